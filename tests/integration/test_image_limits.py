"""Images as Kiro limits them, end to end: the official SDKs → the real daemon → the fake Kiro,
which refuses what the service refuses (docs/UPSTREAM.md §6). The images are made with Pillow."""

from __future__ import annotations

import base64
import io
import json
import random
import struct
import time
import zlib
from typing import Any

import anthropic
import openai
import pytest
from PIL import Image

from kirod.testing.fake_kiro import FakeKiro, Reply

MODEL = "claude-sonnet-4-6"
MAX_IMAGE_BASE64 = 5 * 1024 * 1024


def png(picture: Image.Image) -> str:
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


def noise(side: int) -> str:
    """A PNG of random pixels, as large as its 3 bytes a pixel."""
    pixels = random.Random(side).randbytes(side * side * 3)
    return png(Image.frombytes("RGB", (side, side), pixels))


def bomb(side: int) -> str:
    """A PNG whose header claims `side` x `side` pixels, with next to no data behind it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
    data = chunk(b"IDAT", zlib.compress(b"\0" * 1024))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + header + data + chunk(b"IEND", b"")).decode()


def block(data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def size(data: str) -> tuple[int, int]:
    with Image.open(io.BytesIO(base64.b64decode(data))) as picture:
        return picture.size


def chats(service: FakeKiro) -> list[dict[str, Any]]:
    """The chat bodies the fake answered (a rejected one fails the test where it is sent)."""
    bodies = []
    for record in service.requests("chat"):
        assert record.rejected_by is None, record.rejected_by
        bodies.append(json.loads(record.body))
    return bodies


def sent_images(body: dict[str, Any]) -> list[str]:
    state = body["conversationState"]
    entries = [*state.get("history", []), state["currentMessage"]]
    return [
        image["source"]["bytes"]
        for entry in entries
        for image in entry.get("userInputMessage", {}).get("images", [])
    ]


def test_a_6_mb_png_is_resized_and_answered(claude: anthropic.Anthropic, service: FakeKiro) -> None:
    photo = noise(1_450)
    assert len(base64.b64decode(photo)) > 6_000_000
    service.enqueue(Reply(text="Static."))
    message = claude.messages.create(
        model=MODEL,
        max_tokens=100,
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "what is it?"}, block(photo)]}
        ],
    )
    assert message.content[0].text == "Static."  # type: ignore[union-attr]
    (body,) = chats(service)
    (sent,) = sent_images(body)
    assert len(sent) <= MAX_IMAGE_BASE64
    width, height = size(sent)
    assert width == height < 1_450


def test_25_wide_images_are_downsized_and_the_next_turn_works(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    """More than 20 images: each side at most 2,000 pixels, the same bytes on every turn."""
    shots = [png(Image.new("RGB", (2_500, 120), (i * 10, 80, 160))) for i in range(25)]
    first: list[Any] = [
        {"role": "user", "content": [*map(block, shots), {"type": "text", "text": "compare"}]}
    ]
    service.enqueue(Reply(text="They differ in red."), Reply(text="The first."))
    answer = claude.messages.create(model=MODEL, max_tokens=100, messages=first)
    follow_up = [
        *first,
        {"role": "assistant", "content": answer.content[0].text},  # type: ignore[union-attr]
        {"role": "user", "content": "which is darkest?"},
    ]
    second = claude.messages.create(model=MODEL, max_tokens=100, messages=follow_up)
    assert second.content[0].text == "The first."  # type: ignore[union-attr]
    turn_1, turn_2 = (sent_images(body) for body in chats(service))
    assert len(turn_1) == 25
    assert {size(image) for image in turn_1} == {(2_000, 96)}
    assert turn_2 == turn_1


def test_an_undecodable_oversized_image_is_a_400_naming_it(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    blob = base64.b64encode(random.Random(1).randbytes(4_500_000)).decode()
    small = png(Image.new("RGB", (8, 8)))
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": [block(small), block(blob)]}],
        )
    error = caught.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error"
    assert error["message"] == (
        "image 2 of the request cannot be decoded; Kiro takes images of at most 5,242,880 "
        "bytes of base64 and 8,000 pixels a side"
    )
    assert service.requests("chat") == []


def test_a_decompression_bomb_is_refused_quickly(
    claude: anthropic.Anthropic, gpt: openai.OpenAI, service: FakeKiro
) -> None:
    started = time.monotonic()
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": [block(bomb(200_000))]}],
        )
    assert time.monotonic() - started < 2.0
    assert "image 1 of the request has 200000x200000 pixels" in caught.value.message
    with pytest.raises(openai.BadRequestError) as refused:
        gpt.responses.create(
            model=MODEL,
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "look"},
                        {
                            "type": "input_image",
                            "image_url": f"data:image/png;base64,{bomb(9_000)}",
                        },
                    ],
                }
            ],
        )
    assert "image 1 of the request has 9000x9000 pixels" in refused.value.message
    assert service.requests("chat") == []


def test_an_image_inside_a_tool_result_reaches_kiro(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    screenshot = png(Image.new("RGB", (9_000, 40), (200, 30, 30)))
    service.enqueue(Reply(text="A red bar."))
    claude.messages.create(
        model=MODEL,
        max_tokens=100,
        tools=[
            {"name": "screenshot", "description": "take one", "input_schema": {"type": "object"}}
        ],
        messages=[
            {"role": "user", "content": "what is on screen?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "tooluse_1", "name": "screenshot", "input": {}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "tooluse_1",
                        "content": [{"type": "text", "text": "taken"}, block(screenshot)],
                    }
                ],
            },
        ],
    )
    (body,) = chats(service)
    current = body["conversationState"]["currentMessage"]["userInputMessage"]
    (sent,) = sent_images(body)
    assert size(sent) == (8_000, 36)  # one side over Kiro's 8,000: resized, not dropped
    assert current["userInputMessageContext"]["toolResults"][0]["content"] == [
        {"text": "taken\n\n(image attached to this message)"}
    ]
