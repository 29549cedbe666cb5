"""The answer to a request aiohttp's parser refused, in the client's language.

The parser's own messages quote what it was sent (`Got more than 8190 bytes when reading:
b'aaaa…'`), so none is ever shown: each failure gets a fixed sentence of ours. The envelope
follows the path of the request line, the one part of the request kirod keeps while its head
arrives (`ingress.path_family`: Anthropic's under /v1/messages, Google's for the Gemini API,
OpenAI's under the rest of /v1, Ollama's under /api), and a neutral `{"error": {"type",
"message", "code"}}` otherwise (TLS bytes, garbage).
"""

from __future__ import annotations

from typing import Any

from aiohttp import http_exceptions

from kirod.errors import ApiError, ErrorKind
from kirod.http.ingress import path_family
from kirod.protocols.envelopes import Family, render

REQUEST_LINE_KEPT = 128
"""Bytes of a request head kept while it arrives: enough for the method and the API path."""
CODE = "malformed_request"
_TLS_HANDSHAKE = 0x16  # the first byte of a TLS record carrying a ClientHello


def family_of(head: bytes) -> Family | None:
    """The API family the request line names (`ingress.path_family`), if any."""
    line = head.split(b"\n", 1)[0]
    parts = line.split(b" ", 2)
    if len(parts) < 2:
        return None
    method, path = parts[0].decode("latin-1"), parts[1].split(b"?", 1)[0].decode("latin-1")
    return path_family(method, path)


def describe(failure: BaseException, head: bytes, *, max_line: int, max_headers: int) -> str:
    """What was wrong, in a fixed sentence that quotes nothing the client sent."""
    if isinstance(failure, http_exceptions.LineTooLong):
        return f"the request line or a header line is longer than {max_line} bytes"
    if isinstance(failure, http_exceptions.BadHttpMethod):
        if head[:1] == bytes([_TLS_HANDSHAKE]):
            return "this is TLS on kirod's plain-HTTP port: use an http:// base URL, not https://"
        return "the request does not start with an HTTP method: is it HTTP?"
    if isinstance(failure, http_exceptions.BadStatusLine):
        return "the request line is not `METHOD /path HTTP/1.1`"
    if isinstance(failure, http_exceptions.InvalidURLError):
        return "the request target is not a valid path"
    if isinstance(failure, http_exceptions.InvalidHeader):
        return "a header line is malformed"
    # Recognised by aiohttp's wording (the C and the Python parser say the same), and never
    # repeated: both quote the request.
    said = getattr(failure, "message", "")
    if isinstance(said, str) and said.startswith("Too many headers"):
        return f"the request has more than {max_headers} header lines"
    if isinstance(said, str) and "Transfer-Encoding" in said and "Content-Length" in said:
        return "Content-Length and Transfer-Encoding are not accepted together"
    return "the request is not valid HTTP/1.1"


def document(family: Family | None, message: str, request_id: str) -> dict[str, Any]:
    if family is None:
        return {
            "error": {"type": "invalid_request_error", "message": message, "code": CODE},
            "request_id": request_id,
        }
    return render(family, ApiError(ErrorKind.INVALID_REQUEST, message, code=CODE), request_id)
