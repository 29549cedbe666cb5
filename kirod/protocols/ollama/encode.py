"""Canonical events → Ollama `/api/chat` answers: NDJSON lines, or one JSON object.

Stream: one JSON object per line, `{"model", "created_at", "message": {"role": "assistant",
"content"}, "done": false}` per text delta; thinking streams in `message.thinking`; a tool call
is sent whole, once its input is complete, in `message.tool_calls` with its `arguments` as a JSON
object (Ollama's shape: it never streams a call in pieces). The last line has `done: true`, the
`done_reason` (`stop`, or `length` when the output limit cut the answer) and the counts and
durations in nanoseconds Ollama reports: `prompt_eval_count` is the prompt's tokens,
`eval_count` the answer's, `prompt_eval_duration` the time to the first output, `eval_duration`
the rest; `load_duration` is 0 (nothing is loaded). A failure after the stream started is an
`{"error": message}` line, as Ollama ends a failed stream, and nothing follows it.
Redacted reasoning has no Ollama representation and is left out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kirod.canonical import wirejson
from kirod.canonical.assemble import CanonicalCompletion
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.request import TextBlock, ThinkingBlock, ToolUseBlock

BAD_TOOL_INPUT = "the model produced tool input that is not a JSON object"


def created_at() -> str:
    """Now, as Ollama writes `created_at` (RFC 3339, UTC)."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def line(value: Any) -> bytes:
    """One NDJSON line."""
    return wirejson.dumps(value) + b"\n"


@dataclass(frozen=True, slots=True)
class Timing:
    """Monotonic nanoseconds: when the request arrived, when its first output was ready, and
    when it was done."""

    started_ns: int
    first_ns: int
    done_ns: int


def done_fields(stop_reason: StopReason, usage: Usage, timing: Timing) -> dict[str, Any]:
    """What the last object of an answer adds to its message."""
    return {
        "done": True,
        "done_reason": "length" if stop_reason is StopReason.MAX_TOKENS else "stop",
        "total_duration": timing.done_ns - timing.started_ns,
        "load_duration": 0,
        "prompt_eval_count": usage.input_tokens,
        "prompt_eval_duration": timing.first_ns - timing.started_ns,
        "eval_count": usage.output_tokens,
        "eval_duration": timing.done_ns - timing.first_ns,
    }


def tool_call_json(index: int, call_id: str, name: str, arguments: object) -> dict[str, Any]:
    return {"id": call_id, "function": {"index": index, "name": name, "arguments": arguments}}


class OllamaStreamEncoder:
    """Renders one answer's canonical event stream as Ollama NDJSON lines.

    `started_ns` is when the request arrived, on `clock`'s scale; `now` stamps `created_at`.
    """

    def __init__(
        self,
        *,
        model: str,
        started_ns: int,
        clock: Callable[[], int] = time.monotonic_ns,
        now: Callable[[], str] = created_at,
    ) -> None:
        self._model = model
        self._started_ns = started_ns
        self._first_ns: int | None = None
        self._clock = clock
        self._now = now
        self._usage = Usage(0, 0)
        self._tool: BlockStart | None = None
        self._arguments: list[str] = []
        self._calls = 0
        self._ended = False

    def keepalive(self) -> bytes:
        """An empty chunk: a line every client reads as "nothing new yet"."""
        return line(self._chunk({"role": "assistant", "content": ""}))

    def feed(self, event: CanonicalEvent) -> list[bytes]:
        """The lines for one canonical event (none after the stream has ended)."""
        if self._ended:
            return []
        match event:
            case MessageStart():
                self._usage = Usage(event.input_tokens, 0)
            case BlockStart() if event.kind is BlockKind.TOOL_USE:
                self._tool, self._arguments = event, []
            case TextDelta():
                return self._message(content=event.text)
            case ThinkingDelta():
                return self._message(content="", thinking=event.text)
            case ToolInputDelta():
                self._arguments.append(event.partial_json)
            case BlockStop() if self._tool is not None:
                return self._tool_call(self._tool)
            case Usage():
                self._usage = event
            case MessageStop():
                self._ended = True
                timing = Timing(self._started_ns, self._first(), self._clock())
                message = {"role": "assistant", "content": ""}
                return [
                    line(
                        {
                            **self._chunk(message),
                            **done_fields(event.stop_reason, self._usage, timing),
                        }
                    )
                ]
            case ErrorEvent():
                return self._error(event.message)
        return []

    def _first(self) -> int:
        if self._first_ns is None:
            self._first_ns = self._clock()
        return self._first_ns

    def _message(self, **fields: Any) -> list[bytes]:
        self._first()
        return [line(self._chunk({"role": "assistant", **fields}))]

    def _tool_call(self, start: BlockStart) -> list[bytes]:
        self._tool = None
        text = "".join(self._arguments)
        try:
            arguments = json.loads(text) if text.strip() else {}
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            return self._error(BAD_TOOL_INPUT)
        assert start.tool_use_id is not None
        assert start.tool_name is not None
        call = tool_call_json(self._calls, start.tool_use_id, start.tool_name, arguments)
        self._calls += 1
        return self._message(content="", tool_calls=[call])

    def _error(self, message: str) -> list[bytes]:
        self._ended = True
        return [line({"error": message})]

    def _chunk(self, message: dict[str, Any]) -> dict[str, Any]:
        return {"model": self._model, "created_at": self._now(), "message": message, "done": False}


def ollama_chat_json(
    completion: CanonicalCompletion, *, model: str, timing: Timing, now: str | None = None
) -> dict[str, Any]:
    """The non-streaming `/api/chat` answer for a completed canonical message."""
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in completion.content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ThinkingBlock):
            thinking.append(block.thinking)
        elif isinstance(block, ToolUseBlock):
            calls.append(tool_call_json(len(calls), block.id, block.name, block.input))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if thinking:
        message["thinking"] = "".join(thinking)
    if calls:
        message["tool_calls"] = calls
    return {
        "model": model,
        "created_at": now or created_at(),
        "message": message,
        **done_fields(completion.stop_reason, completion.usage, timing),
    }
