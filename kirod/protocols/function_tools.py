"""Function tools as Chat Completions declares them, which Ollama's `/api/chat` copies:
`{"type": "function", "function": {"name", "description", "parameters"}}`.

Shared by the two codecs that read this shape (codecs never import each other). `strict` is
accepted but not enforced: the model sees the schema. At most `MAX_TOOLS`, each name once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kirod.canonical.request import ToolSpec
from kirod.protocols.fields import (
    MAX_TOOLS,
    at_most,
    invalid,
    quoted,
    string_field,
    unsupported,
)

_EMPTY_SCHEMA: Final[Mapping[str, Any]] = {"type": "object", "properties": {}}


def function_tools(value: object, *, type_required: bool = True) -> tuple[ToolSpec, ...]:
    """The `tools` list; `type_required` False lets a tool leave out `type` (Ollama's default
    is "function")."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise invalid("tools", "must be a list", "invalid_type")
    at_most(len(value), MAX_TOOLS, "tools", "tools")
    specs: list[ToolSpec] = []
    names: set[str] = set()
    for index, tool in enumerate(value):
        path = f"tools[{index}]"
        if not isinstance(tool, Mapping):
            raise invalid(path, "each tool must be an object", "invalid_type")
        kind = tool.get("type", None if type_required else "function")
        if kind != "function":
            raise unsupported(f"{path}.type", f"tool type {quoted(kind)} is not supported")
        function = tool.get("function")
        if not isinstance(function, Mapping):
            raise invalid(f"{path}.function", "is required", "missing_required_parameter")
        name = string_field(function, "name", f"{path}.function", required=True)
        if not name:
            raise invalid(f"{path}.function.name", "must be a non-empty string")
        if name in names:
            raise invalid(f"{path}.function.name", f"tool name {quoted(name)} is declared twice")
        names.add(name)
        description = string_field(function, "description", f"{path}.function") or ""
        parameters = function.get("parameters")
        if parameters is None:
            parameters = _EMPTY_SCHEMA
        elif not isinstance(parameters, Mapping):
            raise invalid(
                f"{path}.function.parameters", "must be a JSON schema object", "invalid_type"
            )
        specs.append(ToolSpec(name, description, parameters))
    return tuple(specs)
