"""Builders of GenerateAssistantResponse bodies for the fake's tests (shapes:
docs/KIRO-PROTOCOL.md §2.1)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

SONNET = "claude-sonnet-4.5"
PNG = {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}


def tool(name: str = "get_weather", schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    schema = schema or {"type": "object", "properties": {"city": {"type": "string"}}}
    return {
        "toolSpecification": {
            "name": name,
            "description": f"The {name} tool.",
            "inputSchema": {"json": dict(schema)},
        }
    }


def result(tool_use_id: str, text: str = "Sunny") -> dict[str, Any]:
    return {"toolUseId": tool_use_id, "content": [{"text": text}], "status": "success"}


def use(tool_use_id: str, name: str = "get_weather", arguments: Any = None) -> dict[str, Any]:
    arguments = {"city": "Paris"} if arguments is None else arguments
    return {"toolUseId": tool_use_id, "name": name, "input": arguments}


def user(
    content: str = "Hello",
    *,
    model: str = SONNET,
    tools: Iterable[Mapping[str, Any]] = (),
    results: Iterable[Mapping[str, Any]] = (),
    images: Iterable[Mapping[str, Any]] = (),
    **extra: Any,
) -> dict[str, Any]:
    """A `userInputMessage` entry (history or current)."""
    message: dict[str, Any] = {"content": content, "modelId": model, "origin": "AI_EDITOR"}
    context: dict[str, Any] = {}
    if tools:
        context["tools"] = [dict(t) for t in tools]
    if results:
        context["toolResults"] = [dict(r) for r in results]
    if context:
        message["userInputMessageContext"] = context
    if images:
        message["images"] = [dict(i) for i in images]
    message.update(extra)
    return {"userInputMessage": message}


def assistant(
    content: str = "OK", *, uses: Iterable[Mapping[str, Any]] = (), **extra: Any
) -> dict[str, Any]:
    message: dict[str, Any] = {"content": content, **extra}
    if uses:
        message["toolUses"] = [dict(u) for u in uses]
    return {"assistantResponseMessage": message}


def body(
    current: Mapping[str, Any] | None = None,
    history: Iterable[Mapping[str, Any]] = (),
    *,
    trigger: str = "MANUAL",
    profile_arn: str | None = None,
    **root: Any,
) -> dict[str, Any]:
    state: dict[str, Any] = {
        "conversationId": "5d9a8b3e-0000-4000-8000-000000000001",
        "chatTriggerType": trigger,
        "currentMessage": dict(current or user()),
    }
    history = [dict(entry) for entry in history]
    if history:
        state["history"] = history
    data: dict[str, Any] = {"conversationState": state, **root}
    if profile_arn is not None:
        data["profileArn"] = profile_arn
    return data


def encode(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8")
