"""Append a fixed text to the answer's text, in the stream and in whole answers alike.

    [extensions.watermark]
    text = "\n\n(answered through kirod)"

The text goes in as one more `TextDelta` just before a text block's `BlockStop`, so the block
grammar holds: clients see it as the end of that block. A Kiro answer has one text block; a
turn of several parts (a web search inside it) has one per part, and each is marked.

One instance serves every request, and each request's hooks run in its own task: what a stream
needs to remember (which block is open) lives in a context variable, not on the instance.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

from kirod.extension import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    Extension,
    OptionSpec,
    Produced,
    TextDelta,
)


class Watermark(Extension):
    priority = 900  # after extensions that rewrite the text, so the mark stays as written
    on_failure = "skip"  # a missing mark is better than a failed answer
    schema = {"text": OptionSpec(str, "\n\n(answered through kirod)", help="the text appended")}

    def __init__(self, options: Mapping[str, Any]) -> None:
        super().__init__(options)
        self._text = str(options["text"])
        # This request's open block, when it is a text block.
        self._text_block: contextvars.ContextVar[int | None] = contextvars.ContextVar(
            f"watermark-{id(self)}", default=None
        )

    def on_stream_event(self, event: CanonicalEvent) -> Produced:
        if isinstance(event, BlockStart):
            self._text_block.set(event.index if event.kind is BlockKind.TEXT else None)
        elif isinstance(event, BlockStop) and event.index == self._text_block.get():
            self._text_block.set(None)
            return [TextDelta(event.index, self._text), event]
        return event
