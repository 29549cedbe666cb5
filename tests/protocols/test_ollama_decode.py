"""Ollama `/api/chat` and `/api/show` decoding: what is accepted, and each rejection's field."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kirod.canonical.request import (
    CanonicalRequest,
    ClientProtocol,
    ImageBlock,
    Message,
    Reasoning,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from kirod.errors import ApiError, ErrorKind
from kirod.protocols.ollama import decode_ollama_chat, decode_show

USER = {"role": "user", "content": "hi"}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(16)).decode()


def decode(**body: Any) -> CanonicalRequest:
    return decode_ollama_chat({"model": "claude-sonnet-4-6", **body}, request_id="req_1")


def refused(body: object) -> ApiError:
    with pytest.raises(ApiError) as error:
        decode_ollama_chat(body, request_id="req_1")
    assert error.value.kind is ErrorKind.INVALID_REQUEST
    return error.value


def test_a_plain_chat_streams_by_default() -> None:
    request = decode(messages=[{"role": "system", "content": "Be brief."}, USER])
    assert request.protocol is ClientProtocol.OLLAMA_CHAT
    assert request.system == ("Be brief.",)
    assert request.messages == (Message(Role.USER, (TextBlock("hi"),)),)
    assert request.stream is True
    assert decode(messages=[USER], stream=False).stream is False
    assert decode(messages=[USER], keep_alive="5m", truncate=True).reasoning is None


def test_the_default_tag_is_dropped() -> None:
    assert decode_ollama_chat(
        {"model": "claude-sonnet-4-6:latest", "messages": [USER]}, request_id="r"
    ).model == ("claude-sonnet-4-6")
    assert decode_show({"model": "glm-5:latest"}) == "glm-5"
    assert decode_show({"name": "glm-5"}) == "glm-5"  # the older field
    assert refused_show({}).param == "model"
    assert refused_show([]).code == "invalid_type"


def refused_show(body: object) -> ApiError:
    with pytest.raises(ApiError) as error:
        decode_show(body)
    return error.value


def test_tool_calls_without_ids_are_named_by_position_and_answered_by_name() -> None:
    request = decode(
        messages=[
            USER,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "ls", "arguments": {"dir": "/"}}},
                    {"function": {"name": "cat", "arguments": '{"path": "a"}'}},
                ],
            },
            {"role": "tool", "content": "a.txt", "tool_name": "cat"},
            {"role": "tool", "content": "/bin"},  # no name: the earliest call still waiting
        ],
        tools=[{"function": {"name": "ls"}}, {"type": "function", "function": {"name": "cat"}}],
    )
    assert request.messages[1] == Message(
        Role.ASSISTANT,
        (
            ToolUseBlock("call_1_0", "ls", {"dir": "/"}),
            ToolUseBlock("call_1_1", "cat", {"path": "a"}),
        ),
    )
    assert request.messages[2] == Message(
        Role.USER,
        (
            ToolResultBlock("call_1_1", (TextBlock("a.txt"),)),
            ToolResultBlock("call_1_0", (TextBlock("/bin"),)),
        ),
    )
    assert [tool.name for tool in request.tools] == ["ls", "cat"]
    assert request.tools[0] == ToolSpec("ls", "", {"type": "object", "properties": {}})


def test_ids_are_kept_where_the_client_sends_them() -> None:
    request = decode(
        messages=[
            USER,
            {
                "role": "assistant",
                "tool_calls": [{"id": "tooluse_1", "function": {"name": "ls", "arguments": {}}}],
            },
            {"role": "tool", "content": "x", "tool_call_id": "tooluse_1"},
        ]
    )
    assert request.messages[1].content == (ToolUseBlock("tooluse_1", "ls", {}),)
    assert request.messages[2].content == (ToolResultBlock("tooluse_1", (TextBlock("x"),)),)


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        ([{"role": "tool", "content": "x"}], "messages[0]"),
        (
            [
                USER,
                {"role": "assistant", "tool_calls": [{"function": {"name": "ls"}}]},
                {"role": "tool", "content": "x", "tool_name": "cat"},
            ],
            "messages[2]",
        ),
        (
            [USER, {"role": "assistant", "tool_calls": [{"name": "ls"}]}],
            "messages[1].tool_calls[0]",
        ),
        (
            [
                USER,
                {
                    "role": "assistant",
                    "tool_calls": [{"function": {"name": "ls", "arguments": [1]}}],
                },
            ],
            "messages[1].tool_calls[0].function.arguments",
        ),
        ([{"role": "user", "content": [{"type": "text", "text": "x"}]}], "messages[0].content"),
        ([{"role": "robot", "content": "x"}], "messages[0].role"),
        ([{"role": "assistant", "content": "x", "images": [PNG]}], "messages[0].images"),
        ([{"role": "user", "images": ["bm90IGFuIGltYWdlIGF0IGFsbA=="]}], "messages[0].images[0]"),
        ([{"role": "user", "images": ["!!!"]}], "messages[0].images[0]"),
        ([{"role": "user", "images": "AAAA"}], "messages[0].images"),
        ([], "messages"),
        ([{"role": "system", "content": "only system"}], "messages"),
    ],
)
def test_bad_messages_name_the_field(messages: list[Any], param: str) -> None:
    assert refused({"model": "m", "messages": messages}).param == param


def test_images_are_read_by_their_first_bytes() -> None:
    jpeg = base64.b64encode(b"\xff\xd8\xff\xe0" + bytes(12)).decode()
    gif = base64.b64encode(b"GIF89a" + bytes(10)).decode()
    webp = base64.b64encode(b"RIFF\x00\x00\x00\x00WEBPVP8 ").decode()
    request = decode(
        messages=[
            {"role": "user", "content": "what?", "images": [PNG, jpeg, gif, webp]},
            {"role": "user", "images": ["data:image/png;base64," + PNG]},
        ]
    )
    assert request.messages[0].content == (
        ImageBlock("image/png", PNG),
        ImageBlock("image/jpeg", jpeg),
        ImageBlock("image/gif", gif),
        ImageBlock("image/webp", webp),
        TextBlock("what?"),
        ImageBlock("image/png", PNG),
    )


def test_options_think_and_what_cannot_be_honoured() -> None:
    request = decode(
        messages=[USER],
        options={
            "num_predict": 128,
            "temperature": 0.5,
            "top_p": 0.9,
            "top_k": 40,
            "stop": ["END"],
            "num_ctx": 8192,  # a local runtime's option: ignored
            "seed": 7,
        },
        think="high",
        format="",
    )
    assert request.max_output_tokens == 128
    assert (request.sampling.temperature, request.sampling.top_p) == (0.5, 0.9)
    assert request.sampling.top_k == 40
    assert request.stop_sequences == ("END",)
    assert request.reasoning == Reasoning(effort="high")
    assert decode(messages=[USER], think=True).reasoning == Reasoning()
    assert decode(messages=[USER], think=False).reasoning is None
    assert decode(messages=[USER], options={"num_predict": -1}).max_output_tokens is None
    assert decode(messages=[USER], options={"stop": "END"}).stop_sequences == ("END",)
    for body, param in (
        ({"format": "json"}, "format"),
        ({"format": {"type": "object"}}, "format"),
        ({"logprobs": True}, "logprobs"),
        ({"think": "extreme"}, "think"),
        ({"options": [1]}, "options"),
        ({"options": {"temperature": 3}}, "options.temperature"),
        ({"options": {"num_predict": "many"}}, "options.num_predict"),
        ({"options": {"top_k": -1}}, "options.top_k"),
        ({"options": {"stop": [1]}}, "options.stop"),
        ({"stream": "yes"}, "stream"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        ({"model": 5}, "model"),
    ):
        assert refused({"model": "m", "messages": [USER], **body}).param == param, body


def test_a_body_that_is_not_an_object() -> None:
    assert refused([]).code == "invalid_type"
