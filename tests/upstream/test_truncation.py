"""Tool calls Kiro cuts off: held until complete, never handed out cut, continued once.

The translator is fed the fake's own wire for every cut scenario of docs/UPSTREAM.md §3.5; the
continuation runs as a real turn against the fake on loopback.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kirod.canonical.assemble import assemble
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStop,
    StopReason,
    StreamValidator,
    TextDelta,
    ToolInputDelta,
)
from kirod.canonical.request import (
    TextBlock,
    ToolSpec,
    ToolUseBlock,
)
from kirod.errors import ApiError, ErrorKind
from kirod.testing.fake_kiro import (
    DEFAULT_MODELS,
    FakeKiro,
    Fault,
    Reply,
    Script,
    ToolCall,
    ToolCut,
)
from kirod.testing.fake_kiro.eventstream import encode_event
from kirod.testing.fake_kiro.script import ChatRequest, Latency, Pause, plan_stream
from kirod.upstream.client import ClientOptions, KiroClient
from kirod.upstream.exchange import Route, open_exchange
from kirod.upstream.frames import Frame, FrameDecoder
from kirod.upstream.translate import TRUNCATED, Translator, Truncation
from kirod.upstream.truncation import CUT_OFF_NOTICE, TruncationRecovery, cut_off_notice
from kirod.upstream.turn import run_turn
from tests.upstream.exchange_env import opener, read, request

WRITE = ToolCall(
    "Write", {"file_path": "notes.md", "content": "All work and no play. " * 20}, tool_use_id="tw"
)
READ = ToolCall("Read", {"file_path": "a.md"}, tool_use_id="tr")
WRITE_SPEC = ToolSpec("Write", "Writes a file.", {"type": "object", "properties": {}})
CHAT = ChatRequest(
    model=DEFAULT_MODELS[0],
    prompt="write it",
    tool_results="",
    thinking_tags=False,
    native_reasoning=False,
    estimated_tokens=10,
    seed="seed",
)


def frames(script: Script) -> list[Frame]:
    """The frames the fake sends for `script`, as kirod decodes them."""
    decoder = FrameDecoder()
    plan = plan_stream(script, CHAT, Latency())
    return [
        frame
        for step in plan.steps
        if not isinstance(step, Pause)
        for frame in decoder.feed(step.data)
    ]


def translate(script: Script, **options: Any) -> tuple[list[list[CanonicalEvent]], Translator]:
    """One batch per frame (then the end), each checked against the event grammar."""
    translator = Translator(
        message_id="m", model="claude", context_window=200_000, input_tokens_estimate=10, **options
    )
    batches = [translator.feed(frame) for frame in frames(script)] + [translator.finish()]
    validator = StreamValidator()
    for event in (event for batch in batches for event in batch):
        validator.feed(event)
    validator.finish()
    return batches, translator


def flat(batches: list[list[CanonicalEvent]]) -> list[CanonicalEvent]:
    return [event for batch in batches for event in batch]


def tool_starts(events: list[CanonicalEvent]) -> list[str | None]:
    return [e.tool_use_id for e in events if isinstance(e, BlockStart) and e.tool_name]


def test_a_whole_call_is_handed_out_in_one_piece_once_it_is_complete() -> None:
    batches, translator = translate(Script(reply=Reply("Writing it.", tool_calls=(WRITE,))))
    arguments = json.dumps(WRITE.arguments, separators=(",", ":"))
    texts = [i for i, b in enumerate(batches) if any(isinstance(e, TextDelta) for e in b)]
    [tool_batch] = [i for i, b in enumerate(batches) if tool_starts(b)]
    assert len(texts) > 1  # text streamed live, frame by frame
    assert batches[tool_batch][-3:-1] == [
        BlockStart(1, BlockKind.TOOL_USE, "tw", "Write"),
        ToolInputDelta(1, arguments),
    ]
    assert batches[texts[-1] + 1] == [BlockStop(0)]  # the call's first frame ends the text
    assert all(not batch for batch in batches[texts[-1] + 2 : tool_batch])  # held, not streamed
    message = assemble(flat(batches))
    assert message.content[1] == ToolUseBlock("tw", "Write", WRITE.arguments)
    assert message.stop_reason is StopReason.TOOL_USE
    assert translator.truncation is None


def test_input_sent_as_growing_objects_is_the_last_object() -> None:
    call = ToolCall("Write", WRITE.arguments, tool_use_id="tw", as_objects=True)
    batches, _ = translate(Script(reply=Reply(tool_calls=(call,))))
    assert len(frames(Script(reply=Reply(tool_calls=(call,))))) > 4
    assert assemble(flat(batches)).content == (ToolUseBlock("tw", "Write", WRITE.arguments),)


@pytest.mark.parametrize(
    ("cut", "cause"),
    [
        (ToolCut.END, "stream_ended"),
        (ToolCut.UNPARSEABLE_STOP, "unparseable"),
        (ToolCut.EXCEPTION, "upstream_fault"),
        (ToolCut.MAX_TOKENS, "max_tokens"),
    ],
)
def test_a_cut_call_never_reaches_the_client(cut: ToolCut, cause: str) -> None:
    call = ToolCall("Write", WRITE.arguments, tool_use_id="tw", cut=cut, cut_after=77)
    batches, translator = translate(Script(reply=Reply("Writing it.", tool_calls=(call,))))
    events = flat(batches)
    assert tool_starts(events) == []
    assert not any(isinstance(e, ToolInputDelta | MessageStop) for e in events)
    error = events[-1]
    assert isinstance(error, ErrorEvent)
    assert (error.kind, error.code) == (ErrorKind.UPSTREAM, TRUNCATED)
    assert "77 bytes" in error.message
    assert "not executed" in error.message
    cut_off = translator.truncation
    assert cut_off is not None
    assert (cut_off.tool_use_id, cut_off.tool_name, cut_off.bytes_received) == ("tw", "Write", 77)
    assert (cut_off.cause, cut_off.elapsed_s < 1) == (cause, True)
    with pytest.raises(ApiError):
        assemble(events)


def test_a_cut_call_sent_as_growing_objects_is_cut_too() -> None:
    call = ToolCall("Write", WRITE.arguments, as_objects=True, cut=ToolCut.END, tool_use_id="tw")
    batches, translator = translate(Script(reply=Reply(tool_calls=(call,))))
    assert tool_starts(flat(batches)) == []
    assert translator.truncation is not None
    assert translator.truncation.cause == "stream_ended"


def test_of_two_calls_the_whole_one_is_handed_out_and_the_cut_one_is_not() -> None:
    cut = ToolCall("Write", WRITE.arguments, tool_use_id="tw", cut=ToolCut.END)
    batches, translator = translate(Script(reply=Reply(tool_calls=(READ, cut))))
    events = flat(batches)
    assert tool_starts(events) == ["tr"]
    assert isinstance(events[-1], ErrorEvent)
    assert translator.truncation is not None
    assert translator.truncation.tool_use_id == "tw"


def test_the_cut_is_timed_from_the_calls_first_frame() -> None:
    now = iter([100.0, 161.5])
    _, translator = translate(
        Script(reply=Reply(tool_calls=(ToolCall("Write", WRITE.arguments, cut=ToolCut.END),))),
        clock=lambda: next(now),
    )
    assert translator.truncation is not None
    assert translator.truncation.elapsed_s == 61.5


def test_a_connection_lost_inside_a_call_is_its_truncation() -> None:
    broken = ApiError(ErrorKind.UPSTREAM, "Kiro's stream broke off", code="upstream_protocol")
    translator = Translator(
        message_id="m", model="claude", context_window=200_000, input_tokens_estimate=10
    )
    call = ToolCall("Write", WRITE.arguments, tool_use_id="tw", cut=ToolCut.END, cut_after=5)
    for frame in frames(Script(reply=Reply(tool_calls=(call,)))):
        translator.feed(frame)
    assert translator.tool_open
    [*_, error] = translator.broken(broken)
    assert isinstance(error, ErrorEvent)
    assert error.code == TRUNCATED
    assert translator.truncation is not None
    assert (translator.truncation.cause, translator.truncation.bytes_received) == (
        "connection_lost",
        5,
    )
    # Without an open call, the break is the error it is.
    plain = Translator(message_id="m", model="c", context_window=1, input_tokens_estimate=1)
    assert plain.broken(broken)[-1] == ErrorEvent.from_error(broken)
    assert plain.truncation is None


def test_live_delivery_streams_fragments_and_still_never_completes_a_cut_call() -> None:
    whole, _ = translate(Script(reply=Reply(tool_calls=(WRITE,))), tool_delivery="live")
    assert sum(isinstance(e, ToolInputDelta) for e in flat(whole)) > 1
    cut = ToolCall("Write", WRITE.arguments, tool_use_id="tw", cut=ToolCut.END)
    batches, translator = translate(Script(reply=Reply(tool_calls=(cut,))), tool_delivery="live")
    events = flat(batches)
    assert tool_starts(events) == ["tw"]  # opened live, then the stream fails inside it
    assert isinstance(events[-1], ErrorEvent)
    assert events[-1].code == TRUNCATED
    assert translator.truncation is not None


def test_an_output_limit_stop_without_an_open_call_is_a_max_tokens_stop() -> None:
    translator = Translator(message_id="m", model="c", context_window=1, input_tokens_estimate=1)
    decoder = FrameDecoder()
    wire = encode_event("assistantResponseEvent", {"content": "Partial answer"}) + encode_event(
        "metadataEvent", {"stopReason": "MAX_TOKENS"}
    )
    events = [e for frame in decoder.feed(wire) for e in translator.feed(frame)]
    events += translator.finish()
    assert events[-1] == MessageStop(StopReason.MAX_TOKENS)
    assert translator.truncation is None


def test_the_notice_states_the_transport_fact() -> None:
    notice = cut_off_notice(Truncation("tw", "Write", 4775, 61.4, "connection_lost"))
    assert notice == CUT_OFF_NOTICE.format(bytes_received=4775, elapsed_s=61.4)
    assert "4775 bytes and 61 s" in notice
    assert "not executed" in notice


# -- the continuation, as a real turn against the fake


async def test_a_cut_call_is_continued_once_into_the_same_message(
    kiro: tuple[FakeKiro, KiroClient, Route],
) -> None:
    service, client, route = kiro
    cut = ToolCall("Write", WRITE.arguments, tool_use_id="tw", cut=ToolCut.END, cut_after=60)
    service.enqueue(
        Reply("Writing it.", tool_calls=(cut,)), Reply("I will write it in smaller parts.")
    )
    asked = request(tools=(WRITE_SPEC,))
    async with open_exchange(client, asked, route) as first:
        turn = run_turn(first, asked, [TruncationRecovery()], opener(client, route), max_parts=4)
        events = [event for batch in await read(turn) for event in batch]
    message = assemble(events)
    assert message.content == (
        TextBlock("Writing it."),
        TextBlock("I will write it in smaller parts."),
    )
    assert message.stop_reason is StopReason.END_TURN
    [_, second] = service.requests("chat")
    state = second.json["conversationState"]
    replayed = state["history"][-1]["assistantResponseMessage"]
    assert replayed["toolUses"] == [{"toolUseId": "tw", "name": "Write", "input": {}}]
    [result] = state["currentMessage"]["userInputMessage"]["userInputMessageContext"]["toolResults"]
    assert result["status"] == "error"
    assert result["toolUseId"] == "tw"
    assert "after 60 bytes" in result["content"][0]["text"]


async def test_a_second_cut_keeps_its_error(kiro: tuple[FakeKiro, KiroClient, Route]) -> None:
    service, client, route = kiro
    cut = ToolCall("Write", WRITE.arguments, cut=ToolCut.EXCEPTION)
    service.enqueue(Reply("One.", tool_calls=(cut,)), Reply("Two.", tool_calls=(cut,)))
    asked = request(tools=(WRITE_SPEC,))
    async with open_exchange(client, asked, route) as first:
        turn = run_turn(first, asked, [TruncationRecovery()], opener(client, route), max_parts=4)
        events = [event for batch in await read(turn) for event in batch]
    assert isinstance(events[-1], ErrorEvent)
    assert events[-1].code == TRUNCATED
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["One.", "Two."]
    assert len(service.requests("chat")) == 2


async def test_no_continuation_after_a_whole_call_was_handed_out(
    kiro: tuple[FakeKiro, KiroClient, Route],
) -> None:
    service, client, route = kiro
    cut = ToolCall("Write", WRITE.arguments, cut=ToolCut.END)
    service.enqueue(Reply(tool_calls=(READ, cut)))
    asked = request(tools=(WRITE_SPEC,))
    async with open_exchange(client, asked, route) as first:
        turn = run_turn(first, asked, [TruncationRecovery()], opener(client, route), max_parts=4)
        events = [event for batch in await read(turn) for event in batch]
    assert tool_starts(events) == ["tr"]
    assert isinstance(events[-1], ErrorEvent)
    assert len(service.requests("chat")) == 1


async def test_a_connection_cut_after_a_long_silence_is_a_truncation_not_a_failover(
    kiro: tuple[FakeKiro, KiroClient, Route],
) -> None:
    """Nothing reached the client yet, but the same request elsewhere would be cut the same
    way: the exchange opens and ends with the truncation."""
    service, client, route = kiro
    cut = ToolCall("Write", WRITE.arguments, tool_use_id="tw", cut=ToolCut.SILENCE)
    service.enqueue(Script(reply=Reply(tool_calls=(cut,)), stall_s=0.3))
    async with open_exchange(client, request(), route) as exchange:
        events = [event for batch in await read(exchange.batches()) for event in batch]
    assert isinstance(events[-1], ErrorEvent)
    assert events[-1].code == TRUNCATED
    assert exchange.truncation is not None
    assert exchange.truncation.cause == "connection_lost"
    assert exchange.truncation.elapsed_s >= 0.3
    assert exchange.failure is None  # a truncation, not a break the account is blamed for


async def test_silence_past_the_idle_timeout_inside_a_held_call_is_continued(
    kiro: tuple[FakeKiro, KiroClient, Route],
) -> None:
    """kirod gives up on a silent stream before Kiro cuts it: the held call was never shown,
    so the turn is continued as for any cut, timed from the call's first frame."""
    service, loopback, route = kiro
    service.enqueue(
        Script(reply=Reply(tool_calls=(WRITE,)), fault=Fault.STALL, fault_at=2, stall_s=3.0),
        Reply("I will write it in smaller parts."),
    )
    asked = request(tools=(WRITE_SPEC,))
    impatient = KiroClient(loopback.endpoints, ClientOptions(idle_timeout_s=0.3))
    async with impatient as client, open_exchange(client, asked, route) as first:
        turn = run_turn(first, asked, [TruncationRecovery()], opener(client, route), max_parts=4)
        events = [event for batch in await read(turn) for event in batch]
        cut = first.truncation
    assert tool_starts(events) == []
    assert assemble(events).content == (TextBlock("I will write it in smaller parts."),)
    assert cut is not None
    assert (cut.tool_use_id, cut.cause) == ("tw", "connection_lost")
    assert 0 < cut.bytes_received < len(json.dumps(WRITE.arguments))
    # The idle timer runs from the last read, the call's clock from when its first frame was
    # translated, a little later on a loaded machine: about the 0.3 s timeout, never the 3 s stall.
    assert 0.2 <= cut.elapsed_s < 3.0
    [_, second] = service.requests("chat")
    context = second.json["conversationState"]["currentMessage"]["userInputMessage"]
    [result] = context["userInputMessageContext"]["toolResults"]
    assert (result["toolUseId"], result["status"]) == ("tw", "error")
    assert f"after {cut.bytes_received} bytes" in result["content"][0]["text"]
