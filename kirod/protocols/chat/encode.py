"""Canonical events → OpenAI Chat Completions: `chat.completion.chunk` SSE and `chat.completion`.

Stream: a first chunk with the assistant role, then content deltas; thinking streams as
`reasoning_content` deltas (the field DeepSeek-style clients read); each tool call opens with
its `index`, `id`, `type` and `function.name` and continues with `function.arguments` fragments.
The last choice chunk carries `finish_reason`; with `stream_options.include_usage` a usage chunk
with empty `choices` follows; `data: [DONE]` ends every stream. A failure after the stream
started is an `{"error": …}` data line in OpenAI's envelope, then `[DONE]`, never a silent stop.
Redacted reasoning has no Chat representation and is left out.
"""

from __future__ import annotations

import json
import time
from typing import Any

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
from kirod.canonical.token_count import estimate_text_tokens
from kirod.protocols.envelopes import openai_error
from kirod.protocols.sse import encode_event, encode_raw


def finish_reason(stop_reason: StopReason, called_tools: bool) -> str:
    """Chat's finish_reason; any tool call means `tool_calls` unless the output was cut off."""
    if stop_reason is StopReason.MAX_TOKENS:
        return "length"
    if called_tools or stop_reason is StopReason.TOOL_USE:
        return "tool_calls"
    if stop_reason is StopReason.REFUSAL:
        return "content_filter"
    return "stop"


def usage_json(usage: Usage, reasoning_text: str) -> dict[str, Any]:
    """Chat usage; reasoning tokens are estimated (Kiro reports none) and within completion.

    `prompt_tokens` is the whole prompt; `cached_tokens`, the part read from Kiro's prompt
    cache, is what `metadataEvent.tokenUsage` reported, or 0: never simulated.
    """
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "completion_tokens_details": {
            "reasoning_tokens": min(estimate_text_tokens(reasoning_text), usage.output_tokens)
        },
    }


class ChatStreamEncoder:
    """Renders one completion's canonical event stream as `chat.completion.chunk` SSE lines."""

    def __init__(
        self,
        *,
        completion_id: str,
        model: str,
        request_id: str,
        include_usage: bool = False,
        created: int | None = None,
    ) -> None:
        self._id = completion_id
        self._model = model
        self._request_id = request_id
        self._include_usage = include_usage
        self._created = int(time.time()) if created is None else created
        self._started = False
        self._open: BlockKind | None = None
        self._tool_index = -1
        self._arguments: list[str] = []
        self._usage = Usage(0, 0)
        self._reasoning_text: list[str] = []

    def start(self) -> list[bytes]:
        """The first chunk: the assistant role with empty content."""
        if self._started:
            return []
        self._started = True
        return [self._chunk({"role": "assistant", "content": ""})]

    def feed(self, event: CanonicalEvent) -> list[bytes]:
        """The SSE lines for one canonical event; starts the stream first if needed."""
        out = self.start()
        match event:
            case MessageStart():
                self._usage = Usage(event.input_tokens, 0)
            case BlockStart():
                out += self._open_block(event)
            case TextDelta():
                out.append(self._chunk({"content": event.text}))
            case ThinkingDelta():
                self._reasoning_text.append(event.text)
                out.append(self._chunk({"reasoning_content": event.text}))
            case ToolInputDelta():
                out.append(self._arguments_chunk(event.partial_json))
            case BlockStop():
                if self._open is BlockKind.TOOL_USE and not "".join(self._arguments).strip():
                    # A call without arguments streams none; clients parse the string as JSON.
                    out.append(self._arguments_chunk("{}"))
                self._open = None
            case Usage():
                self._usage = event
            case MessageStop():
                out += self._finish(event.stop_reason)
            case ErrorEvent():
                body = openai_error(event.to_error(), self._request_id)
                out += [encode_event(body), encode_raw("[DONE]")]
        return out

    def _open_block(self, start: BlockStart) -> list[bytes]:
        self._open = start.kind
        if start.kind is not BlockKind.TOOL_USE:
            return []
        self._tool_index += 1
        self._arguments = []
        call = {
            "index": self._tool_index,
            "id": start.tool_use_id,
            "type": "function",
            "function": {"name": start.tool_name, "arguments": ""},
        }
        return [self._chunk({"tool_calls": [call]})]

    def _arguments_chunk(self, fragment: str) -> bytes:
        self._arguments.append(fragment)
        call = {"index": self._tool_index, "function": {"arguments": fragment}}
        return self._chunk({"tool_calls": [call]})

    def _finish(self, stop_reason: StopReason) -> list[bytes]:
        reason = finish_reason(stop_reason, self._tool_index >= 0)
        out = [self._chunk({}, reason)]
        if self._include_usage:
            usage = usage_json(self._usage, "".join(self._reasoning_text))
            out.append(encode_event({**self._envelope(), "choices": [], "usage": usage}))
        out.append(encode_raw("[DONE]"))
        return out

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return encode_event({**self._envelope(), "choices": [choice]})

    def _envelope(self) -> dict[str, Any]:
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
        }


def chat_completion_json(
    completion: CanonicalCompletion,
    *,
    completion_id: str,
    model: str,
    created: int | None = None,
) -> dict[str, Any]:
    """The non-streaming `chat.completion` object for a completed canonical message."""
    texts, thinking, calls = [], [], []
    for block in completion.content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ThinkingBlock):
            thinking.append(block.thinking)
        elif isinstance(block, ToolUseBlock):
            arguments = json.dumps(block.input, ensure_ascii=False, separators=(",", ":"))
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": arguments},
                }
            )
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": None,
    }
    if thinking:
        message["reasoning_content"] = "".join(thinking)
    if calls:
        message["tool_calls"] = calls
    choice = {
        "index": 0,
        "message": message,
        "finish_reason": finish_reason(completion.stop_reason, bool(calls)),
        "logprobs": None,
    }
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": [choice],
        "usage": usage_json(completion.usage, "".join(thinking)),
    }
