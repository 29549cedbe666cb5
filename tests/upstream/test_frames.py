"""The event-stream decoder, and the fake's encoder checked against botocore's reference decoder."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable

import pytest
from botocore.eventstream import EventStreamBuffer

from kirod.testing.fake_kiro.eventstream import (
    HeaderValue,
    corrupt_crc,
    encode_error,
    encode_event,
    encode_exception,
    encode_message,
)
from kirod.upstream import frames
from kirod.upstream.errors import UpstreamProtocolError
from kirod.upstream.frames import MAX_FRAME_SIZE, Frame, FrameDecoder

EVENT_HEADERS: dict[str, HeaderValue] = {
    ":message-type": "event",
    ":event-type": "assistantResponseEvent",
    ":content-type": "application/json",
}

# (wire bytes, decoded frame) for a stream exercising every message kind.
STREAM: list[tuple[bytes, Frame]] = [
    (
        encode_event("messageMetadataEvent", {"conversationId": ""}),
        Frame("event", event_type="messageMetadataEvent", payload={"conversationId": ""}),
    ),
    (
        encode_event("assistantResponseEvent", {"content": "Hello 👋 世界"}),
        Frame("event", event_type="assistantResponseEvent", payload={"content": "Hello 👋 世界"}),
    ),
    (
        encode_event(
            "toolUseEvent",
            {"toolUseId": "t1", "name": "get", "input": '{"q":"天气"}', "stop": True},
        ),
        Frame(
            "event",
            event_type="toolUseEvent",
            payload={"toolUseId": "t1", "name": "get", "input": '{"q":"天气"}', "stop": True},
        ),
    ),
    (
        encode_event("meteringEvent", {"unit": "credit", "usage": 0.0421}),
        Frame("event", event_type="meteringEvent", payload={"unit": "credit", "usage": 0.0421}),
    ),
    (
        encode_exception("ThrottlingException", "Too many requests"),
        Frame(
            "exception",
            exception_type="ThrottlingException",
            payload={"message": "Too many requests"},
        ),
    ),
    (
        encode_error("InternalFailure", "boom"),
        Frame("error", error_code="InternalFailure", error_message="boom"),
    ),
    (encode_message(EVENT_HEADERS, b""), Frame("event", event_type="assistantResponseEvent")),
]
STREAM_BYTES = b"".join(wire for wire, _ in STREAM)
STREAM_FRAMES = [frame for _, frame in STREAM]


def decode(chunks: Iterable[bytes]) -> list[Frame]:
    decoder = FrameDecoder()
    frames = [frame for chunk in chunks for frame in decoder.feed(chunk)]
    decoder.finish()
    return frames


def decode_until_error(chunks: Iterable[bytes]) -> list[Frame]:
    """Collect frames until the decoder raises, failing the test if it never does."""
    decoder = FrameDecoder()
    frames: list[Frame] = []
    try:
        for chunk in chunks:
            frames += decoder.feed(chunk)
        decoder.finish()
    except UpstreamProtocolError:
        return frames
    pytest.fail("the decoder accepted a malformed stream")


def botocore_decode(data: bytes) -> list[tuple[object, bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [(message.headers, message.payload) for message in buffer]


def frame_with_raw_headers(headers: bytes, payload: bytes = b"") -> bytes:
    """Frame arbitrary header bytes, with valid CRCs, independently of the encoder under test."""
    prelude = struct.pack("!II", 12 + len(headers) + len(payload) + 4, len(headers))
    message = prelude + struct.pack("!I", zlib.crc32(prelude)) + headers + payload
    return message + struct.pack("!I", zlib.crc32(message))


def string_header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack("!H", len(raw)) + raw


# -- encoder ---------------------------------------------------------------------------------


def test_encoder_known_answer_computed_by_hand() -> None:
    header = b"\x0d:message-type" + b"\x07" + b"\x00\x05" + b"event"
    payload = b"{}"
    prelude = struct.pack("!II", 12 + len(header) + len(payload) + 4, len(header))
    prelude += struct.pack("!I", zlib.crc32(prelude))
    expected = prelude + header + payload
    expected += struct.pack("!I", zlib.crc32(expected))

    wire = encode_message({":message-type": "event"}, payload)

    assert wire == expected
    assert struct.unpack("!IIII", wire[:12] + wire[-4:]) == (40, 22, 0x60470EFD, 0xB7184AFC)


# Vectors published with AWS's reference decoder (botocore tests/unit/test_eventstream.py).
@pytest.mark.parametrize(
    ("headers", "payload", "wire"),
    [
        pytest.param(
            {}, b"", b"\x00\x00\x00\x10\x00\x00\x00\x00\x05\xc2H\xeb}\x98\xc8\xff", id="empty"
        ),
        pytest.param(
            {"integer": -1},
            b"",
            b"\x00\x00\x00\x1d\x00\x00\x00\r\x83\xe3\xf0\xe7\x07integer\x04\xff\xff\xff\xff"
            b"\x8b\x8e\x12\xeb",
            id="int32",
        ),
        pytest.param(
            {"content-type": "application/json"},
            b"{'foo':'bar'}",
            b"\x00\x00\x00=\x00\x00\x00 \x07\xfd\x83\x96\x0ccontent-type\x07\x00\x10"
            b"application/json{'foo':'bar'}\x8d\x9c\x08\xb1",
            id="string",
        ),
    ],
)
def test_encoder_matches_aws_vectors(
    headers: dict[str, HeaderValue], payload: bytes, wire: bytes
) -> None:
    assert encode_message(headers, payload) == wire


def test_encode_error_matches_aws_vector() -> None:
    assert encode_error("code", "message") == (
        b"\x00\x00\x00\x52\x00\x00\x00\x42\xbf\x23\x63\x7e"
        b"\x0d:message-type\x07\x00\x05error"
        b"\x0b:error-code\x07\x00\x04code"
        b"\x0e:error-message\x07\x00\x07message"
        b"\x6b\x6c\xea\x3d"
    )


def test_botocore_decodes_every_header_type_we_encode() -> None:
    headers: dict[str, HeaderValue] = {
        "yes": True,
        "no": False,
        "int": -(2**31),
        "blob": b"\x00\xff",
        "text": "naïve ✓",
    }
    assert botocore_decode(encode_message(headers, b"payload")) == [(headers, b"payload")]


def test_botocore_decodes_the_helpers() -> None:
    assert botocore_decode(encode_event("assistantResponseEvent", {"content": "é"})) == [
        (
            {
                ":message-type": "event",
                ":event-type": "assistantResponseEvent",
                ":content-type": "application/json",
            },
            '{"content":"é"}'.encode(),
        )
    ]
    assert botocore_decode(encode_exception("ValidationException", "bad")) == [
        (
            {
                ":message-type": "exception",
                ":exception-type": "ValidationException",
                ":content-type": "application/json",
            },
            b'{"message":"bad"}',
        )
    ]


def test_corrupt_crc_changes_only_the_message_crc() -> None:
    wire = encode_event("assistantResponseEvent", {"content": "x"})
    damaged = corrupt_crc(wire)
    assert damaged[:-4] == wire[:-4]
    assert damaged[-4:] != wire[-4:]


# -- decoder: well-formed streams ------------------------------------------------------------


@pytest.mark.parametrize(("wire", "frame"), STREAM, ids=[f.message_type for f in STREAM_FRAMES])
def test_round_trip(wire: bytes, frame: Frame) -> None:
    assert decode([wire]) == [frame]


def test_whole_stream_in_one_chunk() -> None:
    assert decode([STREAM_BYTES]) == STREAM_FRAMES


def test_split_at_every_offset() -> None:
    for offset in range(len(STREAM_BYTES) + 1):
        assert decode([STREAM_BYTES[:offset], STREAM_BYTES[offset:]]) == STREAM_FRAMES, offset


def test_one_byte_at_a_time() -> None:
    chunks = [STREAM_BYTES[i : i + 1] for i in range(len(STREAM_BYTES))]
    assert decode(chunks) == STREAM_FRAMES


def test_each_frame_knows_its_wire_length_however_chunked() -> None:
    sizes = [len(wire) for wire, _ in STREAM]
    assert [frame.size for frame in decode([STREAM_BYTES])] == sizes
    halves = [STREAM_BYTES[:50], STREAM_BYTES[50:]]  # the first frame split across chunks
    assert [frame.size for frame in decode(halves)] == sizes


def test_frame_is_returned_by_the_feed_that_completes_it() -> None:
    wire = encode_event("assistantResponseEvent", {"content": "hi"})
    decoder = FrameDecoder()
    assert decoder.feed(wire[:-1]) == []
    assert decoder.feed(wire[-1:]) == [
        Frame("event", event_type="assistantResponseEvent", payload={"content": "hi"})
    ]


def test_empty_stream_is_fine() -> None:
    assert decode([]) == []
    assert decode([b""]) == []


def test_empty_payload_is_an_empty_object() -> None:
    assert decode([encode_message(EVENT_HEADERS, b"")])[0].payload == {}


def test_unicode_survives_splits_inside_multibyte_characters() -> None:
    text = "emoji 🧪🚀, CJK 漢字かなカナ한글, combining é"
    wire = encode_event("assistantResponseEvent", {"content": text})
    for offset in range(len(wire) + 1):
        [frame] = decode([wire[:offset], wire[offset:]])
        assert frame.payload == {"content": text}


def test_error_frame_without_message_header() -> None:
    wire = encode_message({":message-type": "error", ":error-code": "InternalFailure"}, b"")
    assert decode([wire]) == [Frame("error", error_code="InternalFailure")]


# -- decoder: malformed streams --------------------------------------------------------------


def test_corrupted_message_crc() -> None:
    with pytest.raises(UpstreamProtocolError, match="message CRC"):
        decode([corrupt_crc(STREAM[0][0])])


def test_the_message_crc_is_checked_whether_or_not_the_header_block_is_known() -> None:
    wire = encode_event("assistantResponseEvent", {"content": "x"})
    frames._KNOWN_KINDS.clear()
    with pytest.raises(UpstreamProtocolError, match="message CRC"):
        FrameDecoder().feed(corrupt_crc(wire))
    assert not frames._KNOWN_KINDS  # a frame that fails its check teaches nothing
    assert FrameDecoder().feed(wire)
    assert frames._KNOWN_KINDS
    with pytest.raises(UpstreamProtocolError, match="message CRC"):
        FrameDecoder().feed(corrupt_crc(wire))


@pytest.mark.parametrize("index", range(12))
def test_corrupted_prelude(index: int) -> None:
    wire = bytearray(STREAM[1][0])
    wire[index] ^= 0x01
    with pytest.raises(UpstreamProtocolError, match="prelude CRC"):
        FrameDecoder().feed(bytes(wire))


def test_every_single_byte_corruption_is_detected() -> None:
    wire = STREAM[2][0]
    for index in range(len(wire)):
        damaged = bytearray(wire)
        damaged[index] ^= 0x80
        assert decode_until_error([bytes(damaged)]) == [], index


def test_frames_before_a_corrupt_one_do_not_depend_on_chunking() -> None:
    data = STREAM_BYTES + corrupt_crc(STREAM[0][0])
    for offset in range(len(data) + 1):
        assert decode_until_error([data[:offset], data[offset:]]) == STREAM_FRAMES, offset


def test_decoder_stays_failed() -> None:
    decoder = FrameDecoder()
    with pytest.raises(UpstreamProtocolError):
        decoder.feed(corrupt_crc(STREAM[0][0]))
    with pytest.raises(UpstreamProtocolError):
        decoder.feed(STREAM[0][0])
    with pytest.raises(UpstreamProtocolError):
        decoder.finish()


@pytest.mark.parametrize("cut", [1, 11, 12, 13, len(STREAM[1][0]) - 1])
def test_truncated_stream_fails_on_finish(cut: int) -> None:
    decoder = FrameDecoder()
    assert decoder.feed(STREAM[0][0] + STREAM[1][0][:cut]) == [STREAM_FRAMES[0]]
    with pytest.raises(UpstreamProtocolError, match="truncated"):
        decoder.finish()


def prelude(total_length: int, headers_length: int) -> bytes:
    head = struct.pack("!II", total_length, headers_length)
    return head + struct.pack("!I", zlib.crc32(head))


@pytest.mark.parametrize(
    ("total_length", "headers_length"),
    [(MAX_FRAME_SIZE + 1, 0), (2**32 - 1, 0), (0, 0), (15, 0), (16, 1), (100, 85)],
)
def test_impossible_lengths_fail_on_the_prelude(total_length: int, headers_length: int) -> None:
    with pytest.raises(UpstreamProtocolError, match="length"):
        FrameDecoder().feed(prelude(total_length, headers_length))


def test_largest_frame_is_accepted() -> None:
    headers = string_header(":message-type", "event") + string_header(":event-type", "e")
    fill = MAX_FRAME_SIZE - 16 - len(headers) - len(b'{"x":""}')
    wire = frame_with_raw_headers(headers, b'{"x":"' + b"a" * fill + b'"}')
    assert len(wire) == MAX_FRAME_SIZE
    [frame] = decode([wire[:1000], wire[1000:]])
    assert len(frame.payload["x"]) == fill


@pytest.mark.parametrize(
    "payload", [b"not json", b"[1, 2]", b'"text"', b"null", b"\xff\xfe{}", b'{"a":'], ids=repr
)
def test_payload_must_be_a_json_object(payload: bytes) -> None:
    with pytest.raises(UpstreamProtocolError, match="payload"):
        decode([encode_message(EVENT_HEADERS, payload)])


@pytest.mark.parametrize(
    ("headers", "match"),
    [
        ({":event-type": "assistantResponseEvent"}, "message type None"),
        ({":message-type": "initial-response"}, "message type"),
        ({":message-type": "event"}, ":event-type is missing"),
        ({":message-type": "exception"}, ":exception-type is missing"),
        ({":message-type": "error", ":error-message": "x"}, ":error-code is missing"),
        ({":message-type": "event", ":event-type": 7}, "not a string"),
        ({":message-type": b"event", ":event-type": "e"}, "not a string"),
    ],
)
def test_headers_are_validated(headers: dict[str, HeaderValue], match: str) -> None:
    with pytest.raises(UpstreamProtocolError, match=match):
        decode([encode_message(headers, b"{}")])


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(string_header("a", "x") + string_header("a", "y"), id="duplicate"),
        pytest.param(b"\x01a\x0a", id="unknown-type"),
        pytest.param(b"\x01a\x04\x00\x00", id="cut-short"),
        pytest.param(b"\x01a\x07\x00\x02\xff\xfe", id="not-utf8"),
    ],
)
def test_malformed_headers(headers: bytes) -> None:
    with pytest.raises(UpstreamProtocolError, match="header"):
        decode([frame_with_raw_headers(headers)])
