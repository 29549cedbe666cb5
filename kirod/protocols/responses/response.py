"""The Response object: what it echoes of its request, its status and usage, and the whole
non-streaming answer (`response_json`) with its output items (`response_items`).

Every canonical block becomes one output item at the same index, in the stream (`encode.py`) and
here alike. Item ids derive from the response id and that index (`msg_<r>_<i>`, `rs_<r>_<i>`,
`fc_<r>_<i>`, `ctc_<r>_<i>`), so the streamed items, the non-streaming Response and the stored
history agree without sharing state.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kirod.canonical.assemble import (
    CanonicalCompletion,
    OutputBlock,
    SearchResultsBlock,
    ServerToolUseBlock,
)
from kirod.canonical.events import StopReason, Usage
from kirod.canonical.request import (
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from kirod.canonical.token_count import estimate_text_tokens
from kirod.protocols.responses.calls import custom_tool_call_item, function_call_item
from kirod.protocols.responses.client_tools import CLIENT_TOOLS
from kirod.protocols.responses.compaction import compaction_item
from kirod.protocols.responses.freeform import CUSTOM_INPUT
from kirod.protocols.responses.message_items import message_item
from kirod.protocols.responses.reasoning import ReasoningBox, reasoning_item
from kirod.protocols.responses.tools import ToolNames
from kirod.protocols.responses.web_search import web_search_done, web_search_item


@dataclass(frozen=True, slots=True)
class ResponseEcho:
    """What a Response object repeats from its request, and the output options it asked for.

    Built by the decoder; the encoder never reads the request itself. `tools` are the client's
    function and namespace tools as accepted (hosted tools kirod dropped are not echoed).
    """

    model: str
    instructions: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    tool_choice: str = "auto"
    parallel_tool_calls: bool = True
    reasoning: Mapping[str, Any] | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    store: bool = True
    previous_response_id: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    truncation: str = "disabled"
    prompt_cache_key: str | None = None
    user: str | None = None
    include_encrypted: bool = False
    summary: bool = False
    tool_names: ToolNames = field(default_factory=dict)
    custom_tools: frozenset[str] = frozenset()  # upstream names of freeform tools
    client_tools: frozenset[str] = frozenset()  # client-run built-in tools (client_tools.py)
    compaction: bool = False  # a summarisation turn: answered with one compaction item


def item_id(prefix: str, response_id: str, index: int) -> str:
    """The id of output item `index` of `response_id` (`msg`, `rs` or `fc` prefix)."""
    return f"{prefix}_{response_id.removeprefix('resp_')}_{index}"


def terminal_status(stop_reason: StopReason) -> tuple[str, dict[str, str] | None]:
    """The Response status and incomplete_details for how generation stopped."""
    if stop_reason is StopReason.MAX_TOKENS:
        return "incomplete", {"reason": "max_output_tokens"}
    if stop_reason is StopReason.REFUSAL:
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def usage_json(usage: Usage, reasoning_text: str) -> dict[str, Any]:
    """Responses usage; reasoning tokens are estimated (Kiro reports none) and within output.

    `input_tokens` is the whole prompt, cached part included, as OpenAI counts it; the cache
    counts are Kiro's own (`metadataEvent.tokenUsage`) or 0, never simulated.
    """
    reasoning = min(estimate_text_tokens(reasoning_text), usage.output_tokens)
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def response_object(
    response_id: str,
    echo: ResponseEcho,
    created_at: int,
    *,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    incomplete: dict[str, str] | None = None,
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    reasoning = dict(echo.reasoning) if echo.reasoning is not None else None
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": echo.instructions,
        "max_output_tokens": echo.max_output_tokens,
        "metadata": dict(echo.metadata),
        "model": echo.model,
        "output": output,
        "parallel_tool_calls": echo.parallel_tool_calls,
        "previous_response_id": echo.previous_response_id,
        "prompt_cache_key": echo.prompt_cache_key,
        "reasoning": reasoning,
        "store": echo.store,
        "temperature": echo.temperature,
        "text": {"format": {"type": "text"}},
        "tool_choice": echo.tool_choice,
        "tools": [dict(tool) for tool in echo.tools],
        "top_p": echo.top_p,
        "truncation": echo.truncation,
        "usage": usage,
        "user": echo.user,
    }


def response_items(
    completion: CanonicalCompletion,
    *,
    response_id: str,
    echo: ResponseEcho,
    reasoning_box: ReasoningBox,
    include_encrypted: bool = True,
) -> list[dict[str, Any]]:
    """The output items of a completed response; by default the stored form (always sealed)."""
    if echo.compaction:
        summary = "".join(b.text for b in completion.content if isinstance(b, TextBlock))
        return [compaction_item(item_id("cmp", response_id, 0), reasoning_box, summary)]
    items: list[dict[str, Any]] = []
    for block in completion.content:
        if isinstance(block, SearchResultsBlock):
            # A search and its results are one item, as the stream shows them.
            if items and items[-1]["type"] == "web_search_call":
                items[-1] = web_search_done(items[-1], block.hits, block.error_code)
            continue
        index = len(items)
        items.append(_item(block, index, response_id, echo, reasoning_box, include_encrypted))
    return items


def _item(
    block: OutputBlock,
    index: int,
    response_id: str,
    echo: ResponseEcho,
    box: ReasoningBox,
    include_encrypted: bool,
) -> dict[str, Any]:
    match block:
        case TextBlock():
            return message_item(item_id("msg", response_id, index), block.text, "completed")
        case ThinkingBlock():
            sealed = box.seal(block.thinking, block.signature) if include_encrypted else None
            summary = block.thinking if echo.summary else None
            return reasoning_item(item_id("rs", response_id, index), summary, sealed)
        case RedactedThinkingBlock():
            sealed = box.seal_redacted(block.data) if include_encrypted else None
            return reasoning_item(item_id("rs", response_id, index), None, sealed)
        case ServerToolUseBlock() | SearchResultsBlock():
            query = block.query if isinstance(block, ServerToolUseBlock) else ""
            return web_search_item(item_id("ws", response_id, index), query, "completed")
        case ToolUseBlock() if block.name in echo.client_tools:
            tool = CLIENT_TOOLS[block.name]
            call_item_id = item_id(tool.id_prefix, response_id, index)
            return tool.call_item(call_item_id, block.id, block.input)
        case ToolUseBlock() if block.name in echo.custom_tools:
            raw = block.input.get(CUSTOM_INPUT)
            text = raw if isinstance(raw, str) else json.dumps(block.input, ensure_ascii=False)
            return custom_tool_call_item(
                item_id("ctc", response_id, index),
                block.id,
                block.name,
                text,
                "completed",
                echo.tool_names,
            )
        case ToolUseBlock():
            arguments = json.dumps(block.input, ensure_ascii=False, separators=(",", ":"))
            fc_id = item_id("fc", response_id, index)
            return function_call_item(
                fc_id, block.id, block.name, arguments, "completed", echo.tool_names
            )


def response_json(
    completion: CanonicalCompletion,
    *,
    response_id: str,
    echo: ResponseEcho,
    reasoning_box: ReasoningBox,
    created_at: int | None = None,
) -> dict[str, Any]:
    """The non-streaming Response object, identical in shape and ids to the streamed one."""
    output = response_items(
        completion,
        response_id=response_id,
        echo=echo,
        reasoning_box=reasoning_box,
        include_encrypted=echo.include_encrypted,
    )
    thinking = "".join(b.thinking for b in completion.content if isinstance(b, ThinkingBlock))
    stop = StopReason.END_TURN if echo.compaction else completion.stop_reason
    status, incomplete = terminal_status(stop)
    return response_object(
        response_id,
        echo,
        int(time.time()) if created_at is None else created_at,
        status=status,
        output=output,
        usage=usage_json(completion.usage, thinking),
        incomplete=incomplete,
    )
