"""The protocol-neutral model every codec and the upstream speak.

`request` is what a decoded client request means; `events` is the block-indexed stream every
response is built from; `assemble` folds that stream for non-streaming answers. This package does no
I/O and imports no aiohttp, botocore or aiosqlite, so codecs and translators stay sans-IO.
"""
