"""Declared tools, the web-search server tool, and `tool_choice`.

Web search: the `web_search_*` server tool (any dated type, named `web_search`; `max_uses`,
`allowed_domains`, `blocked_domains` honoured, `user_location` accepted without effect) is run
by kirod through Kiro's MCP search (`kirod.upstream.websearch`). A request whose only tool it is
and whose one user message is Claude Code's "Perform a web search for the query: …" is a
search-only call (`WebSearch.query`). Any other server tool is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from kirod.canonical.request import (
    Message,
    Role,
    TextBlock,
    ToolChoice,
    ToolChoiceMode,
    ToolSpec,
    WebSearch,
)
from kirod.protocols.anthropic.checks import check, counted, invalid, unsupported
from kirod.protocols.fields import MAX_TOOLS, quoted

EMPTY_SCHEMA: Final[Mapping[str, Any]] = {"type": "object", "properties": {}}
_TOOL_CHOICES: Final = {mode.value: mode for mode in ToolChoiceMode}


def declared_tools(value: object) -> tuple[tuple[ToolSpec, ...], WebSearch | None]:
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
    for i, item in enumerate(counted(check.array(value, "tools"), MAX_TOOLS, "tools", "tools")):
        path = f"tools.{i}"
        tool = check.mapping(item, path)
        kind = tool.get("type")
        if isinstance(kind, str) and kind.startswith("web_search_"):
            if search is not None or WebSearch.TOOL_NAME in seen:
                raise invalid(f"{path}.name", "tool name 'web_search' is declared twice")
            search = _web_search(tool, path)
            continue
        if kind is not None and kind != "custom":
            raise unsupported(
                f"{path}.type",
                f"tool type {quoted(check.text(kind, f'{path}.type'))} is a server tool, which "
                "kirod cannot run; declare a custom tool (name, description, input_schema) "
                "instead",
            )
        name = check.nonempty_text(tool.get("name"), f"{path}.name")
        if name in seen or (search is not None and name == WebSearch.TOOL_NAME):
            raise invalid(f"{path}.name", f"tool name {quoted(name)} is declared twice")
        seen.add(name)
        description = tool.get("description")
        if description is not None:
            description = check.text(description, f"{path}.description")
        schema = tool.get("input_schema")
        if schema is not None:
            schema = check.mapping(schema, f"{path}.input_schema")
        tools.append(ToolSpec(name, description or "", schema or EMPTY_SCHEMA))
    return tuple(tools), search


def _web_search(tool: Mapping[str, Any], path: str) -> WebSearch:
    """The web-search server tool's options; `user_location` is accepted and not used."""
    name = check.text(tool.get("name"), f"{path}.name")
    if name != WebSearch.TOOL_NAME:
        raise invalid(f"{path}.name", "the web search tool must be named 'web_search'")
    max_uses = tool.get("max_uses")
    domains = {}
    for field in ("allowed_domains", "blocked_domains"):
        listed = tool.get(field)
        items = [] if listed is None else check.array(listed, f"{path}.{field}")
        domains[field] = tuple(
            check.nonempty_text(d, f"{path}.{field}.{n}") for n, d in enumerate(items[:100])
        )
    if domains["allowed_domains"] and domains["blocked_domains"]:
        raise invalid(path, "set allowed_domains or blocked_domains, not both")
    return WebSearch(
        max_uses=5 if max_uses is None else check.positive_integer(max_uses, f"{path}.max_uses"),
        allowed_domains=domains["allowed_domains"],
        blocked_domains=domains["blocked_domains"],
    )


SEARCH_CALL_PREFIX: Final = "Perform a web search for the query: "
"""How Claude Code's WebSearch side call words its one user message (docs/CLIENTS.md §2.3)."""


def search_only(search: WebSearch | None, messages: tuple[Message, ...]) -> WebSearch | None:
    """The tool, with its query when the request is a search-only call: one user message
    asking for this search, and no other tool."""
    if search is None or len(messages) != 1 or messages[0].role is not Role.USER:
        return search
    text = "".join(b.text for b in messages[0].content if isinstance(b, TextBlock)).strip()
    if not text.startswith(SEARCH_CALL_PREFIX):
        return search
    return dataclasses.replace(search, query=text.removeprefix(SEARCH_CALL_PREFIX).strip())


def tool_choice(value: object) -> ToolChoice:
    """The tool choice as sent; `decode_messages` refuses a forced one (`any`, `tool`) unless
    the request is a search-only call."""
    if value is None:
        return ToolChoice()
    choice = check.mapping(value, "tool_choice")
    kind = check.text(choice.get("type"), "tool_choice.type")
    mode = _TOOL_CHOICES.get(kind)
    if mode is None:
        raise invalid("tool_choice.type", "must be 'auto', 'none', 'any' or 'tool'")
    if mode is ToolChoiceMode.TOOL:
        return ToolChoice(mode, check.nonempty_text(choice.get("name"), "tool_choice.name"))
    return ToolChoice(mode)
