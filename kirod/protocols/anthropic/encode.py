"""Canonical events → Anthropic Messages SSE, and completions → Messages JSON.

Canonical block indices are Anthropic's content indices (a redacted-thinking block takes one too),
so events map one to one, with two exceptions. Upstream signature fragments are held back and
replaced by one `signature_delta` carrying kirod's own signature (`signatures`) when the thinking
block ends, so every thinking block, prompt-tag thinking included, is signed. And `Usage` is
remembered and reported in `message_delta`, whose counts are cumulative.

Tool-use ids are the upstream ids unchanged, so a `tool_result.tool_use_id` echoed back names the
same call upstream. Streaming and non-streaming answers render blocks, ids and usage identically.
"""

from __future__ import annotations

from typing import Any, Final, assert_never

from kirod.canonical import wirejson
from kirod.canonical.assemble import (
    CanonicalCompletion,
    OutputBlock,
    SearchResultsBlock,
    ServerToolUseBlock,
)
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
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.request import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock
from kirod.protocols.anthropic.signatures import ThinkingSigner
from kirod.protocols.envelopes import anthropic_error
from kirod.protocols.search import seal_snippet
from kirod.protocols.sse import encode_event

STOP_REASONS: Final = {
    StopReason.END_TURN: "end_turn",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.STOP_SEQUENCE: "stop_sequence",
    StopReason.TOOL_USE: "tool_use",
    StopReason.REFUSAL: "refusal",
}


def public_message_id(message_id: str) -> str:
    """Anthropic's spelling of a message id."""
    return f"msg_{message_id}"


def _usage(usage: Usage) -> dict[str, int]:
    """Anthropic's split: `input_tokens` is the uncached rest, so the three add up to the prompt.

    The cache counts are Kiro's own (`metadataEvent.tokenUsage`) or 0, never simulated.
    """
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    return {
        "input_tokens": max(usage.input_tokens - cached, 0),
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
    }


def _event(data: dict[str, Any]) -> bytes:
    return encode_event(data, data["type"])


# A text delta, most of every stream, written around its text: the bytes `_event` writes for
# {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}}, in
# half the time.
_TEXT_DELTA_HEAD: Final = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
)
_TEXT_DELTA_TEXT: Final = b',"delta":{"type":"text_delta","text":'
_TEXT_DELTA_END: Final = b"}}\n\n"


def _text_delta(index: int, text: str) -> bytes:
    return b"".join(
        (_TEXT_DELTA_HEAD, b"%d" % index, _TEXT_DELTA_TEXT, wirejson.dumps(text), _TEXT_DELTA_END)
    )


class MessagesStreamEncoder:
    """Renders one response's canonical events as Anthropic SSE events.

    Feed it a grammar-valid stream (see `kirod.canonical.events`); `request_id`, when given, is
    added to a terminal error event as it is to Anthropic's error bodies.
    """

    def __init__(
        self,
        *,
        message_id: str,
        model: str,
        signer: ThinkingSigner,
        request_id: str | None = None,
    ) -> None:
        self._message_id = public_message_id(message_id)
        self._model = model
        self._signer = signer
        self._request_id = request_id
        self._usage = Usage(0, 0)
        self._thinking: list[str] = []
        self._upstream_signature: list[str] = []
        self._open: BlockKind | None = None

    def ping(self) -> bytes:
        """A keep-alive event for upstream silences."""
        return _event({"type": "ping"})

    def feed(self, event: CanonicalEvent) -> list[bytes]:
        match event:
            case MessageStart():
                self._usage = Usage(event.input_tokens, 0)
                return [self._message_start()]
            case BlockStart():
                self._open = event.kind
                self._thinking, self._upstream_signature = [], []
                return [self._block_start(event.index, _start_block(event))]
            case TextDelta():
                return [_text_delta(event.index, event.text)]
            case ThinkingDelta():
                self._thinking.append(event.text)
                return [
                    self._delta(event.index, {"type": "thinking_delta", "thinking": event.text})
                ]
            case SignatureDelta():
                self._upstream_signature.append(event.signature)
                return []
            case ToolInputDelta():
                delta = {"type": "input_json_delta", "partial_json": event.partial_json}
                return [self._delta(event.index, delta)]
            case BlockStop():
                return self._block_stop(event.index)
            case RedactedThinking():
                data = self._signer.wrap_redacted(event.data)
                block = {"type": "redacted_thinking", "data": data}
                return [self._block_start(event.index, block), _stop(event.index)]
            case ServerToolUse():
                block = server_tool_use_json(event.tool_use_id, event.name, event.query)
                return [self._block_start(event.index, block), _stop(event.index)]
            case SearchResults():
                block = search_results_json(event.tool_use_id, event.hits, event.error_code)
                return [self._block_start(event.index, block), _stop(event.index)]
            case Usage():
                self._usage = event
                return []
            case MessageStop():
                return [self._message_delta(event), _event({"type": "message_stop"})]
            case ErrorEvent():
                return [self._error(event)]
            case _:
                assert_never(event)

    def _message_start(self) -> bytes:
        message: dict[str, Any] = {
            "id": self._message_id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": _usage(Usage(self._usage.input_tokens, 0)),
        }
        return _event({"type": "message_start", "message": message})

    def _block_start(self, index: int, block: dict[str, Any]) -> bytes:
        return _event({"type": "content_block_start", "index": index, "content_block": block})

    def _delta(self, index: int, delta: dict[str, str]) -> bytes:
        return _event({"type": "content_block_delta", "index": index, "delta": delta})

    def _block_stop(self, index: int) -> list[bytes]:
        frames = []
        if self._open is BlockKind.THINKING:
            upstream = "".join(self._upstream_signature) or None
            signature = self._signer.sign("".join(self._thinking), upstream)
            frames.append(self._delta(index, {"type": "signature_delta", "signature": signature}))
        self._open = None
        frames.append(_stop(index))
        return frames

    def _message_delta(self, stop: MessageStop) -> bytes:
        return _event(
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": STOP_REASONS[stop.stop_reason],
                    "stop_sequence": stop.stop_sequence,
                },
                "usage": _searches(_usage(self._usage), self._usage),
            }
        )

    def _error(self, event: ErrorEvent) -> bytes:
        body = anthropic_error(event.to_error(), self._request_id or "")
        if self._request_id is None:
            del body["request_id"]
        return _event(body)


def _start_block(event: BlockStart) -> dict[str, Any]:
    match event.kind:
        case BlockKind.TEXT:
            return {"type": "text", "text": ""}
        case BlockKind.THINKING:
            return {"type": "thinking", "thinking": "", "signature": ""}
        case BlockKind.TOOL_USE:
            return {
                "type": "tool_use",
                "id": event.tool_use_id,
                "name": event.tool_name,
                "input": {},
            }


def _stop(index: int) -> bytes:
    return _event({"type": "content_block_stop", "index": index})


def message_json(
    completion: CanonicalCompletion, *, message_id: str, model: str, signer: ThinkingSigner
) -> dict[str, Any]:
    """The non-streaming Messages answer: what the stream of the same events accumulates to."""
    return {
        "id": public_message_id(message_id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_block_json(block, signer) for block in completion.content],
        "stop_reason": STOP_REASONS[completion.stop_reason],
        "stop_sequence": completion.stop_sequence,
        "usage": _searches(_usage(completion.usage), completion.usage),
    }


def _searches(fields: dict[str, Any], usage: Usage) -> dict[str, Any]:
    """`server_tool_use.web_search_requests` when kirod ran searches for the message."""
    if usage.web_search_requests:
        fields["server_tool_use"] = {"web_search_requests": usage.web_search_requests}
    return fields


def server_tool_use_json(tool_use_id: str, name: str, query: str) -> dict[str, Any]:
    return {"type": "server_tool_use", "id": tool_use_id, "name": name, "input": {"query": query}}


def search_results_json(
    tool_use_id: str, hits: tuple[SearchHit, ...], error_code: str | None
) -> dict[str, Any]:
    """A `web_search_tool_result`; each hit's snippet travels in `encrypted_content`, which is
    opaque to clients (`search_content`), so a result sent back in history can be read again."""
    content: Any
    if error_code is not None:
        content = {"type": "web_search_tool_result_error", "error_code": error_code}
    else:
        content = [
            {
                "type": "web_search_result",
                "url": hit.url,
                "title": hit.title,
                "encrypted_content": seal_snippet(hit.snippet),
                "page_age": hit.page_age,
            }
            for hit in hits
        ]
    return {"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": content}


def _block_json(block: OutputBlock, signer: ThinkingSigner) -> dict[str, Any]:
    match block:
        case TextBlock():
            return {"type": "text", "text": block.text}
        case ThinkingBlock():
            signature = signer.sign(block.thinking, block.signature)
            return {"type": "thinking", "thinking": block.thinking, "signature": signature}
        case RedactedThinkingBlock():
            return {"type": "redacted_thinking", "data": signer.wrap_redacted(block.data)}
        case ToolUseBlock():
            return {
                "type": "tool_use",
                "id": block.id,
                "name": block.name,
                "input": dict(block.input),
            }
        case ServerToolUseBlock():
            return server_tool_use_json(block.id, block.name, block.query)
        case SearchResultsBlock():
            return search_results_json(block.tool_use_id, block.hits, block.error_code)
        case _:
            assert_never(block)
