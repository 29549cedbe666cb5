"""Fold a canonical event stream into one completed message, for non-streaming answers.

Non-streaming responses come from the same event stream as streaming ones
(docs/ARCHITECTURE.md §4.1), so every protocol's JSON answer is rendered from a
`CanonicalCompletion` built here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    RedactedThinking,
    SearchHit,
    SearchResults,
    ServerToolUse,
    SignatureDelta,
    StopReason,
    StreamValidator,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.request import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock
from kirod.errors import ApiError, ErrorKind


@dataclass(frozen=True, slots=True)
class ServerToolUseBlock:
    """A tool kirod ran inside the turn (`ServerToolUse`); output only, never sent upstream."""

    id: str
    name: str
    query: str


@dataclass(frozen=True, slots=True)
class SearchResultsBlock:
    """What that tool found (`SearchResults`); output only, never sent upstream."""

    tool_use_id: str
    hits: tuple[SearchHit, ...]
    error_code: str | None = None


OutputBlock: TypeAlias = (
    TextBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ToolUseBlock
    | ServerToolUseBlock
    | SearchResultsBlock
)


@dataclass(frozen=True, slots=True)
class CanonicalCompletion:
    """A whole assistant message; its blocks are the request model's, so it replays as history."""

    message_id: str
    model: str
    content: tuple[OutputBlock, ...]
    stop_reason: StopReason
    stop_sequence: str | None
    usage: Usage


class _OpenBlock:
    """The block being assembled: its start event and the fragments received so far."""

    __slots__ = ("parts", "signature", "start")

    def __init__(self, start: BlockStart) -> None:
        self.start = start
        self.parts: list[str] = []
        self.signature: list[str] = []

    def close(self) -> OutputBlock:
        text = "".join(self.parts)
        match self.start.kind:
            case BlockKind.TEXT:
                return TextBlock(text)
            case BlockKind.THINKING:
                return ThinkingBlock(text, "".join(self.signature) or None)
            case BlockKind.TOOL_USE:
                tool_use_id, tool_name = self.start.tool_use_id, self.start.tool_name
                assert tool_use_id is not None
                assert tool_name is not None
                return ToolUseBlock(tool_use_id, tool_name, _parse_input(text))


def _parse_input(text: str) -> dict[str, object]:
    # A tool without arguments may stream no input at all (docs/KIRO-PROTOCOL.md §3.3).
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ApiError(
            ErrorKind.UPSTREAM,
            "the model produced tool input that is not a JSON object",
            code="tool_input_invalid",
        )
    return value


class Assembler:
    """Incremental fold for async streams: `feed` each event, then take `result()`.

    The stream is validated as it goes, so a producer bug surfaces as `EventOrderError` rather
    than a malformed answer. A failed stream raises its `ApiError` from `feed` as soon as the
    failure is known, and again from `result`.
    """

    def __init__(self) -> None:
        self._validator = StreamValidator()
        self._start: MessageStart | None = None
        self._blocks: list[OutputBlock] = []
        self._open: _OpenBlock | None = None
        self._usage: Usage | None = None
        self._stop: MessageStop | None = None
        self._error: ApiError | None = None

    def feed(self, event: CanonicalEvent) -> None:
        self._validator.feed(event)
        match event:
            case MessageStart():
                self._start = event
                self._usage = Usage(event.input_tokens, 0)
            case BlockStart():
                self._open = _OpenBlock(event)
            case TextDelta() | ThinkingDelta():
                assert self._open is not None
                self._open.parts.append(event.text)
            case ToolInputDelta():
                assert self._open is not None
                self._open.parts.append(event.partial_json)
            case SignatureDelta():
                assert self._open is not None
                self._open.signature.append(event.signature)
            case BlockStop():
                assert self._open is not None
                block, self._open = self._open, None
                try:
                    self._blocks.append(block.close())
                except ApiError as exc:
                    self._error = exc
                    raise
            case RedactedThinking():
                self._blocks.append(RedactedThinkingBlock(event.data))
            case ServerToolUse():
                self._blocks.append(ServerToolUseBlock(event.tool_use_id, event.name, event.query))
            case SearchResults():
                self._blocks.append(
                    SearchResultsBlock(event.tool_use_id, event.hits, event.error_code)
                )
            case Usage():
                self._usage = event
            case MessageStop():
                self._stop = event
            case ErrorEvent():
                self._error = event.to_error()
                raise self._error

    def result(self) -> CanonicalCompletion:
        """The completed message; raises the stream's `ApiError` if it failed."""
        if self._error is not None:
            raise self._error
        self._validator.finish()
        assert self._start is not None
        assert self._stop is not None
        assert self._usage is not None
        return CanonicalCompletion(
            message_id=self._start.message_id,
            model=self._start.model,
            content=tuple(self._blocks),
            stop_reason=self._stop.stop_reason,
            stop_sequence=self._stop.stop_sequence,
            usage=self._usage,
        )

    def partial(self) -> CanonicalCompletion:
        """The message as far as it got: its completed blocks, and the text or thinking of an
        open block as it stands (a cut tool call is left out: its input is not whole)."""
        if self._error is None and self._validator.ended:
            return self.result()
        blocks = list(self._blocks)
        if self._open is not None and self._open.start.kind is not BlockKind.TOOL_USE:
            blocks.append(self._open.close())
        start = self._start
        return CanonicalCompletion(
            message_id=start.message_id if start else "",
            model=start.model if start else "",
            content=tuple(blocks),
            stop_reason=self._stop.stop_reason if self._stop else StopReason.END_TURN,
            stop_sequence=self._stop.stop_sequence if self._stop else None,
            usage=self._usage or Usage(0, 0),
        )


def assemble(events: Iterable[CanonicalEvent]) -> CanonicalCompletion:
    """Fold a complete event stream; see `Assembler` for the errors it raises."""
    assembler = Assembler()
    for event in events:
        assembler.feed(event)
    return assembler.result()
