"""Bounded request-body reads."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from aiohttp import web

from kirod.errors import ApiError, ClientDisconnected, ErrorKind

READ_CHUNK = 64 * 1024
# A \uD800-\uDFFF escape: a surrogate, which `json.loads` keeps as is when it stands alone.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _too_large(limit: int) -> ApiError:
    return ApiError(
        ErrorKind.REQUEST_TOO_LARGE,
        f"request body exceeds the limit of {limit} bytes",
        code="request_too_large",
    )


async def read_body(request: web.Request, limit: int, timeout_s: float) -> bytes:
    """Read at most `limit` bytes within `timeout_s`.

    A declared or actual larger body is a 413 before it is buffered; a client that trickles its
    body past the deadline gets a 408 instead of holding the connection forever.
    """
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    total = 0
    try:
        async with asyncio.timeout(timeout_s):
            while chunk := await request.content.read(READ_CHUNK):
                total += len(chunk)
                if total > limit:
                    raise _too_large(limit)
                chunks.append(chunk)
    except ConnectionError:
        raise ClientDisconnected() from None
    except TimeoutError:
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            f"the request body did not arrive within {timeout_s:g} s",
            code="request_timeout",
        ) from None
    if declared is not None and total < declared:
        raise ClientDisconnected()
    return b"".join(chunks)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _has_lone_surrogate(value: Any) -> bool:
    """Whether a parsed document holds a string with an unpaired surrogate (not Unicode text)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_json(data: bytes) -> Any:
    """Strict JSON: invalid UTF-8, lone surrogate escapes (`"\\ud800"`), NaN/Infinity and absurd
    nesting are all a 400."""
    try:
        text = data.decode("utf-8")
        value = json.loads(text, parse_constant=_reject_constant)
        # Only a surrogate escape can smuggle one in; the full check runs only when one is there.
        if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
            raise ValueError("lone surrogate")
        return value
    except (ValueError, RecursionError):
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            "request body is not valid JSON",
            code="malformed_request_body",
        ) from None


async def read_json(request: web.Request, limit: int, timeout_s: float = 60.0) -> Any:
    return parse_json(await read_body(request, limit, timeout_s))
