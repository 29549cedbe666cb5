"""Incremental, sans-IO decoder for the AWS binary event stream Kiro answers with.

Feed it the response body in chunks of any size, down to single bytes; it returns each frame as
soon as its last byte arrives. Wire format: docs/KIRO-PROTOCOL.md §3.1.

The decoder assembles each frame itself, so the size guard runs on the 12-byte prelude before a
large frame is buffered and a truncated stream is detected exactly. Each complete frame's message
CRC is checked, and its headers parsed here when they are what Kiro sends (distinct UTF-8
strings); any other frame goes through botocore's `EventStreamBuffer`, the reference decoder,
which parses every header type and names what is malformed. What a header block says (the
frame's kind) is remembered by its bytes, so the next frames with that block are decoded in one
pass. No botocore exception leaves this module: every failure is an `UpstreamProtocolError`.
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
        data = chunk if chunk.__class__ is bytes else bytes(chunk)
        try:
            if self._frame:
                data = self._assemble(data, frames)
                if self._frame:
                    return frames
            # The usual case, a chunk starting on a frame boundary: whole frames are decoded
            # straight from it, and only an incomplete last one is copied into the buffer.
            at, size = _decode_frames(data, frames)
            if at < len(data):
                self._frame += data[at:]
                self._frame_size = size
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
    incomplete one starts, and its length once its prelude is there (else 0).

    A frame whose header block was seen before is decoded here, in one pass: the checks of its
    prelude and CRC, then its kind from `_KNOWN_KINDS` and its payload. Any other goes through
    `_decode_frame`, which parses and validates its headers and remembers the block.
    """
    at, end = 0, len(data)
    known = _KNOWN_KINDS
    while end - at >= _PRELUDE.size:
        size = _checked_frame_size(data, at)
        if end - at < size:
            return at, size
        crc_at = at + size - _MESSAGE_CRC_SIZE
        headers_end = at + _PRELUDE.size + _HEADERS_LENGTH.unpack_from(data, at + 4)[0]
        kind = known.get(data[at + _PRELUDE.size : headers_end])
        if kind is None:
            frames.append(_decode_frame(data[at : at + size]))
        elif zlib.crc32(data[at:crc_at]) != _CRC.unpack_from(data, crc_at)[0]:
            raise UpstreamProtocolError("event stream message CRC mismatch")
        else:
            frames.append(Frame(*kind, _json_object(data[headers_end:crc_at]), size))
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


# What a frame is (message type, event type, exception type, error code, error message), as
# Frame's first fields.
_Kind = tuple[MessageType, str | None, str | None, str | None, str | None]

# The kinds of header blocks already parsed, by the blocks' bytes: Kiro sends the same few
# blocks (one per event type, about 100 bytes each) in every frame. Bounded by bytes: at most 64
# blocks of at most 512 bytes (32 KiB); a longer block is parsed every time.
_KNOWN_KINDS: dict[bytes, _Kind] = {}
_KNOWN_KINDS_MAX = 64
_KNOWN_BLOCK_BYTES = 512


def _decode_frame(data: bytes) -> Frame:
    """One whole frame, its headers parsed and checked; its kind is remembered for the next."""
    parsed = _parse_string_headers(data)
    headers, payload = parsed if parsed is not None else _parse_with_botocore(data)
    kind = _kind(headers)
    block = data[_PRELUDE.size : len(data) - _MESSAGE_CRC_SIZE - len(payload)]
    if len(block) <= _KNOWN_BLOCK_BYTES:
        if len(_KNOWN_KINDS) >= _KNOWN_KINDS_MAX:
            _KNOWN_KINDS.clear()
        _KNOWN_KINDS[block] = kind
    return Frame(*kind, _json_object(payload), len(data))


def _kind(headers: dict[str, object]) -> _Kind:
    message_type = _string_header(headers, ":message-type")
    if message_type == "event":
        return "event", _required_header(headers, ":event-type"), None, None, None
    if message_type == "exception":
        return "exception", None, _required_header(headers, ":exception-type"), None, None
    if message_type == "error":
        error_code = _required_header(headers, ":error-code")
        return "error", None, None, error_code, _string_header(headers, ":error-message")
    raise UpstreamProtocolError(f"unknown event stream message type {message_type!r}")


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
