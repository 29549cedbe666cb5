"""The fake's request validator: one accepted and one rejected body per rule."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import random
import struct
import zlib
from typing import Any

import pytest
from PIL import Image

from kirod.testing.fake_kiro.catalog import DEFAULT_MODELS
from kirod.testing.fake_kiro.script import ChatRequest, Latency, Script, plan_stream
from kirod.testing.fake_kiro.validate import (
    MAX_BODY_BYTES,
    MAX_IMAGE_BASE64,
    RULES,
    estimate_tokens,
    reasoning_signature,
    validate_chat,
)
from tests.fake_kiro.fake_bodies import (
    PNG,
    SONNET,
    assistant,
    body,
    encode,
    result,
    tool,
    use,
    user,
)

DOCS = "claude-sonnet-4.6"  # lists DOCUMENT input; SONNET (4.5) does not
PDF = {"name": "report", "format": "pdf", "source": {"bytes": "JVBERi0xLjQK"}}
TINY = dataclasses.replace(DEFAULT_MODELS[0], model_id="tiny", max_input_tokens=100)
MODELS = {model.model_id: model for model in (*DEFAULT_MODELS, TINY)}

WEATHER = [tool()]
TOOL_TURN = [user("Weather?", tools=WEATHER), assistant("Checking.", uses=[use("t1")])]


def answered(*results: dict[str, Any], tools: list[dict[str, Any]] = WEATHER) -> dict[str, Any]:
    """A body whose current message answers TOOL_TURN's tool use."""
    return body(user("", tools=tools, results=results), TOOL_TURN)


def sized(size: int) -> bytes:
    """A valid body of exactly `size` bytes."""
    skeleton = encode(body(user("", model="auto")))
    filler = "a" * (size - len(skeleton))
    return encode(body(user(filler, model="auto")))


def png(width: int, height: int) -> dict[str, Any]:
    """A Kiro `images[]` item holding a real PNG of that size."""
    out = io.BytesIO()
    Image.new("L", (width, height)).save(out, format="PNG")
    return {"format": "png", "source": {"bytes": base64.b64encode(out.getvalue()).decode()}}


def bomb(side: int) -> dict[str, Any]:
    """A PNG whose header claims `side` x `side` pixels, with next to no data behind it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
    return {
        "format": "png",
        "source": {"bytes": base64.b64encode(data + chunk(b"IEND", b"")).decode()},
    }


def raw(chars: int) -> dict[str, Any]:
    """An image item of `chars` base64 characters that no decoder reads as an image."""
    return {"format": "png", "source": {"bytes": "A" * chars}}


def reasoning(content: dict[str, Any]) -> dict[str, Any]:
    return body(user("Go on"), [user("Think"), assistant("Done.", reasoningContent=content)])


SIGNED = {"reasoningText": {"text": "Let me see.", "signature": reasoning_signature("Let me see.")}}
SIGNED_WEATHER = {
    "reasoningText": {
        "text": "Let me see.",
        "signature": reasoning_signature("Let me see.", [WEATHER[0]["toolSpecification"]["name"]]),
    }
}


def cached(entry: dict[str, Any], point: Any = None) -> dict[str, Any]:
    """`entry` with a message-level cachePoint."""
    ((role, message),) = entry.items()
    return {role: {**message, "cachePoint": point or {"type": "default"}}}


def union(combinator: str) -> dict[str, Any]:
    """A one-branch `combinator` schema: allowed inside a schema, refused at its top level."""
    return {combinator: [{"type": "object", "properties": {}}]}


def without_trigger() -> dict[str, Any]:
    data = body()
    del data["conversationState"]["chatTriggerType"]
    return data


# (rule, case id, accepted body, rejected body); bodies are dicts or raw bytes.
CASES: list[tuple[str, str, Any, Any]] = [
    ("body_too_large", "600000 bytes", sized(MAX_BODY_BYTES), sized(MAX_BODY_BYTES + 1)),
    (
        "body_too_large",
        "images not counted",
        body(user(images=[raw(MAX_BODY_BYTES)])),
        body(user("a" * MAX_BODY_BYTES, images=[raw(8)])),
    ),
    ("malformed_json", "not json", body(), b'{"conversationState":'),
    ("malformed_json", "array", body(), b"[]"),
    ("malformed_field", "content not a string", body(user("Hi")), body(user(42))),
    (
        "malformed_field",
        "history entry with two roles",
        body(),
        body(history=[{**user(), **assistant()}]),
    ),
    (
        "missing_current_message",
        "no currentMessage",
        body(),
        {"conversationState": {"chatTriggerType": "MANUAL"}},
    ),
    ("missing_current_message", "no conversationState", body(), {"profileArn": "x"}),
    ("current_not_user", "assistant current", body(), body(assistant("Prefill"))),
    (
        "invalid_model_id",
        "unknown model",
        body(user(model="claude-opus-4.7")),
        body(user(model="claude-opus-9")),
    ),
    ("invalid_chat_trigger_type", "AUTO", body(trigger="INLINE_CHAT"), body(trigger="AUTO")),
    (
        "invalid_chat_trigger_type",
        "missing",
        body(trigger="DIAGNOSTIC"),
        without_trigger(),
    ),
    (
        "empty_assistant_content",
        "neither content nor toolUses",
        body(
            user("", tools=WEATHER, results=[result("t1")]),
            [user("Weather?", tools=WEATHER), assistant("", uses=[use("t1")])],
        ),
        body(history=[user(), assistant("")]),
    ),
    (
        "empty_assistant_content",
        "plain",
        body(history=[user(), assistant(" ")]),
        body(history=[user(), assistant("")]),
    ),
    ("empty_user_content", "no tool results", answered(result("t1")), body(user(""))),
    (
        "malformed_field",
        "tool result content not blocks",
        answered(result("t1")),
        answered({"toolUseId": "t1", "content": "Sunny"}),
    ),
    (
        "malformed_field",
        "tool result status",
        answered({**result("t1"), "status": "error"}),
        answered({**result("t1"), "status": "failed"}),
    ),
    (
        "thinking_tags_on_tool_results",
        "tags with results",
        body(user("<thinking_mode>enabled</thinking_mode>Weather?", tools=WEATHER)),
        body(
            user("<thinking_mode>enabled</thinking_mode>", tools=WEATHER, results=[result("t1")]),
            TOOL_TURN,
        ),
    ),
    (
        "cache_point_in_tools",
        "cachePoint element",
        body(user(tools=WEATHER)),
        body(user(tools=[*WEATHER, {"cachePoint": {"type": "default"}}])),
    ),
    (
        "invalid_cache_point",
        "unknown type",
        body(cached(user()), [cached(user()), cached(assistant())]),
        body(cached(user(), {"type": "ephemeral"})),
    ),
    (
        "cache_points_unsupported",
        "model lists no promptCaching",
        body(cached(user(model="claude-sonnet-4.5"))),
        body(cached(user(model="claude-haiku-4.5"))),
    ),
    (
        "too_many_cache_points",
        "five of four",
        body(cached(user()), [cached(user()), cached(assistant()), user("More"), assistant()]),
        body(
            cached(user()),
            [cached(user()), cached(assistant()), cached(user("More")), cached(assistant())],
        ),
    ),
    (
        "tool_name_too_long",
        "65 characters",
        body(user(tools=[tool("t" * 64)])),
        body(user(tools=[tool("t" * 65)])),
    ),
    (
        "invalid_tool_schema",
        "null required",
        body(user(tools=[tool(schema={"type": "object", "required": []})])),
        body(user(tools=[tool(schema={"type": "object", "required": None})])),
    ),
    (
        "invalid_tool_schema",
        "type list",
        body(
            user(
                tools=[tool(schema={"type": "object", "properties": {"type": {"type": "string"}}})]
            )
        ),
        body(
            user(
                tools=[
                    tool(
                        schema={
                            "type": "object",
                            "properties": {"x": {"type": ["string", "integer"]}},
                        }
                    )
                ]
            )
        ),
    ),
    (
        "tool_schema_not_object",
        "no type",
        body(user(tools=[tool(schema={"type": "object"})])),
        body(user(tools=[tool(schema={"properties": {"city": {"type": "string"}}})])),
    ),
    (
        "tool_schema_not_object",
        "string",
        body(user(tools=[tool(schema={"type": "object", "properties": {}})])),
        body(user(tools=[tool(schema={"type": "string"})])),
    ),
    *(
        (
            "tool_schema_not_object",
            f"top-level {combinator}",
            body(
                user(
                    tools=[tool(schema={"type": "object", "properties": {"a": union(combinator)}})]
                )
            ),
            body(user(tools=[tool(schema={"type": "object", **union(combinator)})])),
        )
        for combinator in ("oneOf", "anyOf", "allOf")
    ),
    (
        "tool_results_without_tools",
        "no tools",
        answered(result("t1")),
        answered(result("t1"), tools=[]),
    ),
    (
        "duplicate_tool_result",
        "same id twice",
        answered(result("t1")),
        answered(result("t1"), result("t1")),
    ),
    (
        "orphan_tool_result",
        "unknown id",
        answered(result("t1")),
        answered(result("t1"), result("t9")),
    ),
    (
        "orphan_tool_result",
        "no preceding assistant",
        body(user("Hi", tools=WEATHER)),
        body(user("", tools=WEATHER, results=[result("t1")])),
    ),
    (
        "unanswered_tool_use",
        "no results",
        answered(result("t1")),
        body(user("Next", tools=WEATHER), TOOL_TURN),
    ),
    (
        "undeclared_history_tool",
        "not declared",
        body(user("", tools=[tool("Get_Weather")], results=[result("t1")]), TOOL_TURN),
        body(user("", tools=[tool("read_file")], results=[result("t1")]), TOOL_TURN),
    ),
    (
        "tool_input_not_object",
        "input string",
        answered(result("t1")),
        body(
            user("", tools=WEATHER, results=[result("t1")]),
            [user("Weather?"), assistant("On it.", uses=[use("t1", arguments='{"city":"Paris"}')])],
        ),
    ),
    (
        "empty_input_key",
        "nested empty key",
        body(
            user("", tools=WEATHER, results=[result("t1")]),
            [user("Weather?"), assistant("On it.", uses=[use("t1", arguments={"a": {"b": 1}})])],
        ),
        body(
            user("", tools=WEATHER, results=[result("t1")]),
            [user("Weather?"), assistant("On it.", uses=[use("t1", arguments={"a": {"": 1}})])],
        ),
    ),
    (
        "misplaced_images",
        "in context",
        body(user(images=[PNG])),
        body(user(userInputMessageContext={"images": [PNG]})),
    ),
    (
        "misplaced_images",
        "in tool result",
        answered(result("t1")),
        answered({"toolUseId": "t1", "content": [{"image": PNG}], "status": "success"}),
    ),
    (
        "misplaced_images",
        "on assistant",
        body(history=[user(images=[PNG]), assistant()]),
        body(history=[user(), assistant(images=[PNG])]),
    ),
    (
        "invalid_image",
        "media type as format",
        body(user(images=[PNG])),
        body(user(images=[{**PNG, "format": "image/png"}])),
    ),
    (
        "images_unsupported",
        "text-only model",
        body(user(model="deepseek-3.2")),
        body(user(model="deepseek-3.2", images=[PNG])),
    ),
    (
        "image_too_large",
        "5 MiB of base64",
        body(user(images=[raw(MAX_IMAGE_BASE64)])),
        body(user(images=[raw(MAX_IMAGE_BASE64 + 4)])),
    ),
    (
        "image_too_wide",
        "8000 pixels",
        body(user(images=[png(8000, 1)])),
        body(user(images=[png(1, 8001)])),
    ),
    ("image_too_wide", "bomb header", body(user(images=[PNG])), body(user(images=[bomb(100_000)]))),
    (
        "many_images_too_wide",
        "20 images are not many, 21 are",
        body(user(images=[png(2000, 1)]), [user(images=[png(8000, 1)] * 19), assistant()]),
        body(user(images=[png(2001, 1)]), [user(images=[PNG] * 20), assistant()]),
    ),
    (
        "misplaced_documents",
        "in context",
        body(user(model=DOCS, documents=[PDF])),
        body(user(model=DOCS, userInputMessageContext={"documents": [PDF]})),
    ),
    (
        "misplaced_documents",
        "on assistant",
        body(user(model=DOCS), [user(model=DOCS, documents=[PDF]), assistant()]),
        body(user(model=DOCS), [user(model=DOCS), assistant(documents=[PDF])]),
    ),
    (
        "invalid_document",
        "media type as format",
        body(user(model=DOCS, documents=[PDF])),
        body(user(model=DOCS, documents=[{**PDF, "format": "application/pdf"}])),
    ),
    (
        "invalid_document",
        "no name",
        body(user(model=DOCS, documents=[{**PDF, "name": "x"}])),
        body(user(model=DOCS, documents=[{"format": "pdf", "source": PDF["source"]}])),
    ),
    (
        "invalid_document",
        "bytes not base64",
        body(user(model=DOCS, documents=[PDF])),
        body(user(model=DOCS, documents=[{**PDF, "source": {"bytes": "not base64!"}}])),
    ),
    (
        "documents_unsupported",
        "non-Claude model without DOCUMENT",
        body(user(documents=[PDF])),  # Claude without DOCUMENT listed: read all the same
        body(user(model="gpt-5.6-sol", documents=[PDF])),
    ),
    *(
        (
            "invalid_document_name",
            why,
            body(user(documents=[{**PDF, "name": good}])),
            body(user(documents=[{**PDF, "name": bad}])),
        )
        for why, good, bad in [
            ("with its extension", "report", "report.pdf"),
            ("empty", "r", ""),
            ("over 200 characters", "x" * 200, "x" * 201),
            ("a character outside the set", "Q3 (final) [v2]_a-b", "Q3: final"),
            ("not ASCII", "resume", "résumé"),
            ("a leading space", "a b", " a b"),
            ("a trailing space", "a b", "a b "),
            ("a double space", "a b", "a  b"),
        ]
    ),
    (
        "request_fields_without_schema",
        "4.5 rejects any",
        body(
            user(model="claude-opus-4.7"),
            additionalModelRequestFields={"output_config": {"effort": "high"}},
        ),
        body(
            user(model=SONNET), additionalModelRequestFields={"output_config": {"effort": "high"}}
        ),
    ),
    (
        "unsupported_request_fields",
        "gpt rejects output_config",
        body(
            user(model="gpt-5.6-sol"), additionalModelRequestFields={"reasoning": {"effort": "max"}}
        ),
        body(
            user(model="gpt-5.6-sol"),
            additionalModelRequestFields={"output_config": {"effort": "max"}},
        ),
    ),
    (
        "unsupported_request_fields",
        "unknown effort",
        body(
            user(model="claude-sonnet-4.6"),
            additionalModelRequestFields={"thinking": {"type": "adaptive"}},
        ),
        body(
            user(model="claude-sonnet-4.6"),
            additionalModelRequestFields={"output_config": {"effort": "extreme"}},
        ),
    ),
    ("flat_reasoning_content", "flat", reasoning(SIGNED), reasoning(SIGNED["reasoningText"])),
    (
        "reasoning_signature_invalid",
        "wrong signature",
        reasoning({"redactedContent": "b3BhcXVl"}),
        reasoning(
            {
                "reasoningText": {
                    "text": "Let me see!",
                    "signature": SIGNED["reasoningText"]["signature"],
                }
            }
        ),
    ),
    (
        "reasoning_signature_invalid",
        "made under another tool list",
        body(
            user("Go on", tools=WEATHER),
            [user("Think"), assistant("Done.", reasoningContent=SIGNED_WEATHER)],
        ),
        reasoning(SIGNED_WEATHER),
    ),
    (
        "reasoning_signature_invalid",
        "unsigned",
        reasoning(SIGNED),
        reasoning({"reasoningText": {"text": "Let me see."}}),
    ),
    (
        "context_too_long",
        "tiny window",
        body(user("a" * 100, model="tiny")),
        body(user("a" * 1000, model="tiny")),
    ),
]


def as_bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else encode(value)


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [pytest.param(rule, good, bad, id=f"{rule}: {case}") for rule, case, good, bad in CASES],
)
def test_rule(rule: str, good: Any, bad: Any) -> None:
    assert validate_chat(as_bytes(good), MODELS) is None
    rejection = validate_chat(as_bytes(bad), MODELS)
    assert rejection is not None
    assert rejection.rule == rule
    expected = RULES[rule]
    if rule in WORDED:  # the message names what broke; `test_request_fields_are_*` check it
        assert rejection.body["message"].startswith(expected.body["message"])
        assert rejection.body["reason"] in (expected.body["reason"], None)
    else:
        assert rejection.body == expected.body
    assert (rejection.status, rejection.error_type) == (expected.status, expected.error_type)


def test_every_rule_has_a_case() -> None:
    assert {rule for rule, *_ in CASES} == set(RULES)


def test_malformed_requests_get_the_services_unhelpful_answer() -> None:
    rejection = validate_chat(encode(body(trigger="AUTO")), MODELS)
    assert rejection is not None
    assert rejection.status == 400
    assert json.dumps(rejection.body) == '{"message": "Improperly formed request.", "reason": null}'
    assert rejection.error_type == "ValidationException"


def test_special_reasons() -> None:
    reasons = {name: rule.body.get("reason") for name, rule in RULES.items()}
    assert reasons["invalid_model_id"] == "INVALID_MODEL_ID"
    assert reasons["context_too_long"] == "CONTENT_LENGTH_EXCEEDS_THRESHOLD"
    assert RULES["context_too_long"].body["message"] == "Input is too long."
    assert reasons["flat_reasoning_content"] == "REQUEST_BODY_INVALID"
    assert reasons["reasoning_signature_invalid"] == "THINKING_SIGNATURE_INVALID"
    assert reasons["tool_schema_not_object"] == "TOOL_SCHEMA_INVALID"
    assert reasons["unsupported_request_fields"] == "REQUEST_BODY_INVALID"
    assert reasons["request_fields_without_schema"] == "REQUEST_BODY_INVALID"
    assert RULES["reasoning_signature_invalid"].body["message"] == (
        "Invalid `signature` in `thinking` block"
    )


WORDED = {"unsupported_request_fields", "reasoning_signature_invalid"}
OPUS_55 = "claude-opus-5.5"


@pytest.mark.parametrize(
    ("model", "fields", "message"),
    [
        (
            OPUS_55,
            {"max_output_tokens": 1000},
            "property 'max_output_tokens' is not defined in the schema and the schema does not "
            "allow additional properties",
        ),
        (OPUS_55, {"max_tokens": 128_001}, "must have a maximum value of 128000.0"),
        (OPUS_55, {"max_tokens": 1_000}, "must have a minimum value of 1024.0"),
        ("claude-opus-4.6", {"max_tokens": 64_001}, "must have a maximum value of 64000.0"),
        (
            OPUS_55,
            {"thinking": {"type": "disabled"}},
            'does not have a value in the enumeration ["adaptive"]',
        ),
        (
            "claude-sonnet-4.6",
            {"output_config": {"effort": "xhigh"}},
            'does not have a value in the enumeration ["low", "medium", "high", "max"]',
        ),
        (
            "gpt-5.6-sol",
            {"max_tokens": 2_000},
            "property 'max_tokens' is not defined in the schema and the schema does not "
            "allow additional properties",
        ),
        (
            "gpt-5.6-sol",
            {"output_config": {"effort": "max"}},
            "property 'output_config' is not defined in the schema and the schema does not "
            "allow additional properties",
        ),
        (OPUS_55, {"thinking": {"display": "omitted"}}, "required property 'type' not found"),
    ],
)
def test_request_fields_are_refused_in_kiros_words(
    model: str, fields: dict[str, Any], message: str
) -> None:
    """docs/KIRO-PROTOCOL.md §2.6: the schema is enforced strictly, and the 400 names why."""
    rejection = validate_chat(
        encode(body(user(model=model), additionalModelRequestFields=fields)), MODELS
    )
    assert rejection is not None
    assert rejection.rule == "unsupported_request_fields"
    assert rejection.body == {
        "message": f"Invalid additionalModelRequestFields: {message}",
        "reason": "REQUEST_BODY_INVALID",
    }


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (
            OPUS_55,
            {
                "output_config": {"effort": "max"},
                "thinking": {"type": "adaptive"},
                "max_tokens": 128_000,
            },
        ),
        ("claude-sonnet-5.5", {"thinking": {"type": "between_tools"}, "max_tokens": 1024}),
        ("claude-opus-4.7", {"thinking": {"type": "disabled"}}),
        ("gpt-5.6-sol", {"reasoning": {"effort": "xhigh"}}),
    ],
)
def test_request_fields_the_schema_allows_are_accepted(model: str, fields: dict[str, Any]) -> None:
    assert (
        validate_chat(encode(body(user(model=model), additionalModelRequestFields=fields)), MODELS)
        is None
    )


def test_a_signature_from_another_tool_list_is_refused_without_a_reason() -> None:
    """docs/KIRO-PROTOCOL.md §2.6: Kiro sometimes leaves the reason out; the fake does for a
    signature it made itself under another tool list, and names it for a forged one."""
    moved = validate_chat(encode(reasoning(SIGNED_WEATHER)), MODELS)
    forged = validate_chat(
        encode(reasoning({"reasoningText": {"text": "Let me see.", "signature": "AAAA"}})), MODELS
    )
    assert moved is not None
    assert forged is not None
    assert moved.body == {"message": "Invalid `signature` in `thinking` block", "reason": None}
    assert forged.body["reason"] == "THINKING_SIGNATURE_INVALID"


def test_token_estimate_counts_string_characters_without_images() -> None:
    state = {"content": "a" * 39, "images": [{"source": {"bytes": "x" * 10_000}}]}
    assert estimate_tokens(state) == 12  # (7 + 39) / 4, rounded up


def test_kiro_cli_shapes_are_accepted() -> None:
    """kiro-cli sends empty content on tool-result turns and origin KIRO_CLI."""
    current = user("", tools=WEATHER, results=[result("t1")], origin="KIRO_CLI")
    assert validate_chat(encode(body(current, TOOL_TURN)), MODELS) is None


def mutations(value: Any, rng: random.Random) -> Any:
    """`value` with one randomly chosen node replaced by a random JSON value."""
    replacements: list[Any] = [None, 0, 1.5, "", "x", True, [], {}, [None], {"": None}, ["x"]]
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        return {**value, key: mutations(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.8:
        index = rng.randrange(len(value))
        return [*value[:index], mutations(value[index], rng), *value[index + 1 :]]
    return rng.choice(replacements)


def test_the_validator_never_crashes() -> None:
    """Whatever the JSON, the answer is a verdict, never an exception (it runs in a handler),
    and whatever passes can be answered."""
    rng = random.Random(20260801)
    seeds = [good for _, _, good, _ in CASES if isinstance(good, dict)]
    accepted = 0
    for _ in range(3000):
        mutated = mutations(rng.choice(seeds), rng)
        if validate_chat(encode(mutated), MODELS) is None:
            accepted += 1
            model_id = mutated["conversationState"]["currentMessage"]["userInputMessage"]["modelId"]
            request = ChatRequest.parse(mutated, MODELS[model_id])
            plan_stream(Script(), request, Latency())
    assert accepted > 100


@pytest.mark.parametrize(
    "history",
    [
        [assistant(), user(), assistant()],  # opens with an assistant entry
        [user(), user("More"), assistant()],  # two adjacent user entries
        [user(), assistant(), assistant("More")],  # two adjacent assistant entries
        [user()],  # ends with a user entry (a system prompt alone)
    ],
)
def test_history_in_any_order_of_roles_is_accepted(history: list[dict[str, Any]]) -> None:
    """Kiro accepted each of these in 2026 probes (docs/KIRO-PROTOCOL.md §2.3, rules 2-4)."""
    assert validate_chat(as_bytes(body(history=history)), MODELS) is None
