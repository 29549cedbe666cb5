"""The request bounds of every codec (kirod.protocols.fields): counts, lengths, nesting and
values compared with a set of names, each a 400 naming the bound, never an internal error."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kirod.errors import ApiError, ErrorKind
from kirod.protocols.anthropic.decode import decode_messages
from kirod.protocols.anthropic.signatures import ThinkingSigner
from kirod.protocols.chat.decode import decode_chat
from kirod.protocols.fields import (
    MAX_BLOCKS,
    MAX_DEPTH,
    MAX_MESSAGES,
    MAX_TOOLS,
    json_arguments,
    quoted,
    too_deep,
)
from kirod.protocols.responses.decode import decode_responses
from kirod.protocols.responses.reasoning import ReasoningBox

SIGNER = ThinkingSigner(bytes(range(32)))
BOX = ReasoningBox(bytes(range(32)))
MODEL = "claude-sonnet-4-6"


def messages(body: dict[str, Any]) -> object:
    return decode_messages(
        {"model": MODEL, "max_tokens": 8, **body}, {}, request_id="r", signer=SIGNER
    )


def responses(body: dict[str, Any]) -> object:
    return decode_responses({"model": MODEL, **body}, {}, request_id="r", reasoning_box=BOX)


def chat(body: dict[str, Any]) -> object:
    return decode_chat({"model": MODEL, **body}, {}, request_id="r")


def refused(decode: Callable[[dict[str, Any]], object], body: dict[str, Any]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        decode(body)
    assert caught.value.kind is ErrorKind.INVALID_REQUEST
    return caught.value


def alternating(count: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if index % 2 == 0 else "assistant", "content": "hi"}
        for index in range(count)
    ]


def anthropic_tool(index: int) -> dict[str, Any]:
    return {"name": f"t{index}", "input_schema": {"type": "object"}}


def openai_tool(index: int) -> dict[str, Any]:
    return {"type": "function", "name": f"t{index}"}


def chat_tool(index: int) -> dict[str, Any]:
    return {"type": "function", "function": {"name": f"t{index}"}}


# -- counts -------------------------------------------------------------------------------------


def test_message_counts() -> None:
    messages({"messages": alternating(MAX_MESSAGES - 1)})
    error = refused(messages, {"messages": alternating(MAX_MESSAGES + 1)})
    assert error.param == "messages"
    assert f"at most {MAX_MESSAGES} messages" in error.message
    chat({"messages": alternating(MAX_MESSAGES - 1)})
    assert (
        f"at most {MAX_MESSAGES}"
        in refused(chat, {"messages": alternating(MAX_MESSAGES + 1)}).message
    )
    responses({"input": alternating(MAX_MESSAGES - 1)})
    error = refused(responses, {"input": alternating(MAX_MESSAGES + 1)})
    assert error.param == "input"
    assert f"at most {MAX_MESSAGES}" in error.message


def test_stored_items_count_with_the_input() -> None:
    history = [{"type": "message", "role": "user", "content": "hi"}] * (MAX_MESSAGES - 1)
    with pytest.raises(ApiError, match=f"at most {MAX_MESSAGES}"):
        decode_responses(
            {"model": MODEL, "input": alternating(2)},
            {},
            request_id="r",
            history=history,
            reasoning_box=BOX,
        )


def test_block_counts_across_the_request() -> None:
    half = [{"type": "text", "text": "x"}] * (MAX_BLOCKS // 2)
    fits = [{"role": "user", "content": half}, {"role": "assistant", "content": half[:-1]}]
    messages({"messages": fits})
    over = [{"role": "user", "content": half}, {"role": "assistant", "content": half + half[:1]}]
    error = refused(messages, {"messages": over})
    assert error.param == "messages.1.content"
    assert f"at most {MAX_BLOCKS} content blocks" in error.message
    # system blocks and tool-result parts count too
    system = [{"type": "text", "text": "s"}] * (MAX_BLOCKS // 2 + 1)
    refused(messages, {"system": system, "messages": [{"role": "user", "content": half}]})
    result = {"type": "tool_result", "tool_use_id": "t", "content": half}
    refused(messages, {"messages": [{"role": "user", "content": [result, *half]}]})
    parts = [{"type": "input_text", "text": "x"}] * (MAX_BLOCKS + 1)
    assert (
        "content blocks"
        in refused(responses, {"input": [{"role": "user", "content": parts}]}).message
    )
    calls = [{"id": f"c{i}", "function": {"name": "f", "arguments": ""}} for i in range(MAX_BLOCKS)]
    refused(
        chat,
        {
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": calls},
            ]
        },
    )


@pytest.mark.parametrize(
    ("decode", "tool"),
    [(messages, anthropic_tool), (responses, openai_tool), (chat, chat_tool)],
    ids=["messages", "responses", "chat"],
)
def test_tool_counts(decode: Callable[[dict[str, Any]], object], tool: Any) -> None:
    base: dict[str, Any] = {"input": "hi"} if decode is responses else {"messages": alternating(1)}
    decode({**base, "tools": [tool(i) for i in range(MAX_TOOLS)]})
    error = refused(decode, {**base, "tools": [tool(i) for i in range(MAX_TOOLS + 1)]})
    assert f"at most {MAX_TOOLS} tools" in error.message


def test_namespaced_and_hosted_tools_count() -> None:
    inner = [openai_tool(i) for i in range(MAX_TOOLS)]
    space = {"type": "namespace", "name": "ns", "tools": inner}
    refused(responses, {"input": "hi", "tools": [openai_tool(-1), space]})
    hosted = [{"type": f"hosted_{i}"} for i in range(MAX_TOOLS + 1)]
    refused(responses, {"input": "hi", "tools": [openai_tool(-1), *hosted]})


def test_duplicate_tool_checks_are_linear() -> None:
    tools = [openai_tool(i) for i in range(MAX_TOOLS)]
    started = time.perf_counter()
    responses({"input": "hi", "tools": tools})
    chat({"messages": alternating(1), "tools": [chat_tool(i) for i in range(MAX_TOOLS)]})
    assert time.perf_counter() - started < 0.5


# -- lengths ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "decode", [messages, responses, chat], ids=["messages", "responses", "chat"]
)
def test_model_names_are_at_most_128_characters(decode: Callable[[dict[str, Any]], object]) -> None:
    base: dict[str, Any] = {"input": "hi"} if decode is responses else {"messages": alternating(1)}
    decode({**base, "model": "m" * 128})
    error = refused(decode, {**base, "model": "m" * 129})
    assert error.param == "model"
    assert "128 characters" in error.message


@pytest.mark.parametrize("decode", [responses, chat], ids=["responses", "chat"])
def test_openai_metadata_bounds(decode: Callable[[dict[str, Any]], object]) -> None:
    base: dict[str, Any] = {"input": "hi"} if decode is responses else {"messages": alternating(1)}
    decode({**base, "metadata": {f"k{i}": "v" * 512 for i in range(16)}})
    assert (
        "16 metadata pairs"
        in refused(decode, {**base, "metadata": {f"k{i}": "v" for i in range(17)}}).message
    )
    assert "64 characters" in refused(decode, {**base, "metadata": {"k" * 65: "v"}}).message
    assert "512 characters" in refused(decode, {**base, "metadata": {"k": "v" * 513}}).message


def test_anthropic_user_id_bound() -> None:
    messages({"messages": alternating(1), "metadata": {"user_id": "u" * 256}})
    error = refused(messages, {"messages": alternating(1), "metadata": {"user_id": "u" * 257}})
    assert error.param == "metadata.user_id"


def test_client_values_are_quoted_short_in_errors() -> None:
    kind = "x" * 100_000
    error = refused(messages, {"messages": [{"role": "user", "content": [{"type": kind}]}]})
    assert len(error.message) < 200
    error = refused(responses, {"input": [{"type": kind}]})
    assert len(error.message) < 200
    error = refused(chat, {"messages": [{"role": kind, "content": "x"}]})
    assert len(error.message) < 200
    assert quoted("abc") == "'abc'"
    assert quoted(None) == "None"
    assert quoted([1, 2]) == "<list>"


# -- values compared with a set of names --------------------------------------------------------


@pytest.mark.parametrize("value", [[], {}, ["high"], 1.5, True])
def test_unhashable_or_wrong_names_are_400(value: Any) -> None:
    base: dict[str, Any] = {"messages": alternating(1)}
    assert refused(messages, {**base, "output_config": {"effort": value}}).param == (
        "output_config.effort"
    )
    thinking = {"type": "adaptive", "display": value}
    assert refused(messages, {**base, "thinking": thinking}).param == "thinking.display"
    part = {"role": "user", "content": [{"type": value, "text": "hi"}]}
    assert refused(responses, {"input": [part]}).param == "input[0].content[0].type"
    assert refused(responses, {"input": [{"type": value}]}).param == "input[0].type"
    assert refused(chat, {**base, "reasoning_effort": value}).param == "reasoning_effort"


# -- nesting ------------------------------------------------------------------------------------


def deep_object(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def test_arguments_nesting_is_bounded() -> None:
    assert json_arguments(deep_object(MAX_DEPTH), "p") is not None
    with pytest.raises(ApiError, match=f"more than {MAX_DEPTH} levels"):
        json_arguments(deep_object(MAX_DEPTH + 1), "p")
    for depth in (1_000, 100_000):  # beyond what the parser's recursion takes
        with pytest.raises(ApiError, match="must be a JSON object"):
            json_arguments(deep_object(depth), "p")


REFUSED = "refused with a 400"


def _json_loads_arguments(text: str) -> Any:
    """What `json_arguments` must answer: `json.loads`'s reading, or its refusal (a 400)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        return REFUSED
    return REFUSED if too_deep(value) else value


def _arguments(text: str) -> Any:
    try:
        return json_arguments(text, "p")
    except ApiError:
        return REFUSED


objects = st.dictionaries(
    st.text(max_size=8),
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**80), max_value=2**80)
        | st.floats()
        | st.text(max_size=20),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=30,
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(document=objects)
def test_arguments_are_read_as_json_loads_reads_them(document: dict[str, Any]) -> None:
    text = json.dumps(document, ensure_ascii=False)  # NaN and Infinity included, as JSON.parse
    # Compared as JSON text, so an integer read as an equal float (2**70) is a difference.
    assert json.dumps(_arguments(text)) == json.dumps(_json_loads_arguments(text))


@pytest.mark.parametrize(
    "text",
    [
        *(
            f'{{"n": {n}}}'
            for n in (2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30, 2**70)
        ),
        '{"a": 1e19, "b": -1e400, "c": 1e-400, "d": -0.0, "e": -0}',
        '{"a": 1, "b": 2, "a": 3}',
        '{"a": NaN, "b": -Infinity}',
        '{"a": "\\ud800"}',
        '{"a": "\ud800"}',  # the character itself, as a body's escape decodes to
        '{"a": "\\udc00x", "b": ["\\ud83d\\ude00"]}',
        "\ufeff{}",
        '{"a": 1,}',
        "{} {}",
        "[1]",
        "null",
        deep_object(MAX_DEPTH + 1),
        deep_object(900),
    ],
)
def test_arguments_at_the_edges_are_read_as_json_loads_reads_them(text: str) -> None:
    got, expected = _arguments(text), _json_loads_arguments(text)
    assert json.dumps(got) == json.dumps(expected)
    if isinstance(got, dict):
        assert list(got) == list(expected)  # the first place of a repeated key
        assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]


def test_arguments_with_too_many_containers() -> None:
    text = '{"a":[' + ",".join(["[]"] * 150_000) + "]}"
    started = time.perf_counter()
    with pytest.raises(ApiError, match="arrays and objects"):
        json_arguments(text, "p")
    assert time.perf_counter() - started < 0.1
    code = json.dumps({"code": "{[" * 1_000})  # brackets inside strings are no containers
    assert json_arguments(code, "p") == {"code": "{[" * 1_000}


def test_too_deep_is_iterative() -> None:
    value: Any = []
    for _ in range(10_000):
        value = [value]
    assert too_deep(value)
    assert too_deep({"a": [{"b": []}]}, 4) is False
    assert too_deep({"a": [{"b": []}]}, 3) is True
    assert too_deep("scalar", 0) is False
