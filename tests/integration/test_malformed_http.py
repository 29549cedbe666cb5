"""Requests aiohttp's parser refuses, sent on raw sockets to the real daemon (issue 41): each is
answered 400 with a JSON body in the family its path names (Anthropic under /v1/messages,
Google's for the Gemini API, OpenAI under the rest of /v1/, Ollama under /api/, a neutral
`{"error": {...}}` otherwise),
quoting nothing it was sent, and is logged as a warning at most every ten seconds, never as an
`error aiohttp.server` line with a traceback."""

from __future__ import annotations

import json
import re
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import start_daemon

FILLER = b"q" * 9000


def client_hello() -> bytes:
    """The first flight of a real TLS client, as an https:// base URL would send it."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def head(line: str, *headers: bytes) -> bytes:
    return line.encode() + b"\r\nHost: 127.0.0.1\r\n" + b"".join(headers) + b"\r\n"


MANY_HEADERS = tuple(b"X-Many-%d: 1\r\n" % n for n in range(5000))
SMUGGLING = (b"Content-Length: 5\r\n", b"Transfer-Encoding: chunked\r\n")

# name: (what is sent, the family of the answer, words of its message, what must not be echoed)
CASES: dict[str, tuple[bytes, str, str, bytes]] = {
    "header line over 8190 bytes": (
        head("POST /v1/messages HTTP/1.1", b"X-Long: " + FILLER + b"\r\n"),
        "anthropic",
        "longer than 8190 bytes",
        b"qqqq",
    ),
    "request line over 8190 bytes": (
        head("GET /v1/messages?" + "q" * 9000 + " HTTP/1.1"),
        "anthropic",
        "longer than 8190 bytes",
        b"qqqq",
    ),
    "5,000 headers": (
        head("POST /v1/responses HTTP/1.1", *MANY_HEADERS),
        "openai",
        "more than 128 header lines",
        b"X-Many",
    ),
    "Content-Length with Transfer-Encoding": (
        head("POST /v1/chat/completions HTTP/1.1", *SMUGGLING) + b"0\r\n\r\n",
        "openai",
        "Content-Length and Transfer-Encoding",
        b"chunked",
    ),
    "Content-Length with Transfer-Encoding on /v1/models": (
        head("GET /v1/models HTTP/1.1", *SMUGGLING) + b"0\r\n\r\n",
        "openai",
        "Content-Length and Transfer-Encoding",
        b"chunked",
    ),
    "header line over 8190 bytes on /api/chat": (
        head("POST /api/chat HTTP/1.1", b"X-Long: " + FILLER + b"\r\n"),
        "ollama",
        "longer than 8190 bytes",
        b"qqqq",
    ),
    "header line over 8190 bytes on /v1beta": (
        head(
            "POST /v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse HTTP/1.1",
            b"X-Long: " + FILLER + b"\r\n",
        ),
        "google",
        "longer than 8190 bytes",
        b"qqqq",
    ),
    # What google-genai calls when given only a base URL: the Gemini API under /v1.
    "5,000 headers on a Gemini call under /v1": (
        head("POST /v1/models/gemini-3.1-pro-preview:generateContent HTTP/1.1", *MANY_HEADERS),
        "google",
        "more than 128 header lines",
        b"X-Many",
    ),
    "TLS ClientHello": (client_hello(), "neutral", "TLS", b"\x16\x03"),
    "garbage request line": (b"HELLO THERE\r\n\r\n", "neutral", "HTTP method", b"HELLO"),
    "bad HTTP version": (
        head("GET /health HTTP/9.9"),
        "neutral",
        "request line",
        b"9.9",
    ),
}


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(
        module_tmp, fake, {"KIROD_ENABLE_OLLAMA_API": "true", "KIROD_ENABLE_GEMINI_API": "true"}
    )
    try:
        yield proc
    finally:
        assert proc.stop() == 0


def exchange(proc: DaemonProcess, sent: bytes) -> bytes:
    """Send `sent` on a new connection; everything the daemon answers until it closes."""
    host, port = proc.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(sent)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def parse(answer: bytes) -> tuple[int, dict[str, str], Any]:
    head_part, _, body = answer.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, json.loads(body)


def message_of(family: str, document: dict[str, Any], request_id: str) -> str:
    """The message of an error document, once its shape is checked to be `family`'s."""
    error = document["error"]
    if family == "ollama":
        assert set(document) == {"error"}
        assert isinstance(error, str)
        return error
    if family == "google":
        assert set(document) == {"error"}
        assert set(error) == {"code", "message", "status", "details"}
        assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
        assert error["details"][0]["requestId"] == request_id
        google: str = error["message"]
        return google
    assert document["request_id"] == request_id
    if family == "anthropic":
        assert set(document) == {"type", "error", "request_id"}
        assert document["type"] == "error"
        assert set(error) == {"type", "message"}
    elif family == "openai":
        assert set(document) == {"error", "request_id"}
        assert set(error) == {"message", "type", "param", "code"}
        assert error["code"] == "malformed_request"
    else:
        assert set(document) == {"error", "request_id"}
        assert set(error) == {"type", "message", "code"}
    assert error["type"] == "invalid_request_error"
    message: str = error["message"]
    return message


@pytest.mark.parametrize("case", list(CASES))
def test_a_request_the_parser_refuses_gets_json_in_its_family(
    daemon: DaemonProcess, case: str
) -> None:
    sent, family, words, never = CASES[case]
    status, headers, document = parse(exchange(daemon, sent))
    assert status == 400
    assert headers["content-type"].startswith("application/json")
    assert headers["x-request-id"].startswith("req_")
    message = message_of(family, document, headers["x-request-id"])
    assert words in message
    text = json.dumps(document).encode()
    assert never not in text
    assert b"b'" not in text
    assert b"bytearray" not in text


def test_refusals_are_warnings_at_most_every_ten_seconds(daemon: DaemonProcess) -> None:
    started = time.monotonic()
    for sent, _, _, _ in list(CASES.values()) * 3:
        exchange(daemon, sent)
    elapsed = time.monotonic() - started
    time.sleep(0.2)  # the last line written
    log = daemon.log()
    lines = [line for line in log.splitlines() if " malformed_request " in line + " "]
    assert lines
    assert all(line.split(" ")[1] == "warning" for line in lines), lines
    # The module's first refusal opened a ten-second window; each later window logs one line,
    # counting those it held back.
    assert len(lines) <= 2 + int(elapsed // 10), lines
    assert not re.search(r" error aiohttp", log)
    assert "aiohttp.server" not in log
    assert "Traceback" not in log
    # The daemon still serves on the same port.
    status, _, document = parse(
        exchange(daemon, head("GET /health HTTP/1.1", b"Connection: close\r\n"))
    )
    assert status == 200, document
