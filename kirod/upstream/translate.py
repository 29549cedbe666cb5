"""Sans-IO translation of Kiro's event-stream frames into the canonical event stream.

`Translator` is fed the decoded `Frame`s of one response and returns canonical events as soon as
they are known, so clients see text and thinking while Kiro is still generating. It also
repairs what the upstream gets wrong (docs/KIRO-PROTOCOL.md §3.3 to §3.5, §4.2), because no client
can (what it cannot repair, it reports: a cut-off tool call is never "repaired"):

- **Thinking tags.** With prompt-tag thinking the leading `<thinking>…</thinking>` block becomes
  a THINKING block (`kirod.upstream.thinking_tags`).
- **Tool calls.** A call is complete when its `stop: true` frame has come and its input (string
  fragments, or growing whole objects: docs/UPSTREAM.md §3.2) parses as a JSON object. By default
  (`ToolDelivery` "complete") it is held until then and handed out in one piece; "live" streams
  each fragment as it arrives. A call Kiro cuts off (the stream ends, breaks or faults while it
  is open, `stop` comes with input that does not parse, the output limit stops it) never reaches
  the client: the stream ends with `tool_input_truncated` and `Translator.truncation` says what
  was cut, for a continuation (`kirod.upstream.truncation`).
- **Duplicated frames.** Kiro sometimes repeats an `assistantResponseEvent` verbatim. A delta
  identical to the frame just before it is dropped only if it is at least
  `DUPLICATE_MIN_CHARS` long and not all whitespace: repeats that short are what real text does
  ("\\n\\n", "ha"), while a long identical chunk twice in a row is the fault.
- **Leaked tool calls.** `[Called X with args: {…}]` written as text becomes a real call when X
  is a declared tool (`kirod.upstream.leaks`).
- **Usage and stop reason.** Kiro usually sends no token counts, and its `stopReason` is not
  trusted for the ordinary ends (END_TURN on many tool turns); both are inferred as
  docs/KIRO-PROTOCOL.md §3.4 and §3.5 describe, with output tokens estimated by
  `kirod.canonical.token_count`. When a `metadataEvent` carries `tokenUsage`
  (docs/UPSTREAM.md §1.4), its counts win over every estimate, cache reads and writes
  included; without it the cache counts stay 0. The stop reasons that say something no frame
  else does are read: MAX_TOKENS (the output limit), CONTENT_FILTERED (a refusal, `refusal`,
  even with nothing before it), MODEL_CONTEXT_WINDOW_EXCEEDED (before any output the
  protocol's prompt-too-long error, after some a max-tokens stop).
- **The completion witness.** A complete answer ends with its tail frames (`metadataEvent`,
  `contextUsageEvent`, `meteringEvent`: docs/KIRO-PROTOCOL.md §3.4). The witness is any one of
  them after the last content frame: Kiro sends them only once generation is over, so one is
  proof enough, and a break after the first of them lost no content (asking for all three would
  make a finished answer whose billing frame was lost look cut, and the client pay to redo
  it). Content that ends cleanly without it is a cut generation: it ends `max_tokens`, never
  `end_turn` nor `tool_use` (sibling calls may be missing), so clients continue instead of
  taking half the work for done; `Translator.cut` says so, for the operation log.

The stream always starts with `MessageStart`. Failures become an `ErrorEvent` with a short,
client-safe message: upstream text is never copied into it. Codes in `RETRYABLE_CODES` mark
failures worth retrying on another attempt.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from kirod import log
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    RedactedThinking,
    SignatureDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.token_count import estimate_text_tokens
from kirod.drift import Drift, Kind, key_names, type_name
from kirod.errors import ApiError, ErrorKind
from kirod.upstream.errors import UpstreamPromptTooLong
from kirod.upstream.frames import Frame
from kirod.upstream.leaks import LeakedCall, LeakRescuer
from kirod.upstream.thinking_tags import THINKING, ThinkingMode, ThinkingTagSplitter

ToolNames: TypeAlias = Mapping[str, str] | Callable[[str], str]
"""Maps the tool name sent upstream (possibly shortened) back to the client's name."""

ToolDelivery: TypeAlias = Literal["complete", "live"]
"""How tool input reaches the client: whole once it is complete, or fragment by fragment."""

DUPLICATE_MIN_CHARS: Final = 16

TRUNCATED: Final = "tool_input_truncated"
"""The error code of a stream that ended because Kiro cut a tool call off."""

CONTEXT_TOO_LONG: Final = "context_length_exceeded"
"""The error code of a prompt Kiro found too long for the model's window."""

RETRYABLE_CODES: Final = frozenset({"upstream_throttled", "upstream_unavailable", "empty_response"})
"""Error codes for transient upstream failures: the request may succeed if tried again."""

# Mid-stream faults that are transient (docs/KIRO-PROTOCOL.md §4.2); any other is fatal,
# `upstream_error`.
_TRANSIENT_FAULTS: Final[Mapping[str, tuple[ErrorKind, str]]] = {
    "ThrottlingException": (ErrorKind.OVERLOADED, "upstream_throttled"),
    "ServiceUnavailableException": (ErrorKind.OVERLOADED, "upstream_unavailable"),
    "ServiceUnavailable": (ErrorKind.OVERLOADED, "upstream_unavailable"),
    "InternalServerException": (ErrorKind.UPSTREAM, "upstream_unavailable"),
    "InternalFailure": (ErrorKind.UPSTREAM, "upstream_unavailable"),
}
_FAULT_MESSAGES: Final[Mapping[str, str]] = {
    "upstream_throttled": "Kiro is throttling requests",
    "upstream_unavailable": "Kiro is temporarily unavailable",
    "upstream_error": "Kiro failed while answering",
}
_CONTENT_LENGTH_EXCEEDED: Final = "ContentLengthExceededException"
# metadataEvent.stopReason values (docs/KIRO-PROTOCOL.md §3.4) that say what no other frame does.
_MAX_TOKENS: Final = "MAX_TOKENS"
_CONTENT_FILTERED: Final = "CONTENT_FILTERED"
_CONTEXT_WINDOW_EXCEEDED: Final = "MODEL_CONTEXT_WINDOW_EXCEEDED"
# The rest are known and not acted on: inference decides (the service's END_TURN and TOOL_USE are
# unreliable on tool turns); any other value is a drift (`Kind.STOP_REASON`).
_INFERRED_STOPS: Final = frozenset({"END_TURN", "TOOL_USE", "PAUSE_TURN", "UNKNOWN"})
_TAIL_EVENTS: Final = frozenset({"metadataEvent", "contextUsageEvent", "meteringEvent"})
# Events that carry nothing used (docs/KIRO-PROTOCOL.md §3.2); any other type is a drift
# (`Kind.EVENT_TYPE`).
_IGNORED_EVENTS: Final = frozenset(
    {
        "messageMetadataEvent",
        "followupPromptEvent",
        "codeReferenceEvent",
        "supplementaryWebLinksEvent",
        "citationEvent",
        "invalidStateEvent",
    }
)
_SAFE_IDENTIFIER = re.compile(r"[A-Za-z][\w.:-]{0,63}")

logger = logging.getLogger(__name__)
# The Kiro operation whose answer this is, as drift records name it.
_WHERE: Final = "generateAssistantResponse"

TruncationCause: TypeAlias = Literal[
    "stream_ended", "connection_lost", "upstream_fault", "unparseable", "max_tokens", "interrupted"
]


@dataclass(frozen=True, slots=True)
class Truncation:
    """A tool call Kiro cut off, as the client would have named it; never handed out.

    `bytes_received` is the UTF-8 size of the input that came; `elapsed_s` runs from the call's
    first frame to the cut, so a long silence before a dropped connection counts.
    """

    tool_use_id: str
    tool_name: str
    bytes_received: int
    elapsed_s: float
    cause: TruncationCause


class _OpenTool:
    """The tool call being received: its input so far."""

    __slots__ = ("name", "parts", "started", "tool_id")

    def __init__(self, tool_id: str, name: str, started: float) -> None:
        self.tool_id = tool_id
        self.name = name
        self.started = started
        self.parts: list[str] = []

    def add(self, value: object, *, cumulative: bool) -> str:
        """Take one frame's `input`; return the fragment it adds (`""` for none).

        An object is the whole input so far when `cumulative` (a growing snapshot replaces what
        came before); `{}` means no input yet.
        """
        if isinstance(value, str):
            fragment = value
        elif isinstance(value, dict) and value:
            fragment = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            if cumulative:
                self.parts.clear()
        else:
            return ""
        self.parts.append(fragment)
        return fragment

    @property
    def arguments(self) -> str:
        return "".join(self.parts)


class Translator:
    """Turns one response's frames into canonical events: `feed` each frame, then `finish`.

    Both return the events that became known; after a terminal event they return nothing more.
    `input_tokens_estimate` opens the stream and stays the input count unless Kiro reports its
    context usage, which `context_window` (the window Kiro's percentage is of, in tokens: the
    listed one, or the one learned on the account, docs/KIRO-PROTOCOL.md §3.5) converts back to
    tokens; `context_usage` keeps the percentage, for learning that window.
    `tool_names` maps names as sent upstream back to the client's; `declared_tools` holds the
    client's names, and only calls to those are rescued from leaked text. `tool_delivery` says
    whether tool input is held until the call is complete; `clock` times cut-off calls.
    What the answer carries that kirod does not know (an event type, a stop reason, a missing
    tail) is recorded on `drift` (the daemon's `KiroClient.drift`) with the account's `region`.
    """

    def __init__(
        self,
        *,
        message_id: str,
        model: str,
        context_window: int,
        input_tokens_estimate: int,
        tool_names: ToolNames | None = None,
        declared_tools: Collection[str] = frozenset(),
        thinking_mode: ThinkingMode = "none",
        tool_delivery: ToolDelivery = "complete",
        clock: Callable[[], float] = time.monotonic,
        drift: Drift | None = None,
        region: str | None = None,
    ) -> None:
        self._message_id = message_id
        self._model = model
        self._context_window = context_window
        self._input_tokens = input_tokens_estimate
        if tool_names is None:
            self._tool_name: Callable[[str], str] = lambda name: name
        elif isinstance(tool_names, Mapping):
            names = tool_names
            self._tool_name = lambda name: names.get(name, name)
        else:
            self._tool_name = tool_names
        self._declared = frozenset(declared_tools)
        self._splitter = ThinkingTagSplitter() if thinking_mode == "tags" else None
        self._rescuer = LeakRescuer(self._resolve_leaked) if self._declared else None

        self._events: list[CanonicalEvent] = []
        self._started = False
        self._ended = False
        self._halted = False  # Kiro stopped generating: only usage frames still count
        self._max_tokens = False
        self._refused = False  # metadataEvent.stopReason CONTENT_FILTERED
        self._content_seen = False
        self._tail = False  # a tail frame came after the last content: the answer is whole
        self._previous_text: str | None = None  # the frame before, if an assistantResponseEvent

        self._index = 0
        self._open: BlockKind | None = None
        self._open_parts: list[str] = []
        self._pending_space = ""  # whitespace that may yet start a text block
        self._signed = False  # the open thinking block has its signature

        self._live_tools = tool_delivery == "live"
        self._clock = clock
        self._drift = drift
        self._region = region
        self._tool: _OpenTool | None = None  # the tool call being received
        self._finished_tools: set[str] = set()
        self.truncation: Truncation | None = None  # the call Kiro cut off, when it did
        self.error: ErrorEvent | None = None  # the error that ended the stream, when one did
        self.context_usage: float | None = None  # Kiro's contextUsagePercentage, once it came
        self.cut = False  # content ended cleanly without the tail: a cut generation
        # The tail frames that came, in order, and the key names of metadataEvent.tokenUsage
        # (`kiroctl doctor --live` checks them against what kirod reads).
        self.tail_events: list[str] = []
        self.token_usage_keys: tuple[str, ...] | None = None
        self._leaked_calls = 0

        self._text_blocks = 0
        self._thinking_blocks = 0
        self._output_tokens = 0
        self._credits: float | None = None
        self._reported: _TokenUsage | None = None  # metadataEvent.tokenUsage, when Kiro sent it

    def feed(self, frame: Frame) -> list[CanonicalEvent]:
        """Translate one frame."""
        if self._ended:
            return []
        if not self._started:
            self._start()
        previous_text, self._previous_text = self._previous_text, None
        if frame.message_type == "exception":
            self._on_fault(frame.exception_type, frame.payload.get("reason"))
        elif frame.message_type == "error":
            self._on_fault(frame.error_code, None)
        else:
            self._on_event(frame.event_type, frame.payload, previous_text)
        events, self._events = self._events, []  # `_take`, inlined: this runs once per frame
        return events

    def finish(self) -> list[CanonicalEvent]:
        """End of the response body: close what is open and end the stream."""
        if self._ended:
            return []
        self._start()
        if not (self._content_seen or self._halted):
            self._fail(ErrorKind.UPSTREAM, "empty_response", "Kiro returned an empty response")
        elif self._tool is not None:
            self._fail_truncated_tool("stream_ended")
        else:
            self.cut = not (self._tail or self._halted)
            self._end_text()
            self._close_block()
            if self.cut:
                log.event(
                    logger,
                    "answer_cut",
                    level=logging.WARNING,
                    blocks=self._index,
                    tool_calls=len(self._finished_tools),
                )
                self._observe(
                    Kind.TAIL_MISSING, blocks=self._index, tool_calls=len(self._finished_tools)
                )
            self._events.append(self._usage())
            self._events.append(MessageStop(self._stop_reason()))
            self._ended = True
        return self._take()

    @property
    def tool_open(self) -> bool:
        """Whether a tool call has begun and not yet stopped."""
        return self._tool is not None and not self._ended

    def broken(self, error: ApiError) -> list[CanonicalEvent]:
        """The response broke off with `error` (connection, timeout): a tool call still open
        was cut off, and the stream ends saying so; otherwise `error` ends it."""
        if self._ended:
            return []
        self._start()
        if self._tool is not None:
            self._fail_truncated_tool("connection_lost")
        else:
            self.error = ErrorEvent.from_error(error)
            self._events.append(self.error)
            self._ended = True
        return self._take()

    # -- frames

    def _on_event(
        self, event_type: str | None, payload: dict[str, Any], previous: str | None
    ) -> None:
        # Other events (follow-up prompts, references, links, future ones) carry nothing used.
        match event_type:
            case "assistantResponseEvent":
                content = payload.get("content")
                if isinstance(content, str) and content:
                    self._previous_text = content
                    is_duplicate = (
                        content == previous
                        and len(content) >= DUPLICATE_MIN_CHARS
                        and not content.isspace()
                    )
                    if not (
                        is_duplicate
                        or self._halted
                        or (self._tool is not None and self._interrupts_tool())
                    ):
                        self._content_seen, self._tail = True, False
                        self._on_text(content)
            case "reasoningContentEvent":
                if not (self._halted or self._interrupts_tool()):
                    self._on_reasoning(payload)
            case "toolUseEvent":
                if not self._halted:
                    self._on_tool(payload)
            case "meteringEvent":
                self._tail = True
                self.tail_events.append("meteringEvent")
                usage = _number(payload, "usage")
                if usage is not None:
                    self._credits = (self._credits or 0.0) + usage
            case "contextUsageEvent":
                self._tail = True
                self.tail_events.append("contextUsageEvent")
                percentage = _number(payload, "contextUsagePercentage")
                if percentage is not None:
                    self.context_usage = percentage
                    self._input_tokens = round(percentage * self._context_window / 100)
            case "metadataEvent":
                self._tail = True
                self.tail_events.append("metadataEvent")
                if isinstance(usage_keys := payload.get("tokenUsage"), Mapping):
                    self.token_usage_keys = tuple(sorted(map(str, usage_keys)))
                self._reported = _token_usage(payload.get("tokenUsage")) or self._reported
                self._on_stop_reason(payload.get("stopReason"), payload.get("stopDetails"))
            case str() as name if name not in _IGNORED_EVENTS:
                self._observe(Kind.EVENT_TYPE, event_type=name, keys=key_names(payload))

    def _on_fault(self, name: str | None, reason: object) -> None:
        if self._halted:
            return
        if name == _CONTENT_LENGTH_EXCEEDED:
            self._on_output_limit()
            return
        if self._tool is not None:
            self._fail_truncated_tool("upstream_fault")
            return
        kind, code = _TRANSIENT_FAULTS.get(name or "", (ErrorKind.UPSTREAM, "upstream_error"))
        detail = _safe_identifier(name)
        if isinstance(reason, str) and _SAFE_IDENTIFIER.fullmatch(reason):
            detail = f"{detail}: {reason}"
        self._fail(kind, code, f"{_FAULT_MESSAGES[code]} ({detail})")

    def _on_stop_reason(self, reason: object, details: object) -> None:
        """`metadataEvent.stopReason`: only the values that say what no other frame does count."""
        if reason == _MAX_TOKENS:
            self._on_output_limit()
        elif reason == _CONTENT_FILTERED:
            self._on_refusal(details)
        elif reason == _CONTEXT_WINDOW_EXCEEDED:
            self._on_context_window()
        elif reason is not None and not (isinstance(reason, str) and reason in _INFERRED_STOPS):
            self._observe(
                Kind.STOP_REASON,
                stop_reason=reason if isinstance(reason, str) else None,
                type=type_name(reason),
            )

    def _observe(self, kind: Kind, **facts: object) -> None:
        """Something in the answer kirod does not know: served as before, recorded by shape."""
        if self._drift is not None:
            self._drift.observe(kind, _WHERE, region=self._region, **facts)

    def _on_refusal(self, details: object) -> None:
        """Kiro's filter refused the answer: it ends `refusal`, even with nothing before it."""
        if self._halted:
            return
        refusal = details.get("refusal") if isinstance(details, Mapping) else None
        category = refusal.get("category") if isinstance(refusal, Mapping) else None
        log.event(
            logger,
            "answer_refused",
            level=logging.WARNING,
            category=_safe_identifier(category if isinstance(category, str) else None),
            after_content=self._content_seen,
        )
        if self._tool is not None:
            self._fail_truncated_tool("upstream_fault")  # a call the filter stopped is not whole
            return
        self._halted = self._refused = True

    def _on_context_window(self) -> None:
        """The model's window is full: before any output the prompt is too long (the protocol's
        own error, which clients compact on); after some, the output ran out of room."""
        if self._halted:
            return
        if self._content_seen:
            self._on_output_limit()
            return
        too_long = UpstreamPromptTooLong(self._input_tokens, self._context_window)
        self.error = ErrorEvent.from_error(too_long.to_api_error())
        self._events.append(self.error)
        self._ended = True

    def _on_output_limit(self) -> None:
        """Kiro stopped at the output limit: a max-tokens stop, unless it cut a tool call."""
        if self._halted:
            return
        if self._tool is not None:
            self._fail_truncated_tool("max_tokens")
            return
        self._halted = self._max_tokens = True

    def _on_text(self, content: str) -> None:
        if self._splitter is None:
            self._on_plain_text(content)
            return
        for channel, text in self._splitter.feed(content):
            if channel == THINKING:
                self._emit_thinking(text)
            else:
                self._on_plain_text(text)

    def _on_plain_text(self, text: str) -> None:
        if self._rescuer is None:
            self._emit_text(text)
        else:
            self._emit_text_items(self._rescuer.feed(text))

    def _end_text(self) -> None:
        """Release text held back because other content, or the end, interrupts it."""
        if self._splitter is not None:
            for channel, text in self._splitter.boundary():
                if channel == THINKING:
                    self._emit_thinking(text)
                else:
                    self._on_plain_text(text)
        if self._rescuer is not None:
            self._emit_text_items(self._rescuer.flush())

    def _on_reasoning(self, payload: dict[str, Any]) -> None:
        text = _string(payload, "text")
        signature = _string(payload, "signature")
        redacted = _string(payload, "redactedContent")
        if not (text or signature or redacted):
            return
        self._content_seen, self._tail = True, False
        self._end_text()
        if text:
            self._emit_thinking(text)
        if signature:
            # Signature fragments concatenate; thinking after them starts a new block.
            if self._open is not BlockKind.THINKING:
                self._open_block(BlockKind.THINKING)
            self._events.append(SignatureDelta(self._index, signature))
            self._signed = True
        if redacted:
            self._close_block()
            self._pending_space = ""
            self._events.append(RedactedThinking(self._index, redacted))
            self._index += 1
            self._thinking_blocks += 1

    def _on_tool(self, payload: dict[str, Any]) -> None:
        self._content_seen, self._tail = True, False
        tool = self._tool
        tool_id = _string(payload, "toolUseId") or (tool.tool_id if tool else None)
        if tool_id is None:
            self._fail(ErrorKind.UPSTREAM, "upstream_malformed", "Kiro sent a malformed tool call")
            return
        if tool_id in self._finished_tools:
            return  # a repeat of a call that already stopped
        if tool is None or tool_id != tool.tool_id:
            if tool is not None:
                self._fail_truncated_tool("interrupted")  # a new call began before it stopped
                return
            name = _string(payload, "name")
            if not name:
                self._fail(
                    ErrorKind.UPSTREAM, "upstream_malformed", "Kiro sent a malformed tool call"
                )
                return
            self._end_text()
            tool = self._tool = _OpenTool(tool_id, self._tool_name(name), self._clock())
            if self._live_tools:
                self._open_block(BlockKind.TOOL_USE, tool_id, tool.name)
            else:
                self._close_block()  # what came before the call ends here, as it would live
        fragment = tool.add(payload.get("input"), cumulative=not self._live_tools)
        if fragment and self._live_tools:
            self._events.append(ToolInputDelta(self._index, fragment))
            self._open_parts.append(fragment)
        if payload.get("stop") is True:
            self._stop_tool(tool)

    def _stop_tool(self, tool: _OpenTool) -> None:
        arguments = tool.arguments
        if arguments.strip():
            try:
                parsed = json.loads(arguments)
            except (ValueError, RecursionError):
                self._fail_truncated_tool("unparseable")
                return
            if not isinstance(parsed, dict):
                self._fail(
                    ErrorKind.UPSTREAM,
                    "tool_input_invalid",
                    "the model produced tool input that is not a JSON object",
                )
                return
        if not self._live_tools:
            self._open_block(BlockKind.TOOL_USE, tool.tool_id, tool.name)
            if arguments.strip():
                self._events.append(ToolInputDelta(self._index, arguments))
                self._open_parts.append(arguments)
        self._close_block()
        self._tool = None
        self._finished_tools.add(tool.tool_id)

    # -- blocks

    def _emit_text_items(self, items: Iterable[str | LeakedCall]) -> None:
        for item in items:
            if isinstance(item, LeakedCall):
                self._leaked_calls += 1
                tool_id = f"tooluse_{self._message_id}_{self._leaked_calls}"
                self._open_block(BlockKind.TOOL_USE, tool_id, item.name)
                self._events.append(ToolInputDelta(self._index, item.arguments))
                self._open_parts.append(item.arguments)
                self._close_block()
                self._finished_tools.add(tool_id)
            else:
                self._emit_text(item)

    def _emit_text(self, text: str) -> None:
        if self._open is not BlockKind.TEXT:
            # Never open a text block for whitespace alone: clients reject blank text blocks
            # when the message comes back as history.
            text = self._pending_space + text
            if not text.strip():
                self._pending_space = text
                return
            self._open_block(BlockKind.TEXT)
            self._text_blocks += 1
        self._events.append(TextDelta(self._index, text))
        self._open_parts.append(text)

    def _emit_thinking(self, text: str) -> None:
        if self._open is not BlockKind.THINKING or self._signed:
            self._open_block(BlockKind.THINKING)
        self._events.append(ThinkingDelta(self._index, text))
        self._open_parts.append(text)

    def _open_block(
        self, kind: BlockKind, tool_id: str | None = None, tool_name: str | None = None
    ) -> None:
        self._close_block()
        self._pending_space = ""
        self._events.append(BlockStart(self._index, kind, tool_id, tool_name))
        self._open = kind
        self._signed = False
        if kind is BlockKind.THINKING:
            self._thinking_blocks += 1

    def _close_block(self) -> None:
        if self._open is None:
            return
        self._events.append(BlockStop(self._index))
        self._output_tokens += estimate_text_tokens("".join(self._open_parts))
        self._open_parts = []
        self._open = None
        self._index += 1

    # -- ending

    def _stop_reason(self) -> StopReason:
        if self._refused:
            return StopReason.REFUSAL
        if self.cut:
            return StopReason.MAX_TOKENS  # whatever came, the rest did not: calls included
        if self._finished_tools:
            return StopReason.TOOL_USE
        thinking_only = self._thinking_blocks > 0 and self._text_blocks == 0
        return StopReason.MAX_TOKENS if self._max_tokens or thinking_only else StopReason.END_TURN

    def _interrupts_tool(self) -> bool:
        """Fail if a tool call is open: other content before its stop means it was cut short."""
        if self._tool is not None:
            self._fail_truncated_tool("interrupted")
        return self._ended

    def _fail_truncated_tool(self, cause: TruncationCause) -> None:
        tool = self._tool
        assert tool is not None
        received = len(tool.arguments.encode())
        elapsed = round(max(0.0, self._clock() - tool.started), 3)
        self.truncation = Truncation(tool.tool_id, tool.name, received, elapsed, cause)
        name = tool.name if _SAFE_IDENTIFIER.fullmatch(tool.name) else "a tool"
        self._fail(
            ErrorKind.UPSTREAM,
            TRUNCATED,
            f"Kiro cut the tool call to {name} off after {received} bytes ({elapsed:.1f} s); "
            "it was not executed",
        )

    def _fail(self, kind: ErrorKind, code: str, message: str) -> None:
        self.error = ErrorEvent(kind, message, code)
        self._events.append(self.error)
        self._ended = True

    def _usage(self) -> Usage:
        reported = self._reported
        if reported is None:
            return Usage(self._input_tokens, self._output_tokens, credits=self._credits)
        return Usage(
            reported.uncached + reported.cache_read + reported.cache_write,
            self._output_tokens if reported.output is None else reported.output,
            credits=self._credits,
            cache_read_tokens=reported.cache_read,
            cache_write_tokens=reported.cache_write,
        )

    @property
    def credits(self) -> float | None:
        """The credits Kiro metered for the answer so far (None: no `meteringEvent` number)."""
        return self._credits

    @property
    def output_tokens(self) -> int:
        """The answer's output tokens so far: Kiro's count when it sent one, else the estimate."""
        return self._usage().output_tokens

    def _start(self) -> None:
        if not self._started:
            self._started = True
            self._events.append(MessageStart(self._message_id, self._model, self._input_tokens))

    def _take(self) -> list[CanonicalEvent]:
        events, self._events = self._events, []
        return events

    def _resolve_leaked(self, name: str) -> str | None:
        original = self._tool_name(name)
        return original if original in self._declared else None


def translate_all(frames: Iterable[Frame], **kwargs: Any) -> list[CanonicalEvent]:
    """Translate a whole response at once; keyword arguments are `Translator`'s."""
    translator = Translator(**kwargs)
    events = [event for frame in frames for event in translator.feed(frame)]
    return events + translator.finish()


def _string(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) else None


def _number(payload: Mapping[str, Any], key: str) -> float | None:
    value = payload.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class _TokenUsage:
    """Kiro's own counts; `uncached` excludes the cache reads and writes (docs/UPSTREAM.md §1.4)."""

    uncached: int
    output: int | None
    cache_read: int
    cache_write: int


def _token_usage(value: object) -> _TokenUsage | None:
    """`tokenUsage` when it has the one count that matters, `uncachedInputTokens`."""
    if not isinstance(value, Mapping):
        return None
    uncached = _count(value, "uncachedInputTokens")
    if uncached is None:
        return None
    output = _count(value, "outputTokens")
    read = _count(value, "cacheReadInputTokens") or 0
    write = _count(value, "cacheWriteInputTokens") or 0
    return _TokenUsage(uncached, output, read, write)


def _count(payload: Mapping[str, Any], key: str) -> int | None:
    number = _number(payload, key)
    return int(number) if number is not None and number >= 0 else None


def _safe_identifier(name: str | None) -> str:
    return name if name is not None and _SAFE_IDENTIFIER.fullmatch(name) else "unknown"
