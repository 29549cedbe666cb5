"""The Kiro payload builder: one test per construction rule of docs/KIRO-PROTOCOL.md §2.3, thinking
(docs/KIRO-PROTOCOL.md §2.4 to §2.6),
parameter policy and size. Every payload a test builds is also run through the fake Kiro's
validator, which must accept it (see `fake_kiro_accepts_every_payload`)."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from kirod.canonical.catalog import STATIC_CATALOG, ModelInfo, catalog_from_list_available_models
from kirod.canonical.request import (
    Block,
    CanonicalRequest,
    ClientProtocol,
    DocumentBlock,
    Effort,
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
from kirod.canonical.resolution import resolve_model
from kirod.errors import ApiError, ErrorKind
from kirod.testing.fake_kiro.catalog import DEFAULT_MODELS
from kirod.testing.fake_kiro.validate import DOCUMENT_NAME, reasoning_signature, validate_chat
from kirod.upstream.payload import BuiltPayload, build_payload
from kirod.upstream.tools import ToolNameMap

FAKE_MODELS = {model.model_id: model for model in DEFAULT_MODELS}
CATALOG = catalog_from_list_available_models(
    [{"models": [m.to_json() for m in FAKE_MODELS.values()]}]
)
SONNET = resolve_model("claude-sonnet-4-5", CATALOG)
OPUS = resolve_model("claude-opus-4-7", CATALOG)  # native reasoning, in the root field
SONNET_46 = resolve_model("claude-sonnet-4-6", CATALOG)  # root field, no xhigh, max_tokens ≤ 64k
SONNET_46_TAGS = resolve_model("claude-sonnet-4-6", STATIC_CATALOG)  # no schema read: tags
OPUS_55 = resolve_model("claude-opus-5-5", CATALOG)  # adaptive only, effort medium by default
GPT = resolve_model("gpt-5.6-sol", CATALOG)  # native, redacted reasoning
DEEPSEEK = resolve_model("deepseek-3.2", CATALOG)  # text only
CONVERSATION = "6f1c1c3e-0d8c-4c4a-9a43-3f0f1f1e2a10"
ARN = "arn:aws:codewhisperer:us-east-1:123456789012:profile/ABCDEF"
PNG = "iVBORw0KGgo="

_built: list[BuiltPayload] = []


@pytest.fixture(autouse=True)
def fake_kiro_accepts_every_payload() -> Iterator[None]:
    """After each test, the fake's validator must accept every payload the test built."""
    _built.clear()
    yield
    for payload in _built:
        rejection = validate_chat(json.dumps(payload.body).encode(), FAKE_MODELS)
        assert rejection is None, f"fake Kiro rejects the payload: {rejection.rule}"


def build(
    request: CanonicalRequest,
    model: ModelInfo = SONNET,
    *,
    tools: tuple[ToolSpec, ...] = (),
    **options: Any,
) -> BuiltPayload:
    """Build with the test defaults; `tools` is added to the request for brevity."""
    request = dataclasses.replace(request, tools=request.tools + tools)
    payload = build_payload(
        request, model, conversation_id=CONVERSATION, profile_arn=ARN, **options
    )
    _built.append(payload)
    return payload


def req(*messages: Message, **fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        request_id="req_1",
        protocol=ClientProtocol.ANTHROPIC_MESSAGES,
        model="claude-sonnet-4-5",
        messages=messages,
        **fields,
    )


def _blocks(parts: tuple[Block | str, ...]) -> tuple[Block, ...]:
    return tuple(TextBlock(part) if isinstance(part, str) else part for part in parts)


def user(*parts: Block | str) -> Message:
    return Message(Role.USER, _blocks(parts))


def assistant(*parts: Block | str) -> Message:
    return Message(Role.ASSISTANT, _blocks(parts))


def use(call_id: str, name: str = "get_weather", **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock(call_id, name, arguments)


def result(call_id: str, text: str = "sunny", *, is_error: bool = False) -> ToolResultBlock:
    return ToolResultBlock(call_id, (TextBlock(text),), is_error)


def spec(name: str = "get_weather", description: str = "Weather", **schema: Any) -> ToolSpec:
    return ToolSpec(name, description, schema or {"type": "object", "properties": {}})


def image(media_type: str = "image/png") -> ImageBlock:
    return ImageBlock(media_type, PNG)


def state(payload: BuiltPayload) -> dict[str, Any]:
    conversation: dict[str, Any] = payload.body["conversationState"]
    return conversation


def current(payload: BuiltPayload) -> dict[str, Any]:
    message: dict[str, Any] = state(payload)["currentMessage"]["userInputMessage"]
    return message


def history(payload: BuiltPayload) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = state(payload).get("history", [])
    return entries


def turns(payload: BuiltPayload) -> list[tuple[str, dict[str, Any]]]:
    """(role, message) for every history entry and the current message, in order."""
    out = []
    for entry in [*history(payload), state(payload)["currentMessage"]]:
        (key, message), *_ = entry.items()
        out.append(("user" if key == "userInputMessage" else "assistant", message))
    return out


def tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = message.get("userInputMessageContext", {}).get(
        "toolResults", []
    )
    return results


def declared(payload: BuiltPayload) -> dict[str, dict[str, Any]]:
    tools = current(payload).get("userInputMessageContext", {}).get("tools", [])
    return {tool["toolSpecification"]["name"]: tool["toolSpecification"] for tool in tools}


WEATHER_TURN = (
    user("weather in Paris?"),
    assistant("Checking.", use("t1", city="Paris")),
    user(result("t1")),
)


# -- skeleton (rules 19, 20) -----------------------------------------------------------------------


def test_single_turn_skeleton() -> None:
    payload = build(req(user("hi")))
    assert payload.body == {
        "conversationState": {
            "conversationId": CONVERSATION,
            "agentTaskType": "vibe",
            "chatTriggerType": "MANUAL",
            "currentMessage": {
                "userInputMessage": {
                    "content": "hi",
                    "modelId": "claude-sonnet-4.5",
                    "origin": "AI_EDITOR",
                }
            },
        },
        "profileArn": ARN,
    }
    assert payload.tool_names == ToolNameMap()
    assert payload.dropped_parameters == ()
    assert payload.thinking_mode == "none"


def test_profile_arn_is_left_out_when_unknown() -> None:
    payload = build_payload(req(user("hi")), SONNET, conversation_id="c", profile_arn=None)
    _built.append(payload)
    assert "profileArn" not in payload.body
    assert state(payload)["conversationId"] == "c"


def test_rule_19_model_and_origin_on_every_user_entry() -> None:
    payload = build(req(user("a"), assistant("b"), user("c"), system=("sys",)))
    users = [message for role, message in turns(payload) if role == "user"]
    assert len(users) == 3
    for message in users:
        assert (message["modelId"], message["origin"]) == ("claude-sonnet-4.5", "AI_EDITOR")


# -- rules 1-5: conversation shape -----------------------------------------------------------------


def test_rule_1_trailing_assistant_is_a_prefill() -> None:
    payload = build(req(user("Write a haiku"), assistant("Autumn")))
    assert [(role, m["content"]) for role, m in turns(payload)] == [
        ("user", "Write a haiku"),
        ("assistant", "Autumn"),
        ("user", "Continue"),
    ]


def test_rule_1_prefill_with_a_tool_call_gets_it_answered() -> None:
    payload = build(req(user("go"), assistant(use("t1"))), tools=(spec(),))
    assert current(payload)["content"] == "Continue"
    assert tool_results(current(payload)) == [
        {"toolUseId": "t1", "content": [{"text": "tool call was not answered"}], "status": "error"}
    ]


def test_rule_2_adjacent_same_role_messages_merge() -> None:
    payload = build(req(user("a"), user("b"), assistant("x"), assistant("y"), user("c"), user("d")))
    assert [(role, m["content"]) for role, m in turns(payload)] == [
        ("user", "a\n\nb"),
        ("assistant", "x\n\ny"),
        ("user", "c\n\nd"),
    ]


def test_rule_2_tool_results_split_across_messages_join_one_turn() -> None:
    payload = build(
        req(
            user("two cities"),
            assistant(use("t1", city="Paris"), use("t2", city="Rome")),
            user(result("t1", "sunny")),
            user(result("t2", "rainy")),
            user("and compare"),
        ),
        tools=(spec(),),
    )
    assert [r["toolUseId"] for r in tool_results(current(payload))] == ["t1", "t2"]
    assert current(payload)["content"] == "and compare"


@pytest.mark.parametrize("system", [(), ("be brief",)])
def test_rule_3_history_may_open_with_the_assistant(system: tuple[str, ...]) -> None:
    """No invented user turn before a leading assistant: Kiro accepts history opening with one
    (docs/KIRO-PROTOCOL.md §2.3)."""
    payload = build(req(assistant("Hello! How can I help?"), user("hi"), system=system))
    roles = [(role, m["content"]) for role, m in turns(payload)]
    assert roles == [
        *[("user", text) for text in system],
        ("assistant", "Hello! How can I help?"),
        ("user", "hi"),
    ]
    assert "(empty)" not in json.dumps(payload.body)


def test_thinking_tags_before_a_leading_assistant_are_the_system_entry() -> None:
    payload = build(req(assistant("Hi."), user("go"), reasoning=Reasoning(budget_tokens=2_000)))
    roles = [(role, m["content"]) for role, m in turns(payload)]
    assert roles == [
        (
            "user",
            "<thinking_mode>enabled</thinking_mode><max_thinking_length>2000</max_thinking_length>",
        ),
        ("assistant", "Hi."),
        ("user", "go"),
    ]


@pytest.mark.parametrize(
    "messages",
    [
        (user("a"),),
        (user("a"), user("b")),
        (assistant("a"),),
        (user("a"), assistant("b")),
        (assistant("a"), assistant("b"), user("c")),
        WEATHER_TURN,
        (*WEATHER_TURN, user("thanks")),
        (user("a"), assistant(use("t1")), user("no answer"), user("still none")),
    ],
)
def test_rule_4_history_ends_with_assistant_without_filler(messages: tuple[Message, ...]) -> None:
    payload = build(req(*messages), tools=(spec(),))
    roles = [role for role, _ in turns(payload)]
    assert roles[-1] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert not any(m["content"] == "OK" for _, m in turns(payload))


@pytest.mark.parametrize(
    ("messages", "position", "content"),
    [
        pytest.param(  # no "(empty)" the model would read as its own words
            (user("go"), assistant(use("t1")), user(result("t1"))), 1, "", id="tool-use-only"
        ),
        pytest.param(
            (user("go"), assistant(" ", use("t1")), user(result("t1"))), 1, "", id="tool-use-blank"
        ),
        pytest.param(
            (user("go"), assistant(use("t1")), user(result("t1"))), 2, "", id="results-only"
        ),
        pytest.param((user(image()),), 0, "(empty)", id="image-only"),
        pytest.param((user("a"), assistant("  \n"), user("b")), 1, "(empty)", id="whitespace"),
        pytest.param((user(""),), 0, "(empty)", id="empty-user"),
        pytest.param(
            (user("a"), assistant(ThinkingBlock("hmm")), user("b")),
            1,
            "(empty)",
            id="thinking-only",
        ),
        pytest.param(
            (user("a"), assistant(use("t1")), user(result("t1"), " ")), 2, "", id="results-blank"
        ),
    ],
)
def test_rule_5_no_empty_content(
    messages: tuple[Message, ...], position: int, content: str
) -> None:
    payload = build(req(*messages), tools=(spec(),))
    assert turns(payload)[position][1]["content"] == content


# -- rules 6-9: tool traffic ---------------------------------------------------------------------


def test_rule_6_orphan_tool_result_becomes_text() -> None:
    payload = build(req(user("hi"), assistant("hello"), user(result("ghost", "42"), "next")))
    assert "userInputMessageContext" not in current(payload)
    assert current(payload)["content"] == "next\n\n[Tool result ghost]\n42"


def test_rule_6_orphan_error_result_keeps_its_status_in_text() -> None:
    payload = build(req(user(result("ghost", "boom", is_error=True))))
    assert current(payload)["content"] == "[Tool result ghost (error)]\nboom"


def test_rule_6_unanswered_tool_uses_get_error_results_in_use_order() -> None:
    payload = build(
        req(
            user("three"),
            assistant(use("t1"), use("t2"), use("t3")),
            user(result("t3", "c"), "partial answers"),
        ),
        tools=(spec(),),
    )
    assert [(r["toolUseId"], r["status"]) for r in tool_results(current(payload))] == [
        ("t1", "error"),
        ("t2", "error"),
        ("t3", "success"),
    ]
    assert tool_results(current(payload))[0]["content"] == [{"text": "tool call was not answered"}]


def test_rule_6_results_must_answer_the_immediately_preceding_assistant() -> None:
    payload = build(
        req(
            user("go"),
            assistant(use("t1")),
            user("hold on"),
            assistant("ok"),
            user(result("t1", "late")),
        ),
        tools=(spec(),),
    )
    middle = turns(payload)[2][1]
    assert tool_results(middle)[0]["status"] == "error"
    assert current(payload)["content"] == "[Tool result t1]\nlate"
    assert tool_results(current(payload)) == []


def test_rule_7_tool_traffic_without_tools_declares_placeholders() -> None:
    payload = build(req(*WEATHER_TURN))
    assert declared(payload) == {
        "get_weather": {
            "name": "get_weather",
            "description": "Tool: get_weather",
            "inputSchema": {"json": {"type": "object", "properties": {}}},
        }
    }


def test_rule_8_history_tools_are_declared_case_insensitively() -> None:
    payload = build(
        req(
            user("go"),
            assistant(use("t1", "READ_FILE"), use("t2", "grep")),
            user(result("t1"), result("t2")),
        ),
        tools=(spec("read_file"),),
    )
    assert set(declared(payload)) == {"read_file", "grep"}
    assert declared(payload)["grep"]["description"] == "Tool: grep"


def test_rule_8_duplicate_declarations_collapse() -> None:
    payload = build(req(user("hi")), tools=(spec("Read", "first"), spec("read", "second")))
    assert [(t["name"], t["description"]) for t in declared(payload).values()] == [
        ("Read", "first")
    ]


def test_rule_9_duplicate_tool_results_keep_the_first_and_text_the_rest() -> None:
    payload = build(
        req(user("go"), assistant(use("t1")), user(result("t1", "first"), result("t1", "again"))),
        tools=(spec(),),
    )
    assert [r["content"] for r in tool_results(current(payload))] == [[{"text": "first"}]]
    assert current(payload)["content"] == "[Tool result t1]\nagain"


# -- rule 10: tool names ---------------------------------------------------------------------------


def _expected_short(name: str) -> str:
    return f"{name[:55]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def test_rule_10_long_names_shorten_and_map_back() -> None:
    long = "mcp__" + "x" * 95
    assert len(long) == 100
    payload = build(
        req(user("go"), assistant(use("t1", long)), user(result("t1"))),
        tools=(spec(long), spec("short")),
    )
    short = _expected_short(long)
    assert len(short) == 64
    assert set(declared(payload)) == {short, "short"}
    assert turns(payload)[1][1]["toolUses"][0]["name"] == short
    assert payload.tool_names.original(short) == long
    assert payload.tool_names.original("short") == "short"
    assert payload.tool_names.originals == {short: long}


@pytest.mark.parametrize(("length", "shortened"), [(64, False), (65, True)])
def test_rule_10_limit_is_64(length: int, shortened: bool) -> None:
    name = "t" * length
    payload = build(req(user("hi")), tools=(spec(name),))
    (sent,) = declared(payload)
    assert (sent != name) is shortened
    assert len(sent) <= 64


def test_rule_10_names_sharing_a_prefix_stay_distinct() -> None:
    first, second = "p" * 60 + "a" * 40, "p" * 60 + "b" * 40
    payload = build(req(user("hi")), tools=(spec(first), spec(second)))
    names = list(declared(payload))
    assert len(set(names)) == 2
    assert [payload.tool_names.original(name) for name in names] == [first, second]


def test_rule_10_shortened_name_never_collides_with_a_real_tool() -> None:
    long = "q" * 100
    squatter = _expected_short(long).upper()  # Kiro compares names case-insensitively
    payload = build(req(user("hi")), tools=(spec(squatter), spec(long)))
    names = list(declared(payload))
    assert names[0] == squatter
    assert names[1].lower() != squatter.lower()
    assert len(names[1]) == 64
    assert payload.tool_names.original(names[1]) == long
    assert payload.tool_names.original(squatter) == squatter


def test_rule_10_shortening_is_deterministic() -> None:
    request = req(user("hi"), tools=(spec("r" * 80),))
    assert build(request).body == build(request).body


# -- rules 11-14: tool specs and inputs ------------------------------------------------------------


def test_rule_11_long_descriptions_are_truncated_with_a_marker() -> None:
    payload = build(req(user("hi")), tools=(spec(description="d" * 20_000),))
    description = declared(payload)["get_weather"]["description"]
    assert len(description) == 10_000
    assert description.endswith("[description truncated]")


@pytest.mark.parametrize("description", ["", "   "])
def test_rule_11_empty_description_names_the_tool(description: str) -> None:
    payload = build(req(user("hi")), tools=(spec(description=description),))
    assert declared(payload)["get_weather"]["description"] == "Tool: get_weather"


def test_rule_12_no_cache_points() -> None:
    payload = build(req(*WEATHER_TURN), tools=(spec(), spec("other")))
    assert "cachePoint" not in json.dumps(payload.body)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param({}, {"type": "object", "properties": {}}, id="empty"),
        pytest.param(
            {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"},
            {"type": "object", "properties": {}},
            id="dollar-schema",
        ),
        pytest.param(
            {"type": "object", "properties": None, "required": None},
            {"type": "object", "properties": {}},
            id="nulls",
        ),
        pytest.param(
            {"type": "object", "properties": [], "required": ["a", 3, None]},
            {"type": "object", "properties": {}, "required": ["a"]},
            id="malformed-containers",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "type": {"type": ["string", "null"], "default": None},
                    "tags": {"type": "array", "items": {"type": ["null"], "enum": ["x", None]}},
                    "mode": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": None},
                },
                "required": ["type"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {
                    "type": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "null", "enum": ["x"]}},
                    "mode": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                },
                "required": ["type"],
                "additionalProperties": False,
            },
            id="nested",
        ),
        pytest.param(
            {"type": "array", "$defs": {"n": {"type": ["integer"], "minimum": None}}},
            {"type": "object", "properties": {}, "$defs": {"n": {"type": "integer"}}},
            id="root-forced-object",
        ),
    ],
)
def test_rule_13_schema_hygiene(schema: dict[str, Any], expected: dict[str, Any]) -> None:
    payload = build(req(user("hi")), tools=(ToolSpec("t", "d", schema),))
    assert declared(payload)["t"]["inputSchema"]["json"] == expected


def test_rule_14_empty_string_keys_leave_tool_inputs() -> None:
    call = ToolUseBlock("t1", "edit", {"": 1, "path": "a", "opts": {"": 2, "n": [{"": 3, "k": 4}]}})
    payload = build(req(user("go"), assistant(call), user(result("t1"))), tools=(spec("edit"),))
    assert turns(payload)[1][1]["toolUses"][0]["input"] == {
        "path": "a",
        "opts": {"n": [{"k": 4}]},
    }


# -- rule 15: tool choice --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "choice", [ToolChoice(ToolChoiceMode.ANY), ToolChoice(ToolChoiceMode.TOOL, "get_weather")]
)
def test_rule_15_forced_tool_choice_is_refused(choice: ToolChoice) -> None:
    with pytest.raises(ApiError) as caught:
        build(req(user("hi"), tools=(spec(),), tool_choice=choice))
    error = caught.value
    assert (error.kind, error.code, error.param) == (
        ErrorKind.INVALID_REQUEST,
        "unsupported_capability",
        "tool_choice",
    )


def test_rule_15_tool_choice_none_sends_no_tools_and_keeps_traffic_as_text() -> None:
    payload = build(
        req(*WEATHER_TURN, tools=(spec(),), tool_choice=ToolChoice(ToolChoiceMode.NONE))
    )
    assert "userInputMessageContext" not in current(payload)
    assert "toolUses" not in turns(payload)[1][1]
    assert (
        turns(payload)[1][1]["content"]
        == 'Checking.\n\n[Tool call t1: get_weather {"city":"Paris"}]'
    )
    assert current(payload)["content"] == "[Tool result t1]\nsunny"


# -- rule 16: size ---------------------------------------------------------------------------------


def test_rule_16_oversized_payload_is_refused_clearly() -> None:
    with pytest.raises(ApiError) as caught:
        build(req(user("x" * 700_000)))
    error = caught.value
    assert (error.kind, error.code) == (ErrorKind.REQUEST_TOO_LARGE, "request_too_large")
    assert error.status == 413
    assert error.message.startswith("the request for Kiro would be ")
    assert "over kirod's limit of 600000 (the kiro_max_body_bytes option" in error.message
    assert "compact" in error.message


def test_rule_16_limit_is_configurable() -> None:
    build(req(user("x" * 1_000)), max_payload_bytes=2_000)
    with pytest.raises(ApiError):
        build(req(user("x" * 1_000)), max_payload_bytes=1_000)


def test_rule_16_leaves_images_out() -> None:
    """Kiro bounds images one by one (docs/UPSTREAM.md §6); the body limit is on the rest."""
    screenshot = ImageBlock("image/png", "A" * 2_000_000)
    build(req(user("x" * 1_000, screenshot)), max_payload_bytes=2_000)
    with pytest.raises(ApiError):
        build(req(user("x" * 2_000, screenshot)), max_payload_bytes=2_000)


# -- rule 17: images -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("media_type", "image_format"),
    [
        ("image/png", "png"),
        ("image/jpeg", "jpeg"),
        ("image/jpg", "jpeg"),
        ("image/gif", "gif"),
        ("image/webp", "webp"),
        ("IMAGE/PNG", "png"),
    ],
)
def test_rule_17_image_format_is_the_media_subtype(media_type: str, image_format: str) -> None:
    payload = build(req(user("what is this?", image(media_type))))
    assert current(payload)["images"] == [{"format": image_format, "source": {"bytes": PNG}}]


@pytest.mark.parametrize("media_type", ["image/bmp", "application/pdf", "png"])
def test_rule_17_unsupported_image_types_are_refused(media_type: str) -> None:
    with pytest.raises(ApiError) as caught:
        build(req(user("what is this?", image(media_type))))
    assert caught.value.code == "unsupported_image_format"


def test_rule_17_tool_result_images_move_to_the_user_turn() -> None:
    shot = ToolResultBlock("t1", (TextBlock("here"), image()))
    payload = build(
        req(user("screenshot"), assistant(use("t1", "screenshot")), user(shot)),
        tools=(spec("screenshot"),),
    )
    assert current(payload)["images"] == [{"format": "png", "source": {"bytes": PNG}}]
    assert tool_results(current(payload))[0]["content"] == [
        {"text": "here\n\n(image attached to this message)"}
    ]


def test_rule_17_raw_images_only_in_current_and_last_five_history_entries() -> None:
    messages: list[Message] = []
    for index in range(8):
        messages += [user(f"u{index}", image()), assistant(f"a{index}")]
    messages.append(user("now", image()))
    payload = build(req(*messages))
    entries = turns(payload)  # 16 history entries + current
    with_images = [index for index, (_, message) in enumerate(entries) if "images" in message]
    assert with_images == [12, 14, 16]  # u6 and u7 are within the last five history entries
    assert entries[10][1]["content"] == "u5\n\n[image (image/png) omitted]"
    assert entries[0][1]["content"] == "u0\n\n[image (image/png) omitted]"


def test_rule_17_text_only_model_refuses_current_images() -> None:
    with pytest.raises(ApiError) as caught:
        build(req(user("look", image())), DEEPSEEK)
    assert (caught.value.code, caught.value.param) == ("unsupported_capability", "messages")


def test_rule_17_text_only_model_gets_placeholders_for_history_images() -> None:
    payload = build(req(user("look", image()), assistant("nice"), user("more")), DEEPSEEK)
    assert "images" not in turns(payload)[0][1]
    assert turns(payload)[0][1]["content"] == "look\n\n[image (image/png) omitted]"


def test_rule_17_assistant_images_become_text() -> None:
    payload = build(req(user("draw"), assistant(image()), user("thanks")))
    assert turns(payload)[1][1] == {"content": "[image (image/png) omitted]"}


# -- rule 21: documents, for Claude and where the catalog lists DOCUMENT --------------------------

DOCUMENTS = resolve_model("claude-sonnet-4-6", CATALOG)
PDF = DocumentBlock("report.pdf", "pdf", "JVBERi0xLjQK")
PDF_ENTRY = {"name": "report", "format": "pdf", "source": {"bytes": "JVBERi0xLjQK"}}


def test_claude_takes_documents_and_gpt_only_where_listed() -> None:
    assert DOCUMENTS.supports_documents
    assert SONNET.supports_documents  # Claude, though its catalog entry lists no DOCUMENT
    assert not GPT.supports_documents
    assert not DEEPSEEK.supports_documents


def test_documents_go_in_the_current_message_and_history() -> None:
    payload = build(req(user("read", PDF), assistant("done"), user("and this", PDF)), DOCUMENTS)
    assert current(payload)["documents"] == [PDF_ENTRY]
    assert turns(payload)[0][1]["documents"] == [PDF_ENTRY]
    assert current(payload)["content"] == "and this"
    assert payload.documents == ("pdf", "pdf")


def test_document_context_goes_along_as_text() -> None:
    noted = dataclasses.replace(PDF, context="from finance")
    payload = build(req(user("read", noted)), DOCUMENTS)
    assert current(payload)["content"] == (
        "read\n\n[context of document 'report.pdf': from finance]"
    )


def test_tool_result_documents_move_to_the_user_turn() -> None:
    fetched = ToolResultBlock("t1", (TextBlock("here"), PDF))
    payload = build(
        req(user("fetch"), assistant(use("t1", "fetch")), user(fetched)),
        DOCUMENTS,
        tools=(spec("fetch"),),
    )
    assert current(payload)["documents"] == [PDF_ENTRY]
    assert tool_results(current(payload))[0]["content"] == [
        {"text": "here\n\n(document attached to this message)"}
    ]


@pytest.mark.parametrize(
    ("names", "sent"),
    [
        (["Q3 report.pdf"], ["Q3 report"]),  # the final extension goes
        (["v1.2 notes"], ["v1 2 notes"]),  # not an extension: the dot is a space
        (["  a//b:: c  .txt"], ["a b c"]),  # refused characters are spaces, collapsed, trimmed
        (["résumé (final) [v2]_x-y.docx"], ["resume (final) [v2]_x-y"]),  # accents dropped
        (["報告.pdf", ""], ["document-1", "document-2"]),  # nothing left: named by place
        (["a.pdf", "a.txt", "A"], ["a", "a (2)", "A (3)"]),  # no two alike in one message
        (["x" * 250 + ".pdf"], ["x" * 200]),  # at most 200 characters
        (["x" * 200, "x" * 200], ["x" * 200, "x" * 196 + " (2)"]),
    ],
)
def test_rule_21_document_names_meet_kiros_rule(names: list[str], sent: list[str]) -> None:
    documents = [DocumentBlock(name, "pdf", "JVBERi0xLjQK") for name in names]
    payload = build(req(user("read", *documents)), DOCUMENTS)
    assert [document["name"] for document in current(payload)["documents"]] == sent
    assert all(len(name) <= 200 and DOCUMENT_NAME.fullmatch(name) for name in sent)


def test_a_model_without_document_input_refuses_current_documents() -> None:
    with pytest.raises(ApiError) as caught:
        build(req(user("read", PDF)), GPT)
    error = caught.value
    assert (error.kind, error.code, error.param) == (
        ErrorKind.INVALID_REQUEST,
        "unsupported_capability",
        "messages",
    )
    assert "documents (PDF and other files) are not supported by model 'gpt-5.6-sol'" in (
        error.message
    )


def test_a_model_without_document_input_gets_placeholders_for_history_documents() -> None:
    payload = build(req(user("read", PDF), assistant("done"), user("thanks")), GPT)
    assert "documents" not in turns(payload)[0][1]
    assert turns(payload)[0][1]["content"] == "read\n\n[document 'report.pdf' (pdf) omitted]"
    assert payload.documents == ()


def test_assistant_documents_become_text() -> None:
    payload = build(req(user("hi"), assistant(PDF), user("thanks")), DOCUMENTS)
    assert turns(payload)[1][1] == {"content": "[document 'report.pdf' (pdf) omitted]"}


# -- rule 18: system prompt ------------------------------------------------------------------------


def test_rule_18_system_prompt_is_a_first_history_entry_without_a_reply() -> None:
    """No invented acknowledgement after it: the model quotes one back as its own words
    (docs/KIRO-PROTOCOL.md §2.3)."""
    payload = build(req(user("hi"), system=("You are terse.", "", "Answer in French.")))
    assert [(role, m["content"]) for role, m in turns(payload)] == [
        ("user", "You are terse.\n\nAnswer in French."),
        ("user", "hi"),
    ]
    assert "I will follow these instructions" not in json.dumps(payload.body)


def test_rule_18_the_system_entry_stays_alone_in_a_longer_conversation() -> None:
    payload = build(req(user("a"), assistant("b"), user("c"), system=("sys",)))
    assert [(role, m["content"]) for role, m in turns(payload)] == [
        ("user", "sys"),
        ("user", "a"),
        ("assistant", "b"),
        ("user", "c"),
    ]


# -- thinking (docs/KIRO-PROTOCOL.md §2.4 to §2.6) -------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "length"), [(500, 1_024), (1_024, 1_024), (8_000, 8_000), (100_000, 24_576)]
)
def test_tag_thinking_budget_is_clamped(budget: int, length: int) -> None:
    payload = build(req(user("hi"), system=("sys",), reasoning=Reasoning(budget_tokens=budget)))
    assert payload.thinking_mode == "tags"
    assert turns(payload)[0][1]["content"] == (
        "<thinking_mode>enabled</thinking_mode>"
        f"<max_thinking_length>{length}</max_thinking_length>\nsys"
    )


@pytest.mark.parametrize(
    ("effort", "tag"),
    [
        ("low", "low"),
        ("medium", "medium"),
        ("high", "high"),
        ("xhigh", "max"),
        ("max", "max"),
        (None, "high"),
    ],
)
def test_tag_thinking_effort_is_adaptive(effort: Effort | None, tag: str) -> None:
    assert (SONNET_46_TAGS.request_fields, SONNET_46_TAGS.reasoning_field_style) == (
        None,
        "output_config",
    )
    payload = build(req(user("hi"), reasoning=Reasoning(effort=effort)), SONNET_46_TAGS)
    assert "additionalModelRequestFields" not in payload.body
    assert current(payload)["content"] == (
        f"<thinking_mode>adaptive</thinking_mode><thinking_effort>{tag}</thinking_effort>\n\nhi"
    )


@pytest.mark.parametrize(
    ("effort", "tag"), [("low", "low"), ("medium", "medium"), ("high", "high"), ("max", "high")]
)
def test_tag_thinking_effort_is_clamped_to_what_the_model_lists(effort: Effort, tag: str) -> None:
    three = dataclasses.replace(SONNET_46_TAGS, efforts=("low", "medium", "high"))
    payload = build(req(user("hi"), reasoning=Reasoning(effort=effort)), three)
    assert f"<thinking_effort>{tag}</thinking_effort>" in current(payload)["content"]


@pytest.mark.parametrize(
    ("effort", "length"),
    [("low", 4_096), ("medium", 16_384), ("high", 24_576), ("max", 24_576), (None, 24_576)],
)
def test_a_45_generation_model_gets_the_effort_as_a_budget(
    effort: Effort | None, length: int
) -> None:
    """Claude Code's adaptive thinking with `output_config.effort` on a model that predates
    both: budgeted thinking, with no effort anywhere in the payload."""
    assert SONNET.reasoning_field_style == "none"
    payload = build(req(user("hi"), reasoning=Reasoning(effort=effort)))
    assert current(payload)["content"] == (
        "<thinking_mode>enabled</thinking_mode>"
        f"<max_thinking_length>{length}</max_thinking_length>\n\nhi"
    )
    assert "effort" not in json.dumps(payload.body)


def test_tags_never_land_on_a_tool_result_turn() -> None:
    payload = build(req(*WEATHER_TURN, tools=(spec(),), reasoning=Reasoning(budget_tokens=4_000)))
    entries = turns(payload)
    assert entries[0][1]["content"].startswith("<thinking_mode>enabled</thinking_mode>")
    assert "thinking_mode" not in current(payload)["content"]
    assert json.dumps(payload.body).count("thinking_mode") == 2  # one open and one close tag


def test_thinking_blocks_are_not_forwarded_as_prompt_text() -> None:
    signed = ThinkingBlock("secret chain", reasoning_signature("secret chain"))
    payload = build(
        req(
            user("hi"),
            assistant(signed, ThinkingBlock("unsigned musing"), RedactedThinkingBlock("b64"), "yo"),
            user("again"),
            reasoning=Reasoning(budget_tokens=2_000),
        )
    )
    text = json.dumps(payload.body)
    assert "secret chain" not in text
    assert "unsigned musing" not in text
    assert "reasoningContent" not in text
    assert turns(payload)[1][1] == {"content": "yo"}


@pytest.mark.parametrize(
    ("reasoning", "effort"),
    [
        (Reasoning(budget_tokens=1_000), "low"),
        (Reasoning(budget_tokens=4_096), "low"),
        (Reasoning(budget_tokens=10_000), "medium"),
        (Reasoning(budget_tokens=16_384), "medium"),
        (Reasoning(budget_tokens=31_999), "high"),
        (Reasoning(budget_tokens=64_000), "max"),
        (Reasoning(effort="xhigh"), "xhigh"),
        (Reasoning(effort="low", budget_tokens=64_000), "low"),
        (Reasoning(), "high"),
    ],
)
def test_native_reasoning_effort(reasoning: Reasoning, effort: str) -> None:
    """docs/KIRO-PROTOCOL.md §2.6: Claude reads its effort only in the root field, with adaptive
    thinking where the schema lists it; nothing in the message, no prompt tags."""
    payload = build(req(user("hi"), system=("sys",), reasoning=reasoning), OPUS)
    assert payload.thinking_mode == "native"
    assert payload.body["additionalModelRequestFields"] == {
        "output_config": {"effort": effort},
        "thinking": {"type": "adaptive"},
    }
    assert "reasoning" not in current(payload)
    assert "thinking_mode" not in json.dumps(payload.body)


@pytest.mark.parametrize(
    ("asked", "sent"), [("max", "high"), ("xhigh", "high"), ("medium", "medium"), ("low", "medium")]
)
def test_native_effort_is_clamped_to_what_the_catalog_entry_lists(asked: Effort, sent: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "output_config": {
                "type": "object",
                "properties": {"effort": {"type": "string", "enum": ["medium", "high"]}},
            }
        },
    }
    [listed] = catalog_from_list_available_models(
        [{"models": [{"modelId": "claude-opus-4.7", "additionalModelRequestFieldsSchema": schema}]}]
    )
    assert listed.efforts == ("medium", "high")
    payload = build(req(user("hi"), reasoning=Reasoning(effort=asked)), listed)
    assert payload.thinking_mode == "native"
    # This schema has no `thinking` key, so none is sent.
    assert payload.body["additionalModelRequestFields"] == {"output_config": {"effort": sent}}
    assert payload.effort_clamped == (None if asked == sent else f"{asked}>{sent}")


@pytest.mark.parametrize(
    ("reasoning", "effort"),
    [
        (Reasoning(effort="low"), "low"),
        (Reasoning(effort="max"), "max"),
        (Reasoning(budget_tokens=10_000), "medium"),
        (Reasoning(), "high"),
    ],
)
def test_gpt_takes_its_effort_in_additional_model_request_fields(
    reasoning: Reasoning, effort: str
) -> None:
    """docs/KIRO-PROTOCOL.md §2.6: GPT-5.6 reads `additionalModelRequestFields.reasoning.effort`; it
    never gets Claude's `output_config`, nor the effort a second time in the message."""
    assert GPT.reasoning_field_style == "reasoning"
    payload = build(req(user("hi"), system=("sys",), reasoning=reasoning), GPT)
    assert payload.thinking_mode == "native"
    assert payload.body["additionalModelRequestFields"] == {"reasoning": {"effort": effort}}
    assert "reasoning" not in current(payload)
    assert "output_config" not in json.dumps(payload.body)
    assert "thinking_mode" not in json.dumps(payload.body)
    assert payload.effort_clamped is None


def test_gpt_without_reasoning_gets_no_request_fields() -> None:
    payload = build(req(user("hi")), GPT)
    assert payload.thinking_mode == "none"
    assert "additionalModelRequestFields" not in payload.body


def test_a_gpt_model_by_name_alone_takes_the_reasoning_field() -> None:
    """The static fallback (no catalog read) knows GPT's field from the model's name."""
    static = resolve_model("gpt-5.6-sol", STATIC_CATALOG)
    assert static.reasoning_field_style == "reasoning"
    payload = build(req(user("hi"), reasoning=Reasoning(effort="high")), static)
    assert payload.body["additionalModelRequestFields"] == {"reasoning": {"effort": "high"}}


@pytest.mark.parametrize(
    "model",
    [SONNET, SONNET_46_TAGS, STATIC_CATALOG.get("claude-opus-5.5")],
    ids=lambda model: model.kiro_id,
)
@pytest.mark.parametrize("effort", ["low", "high", "max"])
def test_claude_without_a_schema_gets_no_root_fields(model: ModelInfo, effort: Effort) -> None:
    """docs/KIRO-PROTOCOL.md §2.6: the 4.5 generation rejects any root field, and a model whose
    schema was not read (the static list) is not sent one on a guess: prompt tags instead."""
    payload = build(
        req(user("hi"), reasoning=Reasoning(effort=effort), max_output_tokens=4_000), model
    )
    assert payload.thinking_mode == "tags"
    assert "additionalModelRequestFields" not in payload.body
    assert "output_config" not in json.dumps(payload.body)
    assert "reasoning" not in current(payload)


@pytest.mark.parametrize(
    ("reasoning", "effort"),
    [
        (Reasoning(), "medium"),
        (Reasoning(effort="max"), "max"),
        (Reasoning(budget_tokens=2_000), "low"),
    ],
)
def test_opus_55_gets_adaptive_thinking_and_its_default_effort(
    reasoning: Reasoning, effort: str
) -> None:
    """docs/KIRO-PROTOCOL.md §2.6: no effort asked is the schema's default (Kiro's agent sends
    it); Opus 5.5 lists only `adaptive`, never `disabled`."""
    payload = build(req(user("hi"), reasoning=reasoning), OPUS_55)
    assert payload.body["additionalModelRequestFields"] == {
        "output_config": {"effort": effort},
        "thinking": {"type": "adaptive"},
    }


def test_no_thinking_asked_sends_no_thinking_key() -> None:
    """Thinking the client turned off is not sent as `disabled` (Opus 5.5's schema lacks it);
    the client's `max_tokens` still goes natively."""
    payload = build(req(user("hi"), max_output_tokens=8_000), OPUS_55)
    assert payload.thinking_mode == "none"
    assert payload.body["additionalModelRequestFields"] == {"max_tokens": 8_000}


@pytest.mark.parametrize(
    ("model", "asked", "sent"),
    [
        (OPUS_55, 500, 1_024),
        (OPUS_55, 1_024, 1_024),
        (OPUS_55, 128_000, 128_000),
        (OPUS_55, 200_000, 128_000),
        (SONNET_46, 100_000, 64_000),
    ],
    # Named by the model's id: a ModelInfo's text holds a frozenset, whose order differs between
    # pytest-xdist's workers.
    ids=lambda value: value.kiro_id if isinstance(value, ModelInfo) else str(value),
)
def test_max_tokens_goes_natively_clamped_into_the_schemas_range(
    model: ModelInfo, asked: int, sent: int
) -> None:
    payload = build(
        req(user("hi"), reasoning=Reasoning(effort="high"), max_output_tokens=asked), model
    )
    assert payload.body["additionalModelRequestFields"]["max_tokens"] == sent
    assert payload.max_tokens_clamped == (None if asked == sent else f"{asked}>{sent}")


def test_gpt_never_gets_an_output_limit() -> None:
    """GPT-5.6's schema has no output-limit key; Kiro refuses every one."""
    payload = build(
        req(user("hi"), reasoning=Reasoning(effort="low"), max_output_tokens=9_000), GPT
    )
    assert payload.body["additionalModelRequestFields"] == {"reasoning": {"effort": "low"}}
    assert payload.max_tokens_clamped is None


def test_an_effort_the_46_generation_lacks_is_clamped() -> None:
    payload = build(req(user("hi"), reasoning=Reasoning(effort="xhigh")), SONNET_46)
    assert payload.body["additionalModelRequestFields"]["output_config"] == {"effort": "high"}
    assert payload.effort_clamped == "xhigh>high"


def test_without_request_fields_claude_thinks_by_tags() -> None:
    """docs/KIRO-PROTOCOL.md §2.6: an account that refused the root field gets none, and the
    effort goes by prompt tags instead (never both)."""
    payload = build(
        req(user("hi"), reasoning=Reasoning(effort="low"), max_output_tokens=4_000),
        OPUS_55,
        request_fields=False,
    )
    assert payload.thinking_mode == "tags"
    assert "additionalModelRequestFields" not in payload.body
    assert "<thinking_effort>low</thinking_effort>" in current(payload)["content"]


def test_gpt_without_request_fields_still_reasons_natively_and_gets_no_tags() -> None:
    payload = build(req(user("hi"), reasoning=Reasoning(effort="high")), GPT, request_fields=False)
    assert payload.thinking_mode == "native"
    assert "additionalModelRequestFields" not in payload.body
    assert "thinking_mode" not in json.dumps(payload.body)


def test_without_replayed_reasoning_no_history_entry_carries_any() -> None:
    """docs/KIRO-PROTOCOL.md §2.6: after a refused signature every reasoning block is left out."""
    signed = ThinkingBlock("let me see", reasoning_signature("let me see"))
    conversation = req(
        user("q1"),
        assistant(signed, "a1"),
        user("q2"),
        assistant(RedactedThinkingBlock("ZW5j"), "a2"),
        user("q3"),
        reasoning=Reasoning(effort="high"),
    )
    kept = build(conversation, OPUS)
    stripped = build(conversation, OPUS, replay_reasoning=False)
    assert "reasoningContent" in json.dumps(kept.body)
    assert "reasoningContent" not in json.dumps(stripped.body)
    assert [entry for _, entry in turns(stripped)][1] == {"content": "a1"}
    assert stripped.thinking_mode == "native"


def _gpt_listing(*efforts: str) -> ModelInfo:
    schema = {
        "type": "object",
        "properties": {
            "reasoning": {
                "type": "object",
                "properties": {"effort": {"type": "string", "enum": list(efforts)}},
            }
        },
    }
    [listed] = catalog_from_list_available_models(
        [{"models": [{"modelId": "gpt-5.6-sol", "additionalModelRequestFieldsSchema": schema}]}]
    )
    return listed


@pytest.mark.parametrize(
    ("asked", "sent", "clamped"),
    [
        ("xhigh", "high", "xhigh>high"),
        ("max", "high", "max>high"),
        ("high", "high", None),
        ("low", "low", None),
    ],
)
def test_gpt_effort_is_clamped_to_what_the_catalog_entry_lists(
    asked: Effort, sent: str, clamped: str | None
) -> None:
    listed = _gpt_listing("low", "medium", "high")
    assert listed.efforts == ("low", "medium", "high")
    payload = build(req(user("hi"), reasoning=Reasoning(effort=asked)), listed)
    assert payload.body["additionalModelRequestFields"] == {"reasoning": {"effort": sent}}
    assert payload.effort_clamped == clamped


def test_an_effort_below_every_listed_one_takes_the_lowest() -> None:
    payload = build(req(user("hi"), reasoning=Reasoning(effort="low")), _gpt_listing("high", "max"))
    assert payload.body["additionalModelRequestFields"] == {"reasoning": {"effort": "high"}}
    assert payload.effort_clamped == "low>high"


def test_tag_thinking_names_its_effort_clamp() -> None:
    three = dataclasses.replace(SONNET_46_TAGS, efforts=("low", "medium", "high"))
    payload = build(req(user("hi"), reasoning=Reasoning(effort="max")), three)
    assert "<thinking_effort>high</thinking_effort>" in current(payload)["content"]
    assert payload.effort_clamped == "max>high"
    unclamped = build(req(user("hi"), reasoning=Reasoning(effort="xhigh")), SONNET_46_TAGS)
    assert "<thinking_effort>max</thinking_effort>" in current(unclamped)["content"]
    assert unclamped.effort_clamped is None  # the tags' own spelling of xhigh, not a clamp


def test_tag_thinking_budget_never_exceeds_the_models_output_limit() -> None:
    small = dataclasses.replace(SONNET, max_output_tokens=8_000)
    payload = build(req(user("hi"), reasoning=Reasoning(budget_tokens=20_000)), small)
    assert "<max_thinking_length>8000</max_thinking_length>" in current(payload)["content"]


def test_native_reasoning_replays_signed_thinking_and_drops_unsigned() -> None:
    signature = reasoning_signature("let me see")
    payload = build(
        req(
            user("q1"),
            assistant(ThinkingBlock("let me see", signature), "a1"),
            user("q2"),
            assistant(ThinkingBlock("unsigned"), "a2"),
            user("q3"),
            reasoning=Reasoning(effort="high"),
        ),
        OPUS,
    )
    assert turns(payload)[1][1] == {
        "content": "a1",
        "reasoningContent": {"reasoningText": {"text": "let me see", "signature": signature}},
    }
    assert turns(payload)[3][1] == {"content": "a2"}


def test_native_reasoning_replays_redacted_reasoning() -> None:
    payload = build(
        req(
            user("q1"),
            assistant(RedactedThinkingBlock("ZW5jcnlwdGVk"), "a1"),
            user("q2"),
            reasoning=Reasoning(effort="medium"),
        ),
        GPT,
    )
    assert turns(payload)[1][1] == {
        "content": "a1",
        "reasoningContent": {"redactedContent": "ZW5jcnlwdGVk"},
    }


def test_no_reasoning_requested_means_no_thinking() -> None:
    signed = ThinkingBlock("old", reasoning_signature("old"))
    payload = build(req(user("q"), assistant(signed, "a"), user("q2")), OPUS)
    assert payload.thinking_mode == "none"
    assert "reasoning" not in current(payload)
    assert "reasoningContent" not in json.dumps(payload.body)


# -- parameter policy ------------------------------------------------------------------------------

ALL_PARAMETERS = {
    "sampling": Sampling(temperature=0.2, top_p=0.9, top_k=40),
    "stop_sequences": ("END",),
}


def test_unsupported_parameters_are_dropped_and_recorded() -> None:
    payload = build(req(user("hi"), **ALL_PARAMETERS))
    assert payload.dropped_parameters == ("temperature", "top_p", "top_k", "stop_sequences")
    assert "temperature" not in json.dumps(payload.body)


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        (ALL_PARAMETERS, "temperature"),
        ({"sampling": Sampling(top_k=1)}, "top_k"),
        ({"stop_sequences": ("x",)}, "stop_sequences"),
    ],
)
def test_error_policy_refuses_unsupported_parameters(fields: dict[str, Any], param: str) -> None:
    with pytest.raises(ApiError) as caught:
        build(req(user("hi"), **fields), parameter_policy="error")
    error = caught.value
    assert (error.kind, error.code, error.param) == (
        ErrorKind.INVALID_REQUEST,
        "unsupported_parameter",
        param,
    )


def test_error_policy_accepts_requests_without_such_parameters() -> None:
    assert build(req(user("hi")), parameter_policy="error").dropped_parameters == ()


def test_a_request_without_messages_is_refused() -> None:
    with pytest.raises(ApiError) as caught:
        build(req())
    assert caught.value.param == "messages"
