"""Bounded request-body reads and strict, bounded JSON.

A body is read only up to the size limit and the body deadline; a compressed body
(`Content-Encoding: gzip` or `deflate`, which aiohttp inflates as it arrives) that does not inflate
is a 400. The JSON it holds is bounded structurally as well as in bytes: at most `MAX_DEPTH`
levels of nested arrays and objects, and at most `MAX_CONTAINERS` arrays and objects in all;
either is a 400 naming the limit. So no later stage (the decoders, the payload builder, the
encoders, the store) meets a document deep enough to exhaust Python's recursion, and no body
of the size limit unfolds into millions of objects.

Loop time: bodies up to `INLINE_BYTES` are parsed on the event loop (most Claude Code and Codex
turns are below it); larger ones in a worker thread, one at a time, and `BODY_BYTES_VAR` tells
later stages of the same request (`kirod.http.decoding`) to decode off the loop as well. A
thread does not free the loop by itself: the standard library's C parser holds the GIL for a
whole document. So a large body that may hold more than `SCANNER_OPENERS` arrays and objects
(more `[` and `{` bytes than that) is parsed by the standard library's own pure-Python scanner,
which reads the same JSON (the same `JSONObject`, `JSONArray` and C `scanstring`), lets the loop
run between values, and stops at `MAX_CONTAINERS`; the scans of the whole body run a MiB at a
time. The longest the loop then waits is one string's scan, about 1.5 ms per MB of string.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import json.decoder
import json.scanner
import re
import threading
from collections.abc import Callable
from typing import Any, Final

from aiohttp import web
from aiohttp.http_exceptions import PayloadEncodingError
from aiohttp.web_protocol import RequestPayloadError

from kirod.errors import ApiError, ClientDisconnected, ErrorKind
from kirod.protocols.fields import MAX_CONTAINERS, MAX_DEPTH, exact_orjson, too_deep

READ_CHUNK = 64 * 1024
INLINE_BYTES: Final = 128 * 1024
"""Bodies up to this size are parsed and decoded on the event loop; larger ones off it."""
SCANNER_OPENERS: Final = 20_000
"""A large body with more `[` and `{` bytes than this is parsed by the bounded scanner."""
_SLICE = 1024 * 1024

_LARGE_PARSES = threading.BoundedSemaphore(1)
"""Large bodies are parsed one at a time: the event loop then competes for the GIL with one
parser, not with one per request, and only one large document is being built at any moment.
Held in a worker thread, never on the loop; it guards no state, so it may be shared."""

BODY_BYTES_VAR: contextvars.ContextVar[int] = contextvars.ContextVar("kirod_body_bytes", default=0)
"""The size of the body this request's handler read last (0 before any)."""

# A \uD800-\uDFFF escape: a surrogate, which `json.loads` keeps as is when it stands alone.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_WHITESPACE = re.compile(r"[ \t\n\r]*")  # json.decoder.WHITESPACE, which always matches


def _too_large(limit: int) -> ApiError:
    return ApiError(
        ErrorKind.REQUEST_TOO_LARGE,
        f"request body exceeds the limit of {limit} bytes",
        code="request_too_large",
    )


def _malformed() -> ApiError:
    return ApiError(
        ErrorKind.INVALID_REQUEST, "request body is not valid JSON", code="malformed_request_body"
    )


async def read_body(request: web.Request, limit: int, timeout_s: float) -> bytearray:
    """Read at most `limit` bytes within `timeout_s`.

    A declared or actual larger body is a 413 before it is buffered; a client that trickles its
    body past the deadline gets a 408 instead of holding the connection forever. The limit
    counts inflated bytes when the body is compressed. The body is gathered in one buffer, never
    held twice (chunks and their join).
    """
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(limit)
    body = bytearray()
    try:
        if request.content.is_eof():
            # The whole body came with the headers (most requests): nothing to wait for, so no
            # deadline to arm and no read loop.
            body += request.content.read_nowait()
            if len(body) > limit:
                raise _too_large(limit)
        else:
            async with asyncio.timeout(timeout_s):
                while chunk := await request.content.read(READ_CHUNK):
                    if len(body) + len(chunk) > limit:
                        raise _too_large(limit)
                    body += chunk
    except ConnectionError:
        raise ClientDisconnected() from None
    except TimeoutError:
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            f"the request body did not arrive within {timeout_s:g} s",
            code="request_timeout",
        ) from None
    except (RequestPayloadError, PayloadEncodingError):  # a body that does not inflate
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            "the request body could not be decompressed (Content-Encoding)",
            code="malformed_request_body",
        ) from None
    if declared is not None and len(body) < declared and "Content-Encoding" not in request.headers:
        raise ClientDisconnected()
    return body


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _has_lone_surrogate(value: Any) -> bool:
    """Whether a parsed document holds a string with an unpaired surrogate (not Unicode text)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class _Limit(Exception):
    """A structural bound was passed; `error` is the 400 to answer."""

    def __init__(self, error: ApiError) -> None:
        self.error = error


def _skip_whitespace(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    return match.end() if match else at


def _too_deep() -> _Limit:
    return _Limit(
        ApiError(
            ErrorKind.INVALID_REQUEST,
            f"request body nests arrays and objects more than {MAX_DEPTH} levels deep",
            code="request_too_complex",
        )
    )


def _too_many() -> _Limit:
    return _Limit(
        ApiError(
            ErrorKind.INVALID_REQUEST,
            f"request body holds more than {MAX_CONTAINERS} arrays and objects",
            code="request_too_complex",
        )
    )


class _BoundedScanner:
    """The standard library's pure-Python JSON scanner, counting arrays and objects as it goes.

    It parses exactly what `json.loads` parses (the same `JSONObject`, `JSONArray` and C
    `scanstring`), but runs Python code between values, so another thread (the event loop) gets
    the GIL within the interpreter's switch interval, and it stops at `MAX_CONTAINERS` or
    `MAX_DEPTH` instead of building the whole document.
    """

    def __init__(self) -> None:
        self.strict = True
        self.object_hook = None
        self.object_pairs_hook = None
        self.parse_float = float
        self.parse_int = int
        self.parse_constant = _reject_constant
        self.parse_string = json.decoder.scanstring  # type: ignore[attr-defined]
        self.memo: dict[str, str] = {}
        self._containers = 0
        self._depth = 0

    def _enter(self) -> None:
        self._containers += 1
        self._depth += 1
        if self._containers > MAX_CONTAINERS:
            raise _too_many()
        if self._depth > MAX_DEPTH:
            raise _too_deep()

    def parse_object(self, *args: Any) -> tuple[Any, int]:
        self._enter()
        try:
            return json.decoder.JSONObject(*args)  # type: ignore[attr-defined,no-any-return]
        finally:
            self._depth -= 1

    def parse_array(self, *args: Any) -> tuple[Any, int]:
        self._enter()
        try:
            return json.decoder.JSONArray(*args)  # type: ignore[attr-defined,no-any-return]
        finally:
            self._depth -= 1

    def loads(self, text: str) -> Any:
        if text.startswith("\ufeff"):
            raise ValueError("unexpected byte order mark")
        # Made here, not kept on `self`: the scanner holds this context, not the other way round.
        make: Callable[[Any], Callable[[str, int], tuple[Any, int]]]
        make = json.scanner.py_make_scanner  # type: ignore[attr-defined]
        scan_once = make(self)
        try:
            value, end = scan_once(text, _skip_whitespace(text, 0))
        except StopIteration:
            raise ValueError("expecting a value") from None
        if _skip_whitespace(text, end) != len(text):
            raise ValueError("extra data")
        return value


def _openers(data: bytes | bytearray, enough: int) -> int:
    """`[` and `{` bytes in `data` (counted a slice at a time), or more than `enough`."""
    total = 0
    for start in range(0, len(data), _SLICE):
        total += data.count(b"{", start, start + _SLICE) + data.count(b"[", start, start + _SLICE)
        if total > enough:
            break
    return total


def _has_surrogate_escape(text: str) -> bool:
    return any(
        _SURROGATE_ESCAPE.search(text, start, start + _SLICE + 8)
        for start in range(0, len(text), _SLICE)
    )


def parse_json(data: bytes | bytearray) -> Any:
    """Strict, bounded JSON: invalid UTF-8, lone surrogate escapes (`"\\ud800"`), NaN/Infinity,
    nesting deeper than `MAX_DEPTH` and more than `MAX_CONTAINERS` arrays and objects are all a
    400. Synchronous: for a body above `INLINE_BYTES`, prefer `load_json` (off the loop).

    Above `INLINE_BYTES`, a body with more than `SCANNER_OPENERS` `[` or `{` bytes goes to the
    bounded scanner; other work on the whole body is done a `_SLICE` at a time, so no single
    step holds the GIL for long (the longest left: one string's scan, ~1.5 ms per MB). Other
    bodies are read by orjson where its reading is the standard library's (`_orjson_reading`).
    """
    try:
        if len(data) > INLINE_BYTES and _openers(data, SCANNER_OPENERS) > SCANNER_OPENERS:
            text = data.decode("utf-8")
            value = _BoundedScanner().loads(text)
        else:
            # At most SCANNER_OPENERS (or INLINE_BYTES / 3) containers: a bounded C parse.
            value = _orjson_reading(data)
            if value is not _UNREAD:
                return value
            text = data.decode("utf-8")
            value = json.loads(text, parse_constant=_reject_constant)
            # Each level takes two bytes at least: only a body this long can be too deep.
            if len(data) > 2 * MAX_DEPTH and too_deep(value):
                raise _too_deep()
        # Only a surrogate escape can smuggle one in; the full check runs only when one is there.
        if _has_surrogate_escape(text) and _has_lone_surrogate(value):
            raise ValueError("lone surrogate")
        return value
    except _Limit as limit:
        error = limit.error
    except (ValueError, RecursionError):
        error = _malformed()
    # Raised outside the handler, the error chains no context: the parser's traceback, and the
    # partial document its frames hold, are freed now rather than by a later collection.
    raise error


_UNREAD: Final = object()


def _orjson_reading(data: bytes | bytearray) -> Any:
    """orjson's reading of `data` where it is the standard library's (`exact_orjson`: about
    twice as fast as the standard library's parse); else `_UNREAD`."""
    read = exact_orjson(data)
    if read is None:
        return _UNREAD
    value, deep = read
    if deep:
        raise _too_deep()
    return value


def _parse_large(data: bytes | bytearray) -> Any:
    """`parse_json` in a worker thread, one large body at a time (see `_LARGE_PARSES`)."""
    with _LARGE_PARSES:
        return parse_json(data)


async def load_json(data: bytes | bytearray) -> Any:
    """`parse_json`, in a worker thread when `data` is above `INLINE_BYTES`; records the size
    in `BODY_BYTES_VAR` for the rest of the request."""
    BODY_BYTES_VAR.set(len(data))
    if len(data) <= INLINE_BYTES:
        return parse_json(data)
    return await asyncio.to_thread(_parse_large, data)


async def read_json(request: web.Request, limit: int, timeout_s: float = 60.0) -> Any:
    return await load_json(await read_body(request, limit, timeout_s))


def off_loop() -> bool:
    """Whether this request's body was large enough to be decoded off the event loop."""
    return BODY_BYTES_VAR.get() > INLINE_BYTES
