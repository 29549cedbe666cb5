"""The upstream exchange against the fake Kiro on loopback: one request in, event batches out,
early failures raised before anything is committed, and exchanges composed into one turn."""

from __future__ import annotations

import dataclasses

import pytest

from kirod.canonical.assemble import CanonicalCompletion, assemble
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    TextDelta,
    Usage,
)
from kirod.canonical.request import (
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from kirod.testing.fake_kiro import (
    FakeKiro,
    Fault,
    Reply,
    Script,
    ToolCall,
)
from kirod.upstream.client import KiroClient
from kirod.upstream.errors import Failure, UpstreamStreamError
from kirod.upstream.exchange import Route, open_exchange
from kirod.upstream.step import Next, Part
from kirod.upstream.turn import run_turn
from tests.upstream.exchange_env import opener, read, request

LOOKUP = ToolSpec("lookup", "Looks a word up.", {"type": "object", "properties": {}})


async def test_an_exchange_reads_its_first_output_then_yields_a_batch_per_chunk(
    kiro: tuple[FakeKiro, KiroClient, Route],
) -> None:
    service, client, route = kiro
    reply = Reply(text="one two three four five six")
    service.enqueue(Script(reply=reply, chunk_size=4, delay_between_s=0.01))
    async with open_exchange(client, request(), route) as exchange:
        assert isinstance(exchange.first[0], MessageStart)
        assert any(isinstance(event, BlockStart) for event in exchange.first)
        batches = await read(exchange.batches())
    assert batches[0] == exchange.first
    assert len(batches) > 2  # the answer came in several chunks, each its own batch
    message = assemble(event for batch in batches for event in batch)
    assert message.content == (TextBlock("one two three four five six"),)
    assert message.model == "claude-sonnet-4-5"
    assert len(service.requests("chat")) == 1


async def test_an_answer_that_is_only_an_error_raises_before_anything_is_committed(
    kiro: tuple[FakeKiro, KiroClient, Route],
) -> None:
    service, client, route = kiro
    service.enqueue(Script(fault=Fault.MIDSTREAM_EXCEPTION, fault_at=0))
    with pytest.raises(UpstreamStreamError) as raised:
        async with open_exchange(client, request(), route):
            pytest.fail("an exchange that produced nothing but an error must not open")
    assert raised.value.failure is Failure.THROTTLED
    assert raised.value.to_api_error().code == "upstream_throttled"


async def test_an_error_after_output_in_the_same_chunk_is_the_streams_end_not_early(
    kiro: tuple[FakeKiro, KiroClient, Route],
) -> None:
    service, client, route = kiro
    reply = Reply(text="partial answer " * 4)
    service.enqueue(Script(reply=reply, fault=Fault.MIDSTREAM_EXCEPTION, fault_at=3))
    async with open_exchange(client, request(), route) as exchange:
        events = [event for batch in await read(exchange.batches()) for event in batch]
    assert isinstance(events[-1], ErrorEvent)
    assert events[-1].code == "upstream_throttled"


async def test_a_mid_stream_failure_ends_the_batches_with_an_error_event(
    kiro: tuple[FakeKiro, KiroClient, Route],
) -> None:
    service, client, route = kiro
    service.enqueue(Script(reply=Reply(text="x" * 200), fault=Fault.CONNECTION_CUT, fault_at=3))
    async with open_exchange(client, request(), route) as exchange:
        batches = await read(exchange.batches())
    last = batches[-1]
    assert len(last) == 1
    assert isinstance(last[0], ErrorEvent)


@pytest.mark.parametrize(
    ("script", "failure", "code"),
    [
        (Script(fault=Fault.CONNECTION_CUT, fault_at=3), Failure.PROTOCOL, "upstream_protocol"),
        (Script(fault=Fault.CORRUPT_CRC, fault_at=3), Failure.PROTOCOL, "upstream_protocol"),
        (Script(fault=Fault.ERROR_FRAME, fault_at=3), Failure.SERVER, "upstream_unavailable"),
        (
            Script(fault=Fault.MIDSTREAM_EXCEPTION, fault_at=3),
            Failure.THROTTLED,
            "upstream_throttled",
        ),
        (
            Script(
                fault=Fault.MIDSTREAM_EXCEPTION, fault_at=3, exception_type="ValidationException"
            ),
            None,  # Kiro's refusal of the request, not the account's failure
            "upstream_error",
        ),
        (Script(fault=Fault.DUPLICATED_DELTAS, fault_at=2), None, None),
    ],
    ids=["cut", "crc", "error-frame", "throttled", "validation", "repaired"],
)
async def test_a_break_after_the_first_event_is_the_exchanges_failure_before_its_error_event(
    kiro: tuple[FakeKiro, KiroClient, Route],
    script: Script,
    failure: Failure | None,
    code: str | None,
) -> None:
    """The account's failure is known when the error event that ends the stream is handed on,
    so a caller that stops reading there still knows it."""
    service, client, route = kiro
    service.enqueue(dataclasses.replace(script, reply=Reply(text="x" * 200)))
    async with open_exchange(client, request(), route) as exchange:
        assert exchange.failure is None
        last: CanonicalEvent | None = None
        async for batch in exchange.batches():
            last = batch[-1]
            if isinstance(last, ErrorEvent):
                break  # not read any further
    if code is None:
        assert not isinstance(last, ErrorEvent)
        assert exchange.failure is None
        return
    assert isinstance(last, ErrorEvent)
    assert last.code == code
    if failure is None:
        assert exchange.failure is None
    else:
        assert exchange.failure is not None
        assert exchange.failure.failure is failure
        assert exchange.failure.to_api_error().code == code


def answered(completion: CanonicalCompletion) -> tuple[Message, Message]:
    """The example's local tool: every lookup answers "42"."""
    uses = [block for block in completion.content if isinstance(block, ToolUseBlock)]
    results = tuple(ToolResultBlock(use.id, (TextBlock("42"),)) for use in uses)
    return Message(Role.ASSISTANT, completion.content), Message(Role.USER, results)


class Lookup:
    """The example step: a lookup the model calls is answered "42" by kirod, inside the turn."""

    def __init__(self, client: KiroClient, route: Route) -> None:
        self.parts: list[Part] = []
        self.shown: tuple[CanonicalEvent, ...] = ()

    async def after(self, part: Part) -> Next | None:
        self.parts.append(part)
        if part.error is not None:
            return None
        uses = [block for block in part.completion.content if isinstance(block, ToolUseBlock)]
        if not uses:
            return None
        asked, result = answered(part.completion)
        messages = (*part.request.messages, asked, result)
        return Next(request(*messages, tools=part.request.tools), self.shown)


async def test_a_tool_answered_inside_the_turn_joins_two_exchanges_into_one_message(
    kiro: tuple[FakeKiro, KiroClient, Route],
) -> None:
    """The composition the web-search loop uses: Kiro calls a tool kirod answers itself, and a
    second exchange on the same account carries the result; the client sees one message, with
    the blocks kirod shows between the parts numbered in place."""
    service, client, route = kiro
    service.enqueue(
        Reply(text="Let me look.", tool_calls=(ToolCall("lookup", {"word": "answer"}),)),
        Reply(text="It is 42."),
    )
    first_request = request(tools=(LOOKUP,))
    step = Lookup(client, route)
    step.shown = (BlockStart(0, BlockKind.TEXT), TextDelta(0, "[looked up]"), BlockStop(0))
    async with open_exchange(client, first_request, route) as first:
        batches = await read(
            run_turn(first, first_request, [step], opener(client, route), max_parts=4)
        )
    events = [event for batch in batches for event in batch]
    message = assemble(events)
    texts = [block.text for block in message.content if isinstance(block, TextBlock)]
    assert texts == ["Let me look.", "[looked up]", "It is 42."]
    assert [type(block) for block in message.content] == [
        TextBlock,
        ToolUseBlock,
        TextBlock,
        TextBlock,
    ]
    assert sum(isinstance(event, MessageStart) for event in events) == 1
    assert [part.number for part in step.parts] == [1, 2]
    part_usage = [part.completion.usage for part in step.parts]
    assert message.usage.output_tokens == sum(usage.output_tokens for usage in part_usage)
    assert isinstance(events[-2], Usage)
    second = service.requests("chat")[1].json["conversationState"]
    results = second["currentMessage"]["userInputMessage"]["userInputMessageContext"]["toolResults"]
    assert results[0]["content"] == [{"text": "42"}]


async def test_a_turn_stops_at_max_parts(kiro: tuple[FakeKiro, KiroClient, Route]) -> None:
    service, client, route = kiro
    service.enqueue(*(Reply(text=f"part {n}") for n in range(3)))
    asked: list[int] = []

    class Always:
        async def after(self, part: Part) -> Next | None:
            asked.append(part.number)
            return Next(request())

    async with open_exchange(client, request(), route) as first:
        turn = run_turn(first, request(), [Always()], opener(client, route), max_parts=2)
        message = assemble(event for batch in await read(turn) for event in batch)
    assert [block.text for block in message.content if isinstance(block, TextBlock)] == [
        "part 0",
        "part 1",
    ]
    assert asked == [1]  # asked after the first part only: the second was the last allowed


async def test_a_failed_part_is_held_for_the_steps_and_its_open_block_closed(
    kiro: tuple[FakeKiro, KiroClient, Route],
) -> None:
    """A step may recover from a part that failed mid-text: the client sees the text so far,
    that block closed, then the next part, and no error."""
    service, client, route = kiro
    service.enqueue(
        Script(reply=Reply(text="partial answer " * 4), fault=Fault.CONNECTION_CUT, fault_at=3),
        Reply(text="the rest"),
    )
    seen: list[Part] = []

    class Recover:
        async def after(self, part: Part) -> Next | None:
            seen.append(part)
            return Next(request()) if part.error is not None else None

    async with open_exchange(client, request(), route) as first:
        turn = run_turn(first, request(), [Recover()], opener(client, route), max_parts=3)
        events = [event for batch in await read(turn) for event in batch]
    assert not any(isinstance(event, ErrorEvent) for event in events)
    message = assemble(events)
    texts = [block.text for block in message.content if isinstance(block, TextBlock)]
    assert texts[-1] == "the rest"
    assert (texts[0] and "partial answer".startswith(texts[0][:14].rstrip())) or texts[0]
    assert seen[0].error is not None
    assert seen[0].completion.content == message.content[:1]


async def test_a_failed_part_no_step_answers_ends_the_message_with_its_error(
    kiro: tuple[FakeKiro, KiroClient, Route],
) -> None:
    service, client, route = kiro
    service.enqueue(Script(reply=Reply(text="x" * 200), fault=Fault.CONNECTION_CUT, fault_at=3))

    class Never:
        async def after(self, part: Part) -> Next | None:
            return None

    async with open_exchange(client, request(), route) as first:
        turn = run_turn(first, request(), [Never()], opener(client, route), max_parts=3)
        events = [event for batch in await read(turn) for event in batch]
    assert isinstance(events[-1], ErrorEvent)
    assert sum(isinstance(event, ErrorEvent) for event in events) == 1
    assert len(service.requests("chat")) == 1
