"""Responses encoding: event order, SDK-validated shapes, terminal states, stored items."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import pytest
from openai.lib.streaming.responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from kirod.canonical.assemble import assemble
from kirod.canonical.events import CanonicalEvent, ErrorEvent, MessageStop, StopReason, Usage
from kirod.canonical.request import Message, RedactedThinkingBlock, Role, ThinkingBlock
from kirod.errors import ErrorKind
from kirod.protocols.responses.decode import decode_responses
from kirod.protocols.responses.encode import ResponsesStreamEncoder
from kirod.protocols.responses.reasoning import ReasoningBox
from kirod.protocols.responses.response import ResponseEcho, response_items, response_json
from tests.protocols.openai_streams import (
    START,
    parse_sse,
    redacted,
    sse_json,
    stream,
    text,
    thinking,
    tool,
)

EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
BOX = ReasoningBox(bytes(range(32)))
RESPONSE_ID = "resp_0123abcd"
CREATED = 1_700_000_000
NAMES = {"multi_agent_v1__spawn_agent": ("multi_agent_v1", "spawn_agent")}
TEXT_ITEM = [
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]


def echo(**fields: Any) -> ResponseEcho:
    return ResponseEcho(model="claude-sonnet-4-5", **fields)


def encode(
    events: list[CanonicalEvent], settings: ResponseEcho | None = None, **fields: Any
) -> tuple[list[dict[str, Any]], Any]:
    """Run the encoder; validate every event with the SDK's types and its stream state machine.

    Returns the event payloads and the SDK's parsed final response (None if none completed).
    """
    encoder = ResponsesStreamEncoder(
        response_id=RESPONSE_ID,
        echo=settings or echo(**fields),
        reasoning_box=BOX,
        created_at=CREATED,
    )
    chunks = encoder.start()
    for event in events:
        chunks += encoder.feed(event)
    payloads = []
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=[], text_format=openai.omit)
    final = None
    for name, data in parse_sse(chunks):
        payload = json.loads(data)
        assert name == payload["type"]
        for emitted in state.handle_event(EVENTS.validate_python(payload)):
            if emitted.type == "response.completed":
                final = emitted.response
        payloads.append(payload)
    sequence = [payload["sequence_number"] for payload in payloads]
    assert sequence == list(range(len(payloads)))
    terminal = payloads[-1]["response"]
    assert terminal == encoder.response
    Response.model_validate(terminal)
    return payloads, final


def kinds(payloads: list[dict[str, Any]]) -> list[str]:
    return [payload["type"] for payload in payloads]


def test_text_stream() -> None:
    payloads, final = encode(stream(text(0, "Hello, ", "world")))
    assert kinds(payloads) == [
        "response.created",
        "response.in_progress",
        *TEXT_ITEM,
        "response.completed",
    ]
    created = payloads[0]["response"]
    assert (created["id"], created["status"], created["output"]) == (RESPONSE_ID, "in_progress", [])
    assert created["usage"] is None
    added, part, delta = payloads[2], payloads[3], payloads[4]
    assert added["item"] == {
        "id": "msg_0123abcd_0",
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    assert part["part"] == {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    assert delta == {
        "type": "response.output_text.delta",
        "sequence_number": 4,
        "item_id": "msg_0123abcd_0",
        "output_index": 0,
        "content_index": 0,
        "delta": "Hello, ",
        "logprobs": [],
    }
    done = payloads[-1]["response"]
    assert done["status"] == "completed"
    assert done["output"][0]["content"][0]["text"] == "Hello, world"
    assert done["usage"] == {
        "input_tokens": 42,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 17,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 59,
    }
    assert final.output_text == "Hello, world"


def test_tool_call_stream_maps_namespaced_names_back() -> None:
    events = stream(
        tool(0, "tooluse_A", "exec_command", '{"cmd":', '"ls"}'),
        tool(1, "tooluse_B", "multi_agent_v1__spawn_agent", '{"task":"x"}'),
        stop=StopReason.TOOL_USE,
    )
    payloads, final = encode(events, tool_names=NAMES)
    assert kinds(payloads)[2:] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert payloads[2]["item"] == {
        "id": "fc_0123abcd_0",
        "type": "function_call",
        "call_id": "tooluse_A",
        "name": "exec_command",
        "arguments": "",
        "status": "in_progress",
    }
    assert payloads[5]["arguments"] == '{"cmd":"ls"}'
    spawn = payloads[-2]["item"]
    assert (spawn["namespace"], spawn["name"], spawn["call_id"]) == (
        "multi_agent_v1",
        "spawn_agent",
        "tooluse_B",
    )
    assert [(call.name, call.arguments) for call in final.output] == [
        ("exec_command", '{"cmd":"ls"}'),
        ("spawn_agent", '{"task":"x"}'),
    ]


def test_tool_call_without_arguments_gets_an_empty_object() -> None:
    payloads, final = encode(stream(tool(0, "tooluse_A", "get_goal"), stop=StopReason.TOOL_USE))
    assert kinds(payloads)[3:5] == [
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
    ]
    assert payloads[4]["arguments"] == "{}"
    assert final.output[0].arguments == "{}"


def test_reasoning_with_summary_and_encrypted_content() -> None:
    events = stream(
        thinking(0, "Think ", "hard.", signature="sig-xyz"),
        text(1, "Ans", "wer"),
        usage=Usage(42, 30),
    )
    payloads, final = encode(events, summary=True, include_encrypted=True)
    assert kinds(payloads) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        *TEXT_ITEM,
        "response.completed",
    ]
    assert payloads[2]["item"] == {"id": "rs_0123abcd_0", "type": "reasoning", "summary": []}
    assert payloads[3]["summary_index"] == 0
    assert payloads[6]["text"] == "Think hard."
    item = payloads[8]["item"]
    assert item["summary"] == [{"type": "summary_text", "text": "Think hard."}]
    assert BOX.open(item["encrypted_content"]) == ("Think hard.", "sig-xyz")
    assert payloads[9]["output_index"] == 1
    usage = payloads[-1]["response"]["usage"]
    assert 0 < usage["output_tokens_details"]["reasoning_tokens"] <= 30
    assert final.output[0].encrypted_content == item["encrypted_content"]
    assert final.output_text == "Answer"


def test_reasoning_hidden_unless_asked_but_always_stored() -> None:
    encoder = ResponsesStreamEncoder(
        response_id=RESPONSE_ID, echo=echo(), reasoning_box=BOX, created_at=CREATED
    )
    chunks = encoder.start()
    for event in stream(thinking(0, "secret", signature="s"), text(1, "hi")):
        chunks += encoder.feed(event)
    assert "secret" not in b"".join(chunks).decode()
    shown = encoder.response
    assert shown is not None
    assert shown["output"][0] == {"id": "rs_0123abcd_0", "type": "reasoning", "summary": []}
    stored = encoder.history_items[0]
    assert BOX.open(stored["encrypted_content"]) == ("secret", "s")
    assert encoder.history_items[1] == shown["output"][1]


def test_redacted_reasoning_is_an_item() -> None:
    payloads, _ = encode(stream(redacted(0, "blob"), text(1, "ok")), include_encrypted=True)
    assert kinds(payloads)[2:4] == ["response.output_item.added", "response.output_item.done"]
    sealed = payloads[3]["item"]["encrypted_content"]
    assert BOX.open_block(sealed) == RedactedThinkingBlock("blob")


@pytest.mark.parametrize(
    ("stop", "reason"),
    [(StopReason.MAX_TOKENS, "max_output_tokens"), (StopReason.REFUSAL, "content_filter")],
)
def test_incomplete(stop: StopReason, reason: str) -> None:
    payloads, final = encode(stream(text(0, "Hello, ", "wor"), stop=stop), max_output_tokens=5)
    assert kinds(payloads) == [
        "response.created",
        "response.in_progress",
        *TEXT_ITEM,
        "response.incomplete",
    ]
    response = payloads[-1]["response"]
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": reason}
    assert response["max_output_tokens"] == 5
    assert response["output"][0]["content"][0]["text"] == "Hello, wor"
    assert final is None


@pytest.mark.parametrize(
    ("kind", "code", "failed_code"),
    [
        (ErrorKind.UPSTREAM, "upstream_error", "server_error"),
        (ErrorKind.RATE_LIMIT, "rate_limit_exceeded", "rate_limit_exceeded"),
        (ErrorKind.INVALID_REQUEST, "context_length_exceeded", "invalid_prompt"),
        (ErrorKind.INTERNAL, None, "server_error"),
    ],
)
def test_failure_mid_item(kind: ErrorKind, code: str | None, failed_code: str) -> None:
    events = [*stream(text(0, "Hel"))[:3], ErrorEvent(kind, "the model went away", code)]
    payloads, final = encode(events)
    assert kinds(payloads) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "error",
        "response.failed",
    ]
    assert payloads[-2] == {
        "type": "error",
        "sequence_number": 5,
        "code": code or failed_code,
        "message": "the model went away",
        "param": None,
    }
    response = payloads[-1]["response"]
    assert response["status"] == "failed"
    assert response["error"] == {"code": failed_code, "message": "the model went away"}
    assert response["output"][0]["status"] == "incomplete"
    assert response["output"][0]["content"][0]["text"] == "Hel"
    assert final is None


def test_failure_before_any_event_still_opens_the_response() -> None:
    payloads, _ = encode([ErrorEvent(ErrorKind.UNAVAILABLE, "no account is available")])
    assert kinds(payloads) == [
        "response.created",
        "response.in_progress",
        "error",
        "response.failed",
    ]
    assert payloads[-1]["response"]["output"] == []


def test_echo_fields_in_response() -> None:
    decoded = decode_responses(
        {
            "model": "claude-opus-4-7",
            "input": "hi",
            "instructions": "Be brief.",
            "tools": [{"type": "function", "name": "run"}, {"type": "file_search"}],
            "tool_choice": "none",
            "parallel_tool_calls": False,
            "reasoning": {"effort": "high", "summary": "auto"},
            "metadata": {"k": "v"},
            "store": False,
            "previous_response_id": "resp_prev",
            "temperature": 0.2,
            "top_p": 0.9,
            "prompt_cache_key": "pck",
            "user": "u",
        },
        {},
        request_id="req_1",
        reasoning_box=BOX,
    )
    payloads, _ = encode(stream(text(0, "a", "b")), decoded.echo)
    response = payloads[-1]["response"]
    parsed = Response.model_validate(response)
    assert parsed.model == "claude-opus-4-7"
    assert parsed.instructions == "Be brief."
    assert [tool.type for tool in parsed.tools] == ["function"]
    assert parsed.tool_choice == "none"
    assert parsed.parallel_tool_calls is False
    assert parsed.reasoning is not None
    assert (parsed.reasoning.effort, parsed.reasoning.summary) == ("high", "auto")
    assert parsed.metadata == {"k": "v"}
    assert parsed.store is False
    assert parsed.previous_response_id == "resp_prev"
    assert (parsed.temperature, parsed.top_p) == (0.2, 0.9)
    assert parsed.prompt_cache_key == "pck"
    assert parsed.created_at == CREATED


def test_non_streaming_matches_the_stream() -> None:
    events = stream(
        thinking(0, "plan", signature="sig"),
        text(1, "Running it."),
        tool(2, "tooluse_A", "multi_agent_v1__spawn_agent", '{"a":1}'),
        stop=StopReason.TOOL_USE,
    )
    streamed, _ = encode(events, summary=True, tool_names=NAMES)
    body = response_json(
        assemble(events),
        response_id=RESPONSE_ID,
        echo=echo(summary=True, tool_names=NAMES),
        reasoning_box=BOX,
        created_at=CREATED,
    )
    Response.model_validate(body)
    assert body == streamed[-1]["response"]


def test_stored_items_replay_as_history() -> None:
    events = stream(
        thinking(0, "plan", signature="sig"),
        tool(1, "tooluse_A", "multi_agent_v1__spawn_agent", '{"a":1}'),
        stop=StopReason.TOOL_USE,
    )
    items = response_items(
        assemble(events), response_id=RESPONSE_ID, echo=echo(tool_names=NAMES), reasoning_box=BOX
    )
    assert "encrypted_content" in items[0]
    tools = [
        {
            "type": "namespace",
            "name": "multi_agent_v1",
            "description": "",
            "tools": [{"type": "function", "name": "spawn_agent"}],
        }
    ]
    follow_up = {
        "model": "m",
        "tools": tools,
        "input": [{"type": "function_call_output", "call_id": "tooluse_A", "output": "ok"}],
    }
    history = [{"type": "message", "role": "user", "content": "go"}, *items]
    decoded = decode_responses(follow_up, {}, request_id="r", history=history, reasoning_box=BOX)
    assert decoded.request.messages[1] == Message(
        Role.ASSISTANT,
        (
            ThinkingBlock("plan", "sig"),
            *assemble(events).content[1:],
        ),
    )


def _sdk(body: bytes, content_type: str) -> openai.OpenAI:
    """An SDK client whose transport answers every request with `body` (no network)."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": content_type}, content=body)

    transport = httpx2.MockTransport(answer)
    return openai.OpenAI(
        base_url="http://127.0.0.1:1/v1",
        api_key="k",
        http_client=httpx2.Client(transport=transport),
    )


def test_sdk_responses_stream_end_to_end() -> None:
    encoder = ResponsesStreamEncoder(
        response_id=RESPONSE_ID,
        echo=echo(summary=True, include_encrypted=True),
        reasoning_box=BOX,
        created_at=CREATED,
    )
    chunks = encoder.start()
    events = stream(thinking(0, "hmm", signature="s"), text(1, "Hi ", "there"), tool(2, "t1", "f"))
    for event in events:
        chunks += encoder.feed(event)
    client = _sdk(b"".join(chunks), "text/event-stream")
    with client.responses.stream(model="m", input="hi") as responses:
        seen = [event.type for event in responses]
        final = responses.get_final_response()
    assert seen[0] == "response.created"
    assert seen[-1] == "response.completed"
    assert final.output_text == "Hi there"
    assert final.id == RESPONSE_ID


def test_sdk_responses_create_non_streaming() -> None:
    completion = assemble(stream(text(0, "Hello")))
    body = response_json(completion, response_id=RESPONSE_ID, echo=echo(), reasoning_box=BOX)
    client = _sdk(json.dumps(body).encode(), "application/json")
    response = client.responses.create(model="m", input="hi")
    assert response.output_text == "Hello"
    assert response.usage is not None
    assert response.usage.total_tokens == 59


def test_feed_starts_the_stream_once() -> None:
    encoder = ResponsesStreamEncoder(response_id=RESPONSE_ID, echo=echo(), reasoning_box=BOX)
    first = encoder.feed(START)
    assert [name for name, _ in parse_sse(first)] == ["response.created", "response.in_progress"]
    assert encoder.start() == []


@pytest.mark.parametrize("compaction", [False, True], ids=["answer", "compaction"])
def test_end_encodes_the_terminal_event_ahead_of_its_feed(compaction: bool) -> None:
    """What `end` returns is the Response the terminal event then carries, with the items to
    store; the stream is the same as without `end` (a compaction's sealed summary aside)."""
    events = stream(text(0, "Hello, ", "world"))
    *before, stop = events
    assert isinstance(stop, MessageStop)
    encoders = [
        ResponsesStreamEncoder(
            response_id=RESPONSE_ID,
            echo=echo(compaction=compaction),
            reasoning_box=BOX,
            created_at=CREATED,
        )
        for _ in range(2)
    ]
    plain, ahead = encoders
    expected = [chunk for event in events for chunk in plain.feed(event)]
    chunks = [chunk for event in before for chunk in ahead.feed(event)]
    assert ahead.response is None
    response = ahead.end(stop)
    assert response["status"] == "completed"
    assert ahead.end(stop) is response  # encoded once
    chunks += ahead.feed(stop)
    sent = sse_json(chunks)
    assert sent[-1]["response"] == response
    assert [e["type"] for e in sent] == [e["type"] for e in sse_json(expected)]
    if not compaction:  # a compaction's summary is sealed with a fresh nonce each time
        assert chunks == expected
        assert ahead.history_items == plain.history_items


CODE_MODE = {"functions__exec": ("functions", "exec")}


def test_freeform_tool_call_streams_its_raw_input() -> None:
    source = 'const r = await tools.exec_command({cmd: "cat a\\"b"});\ntext(r.output);'
    arguments = json.dumps({"input": source})
    cut = [arguments[:5], arguments[5:14], arguments[14:40], arguments[40:41], arguments[41:]]
    events = stream(tool(0, "tooluse_X", "functions__exec", *cut), stop=StopReason.TOOL_USE)
    settings = echo(tool_names=CODE_MODE, custom_tools=frozenset(CODE_MODE))
    payloads, final = encode(events, settings)
    names = kinds(payloads)
    assert names[2] == "response.output_item.added"
    assert payloads[2]["item"] == {
        "id": "ctc_0123abcd_0",
        "type": "custom_tool_call",
        "call_id": "tooluse_X",
        "name": "exec",
        "namespace": "functions",
        "input": "",
        "status": "in_progress",
    }
    deltas = [p["delta"] for p in payloads if p["type"] == "response.custom_tool_call_input.delta"]
    assert "".join(deltas) == source
    assert all(deltas)  # no empty deltas, even for fragments that decode to nothing yet
    done = next(p for p in payloads if p["type"] == "response.custom_tool_call_input.done")
    assert done["input"] == source
    item = next(p for p in payloads if p["type"] == "response.output_item.done")["item"]
    assert (item["type"], item["input"], item["status"]) == (
        "custom_tool_call",
        source,
        "completed",
    )
    assert names[-1] == "response.completed"
    assert [(c.type, c.name, c.input) for c in final.output] == [
        ("custom_tool_call", "exec", source)
    ]


def test_freeform_tool_call_non_streaming_and_not_json() -> None:
    settings = echo(tool_names=CODE_MODE, custom_tools=frozenset(CODE_MODE))
    completion = assemble(
        stream(
            tool(0, "tooluse_X", "functions__exec", '{"input":"text(1)"}'), stop=StopReason.TOOL_USE
        )
    )
    [item] = response_items(completion, response_id=RESPONSE_ID, echo=settings, reasoning_box=BOX)
    assert (item["type"], item["namespace"], item["name"], item["input"]) == (
        "custom_tool_call",
        "functions",
        "exec",
        "text(1)",
    )
    # A model that ignores the one-parameter schema: its raw arguments are the input.
    events = stream(tool(0, "tooluse_Y", "functions__exec", "text(2)"), stop=StopReason.TOOL_USE)
    payloads, _ = encode(events, settings)
    done = next(p for p in payloads if p["type"] == "response.custom_tool_call_input.done")
    assert done["input"] == "text(2)"
