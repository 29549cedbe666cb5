"""Canonical events → Gemini `GenerateContentResponse`s: streamed chunks, or one JSON answer.

Every answer is `{"candidates": [{"content": {"role": "model", "parts": […]}, "finishReason",
"index": 0, "groundingMetadata"?}], "usageMetadata", "modelVersion", "responseId"}`. Parts:
`{"text"}`; reasoning as `{"text", "thought": true}`, its last part carrying the
`thoughtSignature` (`thoughts`), shown only when the request said `includeThoughts`; a tool call
as `{"functionCall": {"id", "name", "args"}}`, whole (Gemini never streams a call in pieces),
its id the one the client must echo in its `functionResponse`. kirod's web searches become
`groundingMetadata`: the queries in `webSearchQueries`, the pages in `groundingChunks`.

`finishReason` is `STOP` for a finished turn (a tool call too, as in Gemini), `MAX_TOKENS` when
the output limit cut it, `SAFETY` for a refusal. A stream always ends with a chunk that has one,
an empty text part and the usage: Gemini CLI sends a turn again when its stream ends without a
finish reason. A failure after the stream started is a chunk `{"error": {"code", "message",
"status"}}`, which the SDKs raise, and nothing follows it.

Streams are SSE (`data: {…}` and a blank line, for `?alt=sse`) or, without `alt=sse`, one JSON
array written element by element. A keepalive is a chunk whose one part is an empty text: the
JavaScript SDK reads only `data:` events from the start of its buffer, and the Python SDK parses
every non-blank line, so neither a comment nor a blank line would do; a chunk without candidates
would make the Python SDK's chat drop the whole turn from its history, while an empty text is
a valid part to it and one Gemini CLI skips (docs/CLIENTS.md §4.4).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from kirod.canonical import wirejson
from kirod.canonical.assemble import CanonicalCompletion, SearchResultsBlock, ServerToolUseBlock
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
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
from kirod.canonical.request import TextBlock, ThinkingBlock, ToolUseBlock
from kirod.canonical.token_count import estimate_text_tokens
from kirod.errors import ApiError, ErrorKind
from kirod.protocols.envelopes import gemini_error
from kirod.protocols.gemini.thoughts import Signer, thought_signature

BAD_TOOL_INPUT: Final = "the model produced tool input that is not a JSON object"
_FINISH: Final = {
    StopReason.END_TURN: "STOP",
    StopReason.TOOL_USE: "STOP",
    StopReason.STOP_SEQUENCE: "STOP",
    StopReason.MAX_TOKENS: "MAX_TOKENS",
    StopReason.REFUSAL: "SAFETY",
}

Frame = Callable[[dict[str, Any]], bytes]


def sse_frame(value: dict[str, Any]) -> bytes:
    return b"data: " + wirejson.dumps(value) + b"\r\n\r\n"


def finish_reason(stop: StopReason) -> str:
    return _FINISH[stop]


def usage_metadata(usage: Usage, thought_text: str = "") -> dict[str, Any]:
    """Google's usage: `candidatesTokenCount` without the thoughts, which are counted apart in
    `thoughtsTokenCount` (estimated from their text: Kiro reports no split)."""
    thoughts = min(estimate_text_tokens(thought_text), usage.output_tokens) if thought_text else 0
    metadata: dict[str, Any] = {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": usage.output_tokens - thoughts,
        "totalTokenCount": usage.input_tokens + usage.output_tokens,
    }
    if thoughts:
        metadata["thoughtsTokenCount"] = thoughts
    if usage.cache_read_tokens:
        metadata["cachedContentTokenCount"] = usage.cache_read_tokens
    return metadata


class _Grounding:
    """The searches kirod ran in the turn, as `groundingMetadata`."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.hits: list[SearchHit] = []

    def json(self) -> dict[str, Any] | None:
        if not self.queries and not self.hits:
            return None
        chunks = [{"web": {"uri": hit.url, "title": hit.title or hit.url}} for hit in self.hits]
        return {"webSearchQueries": self.queries, "groundingChunks": chunks}


def candidate(
    parts: list[dict[str, Any]], finish: str | None = None, grounding: dict[str, Any] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        out["finishReason"] = finish
    if grounding is not None:
        out["groundingMetadata"] = grounding
    return out


class GeminiStreamEncoder:
    """Renders one answer's canonical event stream as Gemini chunks, framed by `frame`."""

    def __init__(
        self,
        *,
        model: str,
        response_id: str,
        request_id: str,
        signer: Signer,
        show_thoughts: bool,
        frame: Frame = sse_frame,
    ) -> None:
        self._model = model
        self._response_id = response_id
        self._request_id = request_id
        self._signer = signer
        self._show = show_thoughts
        self._frame = frame
        self._usage = Usage(0, 0)
        self._open: BlockStart | None = None
        self._text: list[str] = []
        self._signature: list[str] = []
        self._grounding = _Grounding()
        self._thoughts: list[str] = []
        self._ended = False

    def keepalive(self) -> bytes:
        return self._frame(self._envelope({"candidates": [candidate([{"text": ""}])]}))

    def feed(self, event: CanonicalEvent) -> list[bytes]:
        """The frames for one canonical event (none after the stream has ended)."""
        if self._ended:
            return []
        match event:
            case MessageStart():
                self._usage = Usage(event.input_tokens, 0)
            case BlockStart():
                self._open, self._text, self._signature = event, [], []
            case TextDelta():
                return self._parts([{"text": event.text}]) if event.text else []
            case ThinkingDelta():
                self._text.append(event.text)
                self._thoughts.append(event.text)
                if self._show and event.text:
                    return self._parts([{"text": event.text, "thought": True}])
            case SignatureDelta():
                self._signature.append(event.signature)
            case ToolInputDelta():
                self._text.append(event.partial_json)
            case BlockStop():
                return self._close()
            case ServerToolUse():
                self._grounding.queries.append(event.query)
            case SearchResults():
                self._grounding.hits.extend(event.hits)
            case Usage():
                self._usage = event
            case MessageStop():
                self._ended = True
                last = candidate(
                    [{"text": ""}], finish_reason(event.stop_reason), self._grounding.json()
                )
                return [self._frame(self._envelope({"candidates": [last]}, usage=True))]
            case ErrorEvent():
                return self._error(event.to_error())
        return []

    def _close(self) -> list[bytes]:
        start, self._open = self._open, None
        if start is None:
            return []
        text = "".join(self._text)
        if start.kind is BlockKind.THINKING:
            if not self._show:
                return []
            upstream = "".join(self._signature) or None
            signature = thought_signature(self._signer, text, upstream)
            return self._parts([{"text": "", "thought": True, "thoughtSignature": signature}])
        if start.kind is BlockKind.TOOL_USE:
            try:
                args = json.loads(text) if text.strip() else {}
            except ValueError:
                args = None
            if not isinstance(args, dict):
                return self._error(
                    ApiError(ErrorKind.UPSTREAM, BAD_TOOL_INPUT, code="tool_input_invalid")
                )
            call = {"id": start.tool_use_id, "name": start.tool_name, "args": args}
            return self._parts([{"functionCall": call}])
        return []

    def _parts(self, parts: list[dict[str, Any]]) -> list[bytes]:
        return [self._frame(self._envelope({"candidates": [candidate(parts)]}))]

    def _error(self, error: ApiError) -> list[bytes]:
        self._ended = True
        return [self._frame(gemini_error(error, self._request_id))]

    def _envelope(self, body: dict[str, Any], *, usage: bool = False) -> dict[str, Any]:
        if usage:
            body["usageMetadata"] = usage_metadata(self._usage, "".join(self._thoughts))
        body["modelVersion"] = self._model
        body["responseId"] = self._response_id
        return body


def generate_json(
    completion: CanonicalCompletion,
    *,
    model: str,
    response_id: str,
    signer: Signer,
    show_thoughts: bool,
) -> dict[str, Any]:
    """The non-streaming `generateContent` answer for a completed canonical message."""
    parts: list[dict[str, Any]] = []
    grounding = _Grounding()
    for block in completion.content:
        if isinstance(block, TextBlock):
            if block.text:
                parts.append({"text": block.text})
        elif isinstance(block, ThinkingBlock):
            if show_thoughts:
                signature = thought_signature(signer, block.thinking, block.signature)
                parts.append(
                    {"text": block.thinking, "thought": True, "thoughtSignature": signature}
                )
        elif isinstance(block, ToolUseBlock):
            call = {"id": block.id, "name": block.name, "args": dict(block.input)}
            parts.append({"functionCall": call})
        elif isinstance(block, ServerToolUseBlock):
            grounding.queries.append(block.query)
        elif isinstance(block, SearchResultsBlock):
            grounding.hits.extend(block.hits)
    thought_text = "".join(b.thinking for b in completion.content if isinstance(b, ThinkingBlock))
    return {
        "candidates": [candidate(parts, finish_reason(completion.stop_reason), grounding.json())],
        "usageMetadata": usage_metadata(completion.usage, thought_text),
        "modelVersion": model,
        "responseId": response_id,
    }


def array_frame(value: dict[str, Any]) -> bytes:
    """One element of the JSON-array stream (no `alt=sse`), after the first."""
    return b",\r\n" + wirejson.dumps(value)


def array_start(model: str, response_id: str) -> bytes:
    """The array's opening and a first chunk that says nothing (a keepalive's), so that every
    later element, a keepalive included, is the same comma and object."""
    empty = {"candidates": [candidate([{"text": ""}])]}
    return b"[" + wirejson.dumps({**empty, "modelVersion": model, "responseId": response_id})


ARRAY_END: Final = b"]"
