"""A turn made of several upstream exchanges, shown to the client as one message.

Some turns need Kiro more than once: a hosted web search the model calls (kirod runs it and sends
the results back), a continuation after Kiro cut a tool call off. Each such rule is a `Step`
(`kirod.upstream.step`): told how a part of the turn ended (`Part`), it answers with the `Next`
request to send, on the same account and conversation, and the whole blocks kirod shows the
client between the two parts (the search call and its results), or None; a `Next` without a
request shows its blocks and ends the message (searches beside calls of the client's tools,
which the client must answer first). `run_turn` drives the parts and the steps:

    first exchange → Part → steps (first that answers wins) → shown blocks → next exchange → …

The joined stream is one message (`kirod.canonical.splice`): one start, blocks numbered on, usage
added up, the last part's stop; the model's calls of tools kirod runs itself
(`CanonicalRequest.server_tools`) are left out, the steps show what kirod did instead. A part
that fails holds its error back until the steps have judged it (a step may recover from it); a
part that fails inside an open block has that block closed first, so the next part's blocks
follow a well-formed stream. With no step answering, or
after `max_parts` parts, the message ends as the last part did.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager

from kirod.canonical.assemble import Assembler
from kirod.canonical.events import CanonicalEvent, ErrorEvent
from kirod.canonical.request import CanonicalRequest
from kirod.canonical.splice import Splice
from kirod.errors import ApiError
from kirod.upstream.errors import UpstreamError
from kirod.upstream.exchange import Exchange
from kirod.upstream.step import Next, Part, Step

__all__ = ["OpenPart", "run_turn"]


OpenPart = Callable[[CanonicalRequest], AbstractAsyncContextManager[Exchange]]


async def run_turn(
    first: Exchange,
    request: CanonicalRequest,
    steps: Sequence[Step],
    open_part: OpenPart,
    *,
    max_parts: int,
) -> AsyncIterator[list[CanonicalEvent]]:
    """`first`, and the parts the steps open after it, as one message (module docstring)."""
    splice = Splice(request.server_tools)
    current, number = first, 1
    async with contextlib.AsyncExitStack() as owned:
        while True:
            assembler = Assembler()
            error: ErrorEvent | None = None
            async for batch in current.batches():
                joined = splice.feed(batch)
                try:
                    for event in batch:
                        assembler.feed(event)
                except ApiError as failed:  # the part failed, or its tool input is not JSON
                    error = next((e for e in joined if isinstance(e, ErrorEvent)), None)
                    error = error or ErrorEvent.from_error(failed)
                    joined = [event for event in joined if not isinstance(event, ErrorEvent)]
                    if joined:
                        yield joined
                    break
                if joined:
                    yield joined
            part = Part(request, assembler.partial(), error, number, current.truncation)
            following = await _next(steps, part) if number < max_parts else None
            if following is None or following.request is None:
                shown = splice.append(list(following.shown)) if following else []
                yield [*shown, *([error] if error is not None else splice.end())]
                return
            await owned.aclose()  # the part before is read to its end, or abandoned
            closing = splice.close_open_block()
            splice.next_part()
            shown = splice.feed(list(following.shown))
            splice.next_part()
            if closing or shown:
                yield [*closing, *shown]
            try:
                current = await owned.enter_async_context(open_part(following.request))
            except UpstreamError as exc:
                yield [ErrorEvent.from_error(exc.to_api_error())]
                return
            request, number = following.request, number + 1


async def _next(steps: Sequence[Step], part: Part) -> Next | None:
    for step in steps:
        following = await step.after(part)
        if following is not None:
            return following
    return None
