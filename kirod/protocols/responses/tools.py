"""The tools a Responses request declares, as upstream `ToolSpec`s, and its `tool_choice`.

`function` tools map one to one. A `namespace` tool (Codex: `{type: "namespace", name,
description, tools: [function tools]}`) is flattened into its functions named
`<namespace>__<function>` (Codex's own flattening: trailing `_` of the namespace and leading `_`
of the function trimmed); `ResponseEcho.tool_names` maps each flat name back, and the encoder
emits such calls as `function_call` items with `namespace` and `name` split again, which is how
Codex routes them. An input `function_call` carrying a `namespace` is flattened the same way
(`calls.py`).

Code mode. Codex declares its tools in an `additional_tools` input item (`{type, role:
"developer", tools: [...]}`) instead of top-level `tools`; every such item, wherever it stands in
`input` or in the stored history, declares tools exactly as top-level `tools` does.

Freeform (`custom`) tools are declared as `freeform.py` says; built-in tools the client runs
(`local_shell`, `shell` with a local environment, `apply_patch`) as `client_tools.py` says; the
hosted web search is run by kirod (`web_search.py`).

Other hosted tools (the tools a server would run: `file_search`, `code_interpreter`,
`image_generation`, `mcp`, …) cannot run behind Kiro. The rule: a hosted tool is dropped — named in
`dropped_tools` for the log line — when the request declares at least one function tool (plain
or namespaced) and `tool_choice` does not force a tool (forcing is rejected anyway); this is the
shape Codex always sends (`web_search` beside its function tools). A request whose only tools
are hosted gets a 400 naming the type, because dropping would leave it with no tools at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kirod.canonical.request import ToolChoice, ToolChoiceMode, ToolSpec, WebSearch
from kirod.protocols.fields import (
    MAX_TOOLS,
    at_most,
    invalid,
    is_object,
    quoted,
    string_field,
    unsupported,
)
from kirod.protocols.responses.client_tools import CLIENT_TOOLS, runs_on_client
from kirod.protocols.responses.freeform import custom_tool
from kirod.protocols.responses.web_search import WEB_SEARCH_TYPES, web_search_tool

NAMESPACE_DELIMITER: Final = "__"
ToolNames = Mapping[str, tuple[str, str]]
"""Flattened tool name sent upstream → (namespace, function name) the client declared."""
FlatNames = Mapping[tuple[str, str], str]
"""(namespace, function name) the client declared → flattened tool name sent upstream."""
_EMPTY_SCHEMA: Final[Mapping[str, Any]] = {"type": "object", "properties": {}}


def flat_tool_name(namespace: str, name: str) -> str:
    """The upstream name of function `name` in `namespace` (Codex's `canonical_flat_name`)."""
    return f"{namespace.rstrip('_')}{NAMESPACE_DELIMITER}{name.lstrip('_')}"


def additional_tools(items: Sequence[Mapping[str, Any]], where: str) -> list[tuple[str, object]]:
    """The tool lists of the `additional_tools` items among `items`, with their paths."""
    found: list[tuple[str, object]] = []
    for index, item in enumerate(items):
        if is_object(item) and item.get("type") == "additional_tools":
            path = f"{where}[{index}].tools"
            tools = item.get("tools")
            if not isinstance(tools, list):
                raise invalid(path, "must be a list of tools", "invalid_type")
            found.append((path, tools))
    return found


class DeclaredTools:
    """Function, custom and namespace tools, flattened; hosted tools dropped or refused by the
    rule. `additional` are the tool lists of `additional_tools` input items (code mode)."""

    def __init__(self, value: object, additional: Sequence[tuple[str, object]] = ()) -> None:
        self.specs: list[ToolSpec] = []
        self.echo: list[dict[str, Any]] = []
        self.names: dict[str, tuple[str, str]] = {}
        self.flat_names: dict[tuple[str, str], str] = {}
        self.custom: set[str] = set()
        self.client: set[str] = set()  # client-run built-in tools (client_tools.py)
        self.search: WebSearch | None = None  # the hosted web search, which kirod runs
        self._index: dict[str, int] = {}  # position of each name in `specs`
        self._redeclaring = False
        hosted: list[tuple[str, str]] = []
        if value is None:
            value = []
        if not isinstance(value, list):
            raise invalid("tools", "must be a list", "invalid_type")
        for where, tools in [("tools", value), *additional]:
            echo = self.echo if where == "tools" else []
            # A later additional_tools item may declare a tool again (a stored turn and the new
            # input both carry it; tools change mid-conversation): the last declaration wins.
            self._redeclaring = where != "tools"
            assert isinstance(tools, list)
            for index, tool in enumerate(tools):
                self._declare(tool, f"{where}[{index}]", echo, hosted, where)
        if self.search is not None and WebSearch.TOOL_NAME in self._index:
            raise invalid("tools", "a function named 'web_search' beside the web search tool")
        if hosted and not self.specs and self.search is None:
            where, kind = hosted[0]
            raise unsupported(
                where,
                f"tool type {quoted(kind)} is not supported: Kiro runs no hosted tools. Remove it "
                "(it is ignored when declared beside function tools)",
            )
        self.dropped = tuple(kind for _, kind in hosted)

    def _declare(
        self,
        tool: object,
        path: str,
        echo: list[dict[str, Any]],
        hosted: list[tuple[str, str]],
        where: str = "tools",
    ) -> None:
        if not is_object(tool):
            raise invalid(path, "each tool must be an object", "invalid_type")
        kind = string_field(tool, "type", path, required=True)
        if kind == "function":
            spec, echoed = _function_tool(tool, path)
            self._add(spec, path)
            echo.append(echoed)
        elif kind == "custom":
            spec, echoed = custom_tool(tool, path)
            self._add(spec, path)
            self.custom.add(spec.name)
            echo.append(echoed)
        elif kind == "namespace":
            echo.append(self._namespace(tool, path, hosted))
        elif kind in WEB_SEARCH_TYPES and where == "tools":
            if self.search is not None:
                raise invalid(f"{path}.type", "a web search tool is declared twice")
            self.search = web_search_tool(tool, path)
            echo.append(dict(tool))
        elif kind is not None and runs_on_client(tool):
            self._add(CLIENT_TOOLS[kind].spec, path)
            self.client.add(kind)
            echo.append(dict(tool))
        else:
            at_most(len(hosted) + 1, MAX_TOOLS, "tools", "tools")
            hosted.append((f"{path}.type", str(kind)[:64]))

    def _add(self, spec: ToolSpec, path: str) -> None:
        index = self._index.get(spec.name)
        if index is not None:
            if not self._redeclaring:
                raise invalid(f"{path}.name", f"tool name {quoted(spec.name)} is declared twice")
            self.specs[index] = spec
            return
        at_most(len(self.specs) + 1, MAX_TOOLS, "tools", "tools")
        self._index[spec.name] = len(self.specs)
        self.specs.append(spec)

    def _namespace(
        self, tool: Mapping[str, Any], path: str, hosted: list[tuple[str, str]]
    ) -> dict[str, Any]:
        namespace = string_field(tool, "name", path, required=True)
        assert namespace is not None
        description = string_field(tool, "description", path) or ""
        nested = tool.get("tools")
        if not isinstance(nested, list):
            raise invalid(f"{path}.tools", "must be a list of tools", "invalid_type")
        echoed = []
        for index, inner in enumerate(nested):
            inner_path = f"{path}.tools[{index}]"
            if not is_object(inner):
                raise invalid(inner_path, "each tool must be an object", "invalid_type")
            kind = string_field(inner, "type", inner_path, required=True)
            if kind == "function":
                spec, echo = _function_tool(inner, inner_path)
            elif kind == "custom":
                spec, echo = custom_tool(inner, inner_path)
            else:
                at_most(len(hosted) + 1, MAX_TOOLS, "tools", "tools")
                hosted.append((f"{inner_path}.type", f"{namespace[:64]}.{str(kind)[:64]}"))
                continue
            flat = flat_tool_name(namespace, spec.name)
            self._add(ToolSpec(flat, _namespaced(description, spec), spec.input_schema), inner_path)
            if kind == "custom":
                self.custom.add(flat)
            self.names[flat] = (namespace, spec.name)
            self.flat_names[(namespace, spec.name)] = flat
            echoed.append(echo)
        return {"type": "namespace", "name": namespace, "description": description, "tools": echoed}


def _namespaced(namespace_description: str, spec: ToolSpec) -> str:
    """The namespace's description is the model's only context for its functions: keep it."""
    if not namespace_description:
        return spec.description
    return f"{namespace_description}\n\n{spec.description}".strip()


def _function_tool(tool: Mapping[str, Any], path: str) -> tuple[ToolSpec, dict[str, Any]]:
    """A function tool; `strict` is accepted but not enforced (the model sees the schema)."""
    name = string_field(tool, "name", path, required=True)
    if not name:
        raise invalid(f"{path}.name", "must be a non-empty string")
    description = string_field(tool, "description", path) or ""
    parameters = tool.get("parameters")
    if parameters is None:
        parameters = _EMPTY_SCHEMA
    elif not is_object(parameters):
        raise invalid(f"{path}.parameters", "must be a JSON schema object", "invalid_type")
    strict = tool.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise invalid(f"{path}.strict", "must be a boolean", "invalid_type")
    echo = {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": dict(parameters),
        "strict": strict,
    }
    return ToolSpec(name, description, parameters), echo


def tool_choice(value: object) -> tuple[ToolChoice, str]:
    """auto and none are honoured; Kiro cannot force a tool, so forcing is a 400."""
    if value is None or value == "auto":
        return ToolChoice(ToolChoiceMode.AUTO), "auto"
    if value == "none":
        return ToolChoice(ToolChoiceMode.NONE), "none"
    if value == "required" or isinstance(value, Mapping):
        raise unsupported(
            "tool_choice",
            "forcing a tool call is not supported by Kiro; use tool_choice auto or none",
        )
    raise invalid("tool_choice", "must be 'auto', 'none', 'required' or a tool choice object")
