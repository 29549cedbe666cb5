"""Prompt caching, honestly: Kiro's own token counts, a byte-stable payload prefix, and the
opt-in message-level cache points (docs/UPSTREAM.md §1)."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from kirod.canonical.catalog import catalog_from_list_available_models
from kirod.canonical.events import Usage
from kirod.canonical.request import CanonicalRequest
from kirod.canonical.resolution import resolve_model
from kirod.protocols.anthropic.decode import decode_messages
from kirod.protocols.anthropic.signatures import ThinkingSigner
from kirod.testing.fake_kiro.catalog import DEFAULT_MODELS
from kirod.testing.fake_kiro.eventstream import encode_event
from kirod.testing.fake_kiro.validate import validate_chat
from kirod.upstream.frames import FrameDecoder
from kirod.upstream.payload import BuiltPayload, build_payload
from kirod.upstream.translate import translate_all
from tests.support import captures

FAKE_MODELS = {model.model_id: model for model in DEFAULT_MODELS}
CATALOG = catalog_from_list_available_models([{"models": [m.to_json() for m in DEFAULT_MODELS]}])
SONNET = resolve_model("claude-sonnet-4-5", CATALOG)  # promptCaching: 4 checkpoints
HAIKU = resolve_model("claude-haiku-4-5", CATALOG)  # no promptCaching block
SIGNER = ThinkingSigner(b"k" * 32)
CONVERSATION = "6f1c1c3e-0d8c-4c4a-9a43-3f0f1f1e2a10"

# -- usage from metadataEvent.tokenUsage


def usage_of(*payloads: tuple[str, dict[str, Any]]) -> Usage:
    wire = encode_event("assistantResponseEvent", {"content": "Hi there"})
    wire += b"".join(encode_event(name, payload) for name, payload in payloads)
    decoder = FrameDecoder()
    events = translate_all(
        decoder.feed(wire),
        message_id="m",
        model="claude-sonnet-4.5",
        context_window=200_000,
        input_tokens_estimate=1234,
    )
    (usage,) = [event for event in events if isinstance(event, Usage)]
    return usage


TOKEN_USAGE = {
    "uncachedInputTokens": 100,
    "outputTokens": 7,
    "totalTokens": 9107,
    "cacheReadInputTokens": 8000,
    "cacheWriteInputTokens": 1000,
}


def test_token_usage_wins_over_the_estimates_whatever_the_frame_order() -> None:
    metering = ("meteringEvent", {"unit": "credit", "usage": 0.5})
    context = ("contextUsageEvent", {"contextUsagePercentage": 50.0})
    metadata = ("metadataEvent", {"tokenUsage": TOKEN_USAGE})
    expected = Usage(9100, 7, credits=0.5, cache_read_tokens=8000, cache_write_tokens=1000)
    assert usage_of(metadata, metering, context) == expected
    assert usage_of(metering, context, metadata) == expected


def test_without_token_usage_the_cache_counts_are_zero() -> None:
    usage = usage_of(("metadataEvent", {"stopReason": "END_TURN"}))
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (1234, 0, 0)


@pytest.mark.parametrize(
    ("token_usage", "expected"),
    [
        ({"uncachedInputTokens": 50}, (50, 0, 0)),  # no cache members, no output count
        ({"uncachedInputTokens": 50, "cacheReadInputTokens": -3}, (50, 0, 0)),
        ({"outputTokens": 9}, (1234, 0, 0)),  # no uncached count: not a usable report
        ("100", (1234, 0, 0)),
    ],
)
def test_partial_or_malformed_token_usage(
    token_usage: object, expected: tuple[int, int, int]
) -> None:
    usage = usage_of(("metadataEvent", {"tokenUsage": token_usage}))
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == expected


# -- a byte-stable prefix


def claude_code_turn(version: str, messages: list[dict[str, Any]]) -> CanonicalRequest:
    """The pinned Claude Code's captured first request (system prompt, tools, fields) carrying
    `messages`, its billing header naming client `version` (it changes with every release)."""
    body = captures.pinned_request().body
    billing = body["system"][0]
    billing["text"], found = re.subn(r"cc_version=[^;]*", f"cc_version={version}", billing["text"])
    assert found == 1
    body["messages"] = messages
    return decode_messages(body, {}, request_id="r", signer=SIGNER)


def build(request: CanonicalRequest, **options: Any) -> BuiltPayload:
    payload = build_payload(
        request, SONNET, conversation_id=CONVERSATION, profile_arn=None, **options
    )
    assert validate_chat(payload.encoded, FAKE_MODELS) is None
    return payload


def said(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_two_turns_share_the_bytes_of_the_first_turns_history() -> None:
    first_ask = [
        {
            **said("Read notes.md"),
            "content": [
                {"type": "text", "text": "Read notes.md", "cache_control": {"type": "ephemeral"}}
            ],
        }
    ]
    first = build(claude_code_turn("2.1.332.9a2", first_ask))
    reply = {"role": "assistant", "content": [{"type": "text", "text": "It says hello."}]}
    second = build(claude_code_turn("2.1.333.1b7", [*first_ask, reply, said("Thanks")]))

    cut = first.encoded.index(b'],"currentMessage":')
    assert second.encoded[:cut] == first.encoded[:cut]
    assert second.encoded[cut : cut + 1] == b","  # the second turn's history goes on from there
    assert b"billing" not in first.encoded
    assert b"cache_control" not in first.encoded
    assert b"cachePoint" not in first.encoded + second.encoded
    tools = [
        json.dumps(
            p.body["conversationState"]["currentMessage"]["userInputMessage"][
                "userInputMessageContext"
            ]["tools"]
        )
        for p in (first, second)
    ]
    assert tools[0] == tools[1]  # same order, same cleaned schemas


def test_the_same_request_builds_the_same_bytes() -> None:
    request = claude_code_turn("2.1.332", [said("hi")])
    assert build(request).encoded == build(request).encoded


# -- cache points (the prompt_cache_points experiment)


def cache_points(payload: BuiltPayload) -> list[int]:
    entries = payload.body["conversationState"].get("history", [])
    return [
        index for index, entry in enumerate(entries) if "cachePoint" in next(iter(entry.values()))
    ]


def conversation() -> CanonicalRequest:
    reply = {"role": "assistant", "content": "Hello."}
    return claude_code_turn("2.1.332", [said("hi"), reply, said("more")])


def test_cache_points_mark_the_system_entry_and_the_last_history_entry() -> None:
    payload = build(conversation(), cache_points=True)
    assert cache_points(payload) == [0, 2]  # system, "hi", "Hello." (no acknowledgement entry)
    entries = payload.body["conversationState"]["history"]
    assert entries[2]["assistantResponseMessage"]["cachePoint"] == {"type": "default"}
    assert "cachePoint" not in payload.body["conversationState"]["currentMessage"]


def test_cache_points_stay_within_the_models_budget_and_catalog() -> None:
    one = dataclasses.replace(SONNET, cache_checkpoints=1)
    payload = build_payload(
        conversation(), one, conversation_id=CONVERSATION, profile_arn=None, cache_points=True
    )
    assert cache_points(payload) == [0]
    haiku = build_payload(
        conversation(), HAIKU, conversation_id=CONVERSATION, profile_arn=None, cache_points=True
    )
    assert cache_points(haiku) == []
    assert cache_points(build(conversation())) == []  # off by default


def test_the_catalog_reads_prompt_caching() -> None:
    assert (SONNET.cache_checkpoints, HAIKU.cache_checkpoints) == (4, 0)
    listing = {
        "modelId": "claude-opus-5",
        "promptCaching": {"supportsPromptCaching": False, "maximumCacheCheckpointsPerRequest": 4},
    }
    (opus,) = catalog_from_list_available_models([{"models": [listing]}])
    assert opus.cache_checkpoints == 0
