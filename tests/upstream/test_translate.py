"""Kiro frames to canonical events: genuine wire bytes in, a grammar-valid stream out."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from kirod.canonical.assemble import CanonicalCompletion, assemble
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    RedactedThinking,
    SignatureDelta,
    StopReason,
    StreamValidator,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.request import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock
from kirod.canonical.token_count import estimate_text_tokens
from kirod.drift import Drift, Kind
from kirod.errors import ApiError, ErrorKind
from kirod.testing.fake_kiro.eventstream import (
    HeaderValue,
    encode_error,
    encode_event,
    encode_exception,
    encode_message,
)
from kirod.upstream.frames import Frame, FrameDecoder
from kirod.upstream.leaks import LEAK_MAX_CHARS
from kirod.upstream.translate import (
    DUPLICATE_MIN_CHARS,
    RETRYABLE_CODES,
    Translator,
    translate_all,
)

BASE: dict[str, Any] = {
    "message_id": "msg_1",
    "model": "claude-sonnet-4.5",
    "context_window": 200_000,
    "input_tokens_estimate": 1234,
}
START = MessageStart("msg_1", "claude-sonnet-4.5", 1234)


# -- wire builders


def text(content: str) -> bytes:
    return encode_event("assistantResponseEvent", {"content": content})


def texts(*pieces: str) -> bytes:
    return b"".join(text(piece) for piece in pieces)


def tool(tool_id: str, name: str, fragment: Any = None, *, stop: bool = False) -> bytes:
    payload: dict[str, Any] = {"toolUseId": tool_id, "name": name}
    if fragment is not None:
        payload["input"] = fragment
    if stop:
        payload["stop"] = True
    return encode_event("toolUseEvent", payload)


def tool_call(tool_id: str, name: str, arguments: str, size: int = 7) -> bytes:
    """A whole call as Kiro streams it: open frame, fragments of `size` chars, stop frame."""
    fragments = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    return (
        tool(tool_id, name)
        + b"".join(tool(tool_id, name, fragment) for fragment in fragments)
        + tool(tool_id, name, stop=True)
    )


def reasoning(**payload: str) -> bytes:
    return encode_event("reasoningContentEvent", payload)


def tail(percentage: float = 12.5, credits: float = 0.0421) -> bytes:
    return encode_event(
        "meteringEvent", {"unit": "credit", "unitPlural": "credits", "usage": credits}
    ) + encode_event("contextUsageEvent", {"contextUsagePercentage": percentage})


# -- running and checking


def decode(chunks: Iterable[bytes]) -> list[Frame]:
    decoder = FrameDecoder()
    frames = [frame for chunk in chunks for frame in decoder.feed(chunk)]
    decoder.finish()
    return frames


def translate(wire: bytes, chunks: Iterable[bytes] | None = None, **kwargs: Any) -> list[Any]:
    """Decode and translate `wire`, checking the result against the event grammar."""
    events = translate_all(decode([wire] if chunks is None else chunks), **{**BASE, **kwargs})
    validator = StreamValidator()
    for event in events:
        validator.feed(event)
    validator.finish()
    return events


def merged(events: Sequence[CanonicalEvent]) -> list[CanonicalEvent]:
    """`events` with consecutive deltas of one block joined: the stream modulo fragmentation."""
    out: list[CanonicalEvent] = []
    for event in events:
        last = out[-1] if out else None
        if isinstance(event, TextDelta) and isinstance(last, TextDelta):
            out[-1] = TextDelta(event.index, last.text + event.text)
        elif isinstance(event, ThinkingDelta) and isinstance(last, ThinkingDelta):
            out[-1] = ThinkingDelta(event.index, last.text + event.text)
        elif isinstance(event, ToolInputDelta) and isinstance(last, ToolInputDelta):
            out[-1] = ToolInputDelta(event.index, last.partial_json + event.partial_json)
        else:
            out.append(event)
    return out


def complete(wire: bytes, **kwargs: Any) -> CanonicalCompletion:
    return assemble(translate(wire, **kwargs))


def failure(wire: bytes, **kwargs: Any) -> ErrorEvent:
    events = translate(wire, **kwargs)
    assert isinstance(events[-1], ErrorEvent)
    with pytest.raises(ApiError) as caught:
        assemble(events)
    assert caught.value.code == events[-1].code
    return events[-1]


def splits(content: str) -> Iterable[list[str]]:
    """`content` cut into frames at every single position and at every pair of positions."""
    yield [content]
    yield list(content)
    for i in range(1, len(content)):
        yield [content[:i], content[i:]]
        for j in range(i + 1, len(content)):
            yield [content[:i], content[i:j], content[j:]]


def usage_and_stop(reason: StopReason, output_tokens: int) -> list[CanonicalEvent]:
    return [Usage(25_000, output_tokens, credits=0.0421), MessageStop(reason)]


# -- plain text and chunking


def test_text_stream() -> None:
    events = translate(texts("Hello, ", "world.") + tail())
    assert events == [
        START,
        BlockStart(0, BlockKind.TEXT),
        TextDelta(0, "Hello, "),
        TextDelta(0, "world."),
        BlockStop(0),
        *usage_and_stop(StopReason.END_TURN, estimate_text_tokens("Hello, world.")),
    ]


RICH_STREAM = (
    encode_event("messageMetadataEvent", {"conversationId": ""})
    + texts("<thinking>\nWeigh ", "it.</thin", "king>\n\nI'll read ", "天气 👋.")
    + tool_call("tooluse_a", "Read", json.dumps({"path": "docs/é.txt", "lines": [1, 2]}))
    + encode_event("followupPromptEvent", {"followupPrompt": {"content": "more?"}})
    + tail()
)


def test_output_does_not_depend_on_how_the_body_is_chunked() -> None:
    reference = translate(RICH_STREAM, thinking_mode="tags")
    assert assemble(reference).content == (
        ThinkingBlock("Weigh it."),
        TextBlock("I'll read 天气 👋."),
        ToolUseBlock("tooluse_a", "Read", {"path": "docs/é.txt", "lines": [1, 2]}),
    )
    one_byte = [RICH_STREAM[i : i + 1] for i in range(len(RICH_STREAM))]
    assert translate(RICH_STREAM, one_byte, thinking_mode="tags") == reference
    for cut in range(1, len(RICH_STREAM)):
        chunks = [RICH_STREAM[:cut], RICH_STREAM[cut:]]
        assert translate(RICH_STREAM, chunks, thinking_mode="tags") == reference


def test_events_are_returned_as_soon_as_known() -> None:
    translator = Translator(**BASE)
    frames = decode([texts("Hel", "lo") + tail()])
    assert translator.feed(frames[0]) == [START, BlockStart(0, BlockKind.TEXT), TextDelta(0, "Hel")]
    assert translator.feed(frames[1]) == [TextDelta(0, "lo")]
    assert translator.feed(frames[2]) == translator.feed(frames[3]) == []
    assert translator.finish() == [
        BlockStop(0),
        *usage_and_stop(StopReason.END_TURN, estimate_text_tokens("Hello")),
    ]
    assert translator.finish() == []
    assert translator.feed(frames[0]) == []


def test_unknown_and_informational_events_are_ignored() -> None:
    events: list[tuple[str, dict[str, Any]]] = [
        ("messageMetadataEvent", {"conversationId": "c1"}),
        ("followupPromptEvent", {"followupPrompt": {"content": "x", "userIntent": "y"}}),
        ("codeReferenceEvent", {"references": [{"licenseName": "MIT"}]}),
        ("supplementaryWebLinksEvent", {"supplementaryWebLinks": [{"url": "u", "title": "t"}]}),
        ("metadataEvent", {"tokenUsage": {"outputTokens": 9}}),
        ("someFutureEvent", {"anything": [1, 2]}),
    ]
    noise = b"".join(encode_event(name, payload) for name, payload in events)
    assert complete(text("Hi") + noise + tail()).content == (TextBlock("Hi"),)


def test_whitespace_alone_opens_no_text_block() -> None:
    wire = texts("\n\n", " ") + tool_call("t1", "Bash", '{"cmd":"ls"}') + text("\n") + tail()
    completion = complete(wire)
    assert completion.content == (ToolUseBlock("t1", "Bash", {"cmd": "ls"}),)
    assert completion.stop_reason is StopReason.TOOL_USE
    # Whitespace that leads real text is kept.
    assert complete(texts("\n", "  Hi") + tail()).content == (TextBlock("\n  Hi"),)


# -- thinking tags


THINKING = "<thinking>\nLet me think: is `</thinking>` a tag?\n</thinking>\n\nYes, it is."


def test_thinking_tags_split_at_every_position() -> None:
    expected = [
        START,
        BlockStart(0, BlockKind.THINKING),
        ThinkingDelta(0, "Let me think: is `</thinking>` a tag?\n"),
        BlockStop(0),
        BlockStart(1, BlockKind.TEXT),
        TextDelta(1, "Yes, it is."),
        BlockStop(1),
        *usage_and_stop(
            StopReason.END_TURN,
            estimate_text_tokens("Let me think: is `</thinking>` a tag?\n")
            + estimate_text_tokens("Yes, it is."),
        ),
    ]
    for pieces in splits(THINKING):
        events = translate(texts(*pieces) + tail(), thinking_mode="tags")
        assert merged(events) == expected, pieces


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("No thinking here.", (TextBlock("No thinking here."),)),
        ("<thinkin", (TextBlock("<thinkin"),)),
        ("<think>x</think>", (TextBlock("<think>x</think>"),)),
        (
            "Answer. <thinking>not a tag</thinking>",
            (TextBlock("Answer. <thinking>not a tag</thinking>"),),
        ),
        ("\n <thinking>a</thinking>\r\n\r\nb", (ThinkingBlock("a"), TextBlock("b"))),
        ("<thinking></thinking>\n\nOnly text", (TextBlock("Only text"),)),
        ("<thinking>a</thinking> \n\n  b", (ThinkingBlock("a"), TextBlock("  b"))),
        ("<thinking>a</thinking>b</thinking>\nc", (ThinkingBlock("a</thinking>b"), TextBlock("c"))),
        (
            "<thinking>x</thinking>\n\nlater <thinking>y",
            (ThinkingBlock("x"), TextBlock("later <thinking>y")),
        ),
    ],
)
def test_thinking_tag_shapes(content: str, expected: tuple[object, ...]) -> None:
    for pieces in splits(content):
        completion = complete(texts(*pieces) + tail(), thinking_mode="tags")
        assert completion.content == expected, pieces
        assert completion.stop_reason is StopReason.END_TURN


@pytest.mark.parametrize(
    ("content", "thinking"),
    [
        ("<thinking>\nstill going", "still going"),
        ("<thinking>cut at </thin", "cut at </thin"),
        ("<thinking>closed at the end</thinking>", "closed at the end"),
        ("<thinking>closed</thinking>  \n\n", "closed"),
    ],
)
def test_thinking_only_output_stops_at_max_tokens(content: str, thinking: str) -> None:
    for pieces in splits(content):
        completion = complete(texts(*pieces) + tail(), thinking_mode="tags")
        assert completion.content == (ThinkingBlock(thinking),), pieces
        assert completion.stop_reason is StopReason.MAX_TOKENS


def test_thinking_tags_hold_back_only_a_possible_tag() -> None:
    translator = Translator(**BASE, thinking_mode="tags")
    frames = decode([texts("<thi", "nking>abc</thi", "nk more", "</thinking>", "\n\nok")])
    assert translator.feed(frames[0]) == [START]
    assert translator.feed(frames[1]) == [
        BlockStart(0, BlockKind.THINKING),
        ThinkingDelta(0, "abc"),
    ]
    assert translator.feed(frames[2]) == [ThinkingDelta(0, "</think more")]
    assert translator.feed(frames[3]) == []  # a close tag: undecided until its line goes on
    assert translator.feed(frames[4]) == [
        BlockStop(0),
        BlockStart(1, BlockKind.TEXT),
        TextDelta(1, "ok"),
    ]


def test_tags_are_text_unless_tag_thinking_was_requested() -> None:
    for mode in ("none", "native"):
        assert complete(text(THINKING) + tail(), thinking_mode=mode).content == (
            TextBlock(THINKING),
        )


def test_a_tool_call_closes_unfinished_tag_thinking() -> None:
    wire = text("<thinking>plan") + tool_call("t1", "Bash", "{}") + text("done") + tail()
    completion = complete(wire, thinking_mode="tags")
    assert completion.content == (
        ThinkingBlock("plan"),
        ToolUseBlock("t1", "Bash", {}),
        TextBlock("done"),
    )


# -- native reasoning


def test_native_reasoning_with_signature_and_redaction() -> None:
    wire = (
        reasoning(text="First, ")
        + reasoning(text="read.")
        + reasoning(signature="EqQB")
        + reasoning(signature="Ckg=")
        + reasoning(text="Second thought.", signature="sig2")
        + reasoning(redactedContent="b64blob")
        + text("Answer")
        + tail()
    )
    events = translate(wire, thinking_mode="native")
    assert merged(events)[1:9] == [
        BlockStart(0, BlockKind.THINKING),
        ThinkingDelta(0, "First, read."),
        SignatureDelta(0, "EqQB"),
        SignatureDelta(0, "Ckg="),
        BlockStop(0),
        BlockStart(1, BlockKind.THINKING),
        ThinkingDelta(1, "Second thought."),
        SignatureDelta(1, "sig2"),
    ]
    assert RedactedThinking(2, "b64blob") in events
    completion = assemble(events)
    assert completion.content == (
        ThinkingBlock("First, read.", "EqQBCkg="),
        ThinkingBlock("Second thought.", "sig2"),
        RedactedThinkingBlock("b64blob"),
        TextBlock("Answer"),
    )
    assert completion.stop_reason is StopReason.END_TURN


def test_reasoning_without_an_answer_stops_at_max_tokens() -> None:
    for wire in (reasoning(text="hmm") + tail(), reasoning(redactedContent="blob") + tail()):
        assert complete(wire).stop_reason is StopReason.MAX_TOKENS


# -- tool calls


def test_live_tool_input_is_streamed_fragment_by_fragment() -> None:
    arguments = json.dumps(
        {"path": "src/数据.py", "content": "print('héllo 👋')\n" * 1500, "mode": 0o644},
        ensure_ascii=False,
    )
    assert len(arguments) > 20_000
    wire = (
        text("Writing it.")
        + tool("tooluse_w", "fs_write", {})  # jwadow has seen `{}` on the opening frame
        + b"".join(
            tool("tooluse_w", "fs_write", arguments[i : i + 97])
            for i in range(0, len(arguments), 97)
        )
        + tool("tooluse_w", "fs_write", stop=True)
        + tool("tooluse_w", "fs_write", stop=True)  # a repeat after the stop is ignored
        + tail()
    )
    events = translate(wire, tool_names={"fs_write": "Write"}, tool_delivery="live")
    deltas = [event for event in events if isinstance(event, ToolInputDelta)]
    assert len(deltas) == -(-len(arguments) // 97)
    held = translate(wire, tool_names={"fs_write": "Write"})  # the default: one whole delta
    assert [e for e in held if isinstance(e, ToolInputDelta)] == [ToolInputDelta(1, arguments)]
    assert merged(held) == merged(events)
    assert BlockStart(1, BlockKind.TOOL_USE, "tooluse_w", "Write") in events
    completion = assemble(events)
    assert completion.content == (
        TextBlock("Writing it."),
        ToolUseBlock("tooluse_w", "Write", json.loads(arguments)),
    )
    assert completion.stop_reason is StopReason.TOOL_USE
    assert completion.usage.output_tokens == estimate_text_tokens(
        "Writing it."
    ) + estimate_text_tokens(arguments)


def test_several_tool_calls_and_a_no_argument_call() -> None:
    wire = (
        tool_call("t1", "get_weather", '{"city":"Zürich"}', size=3)
        + tool("t2", "list_files", "", stop=True)
        + tool("t3", "x" * 64, '{"a":{"b":[1,"}"]}}', stop=True)
        + tail()
    )
    completion = complete(wire, tool_names=lambda name: name.upper()[:8])
    assert completion.content == (
        ToolUseBlock("t1", "GET_WEAT", {"city": "Zürich"}),
        ToolUseBlock("t2", "LIST_FIL", {}),
        ToolUseBlock("t3", "XXXXXXXX", {"a": {"b": [1, "}"]}}),
    )
    assert completion.stop_reason is StopReason.TOOL_USE


def test_tool_input_never_stopped_is_truncated() -> None:
    for wire in (
        tool("t1", "Write") + tool("t1", "Write", '{"content": "abc'),  # cut mid-JSON
        tool("t1", "Write", '{"content": "abc"}'),  # whole JSON, but no stop
        tool("t1", "Write", '{"a":') + tool("t2", "Read", "{}", stop=True),  # overtaken
        tool("t1", "Write", '{"a":') + text("more text"),
        tool("t1", "Write", '{"a":') + reasoning(text="more thought"),
        text("Hi ") + tool("t1", "Write", '{"a":') + tail(),
    ):
        error = failure(wire)
        assert (error.kind, error.code) == (ErrorKind.UPSTREAM, "tool_input_truncated")
        assert error.code not in RETRYABLE_CODES


def test_tool_input_that_is_not_an_object_fails() -> None:
    for arguments in ("[1, 2]", '"text"'):
        error = failure(tool_call("t1", "Bash", arguments) + tail())
        assert error.code == "tool_input_invalid"


def test_malformed_tool_frames_fail() -> None:
    nameless = encode_event("toolUseEvent", {"toolUseId": "t1", "input": "{}"})
    idless = encode_event("toolUseEvent", {"name": "Read", "input": "{}"})
    for wire in (nameless, idless):
        assert failure(wire).code == "upstream_malformed"
    # A fragment that only lacks its repeated id belongs to the open call.
    wire = tool("t1", "Read", '{"a":') + idless + tool("t1", "Read", "}", stop=True) + tail()
    assert complete(wire).content == (ToolUseBlock("t1", "Read", {"a": {}}),)


# -- duplicated frames


def test_long_identical_consecutive_delta_is_dropped() -> None:
    chunk = "A sentence long enough to be a fault."
    assert len(chunk) >= DUPLICATE_MIN_CHARS
    completion = complete(texts("Start. ", chunk, chunk, chunk, " End.") + tail())
    assert completion.content == (TextBlock(f"Start. {chunk} End."),)


@pytest.mark.parametrize(
    "pieces",
    [
        ["ha", "ha", "ha"],
        ["\n\n", "\n\n", "x"],
        ["x", " " * 40, " " * 40, "y"],
        ["x" * (DUPLICATE_MIN_CHARS - 1)] * 2,
        ["A sentence long enough to repeat.", "B", "A sentence long enough to repeat."],
    ],
)
def test_legitimate_repeats_are_kept(pieces: list[str]) -> None:
    assert complete(texts(*pieces) + tail()).content == (TextBlock("".join(pieces)),)


def test_a_frame_between_repeats_makes_them_legitimate() -> None:
    chunk = "A sentence long enough to repeat."
    wire = text(chunk) + encode_event("messageMetadataEvent", {}) + text(chunk) + tail()
    assert complete(wire).content == (TextBlock(chunk * 2),)


# -- tool calls leaked as text


LEAK = 'Let me look. [Called Read with args: {"path": "a]b.txt", "q": "say \\"}]\\""}] Done.'


def test_leaked_call_of_a_declared_tool_becomes_a_tool_call() -> None:
    expected = (
        TextBlock("Let me look. "),
        ToolUseBlock("tooluse_msg_1_1", "Read", {"path": "a]b.txt", "q": 'say "}]"'}),
        TextBlock(" Done."),
    )
    for pieces in splits(LEAK):
        completion = complete(texts(*pieces) + tail(), declared_tools={"Read"})
        assert completion.content == expected, pieces
        assert completion.stop_reason is StopReason.TOOL_USE


def test_leaked_call_name_is_mapped_back() -> None:
    wire = text('[Called mcp_short with args: {"q": 1}]') + tail()
    completion = complete(
        wire,
        declared_tools={"mcp__server__long_name"},
        tool_names={"mcp_short": "mcp__server__long_name"},
    )
    assert completion.content == (
        ToolUseBlock("tooluse_msg_1_1", "mcp__server__long_name", {"q": 1}),
    )


@pytest.mark.parametrize(
    "content",
    [
        '[Called Write with args: {"path": "a"}]',  # undeclared
        '[Called Read with args: {"path": }]',  # not JSON
        '[Called Read with args: ["a"]]',  # not an object
        '[Called Read with args: {"path": "a"} ]',  # not closed right after the object
        '[Called Read  with args: {"path": "a"}]',
        "[Called Read with args: {unclosed",  # held to the end, then text
        "[Called Read",
        "[Calle",
        "[Called " + "R" * 129 + ' with args: {"path": "a"}]',  # no tool has such a name
        "[Called [Called Read",
    ],
)
def test_text_that_is_not_a_declared_leak_stays_text(content: str) -> None:
    for pieces in splits(content):
        completion = complete(texts(*pieces) + tail(), declared_tools={"Read"})
        assert completion.content == (TextBlock(content),), pieces


def test_leak_rescue_gives_up_past_its_cap() -> None:
    opening = '[Called Read with args: {"data": "'
    frames = [opening] + [f"{i:04}" + "x" * 996 for i in range(LEAK_MAX_CHARS // 1000 + 1)]
    translator = Translator(**BASE, declared_tools={"Read"})
    decoded = decode([texts(*frames)])
    held = [event for frame in decoded[:-1] for event in translator.feed(frame)]
    assert held == [START]  # everything is held while the call may still complete
    released = translator.feed(decoded[-1])
    assert merged(released) == [BlockStart(0, BlockKind.TEXT), TextDelta(0, "".join(frames))]


def test_leaks_inside_tag_thinking_stay_thinking() -> None:
    content = '<thinking>I could [Called Read with args: {"path": "a"}]</thinking>\n\nNo need.'
    completion = complete(text(content) + tail(), declared_tools={"Read"}, thinking_mode="tags")
    assert completion.content == (
        ThinkingBlock('I could [Called Read with args: {"path": "a"}]'),
        TextBlock("No need."),
    )


def test_leaks_are_text_without_declared_tools() -> None:
    content = '[Called Read with args: {"path": "a"}]'
    assert complete(text(content) + tail()).content == (TextBlock(content),)


# -- exceptions and errors


def test_content_length_exceeded_is_a_max_tokens_stop() -> None:
    wire = (
        text("Partial answer")
        + encode_exception("ContentLengthExceededException", "Output too long")
        + text("ignored after the stop")
        + tail()
    )
    events = translate(wire)
    assert events[-2:] == usage_and_stop(
        StopReason.MAX_TOKENS, estimate_text_tokens("Partial answer")
    )
    assert assemble(events).content == (TextBlock("Partial answer"),)
    empty = translate(encode_exception("ContentLengthExceededException", "too long"))
    assert assemble(empty).stop_reason is StopReason.MAX_TOKENS
    # A tool call the length limit cut short is still never handed out.
    cut = tool("t1", "Write", '{"a":') + encode_exception("ContentLengthExceededException", "")
    assert failure(cut).code == "tool_input_truncated"


@pytest.mark.parametrize(
    ("exception_type", "kind", "code"),
    [
        ("ThrottlingException", ErrorKind.OVERLOADED, "upstream_throttled"),
        ("ServiceUnavailableException", ErrorKind.OVERLOADED, "upstream_unavailable"),
        ("ServiceUnavailable", ErrorKind.OVERLOADED, "upstream_unavailable"),
        ("InternalServerException", ErrorKind.UPSTREAM, "upstream_unavailable"),
        ("InternalFailure", ErrorKind.UPSTREAM, "upstream_unavailable"),
        ("error", ErrorKind.UPSTREAM, "upstream_error"),
        ("ValidationException", ErrorKind.UPSTREAM, "upstream_error"),
        ("Weird <script>", ErrorKind.UPSTREAM, "upstream_error"),
    ],
)
def test_mid_stream_exceptions(exception_type: str, kind: ErrorKind, code: str) -> None:
    secret = "internal detail 10.0.0.7 arn:aws:secret"
    for wire in (
        text("Hello ") + encode_exception(exception_type, secret) + text("more") + tail(),
        encode_error(exception_type, secret),
    ):
        error = failure(wire)
        assert (error.kind, error.code) == (kind, code)
        assert (code in RETRYABLE_CODES) == (code != "upstream_error")
        assert secret not in error.message
        assert "script" not in error.message
        assert len(error.message) < 120


def exception_with(exception_type: str, payload: dict[str, Any]) -> bytes:
    headers: dict[str, HeaderValue] = {
        ":message-type": "exception",
        ":exception-type": exception_type,
        ":content-type": "application/json",
    }
    return encode_message(headers, json.dumps(payload).encode())


def test_exception_reason_is_named_when_it_is_a_plain_code() -> None:
    capacity = {"message": "busy", "reason": "INSUFFICIENT_MODEL_CAPACITY"}
    error = failure(exception_with("ThrottlingException", capacity))
    assert error.message.endswith("(ThrottlingException: INSUFFICIENT_MODEL_CAPACITY)")
    error = failure(exception_with("error", {"reason": "see http://x y"}))
    assert error.message.endswith("(error)")


def test_nothing_follows_a_terminal_error() -> None:
    translator = Translator(**BASE)
    frames = decode([encode_exception("ThrottlingException", "slow down") + text("late")])
    assert [type(event) for event in translator.feed(frames[0])] == [MessageStart, ErrorEvent]
    assert translator.feed(frames[1]) == []
    assert translator.finish() == []


# -- empty streams and usage


@pytest.mark.parametrize(
    "wire",
    [b"", tail(), encode_event("messageMetadataEvent", {"conversationId": ""}) + text("")],
)
def test_empty_stream(wire: bytes) -> None:
    events = translate(wire)
    assert events == [
        START,
        ErrorEvent(ErrorKind.UPSTREAM, "Kiro returned an empty response", "empty_response"),
    ]
    assert "empty_response" in RETRYABLE_CODES


def test_usage_from_tail_frames() -> None:
    events = translate(text("Hi") + tail(percentage=0.7385, credits=0.01) + tail(12.5, 0.02))
    usage = events[-2]
    assert isinstance(usage, Usage)
    assert (usage.input_tokens, usage.output_tokens) == (25_000, 1)
    assert usage.credits == pytest.approx(0.03)


def test_usage_without_tail_frames_uses_the_estimates() -> None:
    events = translate(text("Hello there, how are you?"))
    assert events[-2] == Usage(1234, estimate_text_tokens("Hello there, how are you?"))
    assert complete(text("x") + tail(percentage=0.5)).usage.input_tokens == 1000


# -- the completion witness and the stop reasons Kiro states (docs/KIRO-PROTOCOL.md §3.4)


def metadata(**payload: Any) -> bytes:
    return encode_event("metadataEvent", payload)


def full_tail(stop: str = "END_TURN") -> bytes:
    """Today's tail, in Kiro's order: metadataEvent, contextUsageEvent, meteringEvent."""
    return (
        metadata(stopReason=stop)
        + encode_event("contextUsageEvent", {"contextUsagePercentage": 12.5})
        + encode_event("meteringEvent", {"unit": "credit", "usage": 0.0421})
    )


CUT_SHAPES = {
    "text": text("Step 1 of 12 is done; now step"),
    "reasoning": reasoning(text="plan", signature="sig") + text("I will now"),
    "tag_thinking": text("<thinking>plan</thinking>\n\nHalf an"),
    "tool_call": text("Reading.") + tool_call("t1", "Read", '{"path":"a"}'),
    "tail_then_more": text("Hi") + tail() + text(" and then more"),
}


@pytest.mark.parametrize("shape", CUT_SHAPES)
def test_content_that_ends_without_the_tail_is_a_cut_at_max_tokens(shape: str) -> None:
    wire = CUT_SHAPES[shape]
    translator = Translator(**BASE, thinking_mode="tags")
    events = [e for frame in decode([wire]) for e in translator.feed(frame)] + translator.finish()
    completion = assemble(events)
    assert completion.stop_reason is StopReason.MAX_TOKENS  # never end_turn, nor tool_use
    assert completion.content  # what came is handed out
    assert translator.cut
    # The same content with its tail is whole.
    whole = Translator(**BASE, thinking_mode="tags")
    wire += full_tail()
    events = [e for frame in decode([wire]) for e in whole.feed(frame)] + whole.finish()
    assert assemble(events).stop_reason in (StopReason.END_TURN, StopReason.TOOL_USE)
    assert not whole.cut


@pytest.mark.parametrize(
    "witness",
    [
        metadata(stopReason="END_TURN"),
        metadata(),
        encode_event("contextUsageEvent", {"contextUsagePercentage": 3.0}),
        encode_event("meteringEvent", {"usage": 0.01}),
    ],
)
def test_any_one_tail_frame_after_the_content_witnesses_a_whole_answer(witness: bytes) -> None:
    translator = Translator(**BASE)
    frames = decode([text("Done.") + witness])
    events = [e for frame in frames for e in translator.feed(frame)] + translator.finish()
    assert events[-1] == MessageStop(StopReason.END_TURN)
    assert not translator.cut


def test_the_stated_stop_reason_does_not_decide_tool_turns() -> None:
    """END_TURN comes on many tool turns: that the tail came is what counts."""
    wire = tool_call("t1", "Bash", '{"cmd":"ls"}') + full_tail("END_TURN")
    assert complete(wire).stop_reason is StopReason.TOOL_USE
    assert complete(text("Hi") + full_tail("TOOL_USE")).stop_reason is StopReason.END_TURN


def test_max_tokens_in_the_tail_is_the_output_limit() -> None:
    assert complete(text("Half") + full_tail("MAX_TOKENS")).stop_reason is StopReason.MAX_TOKENS


def test_content_filtered_is_a_refusal_even_with_nothing_before_it() -> None:
    refusal = {"refusal": {"category": "cyber", "explanation": "declined"}}
    wire = metadata(stopReason="CONTENT_FILTERED", stopDetails=refusal) + tail()
    events = translate(wire)
    assert events == [START, Usage(25_000, 0, credits=0.0421), MessageStop(StopReason.REFUSAL)]
    after = complete(text("Sure, here") + wire + text("ignored"))
    assert (after.content, after.stop_reason) == ((TextBlock("Sure, here"),), StopReason.REFUSAL)
    # A call the filter stopped half way is never handed out.
    open_call = tool("t1", "Write", '{"a":') + wire
    assert failure(open_call).code == "tool_input_truncated"


def test_context_window_exceeded_before_output_is_the_prompt_too_long_error() -> None:
    events = translate(metadata(stopReason="MODEL_CONTEXT_WINDOW_EXCEEDED") + tail())
    error = events[-1]
    assert isinstance(error, ErrorEvent)
    assert (error.kind, error.code) == (ErrorKind.INVALID_REQUEST, "context_length_exceeded")
    assert error.message == "prompt is too long: 200001 tokens > 200000 maximum"
    assert error.code not in RETRYABLE_CODES
    # After some output, the output ran out of room.
    wire = text("Long answer") + metadata(stopReason="MODEL_CONTEXT_WINDOW_EXCEEDED") + tail()
    assert complete(wire).stop_reason is StopReason.MAX_TOKENS


def drift_of(recorder: Drift) -> list[tuple[Kind, str, dict[str, str], str | None]]:
    return [(r.kind, r.where, dict(r.shape), r.region) for r in recorder.pending()]


def test_unknown_stop_reasons_and_events_keep_serving_and_are_drift() -> None:
    """Recorded by shape on the daemon's recorder (`kirod.drift`): names and keys, no content."""
    recorder = Drift()
    wire = (
        text("Hi")
        + encode_event("brandNewEvent", {"secretText": "do not log me", "n": 1})
        + metadata(stopReason="BRAND_NEW_REASON")
        + tail()
    )
    known = text("Hi") + metadata(stopReason="PAUSE_TURN") + tail()
    assert complete(wire, drift=recorder, region="us-east-1").stop_reason is StopReason.END_TURN
    assert complete(known, drift=recorder).content
    where = "generateAssistantResponse"
    assert sorted(drift_of(recorder)) == [
        (
            Kind.EVENT_TYPE,
            where,
            {"event_type": "brandNewEvent", "keys": "n,secretText"},
            "us-east-1",
        ),
        (
            Kind.STOP_REASON,
            where,
            {"stop_reason": "BRAND_NEW_REASON", "type": "string"},
            "us-east-1",
        ),
    ]  # not PAUSE_TURN
    assert "do not log me" not in repr(recorder.pending())


def test_an_answer_without_its_tail_is_drift_and_a_whole_one_is_not() -> None:
    recorder = Drift()
    cut = text("Step 1 done.") + tool_call("t1", "Read", '{"path": "a"}')
    assert complete(cut, drift=recorder).stop_reason is StopReason.MAX_TOKENS
    assert drift_of(recorder) == [
        (Kind.TAIL_MISSING, "generateAssistantResponse", {"blocks": "2", "tool_calls": "1"}, None)
    ]
    recorder.take()
    assert complete(cut + metadata(stopReason="TOOL_USE"), drift=recorder).content
    assert complete(text("Hi") + tail(), drift=recorder).content
    assert drift_of(recorder) == []
