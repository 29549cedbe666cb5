"""Incremental, sans-IO decoder for the AWS binary event stream Kiro answers with.

Feed it the response body in chunks of any size, down to single bytes; it returns each frame as
soon as its last byte arrives. Wire format: kiro-protocol.md §3.1.

The decoder assembles each frame itself, so the size guard runs on the 12-byte prelude before a
large frame is buffered and a truncated stream is detected exactly. Each complete frame's message
CRC is checked, and its headers parsed here when they are what Kiro sends (distinct UTF-8
strings); any other frame goes through botocore's `EventStreamBuffer`, the reference decoder,
which parses every header type and names what is malformed. No botocore exception leaves this
module: every failure is an `UpstreamProtocolError`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

from botocore.eventstream import ChecksumMismatch, EventStreamBuffer, ParserError

from kirod.canonical import wirejson
from kirod.upstream.errors import UpstreamProtocolError

MAX_FRAME_SIZE = 16 * 1024 * 1024
"""Largest frame accepted, as in peer decoders; a larger length means a corrupt or hostile peer."""

MessageType = Literal["event", "exception", "error"]

_PRELUDE = struct.Struct("!III")  # total length, headers length, prelude CRC
_MESSAGE_CRC_SIZE = 4
_CRC = struct.Struct("!I")
_HEADERS_LENGTH = struct.Struct("!I")
_VALUE_LENGTH = struct.Struct("!H")
_STRING_HEADER = 7  # the header value type of UTF-8 strings
_MIN_FRAME_SIZE = _PRELUDE.size + _MESSAGE_CRC_SIZE


@dataclass(slots=True)
class Frame:
    """One event-stream message, reduced to what the translator needs.

    Only the fields of its own `message_type` are set: `event_type` for events, `exception_type`
    for exceptions, `error_code` and `error_message` for errors. Not frozen, though nothing
    changes one: a frozen dataclass is built at twice the cost, and there is one per frame.
    """

    message_type: MessageType
    event_type: str | None = None
    exception_type: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    # Its length on the wire, for the trace's bytes read: known at decode time, so no one counts
    # chunks. Not part of what the frame says, so not compared.
    size: int = field(default=0, compare=False)


class FrameDecoder:
    """Turns event-stream bytes into `Frame`s; call `finish()` once the body has ended.

    Frames decoded from a chunk before a malformed one are still returned, so the output never
    depends on how the body was chunked; the error is raised by the next `feed()` or `finish()`.
    After an error every call raises it again.
    """

    def __init__(self) -> None:
        self._frame = bytearray()  # the bytes received so far of the frame being assembled
        self._frame_size = 0  # its total length, once its prelude is complete and valid
        self._failure: UpstreamProtocolError | None = None

    def feed(self, chunk: bytes) -> list[Frame]:
        """Add the next bytes of the body; return the frames they complete."""
        self._raise_if_failed()
        frames: list[Frame] = []
        try:
            self._consume(bytes(chunk) if chunk.__class__ is not bytes else chunk, frames)
        except UpstreamProtocolError as exc:
            self._failure = exc
            if not frames:
                raise
        return frames

    def finish(self) -> None:
        """Declare the end of the body; raise if it ended inside a frame."""
        self._raise_if_failed()
        if self._frame:
            expected = self._frame_size or "at least 16"
            self._failure = UpstreamProtocolError(
                f"event stream truncated: {len(self._frame)} of {expected} frame bytes received"
            )
            raise self._failure

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _consume(self, data: bytes, frames: list[Frame]) -> None:
        if self._frame:
            data = self._assemble(data, frames)
            if self._frame:
                return
        # The usual case, a chunk starting on a frame boundary: whole frames are decoded
        # straight from it, and only an incomplete last one is copied into the buffer.
        at, size = _decode_frames(data, frames)
        if at < len(data):
            self._frame += data[at:]
            self._frame_size = size

    def _assemble(self, data: bytes, frames: list[Frame]) -> bytes:
        """Add to the frame being assembled; return what is left of `data` once it is done."""
        if not self._frame_size:
            missing = _PRELUDE.size - len(self._frame)
            self._frame += data[:missing]
            data = data[missing:]
            if len(self._frame) < _PRELUDE.size:
                return b""
            self._frame_size = _checked_frame_size(bytes(self._frame), 0)
        missing = self._frame_size - len(self._frame)
        self._frame += data[:missing]
        if len(self._frame) == self._frame_size:
            _decode_frames(bytes(self._frame), frames)
            self._frame.clear()
            self._frame_size = 0
        return data[missing:]


def _decode_frames(data: bytes, frames: list[Frame]) -> tuple[int, int]:
    """Decode the whole frames at the start of `data` into `frames`; return where the first
    incomplete one starts, and its length once its prelude is there (else 0)."""
    at, end = 0, len(data)
    while end - at >= _PRELUDE.size:
        size = _checked_frame_size(data, at)
        if end - at < size:
            return at, size
        frames.append(_decode_frame(data[at : at + size]))
        at += size
    return at, 0


def _checked_frame_size(data: bytes, at: int) -> int:
    """Validate the prelude at `at` before trusting its lengths; return the frame's length."""
    total_length, headers_length, prelude_crc = _PRELUDE.unpack_from(data, at)
    if zlib.crc32(data[at : at + 8]) != prelude_crc:
        raise UpstreamProtocolError("event stream prelude CRC mismatch")
    if not _MIN_FRAME_SIZE <= total_length <= MAX_FRAME_SIZE:
        raise UpstreamProtocolError(f"event stream frame length {total_length} out of bounds")
    if headers_length > total_length - _MIN_FRAME_SIZE:
        raise UpstreamProtocolError(
            f"event stream headers length {headers_length} exceeds frame length {total_length}"
        )
    return int(total_length)


def _decode_frame(data: bytes) -> Frame:
    parsed = _parse_string_headers(data)
    headers, payload = parsed if parsed is not None else _parse_with_botocore(data)
    message_type = _string_header(headers, ":message-type")
    if message_type == "event":
        return Frame(
            "event",
            event_type=_required_header(headers, ":event-type"),
            payload=_json_object(payload),
            size=len(data),
        )
    if message_type == "exception":
        return Frame(
            "exception",
            exception_type=_required_header(headers, ":exception-type"),
            payload=_json_object(payload),
            size=len(data),
        )
    if message_type == "error":
        return Frame(
            "error",
            error_code=_required_header(headers, ":error-code"),
            error_message=_string_header(headers, ":error-message"),
            payload=_json_object(payload),
            size=len(data),
        )
    raise UpstreamProtocolError(f"unknown event stream message type {message_type!r}")


# Header blocks already parsed, by their bytes: Kiro sends the same few blocks (one per event
# type, about 100 bytes each) in every frame. Readers never modify the dicts. Bounded by bytes:
# at most 64 blocks of at most 512 bytes (32 KiB); a longer block is parsed every time.
_KNOWN_HEADERS: dict[bytes, dict[str, object]] = {}
_KNOWN_HEADERS_MAX = 64
_KNOWN_HEADER_BYTES = 512


def _parse_string_headers(data: bytes) -> tuple[dict[str, object], bytes] | None:
    """The common case, parsed here: every header a distinct, well-formed UTF-8 string.

    Anything else (another value type, a duplicate, a length past the end, bad UTF-8) returns
    None, and botocore parses the frame and reports what is wrong with it. The message CRC is
    checked first either way.
    """
    if zlib.crc32(data[:-_MESSAGE_CRC_SIZE]) != _CRC.unpack_from(data, len(data) - 4)[0]:
        raise UpstreamProtocolError("event stream message CRC mismatch")
    headers_end = _PRELUDE.size + _HEADERS_LENGTH.unpack_from(data, 4)[0]
    payload = data[headers_end : len(data) - _MESSAGE_CRC_SIZE]
    block = data[_PRELUDE.size : headers_end]
    known = _KNOWN_HEADERS.get(block)
    if known is not None:
        return known, payload
    headers: dict[str, object] = {}
    at = _PRELUDE.size
    try:
        while at < headers_end:
            name_end = at + 1 + data[at]
            if name_end + 3 > headers_end or data[name_end] != _STRING_HEADER:
                return None
            value_end = name_end + 3 + _VALUE_LENGTH.unpack_from(data, name_end + 1)[0]
            if value_end > headers_end:
                return None
            name = data[at + 1 : name_end].decode("utf-8")
            if name in headers:
                return None
            headers[name] = data[name_end + 3 : value_end].decode("utf-8")
            at = value_end
    except UnicodeDecodeError:
        return None
    if len(block) <= _KNOWN_HEADER_BYTES:
        if len(_KNOWN_HEADERS) >= _KNOWN_HEADERS_MAX:
            _KNOWN_HEADERS.clear()
        _KNOWN_HEADERS[block] = headers
    return headers, payload


def _parse_with_botocore(data: bytes) -> tuple[dict[str, object], bytes]:
    """Check the message CRC and parse the headers of one complete frame."""
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    try:
        message = buffer.next()
    except ChecksumMismatch as exc:
        raise UpstreamProtocolError("event stream message CRC mismatch") from exc
    except ParserError as exc:  # duplicate header, oversized headers
        raise UpstreamProtocolError(f"malformed event stream headers: {exc}") from exc
    except KeyError as exc:  # botocore's lookup of the header value type
        raise UpstreamProtocolError(f"unknown event stream header type {exc}") from exc
    except (struct.error, ValueError) as exc:  # headers cut short, names or strings not UTF-8
        raise UpstreamProtocolError("malformed event stream headers") from exc
    # botocore-stubs declares `headers` as int; at runtime it is the dict of parsed headers.
    headers: object = message.headers
    assert isinstance(headers, dict)
    return headers, message.payload


def _string_header(headers: dict[str, object], name: str) -> str | None:
    value = headers.get(name)
    if value is not None and not isinstance(value, str):
        raise UpstreamProtocolError(f"event stream header {name} is not a string")
    return value


def _required_header(headers: dict[str, object], name: str) -> str:
    value = _string_header(headers, name)
    if value is None:
        raise UpstreamProtocolError(f"event stream header {name} is missing")
    return value


def _json_object(payload: bytes) -> dict[str, Any]:
    if not payload:
        return {}
    try:
        value = wirejson.loads(payload)
    except (ValueError, RecursionError) as exc:  # includes UnicodeDecodeError
        raise UpstreamProtocolError("event stream payload is not JSON") from exc
    if not isinstance(value, dict):
        raise UpstreamProtocolError("event stream payload is not a JSON object")
    return value
