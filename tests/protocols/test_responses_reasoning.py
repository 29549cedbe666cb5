"""ReasoningBox: sealed reasoning opens only under the key that sealed it, unaltered."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest

from kirod.canonical.request import RedactedThinkingBlock, ThinkingBlock
from kirod.protocols.responses.reasoning import PREFIX, ReasoningBox

KEY = bytes(range(32))


@pytest.fixture
def box() -> ReasoningBox:
    return ReasoningBox(KEY)


def test_seal_open_round_trip(box: ReasoningBox) -> None:
    token = box.seal("Let me think… 考え中", "sig-abc")
    assert token.startswith(PREFIX)
    assert "=" not in token
    assert box.open(token) == ("Let me think… 考え中", "sig-abc")
    assert box.open_block(token) == ThinkingBlock("Let me think… 考え中", "sig-abc")


def test_unsigned_thinking_round_trips(box: ReasoningBox) -> None:
    assert box.open(box.seal("plain", None)) == ("plain", None)


def test_redacted_round_trip(box: ReasoningBox) -> None:
    token = box.seal_redacted("opaque-blob")
    assert box.open_block(token) == RedactedThinkingBlock("opaque-blob")
    assert box.open(token) is None


def test_tokens_are_randomized_and_hide_the_text(box: ReasoningBox) -> None:
    first, second = box.seal("secret plan", "s"), box.seal("secret plan", "s")
    assert first != second
    assert b"secret" not in base64.urlsafe_b64decode(first[len(PREFIX) :] + "==")


def test_foreign_key_does_not_open(box: ReasoningBox) -> None:
    other = ReasoningBox(bytes(32))
    assert other.open(box.seal("text", "sig")) is None


def _flip(token: str, position: int) -> str:
    """The token with one bit of its raw bytes flipped at `position` (negative from the end)."""
    raw = bytearray(base64.urlsafe_b64decode(token[len(PREFIX) :] + "=="))
    raw[position] ^= 0x01
    return PREFIX + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda t: _flip(t, 0), id="nonce"),
        pytest.param(lambda t: _flip(t, 20), id="ciphertext"),
        pytest.param(lambda t: _flip(t, -1), id="tag"),
        pytest.param(lambda t: t[:-4], id="truncated"),
        pytest.param(lambda t: t[: len(PREFIX) + 10], id="shorter-than-tag"),
        pytest.param(lambda t: "krs2_" + t[len(PREFIX) :], id="other-version"),
        pytest.param(lambda t: t + "!", id="non-alphabet"),
        pytest.param(lambda t: t + "é", id="non-ascii"),
        pytest.param(lambda t: PREFIX, id="empty"),
    ],
)
def test_altered_tokens_do_not_open(box: ReasoningBox, mutate: Callable[[str], str]) -> None:
    token = box.seal("text", "sig")
    altered = mutate(token)
    assert altered != token
    assert box.open_block(altered) is None


@pytest.mark.parametrize(
    "token",
    ["", "gAAAAABnOpenAIStyleBlob==", "not a token", PREFIX + "%%%%"],
)
def test_foreign_strings_do_not_open(box: ReasoningBox, token: str) -> None:
    assert box.open_block(token) is None


def test_key_length_is_checked() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        ReasoningBox(b"short")
