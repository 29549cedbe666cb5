"""The block-indexed event stream every response is built from.

The upstream translator produces it; each protocol encoder and `assemble` consume it. Grammar
(checked by `StreamValidator`, so producers and consumers can rely on it instead of re-checking):

    stream  := MessageStart item* MessageStop | MessageStart item* ErrorEvent | ErrorEvent
    item    := block | RedactedThinking | ServerToolUse | SearchResults | Usage
    block   := BlockStart delta* BlockStop

Blocks are indexed 0, 1, 2, … in stream order (a `RedactedThinking`, `ServerToolUse` or
`SearchResults` is a whole block and takes an index too); at most one block is open at a time,
and its deltas match its kind. `Usage` carries cumulative totals, so the last one wins. An
`ErrorEvent` may end the stream at any point, even inside a block, because upstream failures do
not wait for block boundaries.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Final, TypeAlias, assert_never

from kirod.errors import ApiError, ErrorKind, KirodError

SCHEMA_VERSION: Final = 1


class BlockKind(enum.Enum):
    TEXT = "text"
    THINKING = "thinking"
    TOOL_USE = "tool_use"


class StopReason(enum.Enum):
    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    TOOL_USE = "tool_use"
    REFUSAL = "refusal"


@dataclass(frozen=True, slots=True)
class MessageStart:
    """Opens the stream; `input_tokens` is the best estimate known before generation."""

    version: ClassVar[int] = SCHEMA_VERSION
    message_id: str
    model: str
    input_tokens: int


@dataclass(frozen=True, slots=True)
class BlockStart:
    """Opens block `index`; tool-use blocks name their call id and tool, other blocks neither."""

    version: ClassVar[int] = SCHEMA_VERSION
    index: int
    kind: BlockKind
    tool_use_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    version: ClassVar[int] = SCHEMA_VERSION
    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    version: ClassVar[int] = SCHEMA_VERSION
    index: int
    text: str


@dataclass(frozen=True, slots=True)
class SignatureDelta:
    """A fragment of the open thinking block's signature; fragments concatenate."""

    version: ClassVar[int] = SCHEMA_VERSION
    index: int
    signature: str


@dataclass(frozen=True, slots=True)
class RedactedThinking:
    """A whole redacted-thinking block: it arrives in one piece, so it has no start or stop."""

    version: ClassVar[int] = SCHEMA_VERSION
    index: int
    data: str


@dataclass(frozen=True, slots=True)
class SearchHit:
    url: str
    title: str
    snippet: str = ""
    page_age: str | None = None


@dataclass(frozen=True, slots=True)
class ServerToolUse:
    """A whole block: a tool kirod ran itself inside the turn (a web search), with its input."""

    version: ClassVar[int] = SCHEMA_VERSION
    index: int
    tool_use_id: str
    name: str
    query: str


@dataclass(frozen=True, slots=True)
class SearchResults:
    """A whole block: the results of the `ServerToolUse` `tool_use_id`, or why there are none
    (`error_code`: Anthropic's `web_search_tool_result_error` codes, e.g. `unavailable`)."""

    version: ClassVar[int] = SCHEMA_VERSION
    index: int
    tool_use_id: str
    hits: tuple[SearchHit, ...] = ()
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class ToolInputDelta:
    """A fragment of the tool call's JSON arguments; only the concatenation is valid JSON."""

    version: ClassVar[int] = SCHEMA_VERSION
    index: int
    partial_json: str


@dataclass(frozen=True, slots=True)
class BlockStop:
    version: ClassVar[int] = SCHEMA_VERSION
    index: int


@dataclass(frozen=True, slots=True)
class Usage:
    """Cumulative usage so far; `credits` is Kiro's metering for the request when known.

    `input_tokens` is the whole prompt; `cache_read_tokens` and `cache_write_tokens` are the
    parts of it Kiro reported as read from and written to its prompt cache (0 when it reports
    nothing: never a simulated split). `web_search_requests` counts searches kirod ran.
    """

    version: ClassVar[int] = SCHEMA_VERSION
    input_tokens: int
    output_tokens: int
    credits: float | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    web_search_requests: int = 0


@dataclass(frozen=True, slots=True)
class MessageStop:
    """Ends a successful stream; `stop_sequence` is set when that is why generation stopped."""

    version: ClassVar[int] = SCHEMA_VERSION
    stop_reason: StopReason
    stop_sequence: str | None = None


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """Ends a failed stream; `message` is client-safe, exactly as for `ApiError`."""

    version: ClassVar[int] = SCHEMA_VERSION
    kind: ErrorKind
    message: str
    code: str | None = None

    @classmethod
    def from_error(cls, error: ApiError) -> ErrorEvent:
        return cls(error.kind, error.message, error.code)

    def to_error(self) -> ApiError:
        return ApiError(self.kind, self.message, code=self.code)


CanonicalEvent: TypeAlias = (
    MessageStart
    | BlockStart
    | TextDelta
    | ThinkingDelta
    | SignatureDelta
    | RedactedThinking
    | ServerToolUse
    | SearchResults
    | ToolInputDelta
    | BlockStop
    | Usage
    | MessageStop
    | ErrorEvent
)


_DELTAS: Final = (TextDelta, ThinkingDelta, ToolInputDelta)
_DELTA_BLOCKS: Final[dict[type, BlockKind]] = {
    TextDelta: BlockKind.TEXT,
    ThinkingDelta: BlockKind.THINKING,
    ToolInputDelta: BlockKind.TOOL_USE,
}


class EventOrderError(KirodError):
    """A producer broke the event grammar: a bug in kirod, not the client's or upstream's fault."""


class StreamValidator:
    """Checks a canonical event stream against the grammar, one event at a time."""

    def __init__(self) -> None:
        self._started = False
        self._ended = False
        self._next_index = 0
        self._open: BlockKind | None = None

    @property
    def ended(self) -> bool:
        """Whether a terminal event (MessageStop or ErrorEvent) has been seen."""
        return self._ended

    def feed(self, event: CanonicalEvent) -> None:
        """Accept `event` or raise `EventOrderError` saying which rule it breaks."""
        if (
            isinstance(event, _DELTAS)
            and self._open is not None
            and self._open is _DELTA_BLOCKS.get(event.__class__)
            and event.index == self._next_index
            and not self._ended
        ):
            return  # most of every stream: a delta of the open block, which the rules allow
        name = type(event).__name__
        if event.version != SCHEMA_VERSION:
            raise EventOrderError(f"{name} has schema {event.version}, expected {SCHEMA_VERSION}")
        if self._ended:
            raise EventOrderError(f"{name} after the terminal event")
        if isinstance(event, ErrorEvent):
            self._ended = True
            return
        if isinstance(event, MessageStart):
            if self._started:
                raise EventOrderError("second MessageStart")
            self._started = True
            return
        if not self._started:
            raise EventOrderError(f"{name} before MessageStart")
        match event:
            case BlockStart():
                self._check_block_start(event)
                self._open = event.kind
            case RedactedThinking() | ServerToolUse() | SearchResults():
                self._check_new_index(event.index, name)
                self._next_index += 1
            case TextDelta():
                self._check_open(event.index, BlockKind.TEXT, name)
            case ThinkingDelta() | SignatureDelta():
                self._check_open(event.index, BlockKind.THINKING, name)
            case ToolInputDelta():
                self._check_open(event.index, BlockKind.TOOL_USE, name)
            case BlockStop():
                if self._open is None or event.index != self._next_index:
                    raise EventOrderError(f"BlockStop for block {event.index}, which is not open")
                self._open = None
                self._next_index += 1
            case Usage():
                pass
            case MessageStop():
                if self._open is not None:
                    raise EventOrderError(f"MessageStop while block {self._next_index} is open")
                self._ended = True
            case _:
                assert_never(event)

    def finish(self) -> None:
        """Raise `EventOrderError` unless the stream has ended with a terminal event."""
        if not self._ended:
            raise EventOrderError("stream ended without MessageStop or ErrorEvent")

    def _check_new_index(self, index: int, name: str) -> None:
        if self._open is not None:
            raise EventOrderError(f"{name} {index} while block {self._next_index} is open")
        if index != self._next_index:
            raise EventOrderError(f"{name} has index {index}, expected {self._next_index}")

    def _check_block_start(self, event: BlockStart) -> None:
        self._check_new_index(event.index, "BlockStart")
        is_tool = event.kind is BlockKind.TOOL_USE
        if is_tool and not (event.tool_use_id and event.tool_name):
            raise EventOrderError(f"tool-use block {event.index} lacks a tool_use_id or tool_name")
        if not is_tool and (event.tool_use_id is not None or event.tool_name is not None):
            raise EventOrderError(f"{event.kind.name} block {event.index} names a tool")

    def _check_open(self, index: int, kind: BlockKind, name: str) -> None:
        if self._open is None or index != self._next_index:
            raise EventOrderError(f"{name} for block {index}, which is not open")
        if self._open is not kind:
            raise EventOrderError(f"{name} in a {self._open.name} block")
