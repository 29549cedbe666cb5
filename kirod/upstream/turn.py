"""A turn made of several upstream exchanges, shown to the client as one message.

Some turns need Kiro more than once: a hosted web search the model calls (kirod runs it and sends
the results back), a continuation after Kiro cut a tool call off. Each such rule is a `Step`:
told how a part of the turn ended (`Part`), it answers with the `Next` request to send, on the
same account and conversation, and the whole blocks kirod shows the client between the two parts
(the search call and its results), or None; a `Next` without a request shows its blocks and
ends the message (searches beside calls of the client's tools, which the client must answer
first). `run_turn` drives the parts and the steps:

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kirod.canonical.assemble import Assembler, CanonicalCompletion
from kirod.canonical.events import CanonicalEvent, ErrorEvent
from kirod.canonical.request import CanonicalRequest
from kirod.canonical.splice import Splice
from kirod.errors import ApiError
from kirod.upstream.errors import UpstreamError

if TYPE_CHECKING:  # the exchange module itself uses the steps' types (web search)
    from kirod.upstream.exchange import Exchange
from kirod.upstream.translate import Truncation

__all__ = ["Next", "OpenPart", "Part", "Step", "run_turn"]


@dataclass(frozen=True, slots=True)
class Part:
    """How one part of the turn ended: its request, and the message it produced (`completion`:
    the blocks completed before a failure when `error` is set; `truncation`: the tool call Kiro
    cut off, which that error then reports)."""

    request: CanonicalRequest
    completion: CanonicalCompletion
    error: ErrorEvent | None = None
    number: int = 1  # 1 for the first exchange of the turn
    truncation: Truncation | None = None


@dataclass(frozen=True, slots=True)
class Next:
    """The next part: its request, and the whole blocks shown before it (indexed from 0). No
    request: the blocks are shown after the part's own, and the message ends as the part did."""

    request: CanonicalRequest | None
    shown: tuple[CanonicalEvent, ...] = ()


class Step(Protocol):
    async def after(self, part: Part) -> Next | None:
        """The part that follows `part`, or None when this step has nothing to add."""


OpenPart = Callable[[CanonicalRequest], "AbstractAsyncContextManager[Exchange]"]


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
