"""Built-in tools the client runs itself: `local_shell`, `shell` (local) and `apply_patch`.

OpenAI's Responses API has typed tools whose calls the *client* executes: Codex's `local_shell`
(`local_shell_call` items with an `exec` action), the newer `shell` (`shell_call` with
`commands`) and `apply_patch` (`apply_patch_call` with a file operation). Unlike hosted tools
(web search, code interpreter, …) nothing of them runs on the server, so kirod never drops them:
each is declared to Kiro as a JSON tool of the same name whose parameters are the fields of the
call's action, and the model's call goes back to the client as the typed item, its action built
from the arguments. The item's output (`*_call_output`) goes upstream as that tool's result.

The declared descriptions are the only text here the model reads; they state what the tool's
type means in OpenAI's API and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kirod.canonical.request import TextBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from kirod.protocols.fields import invalid, string_field

_Fields = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ClientTool:
    """One built-in client-run tool type and how its items map to upstream tool calls."""

    tool_type: str  # the `tools[].type`, also the upstream tool name
    call_type: str  # the output item the model's call becomes
    output_type: str  # the input item carrying the client's result
    field: str  # where the call item holds the arguments: `action` or `operation`
    id_prefix: str  # of the call item's id, as `fc` is for function calls
    description: str
    schema: Mapping[str, Any]
    to_item: _Fields  # upstream arguments → the item's `field`
    to_arguments: _Fields  # the item's `field` → upstream arguments

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.tool_type, self.description, self.schema)

    def call_item(
        self, item_id: str, call_id: str, arguments: Mapping[str, Any], status: str = "completed"
    ) -> dict[str, Any]:
        return {
            "id": item_id,
            "type": self.call_type,
            "call_id": call_id,
            self.field: self.to_item(arguments),
            "status": status,
        }

    def tool_use(self, item: Mapping[str, Any], path: str) -> ToolUseBlock:
        """A call item of the input (or stored history) as the upstream tool use."""
        call_id = string_field(item, "call_id", path) or string_field(item, "id", path)
        if not call_id:
            raise invalid(f"{path}.call_id", "is required", "missing_required_parameter")
        value = item.get(self.field)
        if not isinstance(value, Mapping):
            raise invalid(f"{path}.{self.field}", "must be an object", "invalid_type")
        return ToolUseBlock(call_id, self.tool_type, self.to_arguments(value))

    def tool_result(self, item: Mapping[str, Any], path: str) -> ToolResultBlock:
        """The client's `*_call_output` item as the upstream tool result."""
        # `local_shell_call_output` names the call by `id` (OpenAI's schema); others `call_id`.
        call_id = string_field(item, "call_id", path) or string_field(item, "id", path)
        if not call_id:
            raise invalid(f"{path}.call_id", "is required", "missing_required_parameter")
        output = item.get("output")
        if isinstance(output, str):
            text = output
        elif output is None:
            text = ""
        else:
            text = json.dumps(output, ensure_ascii=False, separators=(",", ":"))
        status = item.get("status")
        failed = status == "failed"
        if not text and isinstance(status, str):
            text = status
        return ToolResultBlock(call_id, (TextBlock(text),) if text else (), is_error=failed)


def _strings(value: object) -> list[str]:
    if isinstance(value, list):
        return [item if isinstance(item, str) else json.dumps(item) for item in value]
    return [value] if isinstance(value, str) else []


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _without_none(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def _exec_action(arguments: Mapping[str, Any]) -> dict[str, Any]:
    env = arguments.get("env")
    return {
        "type": "exec",
        "command": _strings(arguments.get("command")),
        "env": {str(k): str(v) for k, v in env.items()} if isinstance(env, Mapping) else {},
        "timeout_ms": _integer(arguments.get("timeout_ms")),
        "working_directory": arguments.get("workdir")
        if isinstance(arguments.get("workdir"), str)
        else None,
        "user": None,
    }


def _exec_arguments(action: Mapping[str, Any]) -> dict[str, Any]:
    return _without_none(
        {
            "command": _strings(action.get("command")),
            "workdir": action.get("working_directory"),
            "timeout_ms": action.get("timeout_ms"),
            "env": action.get("env") or None,
        }
    )


def _shell_action(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "commands": _strings(arguments.get("commands")),
        "timeout_ms": _integer(arguments.get("timeout_ms")),
        "max_output_length": _integer(arguments.get("max_output_length")),
    }


def _shell_arguments(action: Mapping[str, Any]) -> dict[str, Any]:
    return _without_none(
        {
            "commands": _strings(action.get("commands")),
            "timeout_ms": action.get("timeout_ms"),
            "max_output_length": action.get("max_output_length"),
        }
    )


_PATCH_OPERATIONS: Final = ("create_file", "update_file", "delete_file")


def _patch_operation(arguments: Mapping[str, Any]) -> dict[str, Any]:
    kind = arguments.get("type")
    operation: dict[str, Any] = {
        "type": kind if kind in _PATCH_OPERATIONS else "update_file",
        "path": arguments.get("path") if isinstance(arguments.get("path"), str) else "",
    }
    if operation["type"] != "delete_file":
        diff = arguments.get("diff")
        operation["diff"] = diff if isinstance(diff, str) else ""
    return operation


def _patch_arguments(operation: Mapping[str, Any]) -> dict[str, Any]:
    return _without_none({key: operation.get(key) for key in ("type", "path", "diff")})


_INTEGER: Final = {"type": "integer"}

CLIENT_TOOLS: Final[Mapping[str, ClientTool]] = {
    tool.tool_type: tool
    for tool in (
        ClientTool(
            tool_type="local_shell",
            call_type="local_shell_call",
            output_type="local_shell_call_output",
            field="action",
            id_prefix="lsh",
            description="Runs a command on the user's machine and returns its output.",
            schema={
                "type": "object",
                "properties": {
                    "command": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "The program and its arguments, one string each.",
                    },
                    "workdir": {"type": "string", "description": "The working directory."},
                    "timeout_ms": {**_INTEGER, "description": "A time limit in milliseconds."},
                },
                "required": ["command"],
            },
            to_item=_exec_action,
            to_arguments=_exec_arguments,
        ),
        ClientTool(
            tool_type="shell",
            call_type="shell_call",
            output_type="shell_call_output",
            field="action",
            id_prefix="sh",
            description="Runs shell commands on the user's machine and returns their output.",
            schema={
                "type": "object",
                "properties": {
                    "commands": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Shell command lines, run in order.",
                    },
                    "timeout_ms": {**_INTEGER, "description": "A time limit in milliseconds."},
                    "max_output_length": {
                        **_INTEGER,
                        "description": "The most characters of output to return.",
                    },
                },
                "required": ["commands"],
            },
            to_item=_shell_action,
            to_arguments=_shell_arguments,
        ),
        ClientTool(
            tool_type="apply_patch",
            call_type="apply_patch_call",
            output_type="apply_patch_call_output",
            field="operation",
            id_prefix="apc",
            description="Creates, updates or deletes one file on the user's machine.",
            schema={
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": list(_PATCH_OPERATIONS)},
                    "path": {"type": "string", "description": "The file's path."},
                    "diff": {
                        "type": "string",
                        "description": "For create_file and update_file: the change as a diff.",
                    },
                },
                "required": ["type", "path"],
            },
            to_item=_patch_operation,
            to_arguments=_patch_arguments,
        ),
    )
}
"""Client-run tool types by `tools[].type` (the upstream tool name)."""

CALL_TYPES: Final = {tool.call_type: tool for tool in CLIENT_TOOLS.values()}
OUTPUT_TYPES: Final = {tool.output_type: tool for tool in CLIENT_TOOLS.values()}


def runs_on_client(tool: Mapping[str, Any]) -> bool:
    """Whether a built-in tool declaration is one the client executes; a `shell` tool whose
    environment is a hosted container runs on the server and is not."""
    if tool.get("type") not in CLIENT_TOOLS:
        return False
    environment = tool.get("environment")
    return not (isinstance(environment, Mapping) and environment.get("type") != "local")
