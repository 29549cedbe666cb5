"""Anthropic Messages requests → CanonicalRequest.

Validation follows the API's shapes and reports the first problem as a 400 whose message and
`param` name the field path (`messages.2.content.0.source.type`). Unknown keys are ignored, so
newer clients keep working; known keys with the wrong type are errors. Capabilities kirod cannot
provide (server tools other than web search, forced tool choice, URL and file sources, search
results, structured output, MCP servers) are refused with code `unsupported_capability` rather
than approximated.

Documents: a base64 `document` (PDF, Office and text media types) becomes a `DocumentBlock`
(refused later for a model whose catalog lacks DOCUMENT input); a `text` source becomes prompt
text, so it works on every model. A document's `citations` option is accepted and has no effect.

Web search: the `web_search_*` server tool (any dated type, named `web_search`; `max_uses`,
`allowed_domains`, `blocked_domains` honoured, `user_location` accepted without effect) is run
by kirod through Kiro's MCP search (`kirod.upstream.websearch`). A request whose only tool it is
and whose one user message is Claude Code's "Perform a web search for the query: …" is a
search-only call (`WebSearch.query`). `server_tool_use` / `web_search_tool_result` blocks of
earlier turns go upstream as text; other server tools' blocks are refused.

Accepted and deliberately without effect: `cache_control` anywhere, `disable_parallel_tool_use`,
and the tool flags `defer_loading`, `strict`, `eager_input_streaming` and `input_examples` (every
declared tool is offered to the model). Of `context_management`, `clear_thinking_*` edits are
honoured (thinking older than the turns to keep is not sent upstream); other edits are accepted
and logged at debug level.

System blocks starting `x-anthropic-billing-header:` (Claude Code's first block,
`cc_version=…; cc_entrypoint=…;`) are client metadata for Anthropic's billing, not instructions,
and they change with every Claude Code release: they are dropped, so the system prompt, the first
bytes of every upstream payload, stays the same and Kiro's prefix cache keeps matching.

`role: "system"` messages inside `messages` (Claude Code's per-turn environment notes) stay where
they are: each becomes a user message of its own at its position, which the payload builder
merges into the adjacent user turn. Hoisting them into the system prompt would change the
upstream bytes of every earlier turn whenever the note changes.

Thinking blocks in history are replayed only if kirod signed them (see `signatures`); foreign or
altered ones are dropped, never forwarded.

Bounds (`kirod.protocols.fields`), each a 400 naming it: at most 10 000 `messages`, 20 000
content blocks in all (system blocks, message blocks and tool-result parts), 1 000 `tools`, a
`model` of at most 128 characters and a `metadata.user_id` of at most 256; the body nests at
most 128 levels (`kirod.http.body`). A value compared with a set of names (`type`, `effort`,
`display`) must be a string, or it is a 400.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final, NoReturn, get_args

from kirod import log
from kirod.canonical.request import (
    Block,
    CanonicalRequest,
    ClientProtocol,
    DocumentBlock,
    Effort,
    ImageBlock,
    Message,
    Reasoning,
    RedactedThinkingBlock,
    Role,
    Sampling,
    TextBlock,
    ThinkingBlock,
    ToolChoice,
    ToolChoiceMode,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    WebSearch,
)
from kirod.errors import ApiError, ErrorKind
from kirod.protocols.anthropic.signatures import ThinkingSigner
from kirod.protocols.fields import (
    MAX_BLOCKS,
    MAX_MESSAGES,
    MAX_MODEL_CHARS,
    MAX_TOOLS,
    BlockBudget,
    Checks,
    quoted,
)
from kirod.protocols.search import history_text, open_snippet

UNSUPPORTED: Final = "unsupported_capability"
IMAGE_MEDIA_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
EMPTY_SCHEMA: Final[Mapping[str, Any]] = {"type": "object", "properties": {}}

_EFFORTS: Final[Mapping[str, Effort]] = {effort: effort for effort in get_args(Effort)}
_DISPLAYS: Final = frozenset({"summarized", "omitted"})
_ROLES: Final = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.USER}
_TOOL_CHOICES: Final = {mode.value: mode for mode in ToolChoiceMode}
_SERVER_BLOCKS: Final = frozenset(
    {
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)
_ASSISTANT_ONLY: Final = frozenset({"tool_use", "thinking", "redacted_thinking"})

MAX_USER_ID_CHARS: Final = 256

_SESSION_HEADER: Final = "x-claude-code-session-id"
_AGENT_HEADER: Final = "x-claude-code-agent-id"
_AFFINITY_HEADERS: Final = ("x-session-affinity", "x-session-id")
_BILLING_HEADER: Final = "x-anthropic-billing-header:"

logger = logging.getLogger("kirod.protocols.anthropic")


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
        _unsupported(
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
    _refuse_unsupported_top_level(root)
    model = _check.nonempty_text(root.get("model"), "model")
    if len(model) > MAX_MODEL_CHARS:
        _invalid("model", f"must be at most {MAX_MODEL_CHARS} characters")
    max_tokens = root.get("max_tokens")
    if max_tokens is not None or not counting:
        max_tokens = _check.positive_integer(max_tokens, "max_tokens")
    stream = root.get("stream")
    budget = BlockBudget()
    messages = _clear_thinking(
        _messages(root.get("messages"), signer, budget),
        _thinking_turns_to_keep(root.get("context_management")),
    )
    tools, search = _tools(root.get("tools"))
    return CanonicalRequest(
        request_id=request_id,
        protocol=ClientProtocol.ANTHROPIC_MESSAGES,
        model=model,
        messages=messages,
        system=_system(root.get("system"), budget),
        tools=tools,
        web_search=_search_only(search, messages) if not tools else search,
        tool_choice=_tool_choice(root.get("tool_choice")),
        reasoning=_reasoning(root.get("thinking"), root.get("output_config")),
        max_output_tokens=max_tokens,
        stop_sequences=_stop_sequences(root.get("stop_sequences")),
        sampling=Sampling(
            temperature=_check.number(root.get("temperature"), "temperature", 0, 1),
            top_p=_check.number(root.get("top_p"), "top_p", 0, 1),
            top_k=_top_k(root.get("top_k")),
        ),
        affinity_key=_affinity_key(headers, root.get("metadata")),
        stream=stream_default if stream is None else _check.boolean(stream, "stream"),
        metadata=_metadata(root.get("metadata")),
    )


def _affinity_key(headers: Mapping[str, str], metadata: object) -> str | None:
    """The conversation key for account stickiness, from the headers clients send.

    Claude Code: its session id, joined with the agent id for subagents, else the session id in
    `metadata.user_id` (SDK users without the header); opencode: `x-session-affinity`, else
    `x-session-id`. Header names match case-insensitively.
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    session = lowered.get(_SESSION_HEADER)
    if session:
        agent = lowered.get(_AGENT_HEADER)
        return f"{session}:{agent}" if agent else session
    for name in _AFFINITY_HEADERS:
        if value := lowered.get(name):
            return value
    user_id = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    return _user_id_session(user_id) if isinstance(user_id, str) else None


def _user_id_session(user_id: str) -> str | None:
    """The session id in Claude Code's `metadata.user_id`: a JSON object's `session_id`
    (2.1.x) or the `…_session_<uuid>` suffix of the older `user_…_account_…_session_…` form."""
    try:
        parsed = json.loads(user_id)
    except (ValueError, RecursionError):
        _, found, session = user_id.rpartition("_session_")
        return session if found and session else None
    value = parsed.get("session_id") if isinstance(parsed, dict) else None
    return value if isinstance(value, str) and value else None


# -- errors and primitives -------------------------------------------------------------------------


def _error(path: str, problem: str, _code: str = "") -> ApiError:
    # Anthropic's error envelope has no code: the type and the `path: problem` message say it.
    return ApiError(ErrorKind.INVALID_REQUEST, f"{path}: {problem}", param=path)


_check: Final = Checks(_error)


def _invalid(path: str, problem: str) -> NoReturn:
    raise _error(path, problem)


def _unsupported(path: str, problem: str) -> NoReturn:
    raise ApiError(ErrorKind.INVALID_REQUEST, f"{path}: {problem}", code=UNSUPPORTED, param=path)


def _top_k(value: object) -> int | None:
    if value is None:
        return None
    number = _check.integer(value, "top_k")
    if number < 0:
        _invalid("top_k", "must not be negative")
    return number


def _type_of(block: Mapping[str, Any], path: str) -> str:
    return _check.text(block.get("type"), f"{path}.type")


def _counted(items: list[Any], limit: int, path: str, what: str) -> list[Any]:
    if len(items) > limit:
        _invalid(path, f"at most {limit} {what} are allowed ({len(items)} sent)")
    return items


def _spend(budget: BlockBudget, count: int, path: str) -> None:
    if not budget.take(count):
        _invalid(path, f"at most {MAX_BLOCKS} content blocks are allowed in one request")


# -- top level -------------------------------------------------------------------------------------


def _refuse_unsupported_top_level(root: Mapping[str, Any]) -> None:
    if root.get("mcp_servers"):
        _unsupported("mcp_servers", "MCP servers are not supported; declare the tools instead")
    if root.get("output_format") is not None:
        _unsupported("output_format", "structured output is not supported")


def _system(value: object, budget: BlockBudget) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    blocks = _check.array(value, "system")
    _spend(budget, len(blocks), "system")
    texts: list[str] = []
    for i, block in enumerate(blocks):
        path = f"system.{i}"
        block = _check.mapping(block, path)
        if _type_of(block, path) != "text":
            _invalid(f"{path}.type", "system blocks must be of type 'text'")
        text = _check.text(block.get("text"), f"{path}.text")
        if not text.startswith(_BILLING_HEADER):
            texts.append(text)
    return tuple(texts)


def _stop_sequences(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(
        _check.text(item, f"stop_sequences.{i}")
        for i, item in enumerate(_check.array(value, "stop_sequences"))
    )


def _metadata(value: object) -> dict[str, str]:
    if value is None:
        return {}
    user_id = _check.mapping(value, "metadata").get("user_id")
    if user_id is None:
        return {}
    if len(_check.text(user_id, "metadata.user_id")) > MAX_USER_ID_CHARS:
        _invalid("metadata.user_id", f"must be at most {MAX_USER_ID_CHARS} characters")
    return {"user_id": user_id}


def _reasoning(thinking: object, output_config: object) -> Reasoning | None:
    """`thinking` decides whether to reason; `output_config.effort` tunes it when it does.

    Adaptive thinking without an effort leaves the default to the payload builder, so the
    default lives in one place.
    """
    effort: Effort | None = None
    if output_config is not None:
        config = _check.mapping(output_config, "output_config")
        if config.get("format") is not None:
            _unsupported("output_config.format", "structured output is not supported")
        if (value := config.get("effort")) is not None:
            effort = _EFFORTS.get(value) if isinstance(value, str) else None
            if effort is None:
                _invalid("output_config.effort", f"must be one of {_choices(_EFFORTS)}")
    if thinking is None:
        return None
    config = _check.mapping(thinking, "thinking")
    kind = _check.text(config.get("type"), "thinking.type")
    display = config.get("display")
    if display is not None and (not isinstance(display, str) or display not in _DISPLAYS):
        _invalid("thinking.display", f"must be one of {_choices(_DISPLAYS)}")
    if kind == "disabled":
        return None
    if kind == "enabled":
        # Anthropic wants at least 1 024; any positive budget is meaningful here.
        budget = _check.positive_integer(config.get("budget_tokens"), "thinking.budget_tokens")
        return Reasoning(effort=effort, budget_tokens=budget, summary=display)
    if kind == "adaptive":
        return Reasoning(effort=effort, summary=display)
    _invalid("thinking.type", "must be 'enabled', 'adaptive' or 'disabled'")


def _choices(values: Iterable[str]) -> str:
    return ", ".join(f"'{value}'" for value in sorted(values))


# -- tools -----------------------------------------------------------------------------------------


def _tools(value: object) -> tuple[tuple[ToolSpec, ...], WebSearch | None]:
    """Custom tools, and the web-search server tool (any dated `web_search_*` type named
    `web_search`), which kirod runs; a tool with any other `type` is a server tool kirod cannot
    run.

    Claude Code also sends tools without a schema (its `DeferredToolPlaceholder`); they are custom
    tools taking no input.
    """
    if value is None:
        return (), None
    tools: list[ToolSpec] = []
    search: WebSearch | None = None
    seen: set[str] = set()
    for i, item in enumerate(_counted(_check.array(value, "tools"), MAX_TOOLS, "tools", "tools")):
        path = f"tools.{i}"
        tool = _check.mapping(item, path)
        kind = tool.get("type")
        if isinstance(kind, str) and kind.startswith("web_search_"):
            if search is not None or WebSearch.TOOL_NAME in seen:
                _invalid(f"{path}.name", "tool name 'web_search' is declared twice")
            search = _web_search(tool, path)
            continue
        if kind is not None and kind != "custom":
            _unsupported(
                f"{path}.type",
                f"tool type {quoted(_check.text(kind, f'{path}.type'))} is a server tool, which "
                "kirod cannot run; declare a custom tool (name, description, input_schema) "
                "instead",
            )
        name = _check.nonempty_text(tool.get("name"), f"{path}.name")
        if name in seen or (search is not None and name == WebSearch.TOOL_NAME):
            _invalid(f"{path}.name", f"tool name {quoted(name)} is declared twice")
        seen.add(name)
        description = tool.get("description")
        if description is not None:
            description = _check.text(description, f"{path}.description")
        schema = tool.get("input_schema")
        if schema is not None:
            schema = _check.mapping(schema, f"{path}.input_schema")
        tools.append(ToolSpec(name, description or "", schema or EMPTY_SCHEMA))
    return tuple(tools), search


def _web_search(tool: Mapping[str, Any], path: str) -> WebSearch:
    """The web-search server tool's options; `user_location` is accepted and not used."""
    name = _check.text(tool.get("name"), f"{path}.name")
    if name != WebSearch.TOOL_NAME:
        _invalid(f"{path}.name", "the web search tool must be named 'web_search'")
    max_uses = tool.get("max_uses")
    domains = {}
    for field in ("allowed_domains", "blocked_domains"):
        listed = tool.get(field)
        items = [] if listed is None else _check.array(listed, f"{path}.{field}")
        domains[field] = tuple(
            _check.nonempty_text(d, f"{path}.{field}.{n}") for n, d in enumerate(items[:100])
        )
    if domains["allowed_domains"] and domains["blocked_domains"]:
        _invalid(path, "set allowed_domains or blocked_domains, not both")
    return WebSearch(
        max_uses=5 if max_uses is None else _check.positive_integer(max_uses, f"{path}.max_uses"),
        allowed_domains=domains["allowed_domains"],
        blocked_domains=domains["blocked_domains"],
    )


SEARCH_CALL_PREFIX: Final = "Perform a web search for the query: "
"""How Claude Code's WebSearch side call words its one user message (capabilities §2.2)."""


def _search_only(search: WebSearch | None, messages: tuple[Message, ...]) -> WebSearch | None:
    """The tool, with its query when the request is a search-only call: one user message
    asking for this search, and no other tool."""
    if search is None or len(messages) != 1 or messages[0].role is not Role.USER:
        return search
    text = "".join(b.text for b in messages[0].content if isinstance(b, TextBlock)).strip()
    if not text.startswith(SEARCH_CALL_PREFIX):
        return search
    return dataclasses.replace(search, query=text.removeprefix(SEARCH_CALL_PREFIX).strip())


def _tool_choice(value: object) -> ToolChoice:
    if value is None:
        return ToolChoice()
    choice = _check.mapping(value, "tool_choice")
    kind = _check.text(choice.get("type"), "tool_choice.type")
    mode = _TOOL_CHOICES.get(kind)
    if mode is None:
        _invalid("tool_choice.type", "must be 'auto', 'none', 'any' or 'tool'")
    if mode is ToolChoiceMode.TOOL:
        return ToolChoice(mode, _check.nonempty_text(choice.get("name"), "tool_choice.name"))
    return ToolChoice(mode)


# -- messages --------------------------------------------------------------------------------------


def _messages(value: object, signer: ThinkingSigner, budget: BlockBudget) -> tuple[Message, ...]:
    if value is None:
        _invalid("messages", "is required")
    items = _counted(_check.array(value, "messages"), MAX_MESSAGES, "messages", "messages")
    if not items:
        _invalid("messages", "must contain at least one message")
    messages: list[Message] = []
    for i, item in enumerate(items):
        path = f"messages.{i}"
        message = _check.mapping(item, path)
        name = _check.text(message.get("role"), f"{path}.role")
        role = _ROLES.get(name)
        if role is None:
            _invalid(f"{path}.role", "must be 'user', 'assistant' or 'system'")
        content = message.get("content")
        where = f"{path}.content"
        if isinstance(content, str):
            _spend(budget, 1, where)
            blocks: tuple[Block, ...] = (TextBlock(content),)
        else:
            parts = _check.array(content, where)
            _spend(budget, len(parts), where)
            if name == "system":
                blocks = _system_content(parts, where)
            else:
                blocks = _content(parts, role, where, signer, budget)
        messages.append(Message(role, blocks))
    return tuple(messages)


def _system_content(items: list[Any], path: str) -> tuple[Block, ...]:
    """An inline system message holds text blocks only, as the top-level `system` does."""
    blocks: list[Block] = []
    for i, item in enumerate(items):
        block = _check.mapping(item, f"{path}.{i}")
        if _type_of(block, f"{path}.{i}") != "text":
            _invalid(f"{path}.{i}.type", "system messages hold only 'text' blocks")
        blocks.append(TextBlock(_check.text(block.get("text"), f"{path}.{i}.text")))
    return tuple(blocks)


def _thinking_turns_to_keep(value: object) -> int | None:
    """From `context_management.edits`: how many recent assistant turns keep their thinking.

    None keeps all. A `clear_thinking_*` edit's `keep` is "all" or `{"type": "thinking_turns",
    "value": N}`; other edits (clearing tool uses) are accepted without effect.
    """
    if value is None:
        return None
    edits = _check.mapping(value, "context_management").get("edits")
    if edits is None:
        return None
    keep: int | None = None
    for i, item in enumerate(_check.array(edits, "context_management.edits")):
        path = f"context_management.edits.{i}"
        edit = _check.mapping(item, path)
        kind = _check.text(edit.get("type"), f"{path}.type")
        if not kind.startswith("clear_thinking_"):
            log.event(logger, "context_management_ignored", level=logging.DEBUG, edit=kind[:64])
            continue
        rule = edit.get("keep")
        if rule is None or rule == "all":
            continue
        rule = _check.mapping(rule, f"{path}.keep")
        if rule.get("type") != "thinking_turns":
            _invalid(f"{path}.keep.type", "must be 'thinking_turns'")
        turns = _check.integer(rule.get("value"), f"{path}.keep.value")
        if turns < 0:
            _invalid(f"{path}.keep.value", "must not be negative")
        keep = turns if keep is None else min(keep, turns)
    return keep


def _clear_thinking(messages: tuple[Message, ...], keep: int | None) -> tuple[Message, ...]:
    """Drop thinking from all but the last `keep` assistant turns that carry it."""
    if keep is None:
        return messages
    thinking = (ThinkingBlock, RedactedThinkingBlock)
    carriers = [
        i
        for i, message in enumerate(messages)
        if message.role is Role.ASSISTANT and any(isinstance(b, thinking) for b in message.content)
    ]
    cleared = set(carriers[: max(0, len(carriers) - keep)])
    return tuple(
        Message(m.role, tuple(b for b in m.content if not isinstance(b, thinking)))
        if i in cleared
        else m
        for i, m in enumerate(messages)
    )


def _content(
    items: list[Any], role: Role, path: str, signer: ThinkingSigner, budget: BlockBudget
) -> tuple[Block, ...]:
    blocks: list[Block] = []
    for i, item in enumerate(items):
        # The usual block, a text, is read before its path is made (only an error names it).
        if item.__class__ is dict and item.get("type") == "text":
            text = item.get("text")
            if text.__class__ is str:
                blocks.append(TextBlock(text))
                continue
        block = _block(_check.mapping(item, f"{path}.{i}"), role, f"{path}.{i}", signer, budget)
        if block is not None:
            blocks.append(block)
    return tuple(blocks)


def _block(
    block: Mapping[str, Any], role: Role, path: str, signer: ThinkingSigner, budget: BlockBudget
) -> Block | None:
    """One content block; None for echoed reasoning kirod did not sign."""
    kind = _type_of(block, path)
    if kind in _ASSISTANT_ONLY and role is not Role.ASSISTANT:
        _invalid(f"{path}.type", f"'{kind}' blocks belong in assistant messages")
    if kind in ("tool_result", "document") and role is not Role.USER:
        _invalid(f"{path}.type", f"'{kind}' blocks belong in user messages")
    match kind:
        case "text":
            return TextBlock(_check.text(block.get("text"), f"{path}.text"))
        case "image":
            return _image(block, path)
        case "tool_use":
            return ToolUseBlock(
                id=_check.nonempty_text(block.get("id"), f"{path}.id"),
                name=_check.nonempty_text(block.get("name"), f"{path}.name"),
                input=_check.mapping(block.get("input"), f"{path}.input"),
            )
        case "tool_result":
            return _tool_result(block, path, budget)
        case "thinking":
            return _thinking(block, path, signer)
        case "redacted_thinking":
            data = signer.unwrap_redacted(_check.text(block.get("data"), f"{path}.data"))
            return None if data is None else RedactedThinkingBlock(data)
        case "document":
            return _document(block, path)
        case "search_result":
            _unsupported(f"{path}.type", f"'{kind}' blocks are not supported; send text instead")
        case "server_tool_use" | "web_search_tool_result" if role is Role.ASSISTANT:
            return _search_history(block, kind, path)
        case _ if kind in _SERVER_BLOCKS:
            _unsupported(f"{path}.type", f"'{kind}' blocks belong to server tools kirod cannot run")
        case _:
            _invalid(f"{path}.type", f"unknown content block type {quoted(kind)}")


def _search_history(block: Mapping[str, Any], kind: str, path: str) -> TextBlock | None:
    """A web search of an earlier turn, as text: Kiro has no search blocks (`history_text`)."""
    if kind == "server_tool_use":
        if block.get("name") != WebSearch.TOOL_NAME:
            _unsupported(f"{path}.name", "only web_search server tool calls can be replayed")
        query = _check.mapping(block.get("input"), f"{path}.input").get("query")
        return TextBlock(history_text(query if isinstance(query, str) else None, ()))
    content = block.get("content")
    if not isinstance(content, list):
        return None  # an error result: the search found nothing to replay
    results = []
    for i, item in enumerate(content):
        hit = _check.mapping(item, f"{path}.content.{i}")
        url = _check.text(hit.get("url"), f"{path}.content.{i}.url")
        title = hit.get("title")
        snippet = open_snippet(hit.get("encrypted_content"))
        results.append((url, title if isinstance(title, str) else url, snippet))
    return TextBlock(history_text(None, results))


def _thinking(block: Mapping[str, Any], path: str, signer: ThinkingSigner) -> ThinkingBlock | None:
    thinking = _check.text(block.get("thinking"), f"{path}.thinking")
    verified = signer.verify(thinking, _check.text(block.get("signature"), f"{path}.signature"))
    return None if verified is None else ThinkingBlock(thinking, verified.upstream_signature)


def _image(block: Mapping[str, Any], path: str) -> ImageBlock:
    source = _check.mapping(block.get("source"), f"{path}.source")
    kind = _check.text(source.get("type"), f"{path}.source.type")
    if kind == "url":
        _unsupported(f"{path}.source.type", "image URLs are not supported; send base64 data")
    if kind == "file":
        _unsupported(f"{path}.source.type", "Files API images are not supported; send base64 data")
    if kind != "base64":
        _invalid(f"{path}.source.type", "must be 'base64'")
    media_type = _check.text(source.get("media_type"), f"{path}.source.media_type")
    if media_type not in IMAGE_MEDIA_TYPES:
        _invalid(f"{path}.source.media_type", f"must be one of {_choices(IMAGE_MEDIA_TYPES)}")
    data = _check.nonempty_text(source.get("data"), f"{path}.source.data")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        _invalid(f"{path}.source.data", "is not valid base64")
    return ImageBlock(media_type, data)


def _document(block: Mapping[str, Any], path: str) -> DocumentBlock | TextBlock:
    """A base64 file is a document for Kiro; a plain-text one is text, which any model reads.

    `title` names the document, `context` goes along as text; `citations` is accepted and has
    no effect (Kiro returns no citations, so answers carry none).
    """
    source = _check.mapping(block.get("source"), f"{path}.source")
    kind = _check.text(source.get("type"), f"{path}.source.type")
    title = block.get("title")
    name = _check.document_name(title, f"{path}.title")
    context = block.get("context")
    if context is not None:
        context = _check.text(context, f"{path}.context") or None
    if kind == "text":
        text = _check.text(source.get("data"), f"{path}.source.data")
        return TextBlock(_text_document(name if title else None, context, text))
    if kind in ("url", "file", "content"):
        _unsupported(
            f"{path}.source.type",
            f"'{kind}' document sources are not supported; send base64 data or text",
        )
    if kind != "base64":
        _invalid(f"{path}.source.type", "must be 'base64' or 'text'")
    media_type = _check.text(source.get("media_type"), f"{path}.source.media_type")
    return DocumentBlock(
        name,
        _check.document_format(media_type, f"{path}.source.media_type"),
        _check.document_data(source.get("data"), f"{path}.source.data"),
        context,
    )


def _text_document(title: str | None, context: str | None, text: str) -> str:
    """A plain-text document as prompt text, delimited so the model sees where it ends."""
    head = "".join(
        f"<{tag}>{value}</{tag}>\n"
        for tag, value in (("title", title), ("context", context))
        if value
    )
    return f"<document>\n{head}{text}\n</document>"


def _tool_result(block: Mapping[str, Any], path: str, budget: BlockBudget) -> ToolResultBlock:
    tool_use_id = _check.nonempty_text(block.get("tool_use_id"), f"{path}.tool_use_id")
    is_error = block.get("is_error")
    content = block.get("content")
    parts: list[TextBlock | ImageBlock | DocumentBlock] = []
    if isinstance(content, str):
        if content:
            parts.append(TextBlock(content))
    elif content is not None:
        items = _check.array(content, f"{path}.content")
        _spend(budget, len(items), f"{path}.content")
        for i, item in enumerate(items):
            where = f"{path}.content.{i}"
            parts.append(_result_part(_check.mapping(item, where), where))
    return ToolResultBlock(
        tool_use_id=tool_use_id,
        content=tuple(parts),
        is_error=False if is_error is None else _check.boolean(is_error, f"{path}.is_error"),
    )


def _result_part(part: Mapping[str, Any], path: str) -> TextBlock | ImageBlock | DocumentBlock:
    kind = _type_of(part, path)
    if kind == "text":
        return TextBlock(_check.text(part.get("text"), f"{path}.text"))
    if kind == "image":
        return _image(part, path)
    if kind == "document":
        return _document(part, path)
    if kind == "tool_reference":
        # Claude Code's ToolSearch answers with references to deferred tools. Every declared
        # tool is already offered to the model, so the reference is just the tool's name.
        return TextBlock(_check.nonempty_text(part.get("tool_name"), f"{path}.tool_name"))
    if kind == "search_result":
        _unsupported(f"{path}.type", f"'{kind}' blocks are not supported; send text instead")
    _invalid(f"{path}.type", "must be 'text', 'image', 'document' or 'tool_reference'")
