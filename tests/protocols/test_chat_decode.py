"""Chat Completions request decoding: accepted fields, and every rejection with its param path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from kirod.canonical.request import (
    ClientProtocol,
    ImageBlock,
    Message,
    Reasoning,
    Role,
    TextBlock,
    ToolChoiceMode,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from kirod.errors import ApiError, ErrorKind
from kirod.protocols.chat.decode import DecodedChat, decode_chat

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"  # the decoder passes image bytes through
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


def decode(body: object, headers: Mapping[str, str] | None = None) -> DecodedChat:
    return decode_chat(body, headers or {}, request_id="req_1")


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}], **fields}


def function(name: str, **extra: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, **extra}}


def test_minimal_request() -> None:
    decoded = decode(body())
    request = decoded.request
    assert request.protocol is ClientProtocol.OPENAI_CHAT
    assert request.messages == (Message(Role.USER, (TextBlock("hi"),)),)
    assert request.stream is False
    assert request.tool_choice.mode is ToolChoiceMode.AUTO
    assert decoded.include_usage is False


def test_conversation_with_tools_images_and_roles() -> None:
    messages = [
        {"role": "system", "content": "Be terse."},
        {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "read this"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "dropped: Chat carries no signature",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path":"a"}'},
                },
                {"id": "call_2", "type": "function", "function": {"name": "list", "arguments": ""}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "contents"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "a b"}]},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        {"role": "user", "content": "ok"},
    ]
    request = decode(body(messages=messages)).request
    assert request.system == ("Be terse.", "Use tools.")
    assert request.messages == (
        Message(Role.USER, (TextBlock("read this"), ImageBlock("image/png", PNG))),
        Message(
            Role.ASSISTANT,
            (
                ToolUseBlock("call_1", "read", {"path": "a"}),
                ToolUseBlock("call_2", "list", {}),
            ),
        ),
        Message(
            Role.USER,
            (
                ToolResultBlock("call_1", (TextBlock("contents"),)),
                ToolResultBlock("call_2", (TextBlock("a b"),)),
                TextBlock("thanks"),
            ),
        ),
        Message(Role.ASSISTANT, (TextBlock("no"),)),
        Message(Role.USER, (TextBlock("ok"),)),
    )


def test_accepted_fields() -> None:
    decoded = decode(
        body(
            tools=[function("read", description="Reads", parameters=SCHEMA, strict=True)],
            tool_choice="none",
            parallel_tool_calls=False,
            max_tokens=10,
            max_completion_tokens=20,
            stop=["END", "STOP"],
            temperature=1.5,
            top_p=0.5,
            stream=True,
            stream_options={"include_usage": True},
            reasoning_effort="minimal",
            response_format={"type": "text"},
            n=1,
            logprobs=False,
            metadata={"kiro_session_id": "s"},
            user="u",
            seed=7,
            store=False,
            service_tier="auto",
            modalities=["text"],
        )
    )
    request = decoded.request
    assert request.tools == (ToolSpec("read", "Reads", SCHEMA),)
    assert request.tool_choice.mode is ToolChoiceMode.NONE
    assert request.max_output_tokens == 20
    assert request.stop_sequences == ("END", "STOP")
    assert (request.sampling.temperature, request.sampling.top_p) == (1.5, 0.5)
    assert request.stream is True
    assert decoded.include_usage is True
    assert request.reasoning == Reasoning(effort="low")
    assert request.metadata == {"kiro_session_id": "s"}
    assert request.affinity_key == "s"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"max_tokens": 10}, 10),
        ({"stop": "END"}, ("END",)),
        ({"reasoning_effort": "none"}, None),
        ({"reasoning_effort": "xhigh"}, Reasoning(effort="xhigh")),
        ({"stream_options": {"include_usage": True}}, False),
    ],
)
def test_field_variants(fields: dict[str, Any], expected: object) -> None:
    decoded = decode(body(**fields))
    actual = {
        "max_tokens": decoded.request.max_output_tokens,
        "stop": decoded.request.stop_sequences,
        "reasoning_effort": decoded.request.reasoning,
        "stream_options": decoded.include_usage,  # only with stream: true
    }[next(iter(fields))]
    assert actual == expected


@pytest.mark.parametrize(
    ("fields", "headers", "key"),
    [
        ({"prompt_cache_key": "p", "metadata": {"kiro_session_id": "m"}}, {"session-id": "h"}, "p"),
        ({"metadata": {"kiro_session_id": "m"}}, {"session-id": "h"}, "m"),
        ({}, {"X-Session-Id": "x"}, "x"),
        ({}, {"x-session-id": "x", "X-Session-Affinity": "a"}, "a"),
        ({}, {}, None),
    ],
)
def test_affinity(fields: dict[str, Any], headers: dict[str, str], key: str | None) -> None:
    assert decode(body(**fields), headers).request.affinity_key == key


UNSUPPORTED = "unsupported_capability"
INVALID = "invalid_value"
TYPE = "invalid_type"
MISSING = "missing_required_parameter"
IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def assistant(**fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", **fields}]}


REJECTIONS: list[tuple[str, dict[str, Any], str, str]] = [
    ("no-model", {"model": None}, "model", MISSING),
    ("no-messages", {"messages": []}, "messages", TYPE),
    ("messages-type", {"messages": "hi"}, "messages", TYPE),
    ("only-system", {"messages": [{"role": "system", "content": "s"}]}, "messages", INVALID),
    ("message-type", {"messages": ["hi"]}, "messages[0]", TYPE),
    ("no-role", {"messages": [{"content": "x"}]}, "messages[0].role", MISSING),
    ("bad-role", {"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", INVALID),
    (
        "function-role",
        {"messages": [{"role": "function", "name": "f", "content": "x"}]},
        "messages[0].role",
        UNSUPPORTED,
    ),
    ("content-type", {"messages": [{"role": "user", "content": 3}]}, "messages[0].content", TYPE),
    (
        "part-type",
        {"messages": [{"role": "user", "content": [{"type": "video"}]}]},
        "messages[0].content[0].type",
        INVALID,
    ),
    (
        "part-object",
        {"messages": [{"role": "user", "content": ["x"]}]},
        "messages[0].content[0]",
        TYPE,
    ),
    (
        "image-url",
        {"messages": [{"role": "user", "content": [IMAGE]}]},
        "messages[0].content[0].image_url.url",
        INVALID,
    ),
    (
        "image-missing",
        {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
        "messages[0].content[0].image_url.url",
        MISSING,
    ),
    (
        "audio",
        {"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
        "messages[0].content[0].type",
        UNSUPPORTED,
    ),
    (
        "file-id",
        {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}]},
        "messages[0].content[0].file.file_id",
        UNSUPPORTED,
    ),
    (
        "system-image",
        {"messages": [{"role": "system", "content": [IMAGE]}]},
        "messages[0].content[0].type",
        INVALID,
    ),
    ("tool-calls-type", assistant(tool_calls={"id": "c"}), "messages[1].tool_calls", TYPE),
    ("tool-call-shape", assistant(tool_calls=[{"id": "c"}]), "messages[1].tool_calls[0]", TYPE),
    (
        "tool-call-id",
        assistant(tool_calls=[CALL | {"id": None}]),
        "messages[1].tool_calls[0].id",
        MISSING,
    ),
    (
        "tool-call-kind",
        assistant(tool_calls=[CALL | {"type": "custom"}]),
        "messages[1].tool_calls[0].type",
        INVALID,
    ),
    (
        "tool-call-arguments",
        assistant(tool_calls=[CALL | {"function": {"name": "f", "arguments": "[]"}}]),
        "messages[1].tool_calls[0].function.arguments",
        INVALID,
    ),
    (
        "tool-call-id-missing",
        {"messages": [{"role": "tool", "content": "x"}]},
        "messages[0].tool_call_id",
        MISSING,
    ),
    ("tools-type", {"tools": "read"}, "tools", TYPE),
    ("tool-object", {"tools": ["read"]}, "tools[0]", TYPE),
    (
        "tool-custom",
        {"tools": [{"type": "custom", "custom": {"name": "g"}}]},
        "tools[0].type",
        UNSUPPORTED,
    ),
    ("tool-function", {"tools": [{"type": "function"}]}, "tools[0].function", MISSING),
    ("tool-name", {"tools": [function("")]}, "tools[0].function.name", INVALID),
    (
        "tool-duplicate",
        {"tools": [function("a"), function("a")]},
        "tools[1].function.name",
        INVALID,
    ),
    (
        "tool-parameters",
        {"tools": [function("a", parameters="x")]},
        "tools[0].function.parameters",
        TYPE,
    ),
    ("choice-required", {"tool_choice": "required"}, "tool_choice", UNSUPPORTED),
    (
        "choice-named",
        {"tool_choice": {"type": "function", "function": {"name": "a"}}},
        "tool_choice",
        UNSUPPORTED,
    ),
    ("choice-bogus", {"tool_choice": "maybe"}, "tool_choice", INVALID),
    ("n", {"n": 2}, "n", UNSUPPORTED),
    ("n-zero", {"n": 0}, "n", INVALID),
    (
        "json-schema",
        {"response_format": {"type": "json_schema", "json_schema": {}}},
        "response_format",
        UNSUPPORTED,
    ),
    ("json-object", {"response_format": {"type": "json_object"}}, "response_format", UNSUPPORTED),
    ("format-bogus", {"response_format": {"type": "xml"}}, "response_format.type", INVALID),
    ("logprobs", {"logprobs": True}, "logprobs", UNSUPPORTED),
    ("top-logprobs", {"top_logprobs": 2}, "top_logprobs", UNSUPPORTED),
    ("audio", {"audio": {"voice": "alloy"}}, "audio", UNSUPPORTED),
    ("modalities", {"modalities": ["text", "audio"]}, "modalities", UNSUPPORTED),
    ("web-search", {"web_search_options": {}}, "web_search_options", UNSUPPORTED),
    ("functions", {"functions": [{"name": "f"}]}, "functions", UNSUPPORTED),
    ("function-call", {"function_call": "auto"}, "function_call", UNSUPPORTED),
    ("max-tokens", {"max_tokens": 0}, "max_tokens", INVALID),
    ("max-completion", {"max_completion_tokens": "5"}, "max_completion_tokens", TYPE),
    ("stop-type", {"stop": 5}, "stop", TYPE),
    ("stop-many", {"stop": ["a", "b", "c", "d", "e"]}, "stop", INVALID),
    ("temperature", {"temperature": -1}, "temperature", INVALID),
    ("top-p", {"top_p": True}, "top_p", TYPE),
    ("effort", {"reasoning_effort": "huge"}, "reasoning_effort", INVALID),
    ("stream", {"stream": "yes"}, "stream", TYPE),
    ("stream-options", {"stream": True, "stream_options": []}, "stream_options", TYPE),
    (
        "include-usage",
        {"stream": True, "stream_options": {"include_usage": 1}},
        "stream_options.include_usage",
        TYPE,
    ),
    ("metadata", {"metadata": {"a": 1}}, "metadata.a", TYPE),
]


@pytest.mark.parametrize(
    ("fields", "param", "code"),
    [pytest.param(fields, param, code, id=name) for name, fields, param, code in REJECTIONS],
)
def test_rejections(fields: dict[str, Any], param: str, code: str) -> None:
    with pytest.raises(ApiError) as caught:
        decode(body(**fields))
    error = caught.value
    assert error.kind is ErrorKind.INVALID_REQUEST
    assert (error.param, error.code) == (param, code)
    assert error.message.startswith(f"'{param}': ")


def test_body_must_be_an_object() -> None:
    with pytest.raises(ApiError) as caught:
        decode("hi")
    assert caught.value.code == "invalid_type"
