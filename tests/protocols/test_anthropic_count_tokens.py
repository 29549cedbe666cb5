"""count_tokens and `message_start.usage.input_tokens`: `estimate_request_tokens` on decoded bodies.

Reference: the token-counting guide's examples, whose answers Anthropic's own count_tokens
endpoint produced (claude-opus-4-20250514; docs.claude.com "Token counting"). Measured error of
the estimate on them:

    example                                   Anthropic   kirod    error
    system + "Hello, Claude"                         14      14    +0.0 %
    one tool (get_weather) + a question             403     425    +5.5 %
    extended thinking, three turns                   88      85    -3.4 %
    an image + "Describe this image"               1551    1610    +3.8 %

The per-request, per-message and reasoning overheads were chosen on the first and third examples;
the tool and image examples check the method independently (Anthropic's published 346-token tool
prompt and its image formula). The text estimate itself is within ±15 % of Anthropic's published
tokenizer (tests/canonical/test_tokens.py). Newer tokenizers (Opus 4.7 and later) count about 30 %
more on the same text; no local estimate can see that.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

import pytest

from kirod.canonical.request import ImageBlock
from kirod.canonical.token_count import (
    IMAGE_MAX_TOKENS,
    TOOLS_PROMPT_TOKENS,
    estimate_image_tokens,
    estimate_request_tokens,
    estimate_text_tokens,
)
from kirod.protocols.anthropic import ThinkingSigner, decode_count_tokens

SIGNER = ThinkingSigner(b"count-test-secret-0123456789")
MODEL = "claude-opus-4-7"


def count(body: dict[str, Any]) -> int:
    return estimate_request_tokens(decode_count_tokens(body, {}, "req", SIGNER))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">I4sII5B", 13, b"IHDR", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + ihdr + b"\x00" * 16


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00" * 8


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    exif = b"\xff\xe1" + struct.pack(">H", 2 + 3000) + b"\x00" * 3000
    sof = b"\xff\xc2" + struct.pack(">HBHHB", 11, 8, height, width, 3) + b"\x00" * 3
    return b"\xff\xd8" + app0 + exif + sof + b"\xff\xda"


def webp(chunk: bytes, payload: bytes) -> bytes:
    body = chunk + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def webp_vp8x(width: int, height: int) -> bytes:
    size = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return webp(b"VP8X", b"\x00" * 4 + size)


def webp_vp8(width: int, height: int) -> bytes:
    return webp(b"VP8 ", b"\x00\x00\x00\x9d\x01\x2a" + struct.pack("<HH", width, height))


def webp_vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | (height - 1) << 14
    return webp(b"VP8L", b"\x2f" + struct.pack("<I", bits))


WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Get the current weather in a given location",
    "input_schema": {
        "type": "object",
        "properties": {
            "location": {
                "type": "string",
                "description": "The city and state, e.g. San Francisco, CA",
            }
        },
        "required": ["location"],
    },
}
# A photo larger than the resize limit: Anthropic scales it down to its ~1 600-token maximum.
PHOTO = b64(png(2560, 1920))

ANTHROPIC_EXAMPLES = [
    (
        "basic",
        {
            "model": MODEL,
            "system": "You are a scientist",
            "messages": [{"role": "user", "content": "Hello, Claude"}],
        },
        14,
    ),
    (
        "tools",
        {
            "model": MODEL,
            "tools": [WEATHER_TOOL],
            "messages": [{"role": "user", "content": "What's the weather like in San Francisco?"}],
        },
        403,
    ),
    (
        "thinking",
        {
            "model": MODEL,
            "thinking": {"type": "enabled", "budget_tokens": 16000},
            "messages": [
                {
                    "role": "user",
                    "content": "Are there an infinite number of prime numbers "
                    "such that n mod 4 == 3?",
                },
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "thinking",
                            "thinking": "This is a nice number theory question. "
                            "Let's think about it step by step...",
                            "signature": "EuYBCkQYAiJAgCs1le6/Pol5Z4/JMomVOouGrWdhYNsH3ukzUECbB6iW",
                        },
                        {
                            "type": "text",
                            "text": "Yes, there are infinitely many prime numbers p such that "
                            "p mod 4 = 3...",
                        },
                    ],
                },
                {"role": "user", "content": "Can you write a formal proof?"},
            ],
        },
        88,
    ),
    (
        "image",
        {
            "model": MODEL,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PHOTO},
                        },
                        {"type": "text", "text": "Describe this image"},
                    ],
                }
            ],
        },
        1551,
    ),
]


@pytest.mark.parametrize(
    ("body", "reference"),
    [example[1:] for example in ANTHROPIC_EXAMPLES],
    ids=[example[0] for example in ANTHROPIC_EXAMPLES],
)
def test_within_six_percent_of_anthropics_documented_counts(
    body: dict[str, Any], reference: int
) -> None:
    assert abs(count(body) - reference) <= 0.06 * reference


def test_measured_values_are_the_documented_ones() -> None:
    """The table in the module docstring, so it cannot drift from the code."""
    assert [count(body) for _, body, _ in ANTHROPIC_EXAMPLES] == [14, 425, 85, 1610]


def test_only_signed_reasoning_counts() -> None:
    """Foreign thinking is dropped on decode, so it costs nothing; kirod's counts its text."""
    thinking = "Let me think about it step by step, carefully, for a while. " * 20
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": thinking, "signature": "foreign"},
                    {"type": "text", "text": "a"},
                ],
            },
            {"role": "user", "content": "q2"},
        ],
    }
    unsigned_upstream = count(body)
    body["messages"][1]["content"][0]["signature"] = SIGNER.sign(thinking, None)
    assert count(body) == unsigned_upstream  # prompt-tag thinking is never replayed upstream
    body["messages"][1]["content"][0]["signature"] = SIGNER.sign(thinking, "EqQB")
    assert count(body) == unsigned_upstream + estimate_text_tokens(thinking)


def test_tools_add_the_tool_prompt_once_and_each_definition() -> None:
    base = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    one = count({**base, "tools": [WEATHER_TOOL]})
    two = count({**base, "tools": [WEATHER_TOOL, {**WEATHER_TOOL, "name": "get_forecast"}]})
    assert one - count(base) > TOOLS_PROMPT_TOKENS
    assert two - one < one - count(base) - TOOLS_PROMPT_TOKENS + 5


def test_tool_traffic_counts_inputs_and_results() -> None:
    def body(result: str) -> dict[str, Any]:
        return {
            "model": MODEL,
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "t", "name": "Read", "input": {"p": "a.txt"}}
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t", "content": result}],
                },
            ],
        }

    long_result = "line of file content\n" * 100
    assert count(body(long_result)) - count(body("")) == estimate_text_tokens(long_result)


@pytest.mark.parametrize(
    ("data", "tokens"),
    [
        (png(200, 200), 54),  # ceil(200 * 200 / 750)
        (gif(1000, 1000), 1334),  # Anthropic's own worked example
        (jpeg(3000, 500), 546),  # long edge scaled to 1 568: 1568 x 261
        (webp_vp8x(1092, 1092), 1590),  # the largest square kept unscaled
        (webp_vp8(640, 480), 410),
        (webp_vp8l(100, 50), 7),
        (png(4000, 3000), IMAGE_MAX_TOKENS),
        (b"not an image header", IMAGE_MAX_TOKENS),
        (png(0, 10), IMAGE_MAX_TOKENS),
        (b"\xff\xd8\xff\xe0", IMAGE_MAX_TOKENS),  # truncated JPEG
    ],
    ids=[
        "png",
        "gif",
        "jpeg",
        "webp-vp8x",
        "webp-vp8",
        "webp-vp8l",
        "huge",
        "unknown",
        "zero",
        "cut",
    ],
)
def test_image_tokens_from_the_header(data: bytes, tokens: int) -> None:
    assert estimate_image_tokens(ImageBlock("image/png", b64(data))) == tokens


def test_image_data_that_is_not_base64_costs_the_maximum() -> None:
    assert estimate_image_tokens(ImageBlock("image/png", "@@@@")) == IMAGE_MAX_TOKENS
