"""kiroctl's transport: the control client's HTTP on a Unix socket, against canned answers.

The commands' tests cover it against the real daemon; these cover the answers kirod does not give.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kirod.localapi.client import ControlError, DaemonUnreachable, LocalClient

Serve = Callable[[bytes | None], list[bytes]]
JSON_OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"


def read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    length = re.search(rb"\r\nContent-Length: (\d+)\r\n", data)
    while length and len(data.partition(b"\r\n\r\n")[2]) < int(length[1]):
        data += conn.recv(65536)
    return data


@pytest.fixture
def serve(short_tmp: Path) -> Iterator[Serve]:
    """Answer one request on `short_tmp/kirod.sock` with the given bytes, then close; with None,
    hold the connection until the client gives up. Returns the requests received."""
    threads: list[threading.Thread] = []

    def start(answer: bytes | None) -> list[bytes]:
        received: list[bytes] = []
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(short_tmp / "kirod.sock"))
        listener.listen(1)

        def run() -> None:
            with listener, listener.accept()[0] as conn:
                received.append(read_request(conn))
                if answer is None:
                    conn.recv(1)  # returns when the client closes
                else:
                    with contextlib.suppress(OSError):  # the client may hang up first
                        conn.sendall(answer)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        return received

    yield start
    for thread in threads:
        thread.join(timeout=5)


def client(short_tmp: Path, timeout: float = 5.0) -> LocalClient:
    return LocalClient(short_tmp / "kirod.sock", timeout=timeout)


def test_a_get_and_its_json_answer(serve: Serve, short_tmp: Path) -> None:
    received = serve(JSON_OK + b'{"a": true}')
    assert client(short_tmp).request("GET", "/status") == {"a": True}
    head = received[0].decode().split("\r\n")
    assert head[0] == "GET /localapi/v1/status HTTP/1.0"
    assert "Host: localhost" in head
    assert not any(line.startswith("Content-") for line in head)


def test_a_post_sends_its_json_body(serve: Serve, short_tmp: Path) -> None:
    received = serve(JSON_OK + b'{"b": null}')
    assert client(short_tmp).request("POST", "/keys", {"name": "é"}) == {"b": None}
    head, _, body = received[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /localapi/v1/keys HTTP/1.0\r\n")
    assert b"\r\nContent-Type: application/json" in head
    assert f"\r\nContent-Length: {len(body)}".encode() in head
    assert body == b'{"name": "\\u00e9"}'


def test_a_post_without_a_body_says_so(serve: Serve, short_tmp: Path) -> None:
    received = serve(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
    assert client(short_tmp).request("POST", "/shutdown") is None
    assert b"\r\nContent-Length: 0\r\n" in received[0]


def test_an_answer_without_a_length_ends_with_the_connection(serve: Serve, short_tmp: Path) -> None:
    serve(b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"c": [1, 2]}')
    assert client(short_tmp).request("GET", "/status") == {"c": [1, 2]}


def test_an_error_document_is_a_control_error(serve: Serve, short_tmp: Path) -> None:
    body = b'{"error": {"code": "not_found", "message": "no such account"}}'
    serve(b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    with pytest.raises(ControlError) as caught:
        client(short_tmp).request("GET", "/accounts/x")
    assert (caught.value.status, caught.value.code, str(caught.value)) == (
        404,
        "not_found",
        "no such account",
    )


def test_a_non_json_answer_is_a_control_error(serve: Serve, short_tmp: Path) -> None:
    serve(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 4\r\n\r\noops")
    with pytest.raises(ControlError) as caught:
        client(short_tmp).request("GET", "/status")
    assert (caught.value.status, caught.value.code) == (502, "bad_response")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"", "Remote end closed connection without response"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "not an HTTP status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{}", "ended after 2 of 50 bytes"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n{}", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n", "more than 100 headers"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000 + b"\r\n\r\n", "line is too long"),
    ],
    ids=["no answer", "not http", "truncated", "bad length", "too many headers", "long line"],
)
def test_an_unreadable_answer_is_unreachable(
    serve: Serve, short_tmp: Path, answer: bytes, message: str
) -> None:
    serve(answer)
    with pytest.raises(DaemonUnreachable, match=message):
        client(short_tmp).request("GET", "/status")


def test_silence_times_out(serve: Serve, short_tmp: Path) -> None:
    serve(None)
    with pytest.raises(DaemonUnreachable) as caught:
        client(short_tmp, timeout=0.2).request("GET", "/status")
    assert isinstance(caught.value.__cause__, TimeoutError)


def test_no_socket_means_not_running(short_tmp: Path) -> None:
    with pytest.raises(DaemonUnreachable, match="kirod is not running") as caught:
        client(short_tmp).request("GET", "/status")
    assert isinstance(caught.value.__cause__, FileNotFoundError)


def test_a_target_with_control_characters_is_refused(short_tmp: Path) -> None:
    with pytest.raises(ValueError, match="control characters"):
        client(short_tmp).request("GET", "/keys/x\r\nX-Injected: 1")
