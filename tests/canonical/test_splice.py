"""`Splice`: several parts' event streams as one valid message."""

from __future__ import annotations

from kirod.canonical.assemble import assemble
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    SearchHit,
    SearchResults,
    ServerToolUse,
    StopReason,
    TextDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.request import TextBlock, ToolUseBlock
from kirod.canonical.splice import Splice
from kirod.errors import ErrorKind


def part(
    message_id: str, blocks: list[list[CanonicalEvent]], usage: Usage, stop: StopReason
) -> list[CanonicalEvent]:
    events: list[CanonicalEvent] = [MessageStart(message_id, "m", usage.input_tokens)]
    for block in blocks:
        events += block
    return [*events, usage, MessageStop(stop)]


def text(index: int, value: str) -> list[CanonicalEvent]:
    return [BlockStart(index, BlockKind.TEXT), TextDelta(index, value), BlockStop(index)]


def tool(index: int, call_id: str) -> list[CanonicalEvent]:
    return [
        BlockStart(index, BlockKind.TOOL_USE, call_id, "lookup"),
        ToolInputDelta(index, '{"q": 1}'),
        BlockStop(index),
    ]


def test_parts_join_into_one_message_numbered_on_with_the_prompt_counted_once() -> None:
    splice = Splice()
    first = part("a", [text(0, "looking"), tool(1, "t1")], Usage(10, 5, 0.5), StopReason.TOOL_USE)
    second = part("b", [text(0, "found it")], Usage(30, 7, 0.25), StopReason.END_TURN)
    joined = splice.feed(first)
    splice.next_part()
    joined += splice.feed(second) + splice.end()

    message = assemble(joined)  # the stream grammar holds: one start, ordered blocks, one stop
    assert message.message_id == "a"
    assert message.content == (
        TextBlock("looking"),
        ToolUseBlock("t1", "lookup", {"q": 1}),
        TextBlock("found it"),
    )
    assert message.usage == Usage(30, 12, 0.75)  # each part resent the prompt: the last tells it
    assert message.stop_reason is StopReason.END_TURN
    assert [e.index for e in joined if isinstance(e, BlockStart)] == [0, 1, 2]


def test_one_part_passes_through_unchanged() -> None:
    splice = Splice()
    events = part("a", [text(0, "hi")], Usage(3, 1), StopReason.END_TURN)
    assert splice.feed(events) + splice.end() == events


def test_credits_stay_unknown_when_no_part_knows_them() -> None:
    splice = Splice()
    splice.feed(part("a", [], Usage(1, 1), StopReason.END_TURN))
    splice.next_part()
    splice.feed(part("b", [], Usage(2, 2), StopReason.MAX_TOKENS))
    assert splice.end() == [Usage(2, 3, None), MessageStop(StopReason.MAX_TOKENS)]


def test_an_error_in_a_later_part_reaches_the_client() -> None:
    splice = Splice()
    splice.feed(part("a", [text(0, "x")], Usage(1, 1), StopReason.TOOL_USE))
    splice.next_part()
    failure = ErrorEvent(ErrorKind.UPSTREAM, "broke", "upstream_error")
    joined = splice.feed([MessageStart("b", "m", 1), BlockStart(0, BlockKind.TEXT), failure])
    assert joined == [BlockStart(1, BlockKind.TEXT), failure]


def test_hidden_tool_calls_are_left_out_and_the_blocks_after_them_numbered_on() -> None:
    """The model's calls of a tool kirod runs itself never reach the client; what kirod shows
    instead (a search and its results) takes their place between the parts."""
    splice = Splice(hidden_tools=frozenset({"lookup"}))
    first = part("a", [text(0, "looking"), tool(1, "t1")], Usage(10, 5), StopReason.TOOL_USE)
    joined = splice.feed(first)
    splice.next_part()
    joined += splice.feed(
        [
            ServerToolUse(0, "srv1", "web_search", "q"),
            SearchResults(1, "srv1", (SearchHit("https://a.example/", "A"),)),
            Usage(0, 0, web_search_requests=1),
        ]
    )
    splice.next_part()
    second = part("b", [text(0, "found it")], Usage(30, 7), StopReason.END_TURN)
    joined += splice.feed(second) + splice.end()
    message = assemble(joined)
    assert [type(block).__name__ for block in message.content] == [
        "TextBlock",
        "ServerToolUseBlock",
        "SearchResultsBlock",
        "TextBlock",
    ]
    assert not any(isinstance(e, ToolInputDelta) for e in joined)
    assert message.usage == Usage(30, 12, web_search_requests=1)


def test_a_message_ending_on_a_hidden_call_does_not_say_tool_use() -> None:
    splice = Splice(hidden_tools=frozenset({"lookup"}))
    joined = splice.feed(part("a", [tool(0, "t1")], Usage(1, 1), StopReason.TOOL_USE))
    joined += splice.end()
    assert assemble(joined).stop_reason is StopReason.END_TURN


def test_a_part_that_failed_inside_a_block_has_it_closed() -> None:
    splice = Splice()
    joined = splice.feed(
        [MessageStart("a", "m", 1), BlockStart(0, BlockKind.TEXT), TextDelta(0, "x")]
    )
    assert splice.close_open_block() == [BlockStop(0)]
    assert splice.close_open_block() == []
    assert len(joined) == 3


def test_cache_counts_are_the_last_parts_and_a_shown_search_keeps_them() -> None:
    splice = Splice()
    splice.feed(
        part("a", [], Usage(10, 5, cache_read_tokens=4, cache_write_tokens=2), StopReason.TOOL_USE)
    )
    splice.next_part()
    splice.feed([Usage(0, 0, web_search_requests=1)])  # a shown search: no prompt of its own
    splice.next_part()
    assert splice.end()[0] == Usage(10, 5, None, 4, 2, 1)
    splice.next_part()
    splice.feed(part("b", [], Usage(12, 3, cache_read_tokens=10), StopReason.END_TURN))
    assert splice.end()[0] == Usage(12, 8, None, 10, 0, 1)


def test_appended_blocks_follow_the_part_and_its_stop_ends_the_message() -> None:
    """Searches shown after a part that stopped for the client's call: numbered after its
    blocks, their search counted, and the part's `tool_use` stop kept."""
    splice = Splice()
    first = part("a", [text(0, "two things"), tool(1, "t1")], Usage(10, 5), StopReason.TOOL_USE)
    joined = splice.feed(first)
    hit = SearchHit("https://example.com/", "Example", "snippet")
    joined += splice.append(
        [
            ServerToolUse(0, "srvtoolu_1", "web_search", "q"),
            SearchResults(1, "srvtoolu_1", (hit,), None),
            Usage(0, 0, web_search_requests=1),
        ]
    )
    joined += splice.end()
    message = assemble(joined)
    assert [type(block).__name__ for block in message.content][:2] == ["TextBlock", "ToolUseBlock"]
    assert len(message.content) == 4
    assert message.stop_reason is StopReason.TOOL_USE
    assert (message.usage.input_tokens, message.usage.web_search_requests) == (10, 1)
