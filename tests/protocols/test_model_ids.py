"""Model ids are identifiers (kirod.canonical.model_ids), in every decoder: the ids real clients
send are read as they are; anything with a character outside `[A-Za-z0-9._:/@[]-]`, or longer
than 128 characters, is a 400 in the codec's own style that names the first bad character by
position and code point and never echoes it."""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kirod.canonical.client_models import CLIENT_MODELS
from kirod.canonical.model_ids import ALLOWED_CHARS, MAX_MODEL_CHARS, model_id_problem
from kirod.errors import ApiError, ErrorKind
from kirod.protocols.anthropic.decode import decode_count_tokens, decode_messages
from kirod.protocols.anthropic.signatures import ThinkingSigner
from kirod.protocols.chat.decode import decode_chat
from kirod.protocols.ollama.decode import decode_ollama_chat, decode_show
from kirod.protocols.responses.decode import decode_responses
from kirod.protocols.responses.reasoning import ReasoningBox

SIGNER = ThinkingSigner(bytes(range(32)))
BOX = ReasoningBox(bytes(range(32)))
CAPTURES = Path(__file__).parents[1] / "clients" / "captures"
USER = {"role": "user", "content": "hi"}

# Ids real clients send or document, beyond the captures and kirod's own client table.
REAL_IDS = (
    "claude-sonnet-4-5[1m]",  # Claude Code's 1M-context variant
    "claude-opus-4-6[200k]",
    "anthropic/claude-sonnet-4-6",  # aider, llm, routers
    "openai/gpt-5.6-sol",
    "openai/responses/gpt-5.6-sol",
    "kirod/claude-sonnet-4-6",  # opencode
    "claude-sonnet-4-6:latest",  # Ollama clients
    "glm-5:latest",
    "hf.co/org/model:Q4_K_M",
    "us.anthropic.claude-sonnet-4-5-20250929-v1:0",  # Bedrock
    "claude-opus-4-1@20250805",  # Vertex
    "CLAUDE_SONNET_4_5_20250929_V1_0",  # Kiro's legacy enum
    "auto",
    "m" * MAX_MODEL_CHARS,
)
BAD_IDS = {
    "escape": ("claude-sonnet-\u001b[31mRED", 15, "U+001B"),
    "newline": ("claude-opus-9-\n\rFORGED", 15, "U+000A"),
    "nul": ("claude-sonnet-4-6\u0000", 18, "U+0000"),
    "space": ("claude sonnet", 7, "U+0020"),
    "bell": ("claude-sonnet-\u001b]0;TITLE\u0007", 15, "U+001B"),
    "non_ascii": ("claude-sonnet-4-6\u2028x", 18, "U+2028"),
}


def _captured_ids() -> set[str]:
    ids = set()
    for path in CAPTURES.glob("*.json"):
        ids |= set(re.findall(r'"model": ?"([^"]*)"', path.read_text()))
    return ids


def messages(model: object, **extra: Any) -> object:
    body = {"model": model, "max_tokens": 8, "messages": [USER], **extra}
    return decode_messages(body, {}, request_id="r", signer=SIGNER)


def count_tokens(model: object, **extra: Any) -> object:
    return decode_count_tokens({"model": model, "messages": [USER], **extra}, {}, "r", SIGNER)


def responses(model: object, **extra: Any) -> object:
    body = {"model": model, "input": "hi", **extra}
    return decode_responses(body, {}, request_id="r", reasoning_box=BOX)


def chat(model: object, **extra: Any) -> object:
    return decode_chat({"model": model, "messages": [USER], **extra}, {}, request_id="r")


def ollama_chat(model: object, **extra: Any) -> object:
    return decode_ollama_chat({"model": model, "messages": [USER], **extra}, request_id="r")


def ollama_show(model: object, **extra: Any) -> object:
    return decode_show({"model": model, **extra})


Decode = Callable[..., object]
DECODERS: dict[str, Decode] = {
    "messages": messages,
    "count_tokens": count_tokens,
    "responses": responses,
    "chat": chat,
    "ollama_chat": ollama_chat,
    "ollama_show": ollama_show,
}
# A field each decoder refuses, to be judged after the model.
REFUSED_FIELDS: dict[str, dict[str, Any]] = {
    "messages": {"mcp_servers": [{}]},
    "count_tokens": {"mcp_servers": [{}]},
    "responses": {"background": True},
    "chat": {"n": 5},
    "ollama_chat": {"format": "json"},
    "ollama_show": {"verbose": "not a boolean", "name": 7},
}


def refused(decode: Decode, model: object) -> ApiError:
    with pytest.raises(ApiError) as caught:
        decode(model)
    assert caught.value.kind is ErrorKind.INVALID_REQUEST
    assert caught.value.param == "model"
    return caught.value


def test_every_id_clients_send_is_an_identifier() -> None:
    sent = _captured_ids() | {row.id for row in CLIENT_MODELS} | set(REAL_IDS)
    assert "claude-opus-5-5" in sent  # the captures were read
    assert {name: model_id_problem(name) for name in sent} == dict.fromkeys(sent)


@pytest.mark.parametrize("decode", DECODERS.values(), ids=DECODERS.keys())
@pytest.mark.parametrize("model", REAL_IDS)
def test_every_decoder_reads_real_ids(decode: Decode, model: str) -> None:
    decode(model)


@pytest.mark.parametrize("decode", DECODERS.values(), ids=DECODERS.keys())
@pytest.mark.parametrize("bad", BAD_IDS.values(), ids=BAD_IDS.keys())
def test_a_bad_character_is_named_by_position_never_echoed(
    decode: Decode, bad: tuple[str, int, str]
) -> None:
    model, position, code_point = bad
    error = refused(decode, model)
    assert f"character {position} ({code_point}) is not allowed" in error.message
    assert error.message.isprintable()
    assert error.message.isascii()
    assert model not in error.message
    if decode in (messages, count_tokens):
        assert error.message.startswith("model: ")  # Anthropic's style
    else:
        assert (error.message.startswith("'model': "), error.code) == (True, "invalid_value")


@pytest.mark.parametrize("decode", DECODERS.values(), ids=DECODERS.keys())
def test_empty_long_and_non_string_ids_are_refused(decode: Decode) -> None:
    assert "at most 128 characters (129 sent)" in refused(decode, "m" * 129).message
    assert "must not be empty" in refused(decode, "").message
    assert "must be a string" in refused(decode, ["claude"]).message
    assert "is required" in refused(decode, None).message


@pytest.mark.parametrize("name", DECODERS)
def test_the_model_is_judged_before_any_other_field(name: str) -> None:
    """A body wrong in several ways reports its model first: no other check, and no catalog
    lookup of the name (`kirod.http.decoding`), ever sees a bad one."""
    decode, wrong = DECODERS[name], REFUSED_FIELDS[name]
    if name != "ollama_show":
        with pytest.raises(ApiError) as caught:
            decode("claude-sonnet-4-6", **wrong)
        assert caught.value.param != "model"  # the field is refused on its own
    assert refused(lambda model: decode(model, **wrong), BAD_IDS["escape"][0]).code in (
        None,
        "invalid_value",
    )


@given(st.text(max_size=MAX_MODEL_CHARS + 8))
def test_what_is_accepted_is_only_ever_the_allowed_characters(name: str) -> None:
    problem = model_id_problem(name)
    accepted = problem is None
    assert accepted == (0 < len(name) <= MAX_MODEL_CHARS and set(name) <= set(ALLOWED_CHARS))
    if problem is not None:
        assert problem.text.isprintable()
        assert problem.text.isascii()


def test_the_allowed_set_is_the_documented_one() -> None:
    assert set(ALLOWED_CHARS) == set(string.ascii_letters + string.digits + "._:/@[]-")
    assert json.dumps(ALLOWED_CHARS).isascii()
