"""`request_shape`: counts and flags of a request, never its text, tool names or arguments."""

from __future__ import annotations

import json

from kirod.canonical.request import (
    CanonicalRequest,
    ClientProtocol,
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from kirod.canonical.shape import request_shape, tools_hash

SECRET_TEXT = "the launch codes are 0000"
TOOL = "read_private_diary"
ARGUMENT = "page-of-secrets"


def request(*messages: Message, tools: tuple[ToolSpec, ...] = ()) -> CanonicalRequest:
    return CanonicalRequest(
        request_id="req_1",
        protocol=ClientProtocol.ANTHROPIC_MESSAGES,
        model="claude-sonnet-4-6",
        messages=messages,
        system=("be brief",),
        tools=tools,
        stream=True,
    )


def spec(name: str) -> ToolSpec:
    return ToolSpec(name, f"{name} describes {SECRET_TEXT}", {"type": "object"})


CONVERSATION = request(
    Message(
        Role.USER,
        (
            TextBlock(SECRET_TEXT),
            ImageBlock("image/png", "aGk="),
            DocumentBlock("a.pdf", "pdf", ""),
        ),
    ),
    Message(
        Role.ASSISTANT,
        (ThinkingBlock("hmm", "sig"), ToolUseBlock("call_1", TOOL, {"page": ARGUMENT})),
    ),
    Message(
        Role.USER,
        (
            ToolResultBlock("call_1", (TextBlock("12345"),)),
            ToolResultBlock("call_gone", (ImageBlock("image/png", "aGk="),)),
        ),
    ),
    tools=(spec(TOOL), spec("other")),
)


def test_the_shape_counts_what_the_request_holds() -> None:
    shape = request_shape(CONVERSATION)
    assert shape == {
        "protocol": "anthropic_messages",
        "stream": True,
        "messages": 3,
        "user_messages": 2,
        "assistant_messages": 1,
        "system_parts": 1,
        "tools": 2,
        "tool_calls": 1,
        "tool_results": 2,
        "orphan_tool_results": 1,
        "images": 2,
        "documents": 1,
        "reasoning_replay": True,
        "input_chars": len("be brief") + len(SECRET_TEXT) + len("12345"),
        "web_search": False,
        "tools_hash": tools_hash(CONVERSATION),
    }


def test_the_shape_never_holds_content() -> None:
    text = json.dumps(request_shape(CONVERSATION))
    for secret in (SECRET_TEXT, TOOL, ARGUMENT, "other", "be brief", "call_1", "a.pdf"):
        assert secret not in text


def test_the_tool_hash_depends_on_the_tool_set_only() -> None:
    one = request(tools=(spec("a"), spec("b")))
    same = request(tools=(spec("b"), spec("a")))
    other = request(tools=(spec("a"), spec("c")))
    assert tools_hash(one) == tools_hash(same)
    assert tools_hash(one) != tools_hash(other)
    assert len(tools_hash(one) or "") == 12
    assert tools_hash(request()) is None
    assert "tools_hash" not in request_shape(request())
