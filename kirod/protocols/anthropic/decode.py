"""Anthropic Messages requests → CanonicalRequest.

Validation follows the API's shapes and reports the first problem as a 400 whose message and
`param` name the field path (`messages.2.content.0.source.type`). Unknown keys are ignored, so
newer clients keep working; known keys with the wrong type are errors. Capabilities kirod cannot
provide (server tools other than web search, forced tool choice, URL and file sources, search
results, structured output, MCP servers) are refused with code `unsupported_capability` rather
than approximated.

Accepted and deliberately without effect: `cache_control` anywhere, `disable_parallel_tool_use`,
and the tool flags `defer_loading`, `strict`, `eager_input_streaming` and `input_examples` (every
declared tool is offered to the model). Of `context_management`, only `clear_thinking_*` edits
have an effect (`thinking.py`).

System blocks starting `x-anthropic-billing-header:` (Claude Code's first block,
`cc_version=…; cc_entrypoint=…;`) are client metadata for Anthropic's billing, not instructions,
and they change with every Claude Code release: they are dropped, so the system prompt, the first
bytes of every upstream payload, stays the same and Kiro's prefix cache keeps matching.

Parts, each in its own module: messages and content blocks (`content.py`), declared tools and web
search (`tools.py`), thinking and effort (`thinking.py`), the conversation key and metadata
(`affinity.py`), and the field checks that fail in Anthropic's envelope (`checks.py`).

Bounds (`kirod.protocols.fields`), each a 400 naming it: at most 10 000 `messages`, 20 000
content blocks in all (system blocks, message blocks and tool-result parts), 1 000 `tools`, a
`model` of at most 128 characters and a `metadata.user_id` of at most 256; the body nests at
most 128 levels (`kirod.http.body`). A value compared with a set of names (`type`, `effort`,
`display`) must be a string, or it is a 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kirod.canonical.request import CanonicalRequest, ClientProtocol, Sampling, ToolChoiceMode
from kirod.errors import ApiError, ErrorKind
from kirod.protocols.anthropic.affinity import affinity_key, request_metadata
from kirod.protocols.anthropic.checks import check, invalid, spend, type_of, unsupported
from kirod.protocols.anthropic.content import conversation
from kirod.protocols.anthropic.signatures import ThinkingSigner
from kirod.protocols.anthropic.thinking import (
    beta_values,
    clear_thinking,
    requested_reasoning,
    thinking_turns_to_keep,
)
from kirod.protocols.anthropic.tools import declared_tools, search_only, tool_choice
from kirod.protocols.fields import BlockBudget

_BILLING_HEADER: Final = "x-anthropic-billing-header:"


def decode_messages(
    body: object,
    headers: Mapping[str, str],
    *,
    request_id: str,
    signer: ThinkingSigner,
    stream_default: bool = False,
) -> CanonicalRequest:
    """A `POST /v1/messages` body; `stream_default` applies when the body omits `stream`."""
    root = _root(body)
    request = _decode(root, headers, request_id, signer, stream_default, counting=False)
    if request.web_search is not None and request.web_search.query is not None:
        return request  # a search-only call: its tool choice (forcing the search) is honoured
    if request.tool_choice.mode in (ToolChoiceMode.ANY, ToolChoiceMode.TOOL):
        raise unsupported(
            "tool_choice.type",
            f"'{request.tool_choice.mode.value}' (forcing a tool call) is not supported; "
            "use 'auto' or 'none'",
        )
    return request


def decode_count_tokens(
    body: object, headers: Mapping[str, str], request_id: str, signer: ThinkingSigner
) -> CanonicalRequest:
    """A `POST /v1/messages/count_tokens` body: a Messages body without `max_tokens`.

    A forced tool choice is counted rather than refused: counting needs no way to force it.
    """
    return _decode(_root(body), headers, request_id, signer, False, counting=True)


def _root(body: object) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise ApiError(ErrorKind.INVALID_REQUEST, "request body must be a JSON object")
    return body


def _decode(
    root: Mapping[str, Any],
    headers: Mapping[str, str],
    request_id: str,
    signer: ThinkingSigner,
    stream_default: bool,
    *,
    counting: bool,
) -> CanonicalRequest:
    model = check.model(root.get("model"))  # first: a bad name is reported before any field
    _refuse_unsupported_top_level(root)
    max_tokens = root.get("max_tokens")
    if max_tokens is not None or not counting:
        max_tokens = check.positive_integer(max_tokens, "max_tokens")
    stream = root.get("stream")
    budget = BlockBudget()
    messages = clear_thinking(
        conversation(root.get("messages"), signer, budget),
        thinking_turns_to_keep(root.get("context_management")),
    )
    tools, search = declared_tools(root.get("tools"))
    return CanonicalRequest(
        request_id=request_id,
        protocol=ClientProtocol.ANTHROPIC_MESSAGES,
        model=model,
        messages=messages,
        system=_system(root.get("system"), budget),
        tools=tools,
        web_search=search_only(search, messages) if not tools else search,
        tool_choice=tool_choice(root.get("tool_choice")),
        reasoning=requested_reasoning(
            root.get("thinking"), root.get("output_config"), beta_values(headers)
        ),
        max_output_tokens=max_tokens,
        stop_sequences=_stop_sequences(root.get("stop_sequences")),
        sampling=Sampling(
            temperature=check.number(root.get("temperature"), "temperature", 0, 1),
            top_p=check.number(root.get("top_p"), "top_p", 0, 1),
            top_k=_top_k(root.get("top_k")),
        ),
        affinity_key=affinity_key(headers, root.get("metadata")),
        stream=stream_default if stream is None else check.boolean(stream, "stream"),
        metadata=request_metadata(root.get("metadata")),
    )


# -- top level -------------------------------------------------------------------------------------


def _refuse_unsupported_top_level(root: Mapping[str, Any]) -> None:
    if root.get("mcp_servers"):
        raise unsupported("mcp_servers", "MCP servers are not supported; declare the tools instead")
    if root.get("output_format") is not None:
        raise unsupported("output_format", "structured output is not supported")


def _system(value: object, budget: BlockBudget) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    blocks = check.array(value, "system")
    spend(budget, len(blocks), "system")
    texts: list[str] = []
    for i, block in enumerate(blocks):
        path = f"system.{i}"
        block = check.mapping(block, path)
        if type_of(block, path) != "text":
            raise invalid(f"{path}.type", "system blocks must be of type 'text'")
        text = check.text(block.get("text"), f"{path}.text")
        if not text.startswith(_BILLING_HEADER):
            texts.append(text)
    return tuple(texts)


def _stop_sequences(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(
        check.text(item, f"stop_sequences.{i}")
        for i, item in enumerate(check.array(value, "stop_sequences"))
    )


def _top_k(value: object) -> int | None:
    if value is None:
        return None
    number = check.integer(value, "top_k")
    if number < 0:
        raise invalid("top_k", "must not be negative")
    return number
