"""Each protocol's usage fields for Kiro's cache counts, and for their absence (never simulated)."""

from __future__ import annotations

import json

import pytest

from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    MessageStart,
    MessageStop,
    StopReason,
    TextDelta,
    Usage,
)
from kirod.protocols.anthropic import MessagesStreamEncoder, ThinkingSigner
from kirod.protocols.chat.encode import usage_json as chat_usage
from kirod.protocols.responses.response import usage_json as responses_usage

CACHED = Usage(9100, 7, credits=0.5, cache_read_tokens=8000, cache_write_tokens=1000)
UNREPORTED = Usage(9100, 7, credits=0.5)


def anthropic_usage(usage: Usage) -> tuple[dict[str, int], dict[str, int]]:
    """`message_start` and `message_delta` usage of a short stream ending with `usage`."""
    encoder = MessagesStreamEncoder(message_id="1", model="m", signer=ThinkingSigner(b"s" * 32))
    events = [
        MessageStart("1", "m", 9000),
        BlockStart(0, BlockKind.TEXT),
        TextDelta(0, "Hi"),
        BlockStop(0),
        usage,
        MessageStop(StopReason.END_TURN),
    ]
    frames = [frame for event in events for frame in encoder.feed(event)]
    data = [json.loads(f.split(b"data: ", 1)[1]) for f in frames]
    by_type = {item["type"]: item for item in data}
    return by_type["message_start"]["message"]["usage"], by_type["message_delta"]["usage"]


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (CACHED, {"input_tokens": 100, "read": 8000, "write": 1000}),
        (UNREPORTED, {"input_tokens": 9100, "read": 0, "write": 0}),
    ],
)
def test_anthropic_splits_the_prompt_three_ways(usage: Usage, expected: dict[str, int]) -> None:
    start, delta = anthropic_usage(usage)
    assert start["cache_read_input_tokens"] == start["cache_creation_input_tokens"] == 0
    assert delta == {
        "input_tokens": expected["input_tokens"],
        "output_tokens": 7,
        "cache_read_input_tokens": expected["read"],
        "cache_creation_input_tokens": expected["write"],
    }
    whole = sum(delta[k] for k in delta if k != "output_tokens")
    assert whole == 9100  # what a context meter reads back is the whole prompt


def test_responses_counts_the_cached_part_inside_input_tokens() -> None:
    cached = responses_usage(CACHED, "")
    assert cached["input_tokens"] == 9100
    assert cached["input_tokens_details"] == {"cached_tokens": 8000, "cache_write_tokens": 1000}
    assert responses_usage(UNREPORTED, "")["input_tokens_details"]["cached_tokens"] == 0


def test_chat_reports_cached_prompt_tokens() -> None:
    assert chat_usage(CACHED, "")["prompt_tokens"] == 9100
    assert chat_usage(CACHED, "")["prompt_tokens_details"] == {"cached_tokens": 8000}
    assert chat_usage(UNREPORTED, "")["prompt_tokens_details"] == {"cached_tokens": 0}


def test_credits_never_enter_the_usage_fields() -> None:
    for usage in (chat_usage(CACHED, ""), responses_usage(CACHED, "")):
        assert "credits" not in json.dumps(usage)
    assert all("credit" not in key for part in anthropic_usage(CACHED) for key in part)
