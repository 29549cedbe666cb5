"""Anthropic Messages bodies → CanonicalRequest: what real clients send, and every refusal."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from kirod.canonical.request import (
    CanonicalRequest,
    ClientProtocol,
    ImageBlock,
    Message,
    Reasoning,
    RedactedThinkingBlock,
    Role,
    Sampling,
    TextBlock,
    ThinkingBlock,
    ToolChoice,
    ToolChoiceMode,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from kirod.errors import ApiError, ErrorKind
from kirod.protocols.anthropic import ThinkingSigner, decode_count_tokens, decode_messages
from kirod.protocols.anthropic.tools import EMPTY_SCHEMA
from tests.support import captures

SIGNER = ThinkingSigner(b"decode-test-secret-0123456789")
PIXEL_PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
    )
).decode()

Body = dict[str, Any]


def decode(body: object, headers: dict[str, str] | None = None) -> CanonicalRequest:
    return decode_messages(body, headers or {}, request_id="req_1", signer=SIGNER)


def minimal(**extra: Any) -> Body:
    return {
        "model": "claude-opus-4-7",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Hello"}],
        **extra,
    }


def user(*blocks: Any) -> Body:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: Any) -> Body:
    return {"role": "assistant", "content": list(blocks)}


def image(media_type: str = "image/png", data: str = PIXEL_PNG) -> Body:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


# -- Claude Code, as the pinned version's capture records it -----------------------------------


def claude_code() -> tuple[dict[str, str], Body]:
    """The headers (with a key added) and body of the pinned Claude Code's first `claude -p
    hello` request, from its committed capture (tests/clients/captures)."""
    recorded = captures.pinned_request()
    return {**recorded.headers, "authorization": "Bearer sk-kirod-test"}, recorded.body


def claude_code_body() -> Body:
    return claude_code()[1]


def test_claude_code_first_request() -> None:
    headers, body = claude_code()
    request = decode(body, headers)
    assert request.protocol is ClientProtocol.ANTHROPIC_MESSAGES
    assert request.request_id == "req_1"
    assert request.model == body["model"]
    assert request.max_output_tokens == body["max_tokens"]
    assert request.stream is True
    assert body["thinking"] == {"type": "adaptive", "display": "omitted"}
    assert request.reasoning == Reasoning(effort=body["output_config"]["effort"], summary="omitted")
    billing, *prompt = body["system"]
    assert billing["text"].startswith("x-anthropic-billing-header:")
    assert request.system == tuple(block["text"] for block in prompt)  # billing header dropped
    assert [tool.name for tool in request.tools] == [tool["name"] for tool in body["tools"]]
    for spec, sent in zip(request.tools, body["tools"], strict=True):
        assert spec == ToolSpec(sent["name"], sent["description"], sent["input_schema"])
    assert request.tool_choice == ToolChoice()
    # The inline `system` message after the user turn stays where it was, as user text.
    prompt_turn, inline = body["messages"]
    assert inline["role"] == "system"
    assert request.messages == (
        Message(Role.USER, tuple(TextBlock(block["text"]) for block in prompt_turn["content"])),
        Message(Role.USER, tuple(TextBlock(block["text"]) for block in inline["content"])),
    )
    assert request.messages[0].content[-1] == TextBlock(captures.PROMPT)
    session = headers["x-claude-code-session-id"]
    assert json.loads(request.metadata["user_id"])["session_id"] == session
    assert request.affinity_key == session


def test_opencode_requests() -> None:
    """The pinned opencode's two requests per prompt (its capture): the title request (no tools)
    and the agent request (its ten tools, `tool_choice: auto`), both keyed to the session for
    account stickiness by `x-session-affinity`."""
    title, agent = captures.pinned_requests("opencode")
    decoded = []
    for recorded in (title, agent):
        headers = {**recorded.headers, "x-api-key": "sk-kirod-test"}
        request = decode(recorded.body, headers)
        assert request.model == recorded.body["model"]
        assert request.stream is True
        assert request.system == tuple(block["text"] for block in recorded.body["system"])
        assert request.messages[-1].content[-1] == TextBlock(captures.PROMPT)
        assert request.affinity_key == recorded.headers["x-session-affinity"]
        decoded.append(request)
    assert decoded[0].tools == ()
    assert [tool.name for tool in decoded[1].tools] == [t["name"] for t in agent.body["tools"]]
    assert agent.body["tool_choice"] == {"type": "auto"}
    assert decoded[1].tool_choice == ToolChoice()


def test_claude_code_cache_marks_and_eager_streaming_are_accepted_and_dropped() -> None:
    """Later turns put `cache_control` (with a ttl) on system blocks, tools and text, and
    `eager_input_streaming` on tools: accepted, none of it in what kirod keeps."""
    headers, body = claude_code()
    plain = decode(body, headers)
    marked = copy.deepcopy(body)
    marked["system"][1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    for tool in marked["tools"]:
        tool["cache_control"] = {"type": "ephemeral"}
        tool["eager_input_streaming"] = True
    marked["messages"][0]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    request = decode(marked, headers)
    assert (request.system, request.tools, request.messages) == (
        plain.system,
        plain.tools,
        plain.messages,
    )


def test_a_deferred_tool_may_come_without_description_or_schema() -> None:
    """Claude Code's `DeferredToolPlaceholder` had neither in earlier 2.1 versions."""
    headers, body = claude_code()
    body["tools"] = [{"name": "DeferredToolPlaceholder", "defer_loading": True}]
    (spec,) = decode(body, headers).tools
    assert spec == ToolSpec("DeferredToolPlaceholder", "", EMPTY_SCHEMA)


def test_claude_code_tool_round_trip_replays_kirods_thinking() -> None:
    """The second request: the assistant turn echoed verbatim, then the tool result."""
    thinking = "The user said hello. I should read the file first."
    headers, body = claude_code()
    body["messages"] += [
        assistant(
            {"type": "thinking", "thinking": thinking, "signature": SIGNER.sign(thinking, "EqQB")},
            {
                "type": "tool_use",
                "id": "tooluse_7Hq2",
                "name": "Read",
                "input": {"file_path": "/tmp/a.txt"},
            },
        ),
        user(
            {
                "type": "tool_result",
                "tool_use_id": "tooluse_7Hq2",
                "content": "hello from a.txt",
                "cache_control": {"type": "ephemeral"},
            }
        ),
    ]
    request = decode(body, headers)
    assert request.messages[2:] == (
        Message(
            Role.ASSISTANT,
            (
                ThinkingBlock(thinking, "EqQB"),
                ToolUseBlock("tooluse_7Hq2", "Read", {"file_path": "/tmp/a.txt"}),
            ),
        ),
        Message(
            Role.USER,
            (ToolResultBlock("tooluse_7Hq2", (TextBlock("hello from a.txt"),)),),
        ),
    )


def test_claude_code_subagent_affinity_adds_the_agent_id() -> None:
    headers, body = claude_code()
    request = decode(body, {**headers, "X-Claude-Code-Agent-Id": "agent-2"})
    assert request.affinity_key == f"{headers['x-claude-code-session-id']}:agent-2"


# -- opencode (through `@ai-sdk/anthropic`) ---------------------------------------------------


OPENCODE_HEADERS = {
    "x-api-key": "sk-kirod-test",
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "structured-outputs-2025-11-13",
    "x-session-affinity": "ses_4f2a9c",
    "x-session-id": "ses_4f2a9c",
    "user-agent": "opencode/1.18.33 ai-sdk/anthropic",
}
OPENCODE_TOOLS = [
    "bash",
    "read",
    "glob",
    "grep",
    "edit",
    "write",
    "task",
    "webfetch",
    "todowrite",
    "skill",
]


def schema(**properties: str) -> Body:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
        "additionalProperties": False,
    }


def opencode_agent_body() -> Body:
    """opencode's agent call through `@ai-sdk/anthropic`: no capture yet (opencode is pinned but
    not driven), so written from its provider's request shape."""
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 32000,
        "stream": True,
        "system": [
            {
                "type": "text",
                "text": "You are opencode, an interactive CLI tool.",
                "cache_control": {"type": "ephemeral"},
            },
            {"type": "text", "text": "Here is useful information about the environment."},
        ],
        "tools": [
            {"name": name, "description": f"Runs {name}.", "input_schema": schema(value="string")}
            for name in OPENCODE_TOOLS
        ],
        "tool_choice": {"type": "auto"},
        "messages": [
            user({"type": "text", "text": "say hi", "cache_control": {"type": "ephemeral"}})
        ],
    }


def test_opencode_agent_call() -> None:
    request = decode(opencode_agent_body(), OPENCODE_HEADERS)
    assert [tool.name for tool in request.tools] == OPENCODE_TOOLS
    assert request.tool_choice == ToolChoice(ToolChoiceMode.AUTO)
    assert request.system == (
        "You are opencode, an interactive CLI tool.",
        "Here is useful information about the environment.",
    )
    assert request.messages == (Message(Role.USER, (TextBlock("say hi"),)),)
    assert request.reasoning is None
    assert request.affinity_key == "ses_4f2a9c"


def test_opencode_title_call() -> None:
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 1500,
        "temperature": 0.5,
        "stream": True,
        "system": [{"type": "text", "text": "You are a title generator."}],
        "messages": [
            user(
                {"type": "text", "text": "Generate a title for this conversation:\n"},
                {"type": "text", "text": "say hi"},
            )
        ],
    }
    request = decode(body, OPENCODE_HEADERS)
    assert request.tools == ()
    assert request.sampling == Sampling(temperature=0.5)
    assert len(request.messages[0].content) == 2


@pytest.mark.parametrize(
    ("headers", "key"),
    [
        ({}, None),
        ({"x-claude-code-session-id": "s1"}, "s1"),
        ({"X-CLAUDE-CODE-SESSION-ID": "s1", "x-claude-code-agent-id": "a1"}, "s1:a1"),
        ({"x-claude-code-agent-id": "a1"}, None),
        ({"x-session-affinity": "aff", "x-session-id": "sid"}, "aff"),
        ({"X-Session-Id": "sid"}, "sid"),
        ({"x-claude-code-session-id": "s1", "x-session-affinity": "aff"}, "s1"),
        ({"x-claude-code-session-id": "", "x-session-id": "sid"}, "sid"),
    ],
)
def test_affinity_key(headers: dict[str, str], key: str | None) -> None:
    assert decode(minimal(), headers).affinity_key == key


@pytest.mark.parametrize(
    ("user_id", "headers", "key"),
    [
        (json.dumps({"device_id": "d", "session_id": "s-json"}), {}, "s-json"),
        ("user_ab12_account_c3d4_session_5e6f-7a8b", {}, "5e6f-7a8b"),
        (json.dumps({"session_id": "s-json"}), {"x-claude-code-session-id": "s1"}, "s1"),
        (json.dumps({"session_id": ""}), {}, None),
        (json.dumps(["session_id"]), {}, None),
        ("user_ab12_session_", {}, None),
        ("a plain user id", {}, None),
    ],
)
def test_affinity_key_from_the_user_id(
    user_id: str, headers: dict[str, str], key: str | None
) -> None:
    request = decode(minimal(metadata={"user_id": user_id}), headers)
    assert request.affinity_key == key


def test_billing_header_system_block_is_dropped() -> None:
    system = [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.333.1b;"},
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
    ]
    assert decode(minimal(system=system)).system == ("You are Claude Code.",)


# -- accepted features -----------------------------------------------------------------------------


def test_minimal_request_defaults() -> None:
    request = decode(minimal())
    assert request == CanonicalRequest(
        request_id="req_1",
        protocol=ClientProtocol.ANTHROPIC_MESSAGES,
        model="claude-opus-4-7",
        messages=(Message(Role.USER, (TextBlock("Hello"),)),),
        max_output_tokens=1024,
    )


def test_stream_default_applies_only_when_stream_is_absent() -> None:
    def stream(body: Body, default: bool) -> bool:
        return decode_messages(
            body, {}, request_id="r", signer=SIGNER, stream_default=default
        ).stream

    assert stream(minimal(), True) is True
    assert stream(minimal(stream=False), True) is False
    assert stream(minimal(stream=None), True) is True
    assert stream(minimal(stream=True), False) is True


def test_unknown_keys_are_ignored_everywhere() -> None:
    body = minimal(
        future_option={"x": 1},
        service_tier="auto",
        cache_control={"type": "ephemeral"},
        container=None,
        inference_geo="us",
    )
    body["messages"] = [
        {"role": "user", "content": [{"type": "text", "text": "Hi", "citations": [], "new": 1}]}
    ]
    body["tools"] = [{"name": "t", "input_schema": {"type": "object"}, "strict": True, "x": 1}]
    request = decode(body)
    assert request.messages[0].content == (TextBlock("Hi"),)
    assert request.tools == (ToolSpec("t", "", {"type": "object"}),)


@pytest.mark.parametrize(
    ("thinking", "output_config", "reasoning"),
    [
        (None, None, None),
        ({"type": "disabled"}, None, None),
        ({"type": "disabled"}, {"effort": "low"}, None),
        (None, {"effort": "low"}, None),
        ({"type": "enabled", "budget_tokens": 2048}, None, Reasoning(budget_tokens=2048)),
        ({"type": "enabled", "budget_tokens": 1}, None, Reasoning(budget_tokens=1)),
        (
            {"type": "enabled", "budget_tokens": 4096, "display": "summarized"},
            {"effort": "medium"},
            Reasoning(effort="medium", budget_tokens=4096, summary="summarized"),
        ),
        ({"type": "adaptive"}, None, Reasoning()),
        ({"type": "adaptive", "display": None}, {"effort": None}, Reasoning()),
        (
            {"type": "adaptive", "display": "omitted"},
            {"effort": "max"},
            Reasoning("max", None, "omitted"),
        ),
        ({"type": "adaptive"}, {"effort": "xhigh"}, Reasoning(effort="xhigh")),
    ],
)
def test_thinking(thinking: Any, output_config: Any, reasoning: Reasoning | None) -> None:
    body = minimal(thinking=thinking, output_config=output_config)
    assert decode(body).reasoning == reasoning


UPDATES = {"type": "adaptive", "display": "updates"}


@pytest.mark.parametrize(
    "betas",
    [
        "thinking-display-updates-2026-08-18",
        "claude-code-20250219, thinking-display-updates-2026-08-18,effort-2025-11-24",
    ],
)
def test_display_updates_under_its_beta_asks_for_thinking(betas: str) -> None:
    """What Claude Code sends under the Claude Agent SDK (docs/CLIENTS.md §5.4): accepted like
    Anthropic's API accepts it, as thinking with the client's display preference."""
    request = decode(minimal(thinking=UPDATES), {"Anthropic-Beta": betas})
    assert request.reasoning == Reasoning(summary="updates")
    enabled = {"type": "enabled", "budget_tokens": 31999, "display": "updates"}
    request = decode(minimal(thinking=enabled), {"anthropic-beta": betas})
    assert request.reasoning == Reasoning(budget_tokens=31999, summary="updates")


def test_claude_code_under_the_agent_sdk() -> None:
    """The pinned Claude Agent SDK's first request, as Claude Code sent it (its committed
    capture): decoded, not refused; thinking asked for, with the display passed on."""
    recorded = captures.pinned_request("claude-agent-sdk")
    request = decode(recorded.body, {**recorded.headers, "authorization": "Bearer sk-kirod-t"})
    assert recorded.body["thinking"]["display"] == "updates"
    assert request.reasoning == Reasoning(effort="medium", summary="updates")
    assert request.affinity_key is not None  # its x-claude-code-session-id


@pytest.mark.parametrize("headers", [{}, {"anthropic-beta": "thinking-display-updates-2026-07-01"}])
def test_display_updates_without_its_beta_is_a_400_naming_it(headers: dict[str, str]) -> None:
    with pytest.raises(ApiError) as caught:
        decode(minimal(thinking=UPDATES), headers)
    assert caught.value.kind is ErrorKind.INVALID_REQUEST
    assert caught.value.param == "thinking.display"
    assert "thinking-display-updates-2026-08-18" in str(caught.value)


def test_sampling_stop_sequences_and_metadata() -> None:
    body = minimal(
        temperature=0,
        top_p=0.9,
        top_k=40,
        stop_sequences=["\n\nHuman:", "END"],
        metadata={"user_id": "user-42"},
    )
    request = decode(body)
    assert request.sampling == Sampling(temperature=0.0, top_p=0.9, top_k=40)
    assert request.stop_sequences == ("\n\nHuman:", "END")
    assert request.metadata == {"user_id": "user-42"}
    assert decode(minimal(metadata={"user_id": None})).metadata == {}


def test_system_as_string() -> None:
    assert decode(minimal(system="Be brief.")).system == ("Be brief.",)
    assert decode(minimal(system="")).system == ()


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_tool_choice_auto_and_none(choice: str) -> None:
    body = minimal(tool_choice={"type": choice, "disable_parallel_tool_use": True})
    assert decode(body).tool_choice == ToolChoice(ToolChoiceMode(choice))


@pytest.mark.parametrize("media_type", ["image/png", "image/jpeg", "image/gif", "image/webp"])
def test_base64_images(media_type: str) -> None:
    body = minimal(messages=[user(image(media_type), {"type": "text", "text": "What is it?"})])
    assert decode(body).messages[0].content == (
        ImageBlock(media_type, PIXEL_PNG),
        TextBlock("What is it?"),
    )


def test_tool_results_with_text_images_errors_and_references() -> None:
    body = minimal(
        messages=[
            user({"type": "text", "text": "go"}),
            assistant(
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "Shot", "input": {"full": True}},
                {"type": "tool_use", "id": "t3", "name": "ToolSearch", "input": {"q": "w"}},
                {"type": "tool_use", "id": "t4", "name": "Noop", "input": {}},
            ),
            user(
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "no such file",
                    "is_error": True,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "screenshot:"}, image()],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "t3",
                    "content": [{"type": "tool_reference", "tool_name": "Workflow"}],
                },
                {"type": "tool_result", "tool_use_id": "t4"},
            ),
        ]
    )
    assert decode(body).messages[2].content == (
        ToolResultBlock("t1", (TextBlock("no such file"),), is_error=True),
        ToolResultBlock("t2", (TextBlock("screenshot:"), ImageBlock("image/png", PIXEL_PNG))),
        ToolResultBlock("t3", (TextBlock("Workflow"),)),
        ToolResultBlock("t4", ()),
    )


# -- echoed reasoning ------------------------------------------------------------------------------

FOREIGN = "EuYBCkQYAiJAgCs1le6/Pol5Z4/JMomVOouGrWdhYNsH3ukzUECbB6iWrSQtsQuRHJID6lWV"


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (
            {"type": "thinking", "thinking": "plan", "signature": SIGNER.sign("plan", "EqQB")},
            ThinkingBlock("plan", "EqQB"),
        ),
        (
            # Prompt-tag thinking: signed by kirod, but there is nothing to replay upstream.
            {"type": "thinking", "thinking": "plan", "signature": SIGNER.sign("plan", None)},
            ThinkingBlock("plan", None),
        ),
        ({"type": "thinking", "thinking": "plan", "signature": SIGNER.sign("plan!", "E")}, None),
        ({"type": "thinking", "thinking": "plan", "signature": FOREIGN}, None),
        ({"type": "thinking", "thinking": "plan", "signature": ""}, None),
        (
            {"type": "redacted_thinking", "data": SIGNER.wrap_redacted("blob==")},
            RedactedThinkingBlock("blob=="),
        ),
        ({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}, None),
    ],
    ids=[
        "ours",
        "ours-unsigned-upstream",
        "altered",
        "foreign",
        "empty",
        "redacted",
        "foreign-redacted",
    ],
)
def test_echoed_reasoning_is_kept_only_when_kirod_signed_it(
    block: Body, expected: ThinkingBlock | RedactedThinkingBlock | None
) -> None:
    body = minimal(
        messages=[
            user({"type": "text", "text": "hi"}),
            assistant(block, {"type": "text", "text": "Hello!"}),
            user({"type": "text", "text": "again"}),
        ]
    )
    content = decode(body).messages[1].content
    assert content == ((expected,) if expected else ()) + (TextBlock("Hello!"),)


# -- refusals --------------------------------------------------------------------------------------

UNSUPPORTED = "unsupported_capability"


def set_path(body: Body, path: str, value: Any) -> Body:
    """A copy of `body` with the dotted `path` set (or deleted when `value` is DELETE)."""
    result = copy.deepcopy(body)
    *parents, last = path.split(".")
    node: Any = result
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return result


DELETE = object()


def with_messages(*messages: Body) -> Body:
    return minimal(messages=list(messages))


TOOL_TURN = with_messages(
    user({"type": "text", "text": "go"}),
    assistant({"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": 1}}),
    user({"type": "tool_result", "tool_use_id": "t1", "content": "ok"}),
)
THINKING_TURN = with_messages(
    user({"type": "text", "text": "go"}),
    assistant({"type": "thinking", "thinking": "x", "signature": "s"}),
)
IMAGE_TURN = with_messages(user(image()))
WITH_TOOL = minimal(tools=[{"name": "Read", "input_schema": {"type": "object"}}])

Case = tuple[str, Callable[[], object], str | None, str | None]

CASES: list[Case] = [
    ("not an object", lambda: ["messages"], None, None),
    ("model missing", lambda: set_path(minimal(), "model", DELETE), "model", None),
    ("model not a string", lambda: set_path(minimal(), "model", 5), "model", None),
    ("model empty", lambda: set_path(minimal(), "model", ""), "model", None),
    ("max_tokens missing", lambda: set_path(minimal(), "max_tokens", DELETE), "max_tokens", None),
    ("max_tokens zero", lambda: set_path(minimal(), "max_tokens", 0), "max_tokens", None),
    ("max_tokens string", lambda: set_path(minimal(), "max_tokens", "10"), "max_tokens", None),
    ("max_tokens bool", lambda: set_path(minimal(), "max_tokens", True), "max_tokens", None),
    ("max_tokens float", lambda: set_path(minimal(), "max_tokens", 10.5), "max_tokens", None),
    ("messages missing", lambda: set_path(minimal(), "messages", DELETE), "messages", None),
    ("messages empty", lambda: set_path(minimal(), "messages", []), "messages", None),
    ("messages object", lambda: set_path(minimal(), "messages", {}), "messages", None),
    ("message not object", lambda: set_path(minimal(), "messages.0", "hi"), "messages.0", None),
    (
        "role tool",
        lambda: set_path(minimal(), "messages.0.role", "tool"),
        "messages.0.role",
        None,
    ),
    (
        "role missing",
        lambda: set_path(minimal(), "messages.0.role", DELETE),
        "messages.0.role",
        None,
    ),
    (
        "content number",
        lambda: set_path(minimal(), "messages.0.content", 5),
        "messages.0.content",
        None,
    ),
    (
        "content missing",
        lambda: set_path(minimal(), "messages.0.content", DELETE),
        "messages.0.content",
        None,
    ),
    ("block not object", lambda: with_messages(user("hi")), "messages.0.content.0", None),
    (
        "block type missing",
        lambda: with_messages(user({"text": "hi"})),
        "messages.0.content.0.type",
        None,
    ),
    (
        "block type unknown",
        lambda: with_messages(user({"type": "video"})),
        "messages.0.content.0.type",
        None,
    ),
    (
        "text not string",
        lambda: with_messages(user({"type": "text", "text": 1})),
        "messages.0.content.0.text",
        None,
    ),
    (
        "image url",
        lambda: set_path(
            IMAGE_TURN, "messages.0.content.0.source", {"type": "url", "url": "https://x/a.png"}
        ),
        "messages.0.content.0.source.type",
        UNSUPPORTED,
    ),
    (
        "image file",
        lambda: set_path(
            IMAGE_TURN, "messages.0.content.0.source", {"type": "file", "file_id": "f"}
        ),
        "messages.0.content.0.source.type",
        UNSUPPORTED,
    ),
    (
        "image source unknown",
        lambda: set_path(IMAGE_TURN, "messages.0.content.0.source.type", "pixels"),
        "messages.0.content.0.source.type",
        None,
    ),
    (
        "image media type",
        lambda: set_path(IMAGE_TURN, "messages.0.content.0.source.media_type", "image/bmp"),
        "messages.0.content.0.source.media_type",
        None,
    ),
    (
        "image bad base64",
        lambda: set_path(IMAGE_TURN, "messages.0.content.0.source.data", "not base64!"),
        "messages.0.content.0.source.data",
        None,
    ),
    (
        "image empty data",
        lambda: set_path(IMAGE_TURN, "messages.0.content.0.source.data", ""),
        "messages.0.content.0.source.data",
        None,
    ),
    (
        "image source missing",
        lambda: set_path(IMAGE_TURN, "messages.0.content.0.source", DELETE),
        "messages.0.content.0.source",
        None,
    ),
    (
        "document from the assistant",
        lambda: with_messages(assistant({"type": "document", "source": {"type": "text"}})),
        "messages.0.content.0.type",
        None,
    ),
    (
        "search result",
        lambda: with_messages(user({"type": "search_result", "source": "s"})),
        "messages.0.content.0.type",
        UNSUPPORTED,
    ),
    (
        "server tool use of a tool other than web search",
        lambda: with_messages(
            user({"type": "text", "text": "q"}),
            assistant({"type": "server_tool_use", "name": "web_fetch", "input": {}}),
        ),
        "messages.1.content.0.name",
        UNSUPPORTED,
    ),
    (
        "web fetch result",
        lambda: with_messages(
            user({"type": "text", "text": "q"}), assistant({"type": "web_fetch_tool_result"})
        ),
        "messages.1.content.0.type",
        UNSUPPORTED,
    ),
    (
        "web search result",
        lambda: with_messages(user({"type": "web_search_tool_result"})),
        "messages.0.content.0.type",
        UNSUPPORTED,
    ),
    (
        "tool_use from the user",
        lambda: with_messages(user({"type": "tool_use", "id": "t", "name": "n", "input": {}})),
        "messages.0.content.0.type",
        None,
    ),
    (
        "thinking from the user",
        lambda: with_messages(user({"type": "thinking", "thinking": "x", "signature": "s"})),
        "messages.0.content.0.type",
        None,
    ),
    (
        "tool_result from the assistant",
        lambda: with_messages(assistant({"type": "tool_result", "tool_use_id": "t"})),
        "messages.0.content.0.type",
        None,
    ),
    (
        "tool_use input",
        lambda: set_path(TOOL_TURN, "messages.1.content.0.input", "{}"),
        "messages.1.content.0.input",
        None,
    ),
    (
        "tool_use id",
        lambda: set_path(TOOL_TURN, "messages.1.content.0.id", ""),
        "messages.1.content.0.id",
        None,
    ),
    (
        "tool_use name",
        lambda: set_path(TOOL_TURN, "messages.1.content.0.name", 3),
        "messages.1.content.0.name",
        None,
    ),
    (
        "tool_result id",
        lambda: set_path(TOOL_TURN, "messages.2.content.0.tool_use_id", DELETE),
        "messages.2.content.0.tool_use_id",
        None,
    ),
    (
        "tool_result is_error",
        lambda: set_path(TOOL_TURN, "messages.2.content.0.is_error", "yes"),
        "messages.2.content.0.is_error",
        None,
    ),
    (
        "tool_result content",
        lambda: set_path(TOOL_TURN, "messages.2.content.0.content", 42),
        "messages.2.content.0.content",
        None,
    ),
    (
        "tool_result search result",
        lambda: set_path(TOOL_TURN, "messages.2.content.0.content", [{"type": "search_result"}]),
        "messages.2.content.0.content.0.type",
        UNSUPPORTED,
    ),
    (
        "tool_result unknown part",
        lambda: set_path(TOOL_TURN, "messages.2.content.0.content", [{"type": "audio"}]),
        "messages.2.content.0.content.0.type",
        None,
    ),
    (
        "tool_result image url",
        lambda: set_path(
            TOOL_TURN,
            "messages.2.content.0.content",
            [{"type": "image", "source": {"type": "url", "url": "https://x"}}],
        ),
        "messages.2.content.0.content.0.source.type",
        UNSUPPORTED,
    ),
    (
        "thinking signature missing",
        lambda: set_path(THINKING_TURN, "messages.1.content.0.signature", DELETE),
        "messages.1.content.0.signature",
        None,
    ),
    (
        "thinking text",
        lambda: set_path(THINKING_TURN, "messages.1.content.0.thinking", None),
        "messages.1.content.0.thinking",
        None,
    ),
    (
        "redacted data",
        lambda: set_path(THINKING_TURN, "messages.1.content.0", {"type": "redacted_thinking"}),
        "messages.1.content.0.data",
        None,
    ),
    ("system number", lambda: minimal(system=5), "system", None),
    ("system block type", lambda: minimal(system=[{"type": "image"}]), "system.0.type", None),
    ("system block text", lambda: minimal(system=[{"type": "text"}]), "system.0.text", None),
    ("tools object", lambda: minimal(tools={"name": "x"}), "tools", None),
    ("tool not object", lambda: minimal(tools=["Read"]), "tools.0", None),
    (
        "tool name missing",
        lambda: set_path(WITH_TOOL, "tools.0.name", DELETE),
        "tools.0.name",
        None,
    ),
    (
        "tool name twice",
        lambda: minimal(tools=[{"name": "Read"}, {"name": "Read"}]),
        "tools.1.name",
        None,
    ),
    (
        "tool schema",
        lambda: set_path(WITH_TOOL, "tools.0.input_schema", []),
        "tools.0.input_schema",
        None,
    ),
    (
        "tool description",
        lambda: set_path(WITH_TOOL, "tools.0.description", 1),
        "tools.0.description",
        None,
    ),
    ("tool type", lambda: set_path(WITH_TOOL, "tools.0.type", 7), "tools.0.type", None),
    *(
        (
            f"server tool {kind}",
            (lambda kind=kind: minimal(tools=[{"type": kind, "name": "server"}])),
            "tools.0.type",
            UNSUPPORTED,
        )
        for kind in (
            "web_fetch_20250910",
            "code_execution_20250825",
            "computer_20250124",
            "bash_20250124",
            "text_editor_20250728",
            "memory_20250818",
            "tool_search_tool_regex_20251119",
        )
    ),
    (
        "tool_choice any",
        lambda: minimal(tool_choice={"type": "any"}),
        "tool_choice.type",
        UNSUPPORTED,
    ),
    (
        "tool_choice tool",
        lambda: minimal(tool_choice={"type": "tool", "name": "Read"}),
        "tool_choice.type",
        UNSUPPORTED,
    ),
    (
        "tool_choice tool unnamed",
        lambda: minimal(tool_choice={"type": "tool"}),
        "tool_choice.name",
        None,
    ),
    ("tool_choice string", lambda: minimal(tool_choice="auto"), "tool_choice", None),
    (
        "tool_choice unknown",
        lambda: minimal(tool_choice={"type": "sometimes"}),
        "tool_choice.type",
        None,
    ),
    ("thinking string", lambda: minimal(thinking="on"), "thinking", None),
    ("thinking type", lambda: minimal(thinking={"type": "on"}), "thinking.type", None),
    (
        "thinking no budget",
        lambda: minimal(thinking={"type": "enabled"}),
        "thinking.budget_tokens",
        None,
    ),
    (
        "thinking zero budget",
        lambda: minimal(thinking={"type": "enabled", "budget_tokens": 0}),
        "thinking.budget_tokens",
        None,
    ),
    (
        "thinking display",
        lambda: minimal(thinking={"type": "adaptive", "display": "full"}),
        "thinking.display",
        None,
    ),
    ("effort", lambda: minimal(output_config={"effort": "extreme"}), "output_config.effort", None),
    ("output_config list", lambda: minimal(output_config=[]), "output_config", None),
    (
        "output_config format",
        lambda: minimal(output_config={"format": {"type": "json_schema", "schema": {}}}),
        "output_config.format",
        UNSUPPORTED,
    ),
    (
        "output_format",
        lambda: minimal(output_format={"type": "json_schema"}),
        "output_format",
        UNSUPPORTED,
    ),
    (
        "mcp servers",
        lambda: minimal(mcp_servers=[{"type": "url", "url": "https://mcp", "name": "m"}]),
        "mcp_servers",
        UNSUPPORTED,
    ),
    ("temperature string", lambda: minimal(temperature="hot"), "temperature", None),
    ("temperature range", lambda: minimal(temperature=1.5), "temperature", None),
    ("top_p range", lambda: minimal(top_p=-0.1), "top_p", None),
    ("top_k float", lambda: minimal(top_k=1.5), "top_k", None),
    ("top_k negative", lambda: minimal(top_k=-1), "top_k", None),
    ("stop_sequences string", lambda: minimal(stop_sequences="STOP"), "stop_sequences", None),
    ("stop_sequences item", lambda: minimal(stop_sequences=["a", 1]), "stop_sequences.1", None),
    ("stream string", lambda: minimal(stream="yes"), "stream", None),
    ("metadata list", lambda: minimal(metadata=[]), "metadata", None),
    ("metadata user_id", lambda: minimal(metadata={"user_id": 5}), "metadata.user_id", None),
    ("context_management", lambda: minimal(context_management="all"), "context_management", None),
]


@pytest.mark.parametrize(
    ("body", "param", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_refusals_name_the_field(
    body: Callable[[], object], param: str | None, code: str | None
) -> None:
    with pytest.raises(ApiError) as caught:
        decode(body())
    error = caught.value
    assert error.kind is ErrorKind.INVALID_REQUEST
    assert error.param == param
    assert error.code == code
    if param is not None:
        assert error.message.startswith(f"{param}: ")


def test_server_tool_refusal_names_the_type() -> None:
    with pytest.raises(ApiError, match="tool type 'web_fetch_20250910' is a server tool"):
        decode(minimal(tools=[{"type": "web_fetch_20250910", "name": "web_fetch"}]))


def test_url_image_refusal_says_what_to_do() -> None:
    body = set_path(IMAGE_TURN, "messages.0.content.0.source", {"type": "url", "url": "https://x"})
    with pytest.raises(ApiError, match="image URLs are not supported; send base64 data"):
        decode(body)


# -- count_tokens ----------------------------------------------------------------------------------


def count(body: object) -> CanonicalRequest:
    return decode_count_tokens(body, {"x-session-id": "s"}, "req_2", SIGNER)


def test_count_tokens_needs_no_max_tokens() -> None:
    body = set_path(minimal(), "max_tokens", DELETE)
    request = count(body)
    assert request.max_output_tokens is None
    assert request.request_id == "req_2"
    assert request.affinity_key == "s"
    body = claude_code_body()
    assert count(body).max_output_tokens == body["max_tokens"]


def test_count_tokens_counts_a_forced_tool_choice() -> None:
    body = minimal(tool_choice={"type": "tool", "name": "Read"})
    assert count(body).tool_choice == ToolChoice(ToolChoiceMode.TOOL, "Read")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (set_path(minimal(), "max_tokens", 0), "max_tokens"),
        (set_path(minimal(), "messages", []), "messages"),
        (minimal(tools=[{"type": "web_fetch_20250910", "name": "w"}]), "tools.0.type"),
    ],
)
def test_count_tokens_validates_like_messages(body: Body, param: str) -> None:
    with pytest.raises(ApiError) as caught:
        count(body)
    assert caught.value.param == param


# -- inline system messages and context management (Claude Code 2.1.332 defaults) -----------------


def test_inline_system_messages_stay_at_their_position_as_user_text() -> None:
    body = minimal(
        system="top",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "system", "content": [{"type": "text", "text": "# Environment\ncwd: /w"}]},
            assistant({"type": "text", "text": "hello"}),
            {"role": "system", "content": "note two"},
            {"role": "user", "content": "again"},
        ],
    )
    request = decode(body)
    assert request.system == ("top",)
    assert [m.role for m in request.messages] == [
        Role.USER,
        Role.USER,
        Role.ASSISTANT,
        Role.USER,
        Role.USER,
    ]
    assert request.messages[1].content == (TextBlock("# Environment\ncwd: /w"),)
    assert request.messages[3].content == (TextBlock("note two"),)


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}},
        {"type": "tool_result", "tool_use_id": "t1", "content": "x"},
    ],
)
def test_inline_system_messages_hold_only_text(block: Body) -> None:
    body = minimal(
        messages=[{"role": "user", "content": "hi"}, {"role": "system", "content": [block]}]
    )
    with pytest.raises(ApiError) as caught:
        decode(body)
    assert caught.value.param == "messages.1.content.0.type"


def _signed(text: str) -> Body:
    return {"type": "thinking", "thinking": text, "signature": SIGNER.sign(text, "upstream-sig")}


def _thinking_history() -> list[Body]:
    return [
        {"role": "user", "content": "one"},
        assistant(_signed("first thought"), {"type": "text", "text": "a"}),
        {"role": "user", "content": "two"},
        assistant(_signed("second thought"), {"type": "text", "text": "b"}),
        {"role": "user", "content": "three"},
    ]


def _thoughts(request: CanonicalRequest) -> list[str]:
    return [
        block.thinking
        for message in request.messages
        for block in message.content
        if isinstance(block, ThinkingBlock)
    ]


def test_clear_thinking_keep_all_keeps_every_thinking_block() -> None:
    edits = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    request = decode(minimal(messages=_thinking_history(), context_management=edits))
    assert _thoughts(request) == ["first thought", "second thought"]


def test_clear_thinking_keeps_only_the_last_turns_asked_for() -> None:
    edits = {
        "edits": [
            {"type": "clear_tool_uses_20250919"},
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}},
        ]
    }
    request = decode(minimal(messages=_thinking_history(), context_management=edits))
    assert _thoughts(request) == ["second thought"]
    assert request.messages[1].content == (TextBlock("a"),)


@pytest.mark.parametrize(
    ("edits", "param"),
    [
        ({"edits": "all"}, "context_management.edits"),
        ({"edits": [{"type": 1}]}, "context_management.edits.0.type"),
        (
            {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "x"}}]},
            "context_management.edits.0.keep.type",
        ),
        (
            {
                "edits": [
                    {"type": "clear_thinking_1", "keep": {"type": "thinking_turns", "value": -1}}
                ]
            },
            "context_management.edits.0.keep.value",
        ),
    ],
)
def test_malformed_context_management_names_the_field(edits: Body, param: str) -> None:
    with pytest.raises(ApiError) as caught:
        decode(minimal(context_management=edits))
    assert caught.value.param == param
