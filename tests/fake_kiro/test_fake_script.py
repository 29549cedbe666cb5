"""The scripted model as a pure function: the frames it plans, decoded by kirod's decoder."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from kirod.testing.fake_kiro.catalog import DEFAULT_MODELS, Model
from kirod.testing.fake_kiro.drift import Drift
from kirod.testing.fake_kiro.script import (
    DEFAULT_TOOL_CALL,
    DRIFTED_EVENT,
    DRIFTED_REASON,
    DRIFTED_STATUS,
    DRIFTED_STOP,
    DRIFTED_WAIT_S,
    REFUSAL_DETAILS,
    ChatRequest,
    Cut,
    Fault,
    HttpFailure,
    Latency,
    Pause,
    Reply,
    Script,
    Send,
    StreamPlan,
    TokenUsage,
    ToolCall,
    ToolCut,
    drifted_failure,
    http_failure,
    plan_stream,
)
from kirod.testing.fake_kiro.validate import validate_chat
from kirod.upstream.errors import UpstreamProtocolError
from kirod.upstream.frames import Frame, FrameDecoder
from tests.fake_kiro.fake_bodies import SONNET, assistant, body, encode, tool, user

MODELS = {model.model_id: model for model in DEFAULT_MODELS}
WEATHER = ToolCall("get_weather", {"city": "Paris", "unit": "C"})
HTTP_FAULTS = {
    Fault.QUOTA_402,
    Fault.OVERAGE_400,
    Fault.IMPROPERLY_FORMED_400,
    Fault.SUSPICIOUS_429,
    Fault.THROTTLE_429,
    Fault.THROTTLE_429_NO_RETRY_AFTER,
    Fault.CAPACITY_429,
    Fault.SUSPENDED_403,
    Fault.BEARER_INVALID_403,
    Fault.SERVER_500,
    Fault.INTERNAL_500,
    Fault.THROTTLE_429_RETRY_AFTER_HEADER,
    Fault.CONVERSATION_LIMIT_402,
}


def request(data: dict[str, Any] | None = None) -> ChatRequest:
    data = data or body(user("Hello there"))
    model_id = data["conversationState"]["currentMessage"]["userInputMessage"]["modelId"]
    return ChatRequest.parse(data, MODELS[model_id])


def plan(script: Script, data: dict[str, Any] | None = None) -> StreamPlan:
    return plan_stream(script, request(data), Latency())


def decode(stream: StreamPlan) -> list[Frame]:
    decoder = FrameDecoder()
    frames = [
        frame
        for step in stream.steps
        if not isinstance(step, Pause)
        for frame in decoder.feed(step.data)
    ]
    decoder.finish()
    return frames


def events(frames: list[Frame], event_type: str) -> list[dict[str, Any]]:
    return [frame.payload for frame in frames if frame.event_type == event_type]


def text_of(frames: list[Frame]) -> str:
    return "".join(payload["content"] for payload in events(frames, "assistantResponseEvent"))


def tool_input(frames: list[Frame]) -> str:
    return "".join(payload.get("input", "") for payload in events(frames, "toolUseEvent"))


def test_full_reply_shape() -> None:
    reply = Reply(
        text="The weather in Paris:", tool_calls=(WEATHER,), credits=0.05, context_usage=12.5
    )
    frames = decode(plan(Script(reply=reply, chunk_size=5)))
    arguments = '{"city":"Paris","unit":"C"}'
    fragments = [arguments[i : i + 5] for i in range(0, len(arguments), 5)]
    kinds = [frame.event_type for frame in frames]
    assert kinds == [
        *["assistantResponseEvent"] * 5,
        *["toolUseEvent"] * (len(fragments) + 2),
        "metadataEvent",  # today's tail, in its order (docs/KIRO-PROTOCOL.md §3.4)
        "contextUsageEvent",
        "meteringEvent",
    ]
    assert all(frame.message_type == "event" for frame in frames)
    assert [p["content"] for p in events(frames, "assistantResponseEvent")] == [
        "The w",
        "eathe",
        "r in ",
        "Paris",
        ":",
    ]
    head = {"name": "get_weather", "toolUseId": events(frames, "toolUseEvent")[0]["toolUseId"]}
    assert events(frames, "toolUseEvent") == [
        {**head, "input": ""},
        *({**head, "input": fragment} for fragment in fragments),
        {**head, "stop": True},
    ]
    assert events(frames, "meteringEvent") == [
        {"unit": "credit", "unitPlural": "credits", "usage": 0.05}
    ]
    assert events(frames, "contextUsageEvent") == [{"contextUsagePercentage": 12.5}]
    assert events(frames, "metadataEvent") == [{"stopReason": "TOOL_USE"}]
    plain = decode(plan(Script(reply=Reply(text="Hi"))))
    assert events(plain, "metadataEvent") == [{"stopReason": "END_TURN"}]


def test_tool_use_ids_are_deterministic_and_distinct() -> None:
    reply = Reply(tool_calls=(WEATHER, WEATHER))
    first, second = decode(plan(Script(reply=reply))), decode(plan(Script(reply=reply)))
    ids = [e["toolUseId"] for e in events(first, "toolUseEvent")]
    assert ids == [e["toolUseId"] for e in events(second, "toolUseEvent")]
    assert len(set(ids)) == 2
    assert all(i.startswith("tooluse_") and len(i) == 30 for i in ids)
    explicit = decode(
        plan(Script(reply=Reply(tool_calls=(ToolCall("x", {"a": 1}, tool_use_id="mine"),))))
    )
    assert {e["toolUseId"] for e in events(explicit, "toolUseEvent")} == {"mine"}


def test_tool_without_arguments_is_one_frame() -> None:
    frames = decode(plan(Script(reply=Reply(tool_calls=(ToolCall("list_files"),)))))
    assert events(frames, "toolUseEvent") == [
        {
            "name": "list_files",
            "toolUseId": events(frames, "toolUseEvent")[0]["toolUseId"],
            "input": "",
            "stop": True,
        }
    ]


def test_raw_fragments_are_sent_verbatim() -> None:
    call = ToolCall("write", fragments=('{"pa', 'th":"a', '.txt"}'))
    frames = decode(plan(Script(reply=Reply(tool_calls=(call,)))))
    assert [e.get("input") for e in events(frames, "toolUseEvent")] == [
        "",
        '{"pa',
        'th":"a',
        '.txt"}',
        None,
    ]


def test_default_reply_echoes_the_prompt() -> None:
    prompt = "x" * 300
    frames = decode(plan(Script(), body(user(prompt))))
    assert text_of(frames) == "You said: " + "x" * 200
    assert decode(plan(Script(), body(user(prompt)))) == frames


def test_default_reply_on_a_tool_result_turn() -> None:
    data = body(
        user("", tools=[tool()], results=[{"toolUseId": "t1", "content": [{"text": "Sunny"}]}]),
        [
            user("Weather?"),
            assistant("Checking.", uses=[{"toolUseId": "t1", "name": "get_weather", "input": {}}]),
        ],
    )
    assert text_of(decode(plan(Script(), data))) == "You said: (tool results) Sunny"


def test_default_context_usage_and_credits_follow_the_request() -> None:
    frames = decode(plan(Script(), body(user("a" * 4000))))
    usage = events(frames, "contextUsageEvent")[0]["contextUsagePercentage"]
    assert 0.5 < usage < 0.6  # ~1 000 estimated tokens of a 200 000 window
    assert events(frames, "meteringEvent")[0]["usage"] > 0
    assert (
        plan(Script(), body(user("a" * 4000))).credits
        == events(frames, "meteringEvent")[0]["usage"]
    )


THINKING = Reply(text="Answer.", thinking="Step by step.")


def test_thinking_appears_only_when_tags_ask_for_it() -> None:
    tagged = body(
        user(
            "<thinking_mode>enabled</thinking_mode><max_thinking_length>4000</max_thinking_length>Hi"
        )
    )
    frames = decode(plan(Script(reply=THINKING, chunk_size=7), tagged))
    assert text_of(frames) == "<thinking>Step by step.</thinking>\n\nAnswer."
    assert not events(frames, "reasoningContentEvent")
    assert text_of(decode(plan(Script(reply=THINKING)))) == "Answer."


def test_tags_in_the_first_history_message_count() -> None:
    data = body(user("Next"), [user("<thinking_mode>adaptive</thinking_mode>Hi"), assistant()])
    assert text_of(decode(plan(Script(reply=THINKING), data))).startswith("<thinking>")


def test_native_reasoning_is_signed_and_round_trips() -> None:
    data = body(
        user("Hi", model="claude-opus-4.7"),
        additionalModelRequestFields={"output_config": {"effort": "high"}},
    )
    frames = decode(plan(Script(reply=THINKING, chunk_size=4), data))
    reasoning = events(frames, "reasoningContentEvent")
    assert frames[0].event_type == "reasoningContentEvent"
    assert "".join(r.get("text", "") for r in reasoning) == "Step by step."
    signature = reasoning[-1]["signature"]
    assert text_of(frames) == "Answer."
    echoed = {"reasoningText": {"text": "Step by step.", "signature": signature}}
    follow_up = body(
        user("More", model="claude-opus-4.7"),
        [user("Hi"), assistant("Answer.", reasoningContent=echoed)],
    )
    assert validate_chat(encode(follow_up), MODELS) is None


def test_native_reasoning_through_request_fields() -> None:
    data = body(
        user("Hi", model="claude-sonnet-4.6"),
        additionalModelRequestFields={"output_config": {"effort": "max"}},
    )
    assert events(decode(plan(Script(reply=THINKING), data)), "reasoningContentEvent")
    disabled = body(
        user("Hi", model="claude-sonnet-4.6"),
        additionalModelRequestFields={
            "thinking": {"type": "disabled"},
            "output_config": {"effort": "max"},
        },
    )
    assert not events(decode(plan(Script(reply=THINKING), disabled)), "reasoningContentEvent")


@pytest.mark.parametrize("model", ["claude-opus-4.7", "claude-opus-5.5", SONNET])
def test_claude_ignores_the_effort_in_the_message(model: str) -> None:
    """docs/KIRO-PROTOCOL.md §2.6: `userInputMessage.reasoning` changes nothing for Claude, not
    even the credits; only the root field turns reasoning on."""
    plain = plan(Script(reply=THINKING), body(user("Hi", model=model)))
    data = body(user("Hi", model=model, reasoning={"effort": "low"}))
    stream = plan(Script(reply=THINKING), data)
    assert not events(decode(stream), "reasoningContentEvent")
    assert stream.credits == plain.credits


def test_credits_follow_the_root_effort() -> None:
    """The fake shows which effort it honoured: its credits scale with the root effort."""

    def credits(effort: str) -> float:
        fields = {"output_config": {"effort": effort}, "thinking": {"type": "adaptive"}}
        data = body(user("Hi", model="claude-opus-5.5"), additionalModelRequestFields=fields)
        return plan(Script(reply=THINKING), data).credits

    spent = [credits(effort) for effort in ("low", "medium", "high", "xhigh", "max")]
    assert spent == sorted(spent)
    assert len(set(spent)) == 5


def test_a_signature_binds_the_tool_list() -> None:
    """docs/KIRO-PROTOCOL.md §2.6: reasoning made under one tool list replays only under it."""
    fields = {"output_config": {"effort": "high"}}
    first = body(user("Hi", model="claude-opus-4.7", tools=[tool()]), **_fields(fields))
    reasoning = events(decode(plan(Script(reply=THINKING), first)), "reasoningContentEvent")
    echoed = {"reasoningText": {"text": "Step by step.", "signature": reasoning[-1]["signature"]}}
    history = [user("Hi"), assistant("Answer.", reasoningContent=echoed)]
    same = body(user("More", model="claude-opus-4.7", tools=[tool()]), history)
    other = body(user("More", model="claude-opus-4.7", tools=[tool("read_file")]), history)
    assert validate_chat(encode(same), MODELS) is None
    refused = validate_chat(encode(other), MODELS)
    assert refused is not None
    assert refused.rule == "reasoning_signature_invalid"


def _fields(fields: dict[str, Any]) -> dict[str, Any]:
    return {"additionalModelRequestFields": fields}


def test_reasoning_effort_is_ignored_by_older_models() -> None:
    data = body(user("Hi", model=SONNET, reasoning={"effort": "high"}))
    frames = decode(plan(Script(reply=THINKING), data))
    assert not events(frames, "reasoningContentEvent")
    assert text_of(frames) == "Answer."


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(
            body(user("Hi", model="gpt-5.6-sol", reasoning={"effort": "low"})),
            id="userInputMessage.reasoning",
        ),
        pytest.param(
            body(
                user("Hi", model="gpt-5.6-sol"),
                additionalModelRequestFields={"reasoning": {"effort": "low"}},
            ),
            id="additionalModelRequestFields.reasoning",
        ),
    ],
)
def test_gpt_reasoning_is_redacted(data: dict[str, Any]) -> None:
    assert validate_chat(encode(data), MODELS) is None
    reasoning = events(decode(plan(Script(reply=THINKING), data)), "reasoningContentEvent")
    assert [set(r) for r in reasoning] == [{"redactedContent"}]


def test_latency_profile_and_script_overrides() -> None:
    reply = Reply(text="abcdef")
    steps = plan_stream(Script(reply=reply, chunk_size=2), request(), Latency(0.5, 0.1)).steps
    delays = [step.delay_s for step in steps if isinstance(step, Send)]
    assert delays == [0.5, 0.1, 0.1, 0.1, 0.1, 0.1]
    steps = plan_stream(
        Script(reply=reply, chunk_size=3, delay_first_s=0.0, delay_between_s=0.2),
        request(),
        Latency(0.5, 0.1),
    ).steps
    assert [step.delay_s for step in steps if isinstance(step, Send)] == [0.0, 0.2, 0.2, 0.2, 0.2]


# Faults


@pytest.mark.parametrize(
    "exception_type", ["ThrottlingException", "ContentLengthExceededException", "error"]
)
def test_midstream_exception(exception_type: str) -> None:
    script = Script(
        reply=Reply(text="abcdefgh"),
        chunk_size=2,
        fault=Fault.MIDSTREAM_EXCEPTION,
        fault_at=2,
        exception_type=exception_type,
    )
    stream = plan(script)
    frames = decode(stream)
    assert [f.message_type for f in frames] == ["event", "event", "exception"]
    assert frames[-1].exception_type == exception_type
    assert "message" in frames[-1].payload
    assert stream.credits == 0


def test_error_frame() -> None:
    frames = decode(
        plan(Script(reply=Reply(text="abcd"), chunk_size=2, fault=Fault.ERROR_FRAME, fault_at=1))
    )
    assert [f.message_type for f in frames] == ["event", "error"]
    assert frames[-1].error_code == "InternalFailure"


def test_truncated_tool_input() -> None:
    reply = Reply(text="Writing.", tool_calls=(WEATHER, DEFAULT_TOOL_CALL))
    stream = plan(Script(reply=reply, chunk_size=16, fault=Fault.TRUNCATED_TOOL_INPUT))
    frames = decode(stream)
    last_id = events(frames, "toolUseEvent")[-1]["toolUseId"]
    truncated = [e for e in events(frames, "toolUseEvent") if e["toolUseId"] == last_id]
    assert not any(e.get("stop") for e in truncated)
    sent = "".join(e["input"] for e in truncated)
    full = json.dumps(dict(DEFAULT_TOOL_CALL.arguments), separators=(",", ":"))
    assert full.startswith(sent)
    assert len(sent) < len(full)
    with pytest.raises(ValueError, match=r"Unterminated|Expecting"):
        json.loads(sent)
    assert frames[-1].event_type == "toolUseEvent"  # no metering, no context usage
    assert stream.credits == 0
    first_id = events(frames, "toolUseEvent")[0]["toolUseId"]
    assert any(e.get("stop") for e in events(frames, "toolUseEvent") if e["toolUseId"] == first_id)


def test_truncation_without_scripted_tools_uses_a_large_write() -> None:
    frames = decode(plan(Script(fault=Fault.TRUNCATED_TOOL_INPUT)))
    assert {e["name"] for e in events(frames, "toolUseEvent")} == {"write_file"}


def test_corrupt_crc() -> None:
    stream = plan(
        Script(reply=Reply(text="abcdef"), chunk_size=2, fault=Fault.CORRUPT_CRC, fault_at=1)
    )
    decoder = FrameDecoder()
    steps = [step for step in stream.steps if isinstance(step, Send)]
    assert len(decoder.feed(steps[0].data)) == 1
    with pytest.raises(UpstreamProtocolError, match="CRC"):
        decoder.feed(steps[1].data)
    assert len(steps) == 6  # the rest of the stream still follows


def test_empty_stream() -> None:
    assert plan(Script(fault=Fault.EMPTY_STREAM)) == StreamPlan((), 0.0)


def test_cut_generation_ends_cleanly_after_some_content_without_the_tail() -> None:
    script = Script(reply=Reply(text="abcdef"), chunk_size=2, fault=Fault.CUT_GENERATION)
    for at, expected in ((0, "ab"), (2, "abcd"), (9, "abcdef")):
        stream = plan(replace(script, fault_at=at))
        frames = decode(stream)  # whole frames: the body ends on a frame boundary
        assert text_of(frames) == expected
        assert {f.event_type for f in frames} == {"assistantResponseEvent"}
        assert stream.credits == 0.0
    assert Script.from_json(script.to_json()) == script


@pytest.mark.parametrize(
    ("fault", "stated"),
    [
        (
            Fault.CONTENT_FILTERED,
            {"stopReason": "CONTENT_FILTERED", "stopDetails": dict(REFUSAL_DETAILS)},
        ),
        (Fault.CONTEXT_WINDOW_EXCEEDED, {"stopReason": "MODEL_CONTEXT_WINDOW_EXCEEDED"}),
    ],
)
def test_stated_stops_come_with_no_content_and_the_whole_tail(
    fault: Fault, stated: dict[str, Any]
) -> None:
    frames = decode(plan(Script(reply=Reply(text="never sent"), fault=fault)))
    assert [f.event_type for f in frames] == ["metadataEvent", "contextUsageEvent", "meteringEvent"]
    assert frames[0].payload == stated
    assert Script.from_json(Script(fault=fault).to_json()).fault is fault


def test_connection_cut() -> None:
    stream = plan(
        Script(reply=Reply(text="abcdef"), chunk_size=2, fault=Fault.CONNECTION_CUT, fault_at=2)
    )
    assert isinstance(stream.steps[-1], Cut)
    assert [type(step) for step in stream.steps] == [Send, Send, Cut]
    decoder = FrameDecoder()
    for step in stream.steps:
        decoder.feed(step.data)
    with pytest.raises(UpstreamProtocolError, match="truncated"):
        decoder.finish()


def test_duplicated_deltas() -> None:
    frames = decode(
        plan(
            Script(
                reply=Reply(text="abcdef"), chunk_size=2, fault=Fault.DUPLICATED_DELTAS, fault_at=1
            )
        )
    )
    assert [p["content"] for p in events(frames, "assistantResponseEvent")] == [
        "ab",
        "cd",
        "cd",
        "ef",
    ]


def test_leaked_tool_call_text() -> None:
    frames = decode(
        plan(
            Script(
                reply=Reply(text="Sure. ", tool_calls=(WEATHER,)), fault=Fault.LEAKED_TOOL_CALL_TEXT
            )
        )
    )
    assert text_of(frames) == 'Sure. [Called get_weather with args: {"city":"Paris","unit":"C"}]'
    assert not events(frames, "toolUseEvent")
    assert events(frames, "contextUsageEvent")


def test_stall() -> None:
    stream = plan(
        Script(reply=Reply(text="abcd"), chunk_size=2, fault=Fault.STALL, fault_at=1, stall_s=3.5)
    )
    assert [type(step) for step in stream.steps] == [Send, Pause, Send, Send, Send, Send]
    assert stream.steps[1] == Pause(3.5)
    assert text_of(decode(stream)) == "abcd"
    assert stream.credits > 0


def failure(fault: Fault) -> HttpFailure:
    result = http_failure(Script(fault=fault, retry_after_s=7), "d-123.user")
    assert result is not None
    return result


def test_only_http_faults_fail_before_streaming() -> None:
    scripts = {fault: Script(fault=fault) for fault in Fault}
    failing = {fault for fault, script in scripts.items() if http_failure(script, "u") is not None}
    assert failing == HTTP_FAULTS


@pytest.mark.parametrize(
    ("fault", "status", "error_type", "reason"),
    [
        (Fault.QUOTA_402, 402, "ServiceQuotaExceededException", "MONTHLY_REQUEST_COUNT"),
        (Fault.OVERAGE_400, 400, "ServiceQuotaExceededException", "OVERAGE_REQUEST_LIMIT_EXCEEDED"),
        (Fault.THROTTLE_429, 429, "ThrottlingException", "CREDIT_CONSUMPTION_RATE_EXCEEDED"),
        (Fault.SUSPICIOUS_429, 429, "ThrottlingException", None),
        (Fault.THROTTLE_429_NO_RETRY_AFTER, 429, "ThrottlingException", None),
        (Fault.THROTTLE_429_RETRY_AFTER_HEADER, 429, "ThrottlingException", None),
        (
            Fault.CONVERSATION_LIMIT_402,
            402,
            "ServiceQuotaExceededException",
            "CONVERSATION_LIMIT_EXCEEDED",
        ),
        (Fault.CAPACITY_429, 429, "ThrottlingException", "INSUFFICIENT_MODEL_CAPACITY"),
        (Fault.SUSPENDED_403, 403, "AccessDeniedException", "TEMPORARILY_SUSPENDED"),
        (Fault.SERVER_500, 500, "InternalServerException", "MODEL_TEMPORARILY_UNAVAILABLE"),
        (Fault.INTERNAL_500, 500, "InternalServerException", None),
    ],
)
def test_http_fault_bodies(fault: Fault, status: int, error_type: str, reason: str | None) -> None:
    result = failure(fault)
    assert (result.status, result.error_type, result.body["reason"]) == (status, error_type, reason)
    assert result.body["message"]
    retried = fault in (Fault.THROTTLE_429_RETRY_AFTER_HEADER, Fault.SUSPICIOUS_429)
    assert dict(result.headers) == ({"Retry-After": "7"} if retried else {})
    waits = result.body.get("retryAfterMilliseconds")
    assert waits == (7000 if fault is Fault.THROTTLE_429 else None)


@pytest.mark.parametrize(
    "reason",
    [
        "CREDIT_CONSUMPTION_RATE_EXCEEDED",
        "DAILY_REQUEST_COUNT",
        "INSUFFICIENT_MODEL_CAPACITY",
        "MONTHLY_REQUEST_COUNT",
        "SERVICE_REQUEST_RATE_EXCEEDED",
        "USER_REQUEST_RATE_EXCEEDED",
    ],
)
def test_a_throttle_is_scripted_per_reason_as_today(reason: str) -> None:
    script = Script(fault=Fault.THROTTLE_429, retry_after_s=300, throttle_reason=reason)
    result = http_failure(script, "d-123.user")
    assert result is not None
    assert (result.status, dict(result.headers)) == (429, {})
    assert result.body == {
        "__type": "com.amazon.kiro.runtimeservice#ThrottlingException",
        "message": "Too many requests, please wait before trying again.",
        "reason": reason,
        "retryAfterMilliseconds": 300000,
    }
    no_wait = http_failure(Script(fault=Fault.THROTTLE_429, retry_after_s=0), "u")
    assert no_wait is not None
    assert "retryAfterMilliseconds" not in no_wait.body


def test_suspension_names_the_user() -> None:
    message = failure(Fault.SUSPENDED_403).body["message"]
    assert "Your User ID (d-123.user) temporarily is suspended" in message


def test_the_limits_on_a_flagged_account_name_it() -> None:
    message = failure(Fault.SUSPICIOUS_429).body["message"]
    assert message.startswith("Due to suspicious activity, we are imposing temporary limits")
    assert "your account (d-123.user) can send a request" in message


def test_the_overage_limit_says_so() -> None:
    assert failure(Fault.OVERAGE_400).body["message"] == "You have reached the limit for overages."


def test_bearer_invalid_body() -> None:
    result = failure(Fault.BEARER_INVALID_403)
    assert result.status == 403
    assert result.body == {"message": "The bearer token included in the request is invalid."}


def test_script_json_round_trip() -> None:
    script = Script(
        reply=Reply(
            text="t",
            thinking="th",
            tool_calls=(
                WEATHER,
                ToolCall("w", fragments=("{", "}"), tool_use_id="i"),
                ToolCall("c", {"a": "b"}, as_objects=True, cut=ToolCut.SILENCE, cut_after=1),
            ),
            credits=0.1,
            context_usage=3.0,
            token_usage=TokenUsage(uncached=5, output=2, cache_read=40),
        ),
        fault=Fault.STALL,
        chunk_size=3,
        delay_first_s=0.1,
        fault_at=4,
        stall_s=1.5,
    )
    assert Script.from_json(json.loads(json.dumps(script.to_json()))) == script
    assert Script.from_json(Script().to_json()) == Script()


def test_script_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        Script(chunk_size=0)


def test_custom_model_window() -> None:
    tiny = Model("tiny", "Tiny", 1000, 100, 1.0)
    data = body(user("a" * 400, model="tiny"))
    stream = plan_stream(Script(), ChatRequest.parse(data, tiny), Latency())
    assert 10 < events(decode(stream), "contextUsageEvent")[0]["contextUsagePercentage"] < 20


# Tomorrow's Kiro (`drift.Drift`), switched on


def drifted(*drifts: Drift, script: Script | None = None) -> list[Frame]:
    return decode(plan_stream(script or Script(), request(), Latency(), frozenset(drifts)))


def test_the_stream_drifts_change_only_what_they_name() -> None:
    today = decode(plan(Script()))
    types = [frame.event_type for frame in today]
    assert types[-3:] == ["metadataEvent", "contextUsageEvent", "meteringEvent"]
    assert [f.event_type for f in drifted(Drift.TAIL_MISSING)] == types[:-3]
    with_event = [f.event_type for f in drifted(Drift.EVENT_TYPE)]
    assert with_event == [*types[:-3], DRIFTED_EVENT, *types[-3:]]
    assert events(drifted(Drift.STOP_REASON), "metadataEvent") == [{"stopReason": DRIFTED_STOP}]
    # Off, or on a scripted fault, the answer is today's.
    assert drifted() == today
    cut = Script(fault=Fault.CUT_GENERATION)
    assert drifted(Drift.EVENT_TYPE, script=cut) == decode(plan(cut))


def test_the_error_drifts_answer_with_a_new_status_or_reason() -> None:
    assert drifted_failure(frozenset()) is None
    assert drifted_failure({Drift.EVENT_TYPE, Drift.WINDOW}) is None
    status = drifted_failure({Drift.HTTP_STATUS})
    assert status is not None
    assert (status.status, status.body["reason"]) == (DRIFTED_STATUS, None)
    reason = drifted_failure({Drift.ERROR_REASON})
    assert reason is not None
    assert (reason.status, reason.body["reason"]) == (429, DRIFTED_REASON)
    assert reason.body["retryAfterMilliseconds"] == DRIFTED_WAIT_S * 1000
