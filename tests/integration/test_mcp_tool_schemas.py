"""MCP tools' schemas end to end: the Anthropic SDK declares tools whose top level Kiro refuses
(docs/KIRO-PROTOCOL.md §4.2: `400 TOOL_SCHEMA_INVALID` for a top level that is not `type: object`
or holds a `oneOf`/`anyOf`/`allOf`); kirod flattens them, the fake accepts them, and the call
comes back."""

from __future__ import annotations

from typing import Any

import anthropic

from kirod.testing.fake_kiro import FakeKiro, Reply, ToolCall

MODEL = "claude-sonnet-4-6"
PATH = {"type": "string", "description": "A path inside the repository"}
QUERY = {"type": "string", "description": "What to search for"}
MCP_TOOLS: list[Any] = [
    {
        "name": "mcp__files__read",
        "description": "Read a file, whole or a range of its lines",
        "input_schema": {
            "anyOf": [
                {"type": "object", "properties": {"path": PATH}, "required": ["path"]},
                {
                    "type": "object",
                    "properties": {"path": PATH, "start": {"type": "integer"}},
                    "required": ["path", "start"],
                },
            ]
        },
    },
    {
        "name": "mcp__search__query",
        "description": "Search the code",
        "input_schema": {"properties": {"query": QUERY}, "required": ["query"]},  # no type
    },
    {
        "name": "mcp__git__log",
        "description": "The recent commits",
        "input_schema": {
            "$ref": "#/$defs/LogArgs",
            "$defs": {"LogArgs": {"type": "object", "properties": {"count": {"type": "integer"}}}},
        },
    },
    {
        "name": "mcp__clock__now",
        "description": "The time",
        "input_schema": {"type": "string"},  # no input an object could carry
    },
]


def declared(service: FakeKiro) -> dict[str, Any]:
    body = service.requests("chat")[-1].json
    user = body["conversationState"]["currentMessage"]["userInputMessage"]
    tools = user["userInputMessageContext"]["tools"]
    return {tool["toolSpecification"]["name"]: tool["toolSpecification"] for tool in tools}


def test_mcp_tools_with_top_level_unions_reach_kiro_and_are_called(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    call = ToolCall("mcp__files__read", {"path": "README.md"})
    service.enqueue(Reply(text="Reading.", tool_calls=(call,)))
    message = claude.messages.create(
        model=MODEL,
        max_tokens=200,
        tools=MCP_TOOLS,
        messages=[{"role": "user", "content": "Read the README"}],
    )
    assert message.stop_reason == "tool_use"
    [use] = [block for block in message.content if block.type == "tool_use"]
    assert (use.name, use.input) == ("mcp__files__read", {"path": "README.md"})
    assert not any(name.startswith("rejected:") for name in service.counters())

    schemas = {name: spec["inputSchema"]["json"] for name, spec in declared(service).items()}
    assert schemas["mcp__files__read"] == {
        "type": "object",
        "properties": {"path": PATH, "start": {"type": "integer"}},
        "required": ["path"],
    }
    assert schemas["mcp__search__query"]["type"] == "object"
    assert schemas["mcp__git__log"]["properties"] == {"count": {"type": "integer"}}
    assert schemas["mcp__clock__now"] == {"type": "object", "properties": {}}

    service.enqueue(Reply(text="It is a README."))
    answer = claude.messages.create(
        model=MODEL,
        max_tokens=200,
        tools=MCP_TOOLS,
        messages=[
            {"role": "user", "content": "Read the README"},
            {"role": "assistant", "content": message.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "# kirod"}],
            },
        ],
    )
    assert answer.content[0].type == "text"
    assert answer.content[0].text == "It is a README."
