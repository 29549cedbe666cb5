"""Canonical events → the OpenAI Responses SSE stream (`ResponsesStreamEncoder`).

Every canonical block becomes one output item at the same index: text → `message`, thinking and
redacted thinking → `reasoning`, tool use → `function_call`, or `custom_tool_call` for a freeform
tool (its raw input decoded from the one-parameter JSON it was declared upstream with, and
streamed as `response.custom_tool_call_input.delta`), or the typed call of a client-run built-in
tool (`local_shell_call`, `shell_call`, `apply_patch_call`: sent whole once its arguments are
complete, as these items have no delta events). The items' shapes and ids, and the Response
object, are those of the non-streaming answer (`response.py`).

Stream order is the one the openai SDK's `responses.stream` enforces (docs/CLIENTS.md §5.2):
`response.created`, `response.in_progress`, then per item `output_item.added` → its part and delta
events → `output_item.done`, and one terminal event: `response.completed`, `response.incomplete`
(max tokens, refusal) or `error` + `response.failed`. Every event carries a `sequence_number`
counting from 0.

Reasoning is shown as summary text only when the request asked for a summary, and carried as
`encrypted_content` (see `reasoning.py`) only when it asked for
`include: ["reasoning.encrypted_content"]`. Stored history items always carry it, so a
`previous_response_id` continuation can replay the reasoning upstream.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
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
from kirod.errors import ErrorKind
from kirod.protocols.responses.calls import custom_tool_call_item, function_call_item
from kirod.protocols.responses.client_tools import CLIENT_TOOLS, ClientTool
from kirod.protocols.responses.compaction import compaction_item
from kirod.protocols.responses.freeform import CUSTOM_INPUT, InputReader
from kirod.protocols.responses.message_items import message_item, text_part
from kirod.protocols.responses.reasoning import ReasoningBox, reasoning_item
from kirod.protocols.responses.response import (
    ResponseEcho,
    item_id,
    response_object,
    terminal_status,
    usage_json,
)
from kirod.protocols.responses.web_search import web_search_done, web_search_item
from kirod.protocols.sse import encode_event

_FAILED_CODES: Final[Mapping[ErrorKind, str]] = {
    ErrorKind.RATE_LIMIT: "rate_limit_exceeded",
    ErrorKind.INVALID_REQUEST: "invalid_prompt",
}
"""`Response.error.code` is a closed set; anything else is reported as `server_error`."""


class ResponsesStreamEncoder:
    """Renders one response's canonical event stream as Responses SSE events.

    Sans-IO: `start()` and `feed()` return encoded events to write: SSE events by default, or
    whatever `render(event, type)` makes of each event object (a WebSocket text frame sends the
    same object alone). After the terminal event, `response` is the final Response object (as in
    the terminal event) and `history_items` the output items to store for `previous_response_id`.
    `end(stop)` encodes the terminal event ahead of its `feed`, which then returns what `end`
    made: the response can be stored before the client is sent the event that completes it.
    """

    def __init__(
        self,
        *,
        response_id: str,
        echo: ResponseEcho,
        reasoning_box: ReasoningBox,
        created_at: int | None = None,
        render: Callable[[dict[str, Any], str], bytes] = encode_event,
    ) -> None:
        self._id = response_id
        self._render = render
        self._echo = echo
        self._box = reasoning_box
        self._created_at = int(time.time()) if created_at is None else created_at
        self._sequence = 0
        self._started = False
        self._shown: list[dict[str, Any]] = []
        self._stored: list[dict[str, Any]] = []
        self._open: _OpenItem | None = None
        self._searching: tuple[int, dict[str, Any]] | None = None  # a search kirod runs
        self._usage = Usage(0, 0)
        self._reasoning_text: list[str] = []
        self._summary: list[str] = []
        self.response: dict[str, Any] | None = None
        self._ending: list[bytes] | None = None  # the terminal events `end` encoded

    @property
    def history_items(self) -> list[dict[str, Any]]:
        """Finished output items with `encrypted_content` always present, for storage."""
        return list(self._stored)

    def start(self) -> list[bytes]:
        """`response.created` and `response.in_progress`, both with status `in_progress`."""
        if self._started:
            return []
        self._started = True
        snapshot = self._response("in_progress", [], usage=None)
        return [
            self._event("response.created", response=snapshot),
            self._event("response.in_progress", response=snapshot),
        ]

    def end(self, stop: MessageStop) -> dict[str, Any]:
        """Encode the terminal events for `stop` now, and return the final Response object they
        carry; `feed(stop)` returns them."""
        if self._ending is None:
            self._ending = self._encode(stop)
        assert self.response is not None
        return self.response

    def feed(self, event: CanonicalEvent) -> list[bytes]:
        """The SSE events for one canonical event; starts the stream first if needed."""
        if self._ending is not None and isinstance(event, MessageStop):
            ending, self._ending = self._ending, None
            return ending
        return self._encode(event)

    def _encode(self, event: CanonicalEvent) -> list[bytes]:
        out = self.start()
        if self._echo.compaction and not isinstance(event, MessageStart | Usage | ErrorEvent):
            return out + self._compacting(event)
        match event:
            case MessageStart():
                self._usage = Usage(event.input_tokens, 0)
            case BlockStart():
                out += self._open_item(event)
            case TextDelta():
                out += self._text_delta(event.text)
            case ThinkingDelta():
                out += self._thinking_delta(event.text)
            case SignatureDelta():
                assert self._open is not None
                self._open.signature.append(event.signature)
            case ToolInputDelta():
                out += self._arguments_delta(self._open, event.partial_json)
            case BlockStop():
                out += self._close_item()
            case RedactedThinking():
                out += self._redacted(event.data)
            case ServerToolUse():
                out += self._search_started(event)
            case SearchResults():
                out += self._search_done(event)
            case Usage():
                self._usage = event
            case MessageStop():
                out += self._finish(event.stop_reason)
            case ErrorEvent():
                out += self._fail(event)
        return out

    # -- items ------------------------------------------------------------------------------------

    def _open_item(self, start: BlockStart) -> list[bytes]:
        index = len(self._shown)
        match start.kind:
            case BlockKind.TEXT:
                item = message_item(item_id("msg", self._id, index), None, "in_progress")
                opened = _OpenItem(start.kind, index, item)
                part = text_part("")
                return [
                    self._added(opened),
                    self._event("response.content_part.added", **opened.at(), part=part),
                ]
            case BlockKind.THINKING:
                item = reasoning_item(item_id("rs", self._id, index), None, None)
                return [self._added(_OpenItem(start.kind, index, item))]
            case BlockKind.TOOL_USE if start.tool_name in self._echo.client_tools:
                # Typed calls have no argument deltas: the item is sent whole once complete.
                assert start.tool_use_id is not None
                tool = CLIENT_TOOLS[start.tool_name]
                item = tool.call_item(
                    item_id(tool.id_prefix, self._id, index), start.tool_use_id, {}, "in_progress"
                )
                self._open = _OpenItem(start.kind, index, item)
                self._open.client = tool
                return []
            case BlockKind.TOOL_USE if start.tool_name in self._echo.custom_tools:
                assert start.tool_use_id is not None
                item = custom_tool_call_item(
                    item_id("ctc", self._id, index),
                    start.tool_use_id,
                    start.tool_name,
                    "",
                    "in_progress",
                    self._echo.tool_names,
                )
                opened = _OpenItem(start.kind, index, item)
                opened.reader = InputReader(CUSTOM_INPUT)
                return [self._added(opened)]
            case BlockKind.TOOL_USE:
                assert start.tool_use_id is not None
                assert start.tool_name is not None
                item = function_call_item(
                    item_id("fc", self._id, index),
                    start.tool_use_id,
                    start.tool_name,
                    "",
                    "in_progress",
                    self._echo.tool_names,
                )
                return [self._added(_OpenItem(start.kind, index, item))]

    def _added(self, opened: _OpenItem) -> bytes:
        self._open = opened
        return self._event(
            "response.output_item.added", output_index=opened.index, item=dict(opened.item)
        )

    def _text_delta(self, text: str) -> list[bytes]:
        assert self._open is not None
        self._open.parts.append(text)
        return [
            self._event("response.output_text.delta", **self._open.at(), delta=text, logprobs=[])
        ]

    def _arguments_delta(self, opened: _OpenItem | None, partial: str) -> list[bytes]:
        assert opened is not None
        opened.parts.append(partial)
        if opened.client is not None:
            return []
        if opened.reader is not None:
            text = opened.reader.feed(partial)
            if not text:
                return []
            return [
                self._event(
                    "response.custom_tool_call_input.delta",
                    item_id=opened.item["id"],
                    output_index=opened.index,
                    delta=text,
                )
            ]
        return [
            self._event(
                "response.function_call_arguments.delta",
                item_id=opened.item["id"],
                output_index=opened.index,
                delta=partial,
            )
        ]

    def _thinking_delta(self, text: str) -> list[bytes]:
        opened = self._open
        assert opened is not None
        opened.parts.append(text)
        self._reasoning_text.append(text)
        if not (self._echo.summary and text):
            return []
        out = []
        if not opened.summary_open:
            opened.summary_open = True
            out.append(
                self._event(
                    "response.reasoning_summary_part.added",
                    **opened.at_summary(),
                    part={"type": "summary_text", "text": ""},
                )
            )
        out.append(
            self._event("response.reasoning_summary_text.delta", **opened.at_summary(), delta=text)
        )
        return out

    def _close_item(self) -> list[bytes]:
        opened, self._open = self._open, None
        assert opened is not None
        text = "".join(opened.parts)
        out: list[bytes] = []
        match opened.kind:
            case BlockKind.TEXT:
                part = text_part(text)
                out.append(
                    self._event("response.output_text.done", **opened.at(), text=text, logprobs=[])
                )
                out.append(self._event("response.content_part.done", **opened.at(), part=part))
                shown = message_item(opened.item["id"], text, "completed")
                stored = shown
            case BlockKind.TOOL_USE if opened.client is not None:
                arguments = _arguments(text)
                shown = opened.client.call_item(
                    opened.item["id"], opened.item["call_id"], arguments
                )
                added = {**shown, "status": "in_progress"}
                out.append(
                    self._event("response.output_item.added", output_index=opened.index, item=added)
                )
                stored = shown
            case BlockKind.TOOL_USE if opened.reader is not None:
                raw = opened.reader.value()
                out.append(
                    self._event(
                        "response.custom_tool_call_input.done",
                        item_id=opened.item["id"],
                        output_index=opened.index,
                        input=raw,
                    )
                )
                shown = {**opened.item, "input": raw, "status": "completed"}
                stored = shown
            case BlockKind.TOOL_USE:
                if not text.strip():
                    # A call without arguments streams none; clients parse the string as JSON.
                    out += self._arguments_delta(opened, "{}")
                    text += "{}"
                out.append(
                    self._event(
                        "response.function_call_arguments.done",
                        item_id=opened.item["id"],
                        output_index=opened.index,
                        arguments=text,
                    )
                )
                shown = {**opened.item, "arguments": text, "status": "completed"}
                stored = shown
            case BlockKind.THINKING:
                if opened.summary_open:
                    part = {"type": "summary_text", "text": text}
                    out.append(
                        self._event(
                            "response.reasoning_summary_text.done", **opened.at_summary(), text=text
                        )
                    )
                    out.append(
                        self._event(
                            "response.reasoning_summary_part.done", **opened.at_summary(), part=part
                        )
                    )
                sealed = self._box.seal(text, "".join(opened.signature) or None)
                summary = text if self._echo.summary else None
                shown = reasoning_item(opened.item["id"], summary, self._shown_seal(sealed))
                stored = reasoning_item(opened.item["id"], summary, sealed)
        return [*out, self._done(opened.index, shown, stored)]

    def _redacted(self, data: str) -> list[bytes]:
        index = len(self._shown)
        rs_id = item_id("rs", self._id, index)
        sealed = self._box.seal_redacted(data)
        added = self._event(
            "response.output_item.added", output_index=index, item=reasoning_item(rs_id, None, None)
        )
        shown = reasoning_item(rs_id, None, self._shown_seal(sealed))
        return [added, self._done(index, shown, reasoning_item(rs_id, None, sealed))]

    def _search_started(self, use: ServerToolUse) -> list[bytes]:
        """A search kirod runs: its item opens and is searching until the results close it."""
        index = len(self._shown)
        item = web_search_item(item_id("ws", self._id, index), use.query, "in_progress")
        self._searching = (index, item)
        at = {"output_index": index, "item_id": item["id"]}
        return [
            self._event("response.output_item.added", output_index=index, item=item),
            self._event("response.web_search_call.in_progress", **at),
            self._event("response.web_search_call.searching", **at),
        ]

    def _search_done(self, results: SearchResults) -> list[bytes]:
        assert self._searching is not None
        (index, item), self._searching = self._searching, None
        done = web_search_done(item, results.hits, results.error_code)
        at = {"output_index": index, "item_id": item["id"]}
        return [
            self._event("response.web_search_call.completed", **at),
            self._done(index, done, done),
        ]

    def _shown_seal(self, sealed: str) -> str | None:
        return sealed if self._echo.include_encrypted else None

    def _done(self, index: int, shown: dict[str, Any], stored: dict[str, Any]) -> bytes:
        self._shown.append(shown)
        self._stored.append(stored)
        return self._event("response.output_item.done", output_index=index, item=shown)

    def _compacting(self, event: CanonicalEvent) -> list[bytes]:
        """A summarisation turn shows nothing until its one compaction item (compaction.py)."""
        if isinstance(event, TextDelta):
            self._summary.append(event.text)
        if not isinstance(event, MessageStop):
            return []
        index = len(self._shown)
        item = compaction_item(item_id("cmp", self._id, index), self._box, "".join(self._summary))
        added = self._event("response.output_item.added", output_index=index, item=item)
        # However the summary ended (even at max tokens), it is the compaction Codex asked for.
        return [added, self._done(index, item, item), *self._finish(StopReason.END_TURN)]

    # -- terminal events --------------------------------------------------------------------------

    def _finish(self, stop_reason: StopReason) -> list[bytes]:
        status, incomplete = terminal_status(stop_reason)
        usage = usage_json(self._usage, "".join(self._reasoning_text))
        self.response = self._response(status, self._shown, usage=usage, incomplete=incomplete)
        kind = "response.completed" if status == "completed" else "response.incomplete"
        return [self._event(kind, response=self.response)]

    def _fail(self, event: ErrorEvent) -> list[bytes]:
        output = list(self._shown)
        if self._open is not None:
            output.append(self._open.partial())
        failed_code = _FAILED_CODES.get(event.kind, "server_error")
        error = {"code": failed_code, "message": event.message}
        usage = usage_json(self._usage, "".join(self._reasoning_text))
        self.response = self._response("failed", output, usage=usage, error=error)
        return [
            self._event("error", code=event.code or failed_code, message=event.message, param=None),
            self._event("response.failed", response=self.response),
        ]

    def _response(
        self,
        status: str,
        output: list[dict[str, Any]],
        *,
        usage: dict[str, Any] | None,
        incomplete: dict[str, str] | None = None,
        error: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        return response_object(
            self._id,
            self._echo,
            self._created_at,
            status=status,
            output=list(output),
            usage=usage,
            incomplete=incomplete,
            error=error,
        )

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return self._render(data, kind)


class _OpenItem:
    """The output item being streamed: its added form and the fragments received so far."""

    __slots__ = (
        "client",
        "index",
        "item",
        "kind",
        "parts",
        "reader",
        "signature",
        "summary_open",
    )

    def __init__(self, kind: BlockKind, index: int, item: dict[str, Any]) -> None:
        self.kind = kind
        self.index = index
        self.item = item
        self.parts: list[str] = []
        self.signature: list[str] = []
        self.summary_open = False
        self.reader: InputReader | None = None  # a freeform tool's input, as it streams
        self.client: ClientTool | None = None  # a client-run built-in tool's typed call

    def at(self) -> dict[str, Any]:
        """Where a content event points: item, output index and (single) content part."""
        return {"item_id": self.item["id"], "output_index": self.index, "content_index": 0}

    def at_summary(self) -> dict[str, Any]:
        return {"item_id": self.item["id"], "output_index": self.index, "summary_index": 0}

    def partial(self) -> dict[str, Any]:
        """The item as far as it got, for the output of a failed response."""
        text = "".join(self.parts)
        if self.kind is BlockKind.TEXT:
            return message_item(self.item["id"], text, "incomplete")
        if self.reader is not None:
            return {**self.item, "input": self.reader.value(), "status": "incomplete"}
        if self.client is not None:
            return {**self.item, "status": "incomplete"}
        if self.kind is BlockKind.TOOL_USE:
            return {**self.item, "arguments": text, "status": "incomplete"}
        return reasoning_item(self.item["id"], None, None)


def _arguments(text: str) -> Mapping[str, Any]:
    """A typed call's arguments; what is not a JSON object leaves the action's fields empty."""
    try:
        value = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
