"""Several canonical event streams joined into one message, for turns made of several exchanges.

A web search inside a turn, a continuation after a truncated answer or a compaction turn each
send Kiro more than one request, yet the client sees one message: the first part's
`MessageStart`, every part's blocks numbered on from the blocks before them, one `Usage` with
the last part's prompt counts (each part resends the prompt) and the parts' output, credits and
searches added up, and the last part's `MessageStop`. An `ErrorEvent` ends the whole message.

`Splice` is sans-IO: `feed` each part's events, call `next_part()` between parts, and take
`end()` once no part follows; the driver that opens the parts is `kirod.upstream.exchange`.
"""

from __future__ import annotations

import dataclasses

from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    EventOrderError,
    MessageStart,
    MessageStop,
    RedactedThinking,
    SearchResults,
    ServerToolUse,
    SignatureDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)

_Indexed = (
    BlockStart
    | TextDelta
    | ThinkingDelta
    | SignatureDelta
    | RedactedThinking
    | ServerToolUse
    | SearchResults
    | ToolInputDelta
    | BlockStop
)

_DELTAS = (TextDelta, ThinkingDelta, ToolInputDelta)


class Splice:
    """`hidden_tools`: calls of these tools (the ones kirod runs itself) are left out, and the
    blocks after them numbered as if they were not there."""

    def __init__(self, hidden_tools: frozenset[str] = frozenset()) -> None:
        self._hidden_tools = hidden_tools
        self._hiding: int | None = None  # the part's own index of the hidden block being read
        self._hidden = 0  # blocks of this part left out so far
        self._shown_tool_use = False  # this part has a tool call the client sees
        self._started = False
        self._offset = 0  # blocks of the parts before this one
        self._blocks = 0  # blocks seen so far, this part included
        self._banked = Usage(0, 0)  # the parts before this one
        self._usage: Usage | None = None  # this part's, cumulative
        self._stop: MessageStop | None = None
        self._open: int | None = None  # the joined index of the open block

    def feed(self, events: list[CanonicalEvent]) -> list[CanonicalEvent]:
        """This part's events as the joined message carries them."""
        joined: list[CanonicalEvent] = []
        for event in events:
            if isinstance(event, _DELTAS) and self._hiding is None:
                # Most events: a delta of a shown block, which needs renumbering only after a
                # part or a hidden block came before it.
                shift = self._offset - self._hidden
                joined.append(self._renumbered(event) if shift else event)
            elif isinstance(event, MessageStart):
                if not self._started:
                    self._started = True
                    joined.append(event)
            elif isinstance(event, Usage):
                self._usage = event  # held: only the joined usage is told
            elif isinstance(event, MessageStop):
                self._stop = event  # held: a part may follow
            elif isinstance(event, ErrorEvent):
                joined.append(event)
            elif not self._hides(event):
                joined.append(self._renumbered(event))
        return joined

    def _hides(self, event: _Indexed) -> bool:
        if self._hiding is not None:
            if event.index != self._hiding:
                raise EventOrderError(
                    f"block {event.index} while hidden block {self._hiding} is open"
                )
            if isinstance(event, BlockStop):
                self._hiding = None
                self._hidden += 1
            return True
        if isinstance(event, BlockStart) and event.kind is BlockKind.TOOL_USE:
            if event.tool_name in self._hidden_tools:
                self._hiding = event.index
                return True
            self._shown_tool_use = True
        return False

    def close_open_block(self) -> list[CanonicalEvent]:
        """A `BlockStop` for the block a failed part left open, if it did."""
        if self._open is None:
            return []
        index, self._open = self._open, None
        return [BlockStop(index)]

    def next_part(self) -> None:
        """The current part ended and another follows."""
        self._banked = self._total()
        self._usage, self._stop = None, None
        self._offset = self._blocks
        self._hiding, self._hidden, self._shown_tool_use = None, 0, False

    def append(self, events: list[CanonicalEvent]) -> list[CanonicalEvent]:
        """Whole blocks (indexed from 0) after the current part's own, which stays the last
        part: its stop ends the message."""
        stop, shown_tool_use = self._stop, self._shown_tool_use
        self.next_part()
        joined = self.feed(events)
        self._stop, self._shown_tool_use = stop, shown_tool_use
        return joined

    def end(self) -> list[CanonicalEvent]:
        """The joined message's end: the joined usage and the last part's stop."""
        stop = self._stop or MessageStop(StopReason.END_TURN)
        if stop.stop_reason is StopReason.TOOL_USE and not self._shown_tool_use:
            stop = MessageStop(StopReason.END_TURN)  # it stopped for a call the client never saw
        return [self._total(), stop]

    def _renumbered(self, event: _Indexed) -> CanonicalEvent:
        index = event.index + self._offset - self._hidden
        self._blocks = max(self._blocks, index + 1)
        if isinstance(event, BlockStart):
            self._open = index
        elif isinstance(event, BlockStop):
            self._open = None
        return event if index == event.index else dataclasses.replace(event, index=index)

    def _total(self) -> Usage:
        part = self._usage or Usage(0, 0)
        credits = None
        if self._banked.credits is not None or part.credits is not None:
            credits = (self._banked.credits or 0.0) + (part.credits or 0.0)
        banked = self._banked
        # Each part sends the whole prompt again, so the input side is the latest part's, not a
        # sum; a part with no prompt count (a shown search's `Usage(0, 0)`) keeps the one before.
        prompt = part if part.input_tokens else banked
        return Usage(
            prompt.input_tokens,
            banked.output_tokens + part.output_tokens,
            credits,
            prompt.cache_read_tokens,
            prompt.cache_write_tokens,
            banked.web_search_requests + part.web_search_requests,
        )
