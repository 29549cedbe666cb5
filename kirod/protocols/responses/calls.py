"""Function and freeform tool calls and their outputs, both ways.

A `function_call` item carries JSON `arguments`, a `custom_tool_call` the raw `input` of a
freeform tool (`freeform.py`); either names its tool, with the `namespace` the client declared it
in (`tools.py` flattens the two into the upstream name, and the encoder splits them again). Their
outputs (`function_call_output`, `custom_tool_call_output`) go upstream as tool results.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kirod.canonical.request import ToolResultBlock, ToolUseBlock
from kirod.protocols.fields import BlockBudget, invalid, json_arguments, string_field
from kirod.protocols.responses.freeform import CUSTOM_INPUT
from kirod.protocols.responses.message_items import content_parts
from kirod.protocols.responses.tools import FlatNames, ToolNames, flat_tool_name


def function_call(item: Mapping[str, Any], path: str, flat_names: FlatNames) -> ToolUseBlock:
    """A `function_call` item as the tool use it replays upstream."""
    call_id, name, arguments = _call(item, path, "arguments", flat_names)
    return ToolUseBlock(call_id, name, json_arguments(arguments, f"{path}.arguments"))


def custom_tool_call(item: Mapping[str, Any], path: str, flat_names: FlatNames) -> ToolUseBlock:
    """A `custom_tool_call` item as the one-parameter tool use it was upstream."""
    call_id, name, text = _call(item, path, "input", flat_names)
    return ToolUseBlock(call_id, name, {CUSTOM_INPUT: text})


def _call(
    item: Mapping[str, Any], path: str, field: str, flat_names: FlatNames
) -> tuple[str, str, str]:
    """A tool call item's id, upstream (flattened) name, and its `field` string."""
    call_id = string_field(item, "call_id", path, required=True)
    name = string_field(item, "name", path, required=True)
    namespace = string_field(item, "namespace", path)
    value = string_field(item, field, path, required=True)
    assert call_id is not None
    assert name is not None
    assert value is not None
    if namespace is not None:
        name = flat_names.get((namespace, name)) or flat_tool_name(namespace, name)
    return call_id, name, value


def call_output(item: Mapping[str, Any], path: str, budget: BlockBudget) -> ToolResultBlock:
    call_id = string_field(item, "call_id", path, required=True)
    assert call_id is not None
    output = item.get("output")
    if output is None:
        raise invalid(f"{path}.output", "is required", "missing_required_parameter")
    parts = content_parts(output, f"{path}.output", budget, attachments=True)
    return ToolResultBlock(call_id, tuple(parts))


def function_call_item(
    fc_id: str, call_id: str, name: str, arguments: str, status: str, tool_names: ToolNames
) -> dict[str, Any]:
    """A function call with its JSON `arguments`."""
    return _call_item(
        "function_call", fc_id, call_id, name, "arguments", arguments, status, tool_names
    )


def custom_tool_call_item(
    ctc_id: str, call_id: str, name: str, text: str, status: str, tool_names: ToolNames
) -> dict[str, Any]:
    """A freeform tool call with its raw `input`."""
    return _call_item("custom_tool_call", ctc_id, call_id, name, "input", text, status, tool_names)


def _call_item(
    kind: str,
    call_item_id: str,
    call_id: str,
    name: str,
    field: str,
    value: str,
    status: str,
    tool_names: ToolNames,
) -> dict[str, Any]:
    """A tool call item; flattened namespace tools get their namespace and own name back."""
    item: dict[str, Any] = {
        "id": call_item_id,
        "type": kind,
        "call_id": call_id,
        "name": name,
        field: value,
        "status": status,
    }
    if name in tool_names:
        item["namespace"], item["name"] = tool_names[name]
    return item
