"""Sans-IO translation of Kiro's event-stream frames into the canonical event stream.

`Translator` is fed the decoded `Frame`s of one response and returns canonical events as soon as
they are known, so clients see text and tool input while Kiro is still generating. It also
repairs what the upstream gets wrong (kiro-protocol §3.3 to §3.5, §4.2), because no client can:

- **Thinking tags.** With prompt-tag thinking the leading `<thinking>…</thinking>` block becomes
  a THINKING block (`kirod.upstream.thinking_tags`).
- **Tool calls.** `toolUseEvent` fragments are streamed as `ToolInputDelta`s as they arrive; the
  input is checked to be a JSON object at `stop`. A call that never stops (Kiro truncates large
  inputs) ends the stream with `tool_input_truncated` instead of handing out a broken call.
- **Duplicated frames.** Kiro sometimes repeats an `assistantResponseEvent` verbatim. A delta
  identical to the frame just before it is dropped only if it is at least
  `DUPLICATE_MIN_CHARS` long and not all whitespace: repeats that short are what real text does
  ("\\n\\n", "ha"), while a long identical chunk twice in a row is the fault.
- **Leaked tool calls.** `[Called X with args: {…}]` written as text becomes a real call when X
  is a declared tool (`kirod.upstream.leaks`).
- **Usage and stop reason.** Kiro sends neither token counts nor a stop reason; both are inferred
  as §3.4 and §3.5 describe, with output tokens estimated by `kirod.canonical.tokens`.

The stream always starts with `MessageStart`. Failures become an `ErrorEvent` with a short,
client-safe message: upstream text is never copied into it. Codes in `RETRYABLE_CODES` mark
failures worth retrying on another attempt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final, TypeAlias

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
from kirod.canonical.tokens import estimate_text_tokens
from kirod.errors import ErrorKind
from kirod.upstream.frames import Frame
from kirod.upstream.leaks import LeakedCall, LeakRescuer
from kirod.upstream.thinking_tags import THINKING, ThinkingMode, ThinkingTagSplitter

ToolNames: TypeAlias = Mapping[str, str] | Callable[[str], str]
"""Maps the tool name sent upstream (possibly shortened) back to the client's name."""

DUPLICATE_MIN_CHARS: Final = 16

RETRYABLE_CODES: Final = frozenset({"upstream_throttled", "upstream_unavailable", "empty_response"})
"""Error codes for transient upstream failures: the request may succeed if tried again."""

# Mid-stream faults that are transient (§4.2); any other is fatal, `upstream_error`.
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
_SAFE_IDENTIFIER = re.compile(r"[A-Za-z][\w.:-]{0,63}")


class Translator:
    """Turns one response's frames into canonical events: `feed` each frame, then `finish`.

    Both return the events that became known; after a terminal event they return nothing more.
    `input_tokens_estimate` opens the stream and stays the input count unless Kiro reports its
    context usage, which `context_window` (the model's, in tokens) converts back to tokens.
    `tool_names` maps names as sent upstream back to the client's; `declared_tools` holds the
    client's names, and only calls to those are rescued from leaked text.
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
        self._content_seen = False
        self._previous_text: str | None = None  # the frame before, if an assistantResponseEvent

        self._index = 0
        self._open: BlockKind | None = None
        self._open_parts: list[str] = []
        self._pending_space = ""  # whitespace that may yet start a text block
        self._signed = False  # the open thinking block has its signature

        self._tool_id: str | None = None  # the upstream id of the open tool call
        self._finished_tools: set[str] = set()
        self._leaked_calls = 0

        self._text_blocks = 0
        self._thinking_blocks = 0
        self._output_tokens = 0
        self._credits: float | None = None

    def feed(self, frame: Frame) -> list[CanonicalEvent]:
        """Translate one frame."""
        if self._ended:
            return []
        self._start()
        previous_text, self._previous_text = self._previous_text, None
        if frame.message_type == "exception":
            self._on_fault(frame.exception_type, frame.payload.get("reason"))
        elif frame.message_type == "error":
            self._on_fault(frame.error_code, None)
        else:
            self._on_event(frame.event_type, frame.payload, previous_text)
        return self._take()

    def finish(self) -> list[CanonicalEvent]:
        """End of the response body: close what is open and end the stream."""
        if self._ended:
            return []
        self._start()
        if not (self._content_seen or self._halted):
            self._fail(ErrorKind.UPSTREAM, "empty_response", "Kiro returned an empty response")
        elif self._tool_id is not None:
            self._fail_truncated_tool()
        else:
            self._end_text()
            self._close_block()
            self._events.append(
                Usage(self._input_tokens, self._output_tokens, credits=self._credits)
            )
            self._events.append(MessageStop(self._stop_reason()))
            self._ended = True
        return self._take()

    # -- frames

    def _on_event(
        self, event_type: str | None, payload: dict[str, Any], previous: str | None
    ) -> None:
        match event_type:
            case "assistantResponseEvent":
                content = _string(payload, "content")
                if content:
                    self._previous_text = content
                    is_duplicate = (
                        content == previous
                        and len(content) >= DUPLICATE_MIN_CHARS
                        and not content.isspace()
                    )
                    if not (is_duplicate or self._halted or self._interrupts_tool()):
                        self._content_seen = True
                        self._on_text(content)
            case "reasoningContentEvent":
                if not (self._halted or self._interrupts_tool()):
                    self._on_reasoning(payload)
            case "toolUseEvent":
                if not self._halted:
                    self._on_tool(payload)
            case "meteringEvent":
                usage = _number(payload, "usage")
                if usage is not None:
                    self._credits = (self._credits or 0.0) + usage
            case "contextUsageEvent":
                percentage = _number(payload, "contextUsagePercentage")
                if percentage is not None:
                    self._input_tokens = round(percentage * self._context_window / 100)
            case _:
                pass  # metadata, follow-up prompts, references, links, and future events

    def _on_fault(self, name: str | None, reason: object) -> None:
        if self._halted:
            return
        if name == _CONTENT_LENGTH_EXCEEDED:
            self._halted = self._max_tokens = True
            return
        kind, code = _TRANSIENT_FAULTS.get(name or "", (ErrorKind.UPSTREAM, "upstream_error"))
        detail = _safe_identifier(name)
        if isinstance(reason, str) and _SAFE_IDENTIFIER.fullmatch(reason):
            detail = f"{detail}: {reason}"
        self._fail(kind, code, f"{_FAULT_MESSAGES[code]} ({detail})")

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
        items: Iterable[str | LeakedCall] = (
            [text] if self._rescuer is None else self._rescuer.feed(text)
        )
        self._emit_text_items(items)

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
        self._content_seen = True
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
        self._content_seen = True
        tool_id = _string(payload, "toolUseId") or self._tool_id
        if tool_id is None:
            self._fail(ErrorKind.UPSTREAM, "upstream_malformed", "Kiro sent a malformed tool call")
            return
        if tool_id in self._finished_tools:
            return  # a repeat of a call that already stopped
        if tool_id != self._tool_id:
            if self._tool_id is not None:
                self._fail_truncated_tool()  # a new call began before the open one stopped
                return
            name = _string(payload, "name")
            if not name:
                self._fail(
                    ErrorKind.UPSTREAM, "upstream_malformed", "Kiro sent a malformed tool call"
                )
                return
            self._end_text()
            self._open_block(BlockKind.TOOL_USE, tool_id, self._tool_name(name))
            self._tool_id = tool_id
        fragment = _tool_input(payload.get("input"))
        if fragment:
            self._events.append(ToolInputDelta(self._index, fragment))
            self._open_parts.append(fragment)
        if payload.get("stop") is True:
            self._stop_tool(tool_id)

    def _stop_tool(self, tool_id: str) -> None:
        arguments = "".join(self._open_parts)
        if arguments.strip():
            try:
                parsed = json.loads(arguments)
            except (ValueError, RecursionError):
                parsed = None
            if not isinstance(parsed, dict):
                self._fail(
                    ErrorKind.UPSTREAM,
                    "tool_input_invalid",
                    "the model produced tool input that is not a JSON object",
                )
                return
        self._close_block()
        self._tool_id = None
        self._finished_tools.add(tool_id)

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
        if self._finished_tools:
            return StopReason.TOOL_USE
        thinking_only = self._thinking_blocks > 0 and self._text_blocks == 0
        return StopReason.MAX_TOKENS if self._max_tokens or thinking_only else StopReason.END_TURN

    def _interrupts_tool(self) -> bool:
        """Fail if a tool call is open: other content before its stop means it was cut short."""
        if self._tool_id is not None:
            self._fail_truncated_tool()
        return self._ended

    def _fail_truncated_tool(self) -> None:
        self._fail(
            ErrorKind.UPSTREAM,
            "tool_input_truncated",
            "Kiro cut the tool call's input short; try again or ask for smaller edits",
        )

    def _fail(self, kind: ErrorKind, code: str, message: str) -> None:
        self._events.append(ErrorEvent(kind, message, code))
        self._ended = True

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


def _tool_input(value: object) -> str:
    """A tool-input fragment; Kiro sometimes sends an object, `{}` meaning no input yet."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return ""


def _safe_identifier(name: str | None) -> str:
    return name if name is not None and _SAFE_IDENTIFIER.fullmatch(name) else "unknown"
