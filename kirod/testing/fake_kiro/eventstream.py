"""Encoder for the AWS binary event stream, which botocore can only decode.

The fake Kiro service answers with these frames, so kirod's decoder is exercised against genuine
wire bytes. Wire format: docs/KIRO-PROTOCOL.md §3.1: a prelude (total length, headers length, CRC32
of both), the headers, the payload, and a CRC32 of everything before it, all big-endian.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping
from typing import Any

HeaderValue = str | bytes | bool | int
"""Header values we encode: string (type 7), byte array (6), boolean (0/1) and int32 (4)."""

_BOOL_TRUE, _BOOL_FALSE, _INT32, _BYTES, _STRING = 0, 1, 4, 6, 7
_PRELUDE_LENGTH = 12  # total length, headers length, prelude CRC
_CRC_LENGTH = 4


def encode_message(headers: Mapping[str, HeaderValue], payload: bytes) -> bytes:
    """Encode one event-stream message; headers keep the mapping's order."""
    encoded_headers = b"".join(_encode_header(name, value) for name, value in headers.items())
    total_length = _PRELUDE_LENGTH + len(encoded_headers) + len(payload) + _CRC_LENGTH
    prelude = struct.pack("!II", total_length, len(encoded_headers))
    message = prelude + struct.pack("!I", zlib.crc32(prelude)) + encoded_headers + payload
    return message + struct.pack("!I", zlib.crc32(message))


def encode_event(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """Encode an event as Kiro sends it: compact UTF-8 JSON, since some peers regex-scan it."""
    return encode_message(
        {
            ":message-type": "event",
            ":event-type": event_type,
            ":content-type": "application/json",
        },
        _compact_json(payload),
    )


def encode_exception(exception_type: str, message: str) -> bytes:
    """Encode a modelled exception frame, e.g. `ThrottlingException` mid-stream."""
    return encode_message(
        {
            ":message-type": "exception",
            ":exception-type": exception_type,
            ":content-type": "application/json",
        },
        _compact_json({"message": message}),
    )


def encode_error(code: str, message: str) -> bytes:
    """Encode an unmodelled error frame, which carries its code and message in headers only."""
    return encode_message(
        {":message-type": "error", ":error-code": code, ":error-message": message}, b""
    )


def corrupt_crc(frame: bytes) -> bytes:
    """Return `frame` with its message CRC damaged, for fault injection."""
    return frame[:-1] + bytes([frame[-1] ^ 0xFF])


def _encode_header(name: str, value: HeaderValue) -> bytes:
    encoded_name = name.encode("utf-8")
    prefix = struct.pack("!B", len(encoded_name)) + encoded_name
    # bool before int: bool is a subclass of int.
    if isinstance(value, bool):
        return prefix + struct.pack("!B", _BOOL_TRUE if value else _BOOL_FALSE)
    if isinstance(value, int):
        return prefix + struct.pack("!Bi", _INT32, value)
    data, value_type = (
        (value, _BYTES) if isinstance(value, bytes) else (value.encode("utf-8"), _STRING)
    )
    return prefix + struct.pack("!BH", value_type, len(data)) + data


def _compact_json(value: Mapping[str, Any]) -> bytes:
    return json.dumps(dict(value), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
