"""Chat Completions encoding: chunks the SDK accepts, finish reasons, usage, errors, JSON."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from kirod.canonical.assemble import assemble
from kirod.canonical.events import CanonicalEvent, ErrorEvent, StopReason, Usage
from kirod.errors import ErrorKind
from kirod.protocols.chat.encode import ChatStreamEncoder, chat_completion_json
from tests.protocols.openai_streams import parse_sse, redacted, stream, text, thinking, tool

COMPLETION_ID = "chatcmpl-0001"
MODEL = "claude-sonnet-4-5"
CREATED = 1_700_000_000


def encode(events: list[CanonicalEvent], *, include_usage: bool = False) -> list[bytes]:
    encoder = ChatStreamEncoder(
        completion_id=COMPLETION_ID,
        model=MODEL,
        request_id="req_1",
        include_usage=include_usage,
        created=CREATED,
    )
    chunks = encoder.start()
    for event in events:
        chunks += encoder.feed(event)
    return chunks


def chunks_of(raw: list[bytes]) -> list[ChatCompletionChunk]:
    """Every data line but the last validated as a chunk; the last must be `[DONE]`."""
    events = parse_sse(raw)
    assert events[-1] == (None, "[DONE]")
    assert all(name is None for name, _ in events)
    return [ChatCompletionChunk.model_validate_json(data) for _, data in events[:-1]]


def final(chunks: list[ChatCompletionChunk]) -> Any:
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    return state.get_final_completion()


def test_text_stream() -> None:
    chunks = chunks_of(encode(stream(text(0, "Hello, ", "world"))))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].delta.content for c in chunks[1:3]] == ["Hello, ", "world"]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.id == COMPLETION_ID and c.created == CREATED and c.model == MODEL for c in chunks)
    completion = final(chunks)
    assert completion.choices[0].message.content == "Hello, world"
    assert completion.choices[0].finish_reason == "stop"


def test_thinking_streams_as_reasoning_content() -> None:
    events = stream(thinking(0, "let me ", "see", signature="s"), redacted(1, "x"), text(2, "ok"))
    chunks = chunks_of(encode(events))
    deltas = [c.choices[0].delta.model_dump(exclude_none=True) for c in chunks]
    assert deltas[1:4] == [
        {"reasoning_content": "let me "},
        {"reasoning_content": "see"},
        {"content": "ok"},
    ]


def test_tool_call_stream() -> None:
    events = stream(
        text(0, "Reading."),
        tool(1, "tooluse_A", "read", '{"path":', '"a"}'),
        tool(2, "tooluse_B", "list"),
        stop=StopReason.TOOL_USE,
    )
    chunks = chunks_of(encode(events))
    calls = [c.choices[0].delta.tool_calls for c in chunks if c.choices[0].delta.tool_calls]
    first = calls[0][0]
    assert (first.index, first.id, first.type) == (0, "tooluse_A", "function")
    assert first.function is not None
    assert (first.function.name, first.function.arguments) == ("read", "")
    assert [c[0].index for c in calls] == [0, 0, 0, 1, 1]
    assert calls[-1][0].function is not None
    assert calls[-1][0].function.arguments == "{}"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    message = final(chunks).choices[0].message
    assert message.content == "Reading."
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls] == [
        ("tooluse_A", "read", '{"path":"a"}'),
        ("tooluse_B", "list", "{}"),
    ]


@pytest.mark.parametrize(
    ("stop", "reason"),
    [
        (StopReason.END_TURN, "stop"),
        (StopReason.STOP_SEQUENCE, "stop"),
        (StopReason.MAX_TOKENS, "length"),
        (StopReason.REFUSAL, "content_filter"),
    ],
)
def test_finish_reasons(stop: StopReason, reason: str) -> None:
    chunks = chunks_of(encode(stream(text(0, "x"), stop=stop)))
    assert chunks[-1].choices[0].finish_reason == reason


def test_usage_chunk_when_requested() -> None:
    events = stream(thinking(0, "pondering deeply"), text(1, "x"), usage=Usage(100, 40))
    chunks = chunks_of(encode(events, include_usage=True))
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == []
    assert usage_chunk.usage is not None
    assert (usage_chunk.usage.prompt_tokens, usage_chunk.usage.completion_tokens) == (100, 40)
    assert usage_chunk.usage.total_tokens == 140
    details = usage_chunk.usage.completion_tokens_details
    assert details is not None
    assert details.reasoning_tokens is not None
    assert 0 < details.reasoning_tokens <= 40
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert final(chunks).usage.total_tokens == 140
    assert all(c.usage is None for c in chunks_of(encode(events))[:-1])


def test_error_after_start() -> None:
    events = [*stream(text(0, "partial"))[:3], ErrorEvent(ErrorKind.RATE_LIMIT, "slow down")]
    parsed = parse_sse(encode(events))
    assert parsed[-1] == (None, "[DONE]")
    error = json.loads(parsed[-2][1])
    assert error == {
        "error": {
            "message": "slow down",
            "type": "rate_limit_error",
            "param": None,
            "code": None,
        },
        "request_id": "req_1",
    }
    for _, data in parsed[:-2]:
        ChatCompletionChunk.model_validate_json(data)


def test_non_streaming_json() -> None:
    events = stream(
        thinking(0, "hmm"),
        text(1, "Reading."),
        tool(2, "tooluse_A", "read", '{"path":"a"}'),
        stop=StopReason.TOOL_USE,
    )
    body = chat_completion_json(
        assemble(events), completion_id=COMPLETION_ID, model=MODEL, created=CREATED
    )
    completion = ChatCompletion.model_validate(body)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Reading."
    assert body["choices"][0]["message"]["reasoning_content"] == "hmm"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.type == "function"
    assert (call.id, call.function.name, call.function.arguments) == (
        "tooluse_A",
        "read",
        '{"path":"a"}',
    )
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (42, 17)


def test_non_streaming_without_text_has_null_content() -> None:
    body = chat_completion_json(
        assemble(stream(tool(0, "t", "f"), stop=StopReason.TOOL_USE)),
        completion_id=COMPLETION_ID,
        model=MODEL,
    )
    assert body["choices"][0]["message"]["content"] is None
    assert "reasoning_content" not in body["choices"][0]["message"]
    ChatCompletion.model_validate(body)


def _sdk(body: bytes, content_type: str) -> openai.OpenAI:
    """An SDK client whose transport answers every request with `body` (no network)."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": content_type}, content=body)

    return openai.OpenAI(
        base_url="http://127.0.0.1:1/v1",
        api_key="k",
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )


def test_sdk_chat_stream_end_to_end() -> None:
    raw = b"".join(encode(stream(text(0, "Hi"), tool(1, "t1", "f", '{"a":1}')), include_usage=True))
    client = _sdk(raw, "text/event-stream")
    with client.chat.completions.stream(
        model=MODEL, messages=[{"role": "user", "content": "x"}]
    ) as s:
        for _ in s:
            pass
        completion = s.get_final_completion()
    message = completion.choices[0].message
    assert message.content == "Hi"
    assert message.tool_calls is not None
    assert message.tool_calls[0].function.arguments == '{"a":1}'
    assert completion.usage is not None


def test_sdk_chat_create_non_streaming() -> None:
    body = chat_completion_json(
        assemble(stream(text(0, "Hello"))), completion_id=COMPLETION_ID, model=MODEL
    )
    client = _sdk(json.dumps(body).encode(), "application/json")
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "x"}]
    )
    assert completion.choices[0].message.content == "Hello"
