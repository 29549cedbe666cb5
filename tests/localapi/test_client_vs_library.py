"""`LocalClient`'s own HTTP/1.0 reader reads what `http.client` reads (bench/README.md: its gain).

Both talk to the same stdlib HTTP server on a Unix socket, answering with a Content-Length, with
none (the body ends with the connection), and with an error status.
"""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kirod.localapi.client import ControlError, LocalClient
from kirod.localapi.wire import PREFIX

ANSWERS: dict[str, tuple[int, bytes, bool]] = {
    # path: status, body, whether a Content-Length is sent
    "/sized": (200, json.dumps({"accounts": [{"id": "a1", "label": "wörk"}]}).encode(), True),
    "/unsized": (200, json.dumps({"big": "x" * 100_000}).encode(), False),
    "/missing": (404, b'{"error": {"code": "not_found", "message": "no such account"}}', True),
    "/empty": (200, b"", True),
}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status, body, sized = ANSWERS[self.path.removeprefix(PREFIX)]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if sized:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:  # an empty write after the client, done at Content-Length 0, hung up: EPIPE
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a Unix socket's peer has no address to log."""


class UnixHttpServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, _ = super().get_request()
        return sock, ("local", 0)  # BaseHTTPRequestHandler wants a (host, port) pair


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost")
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(self._path))


@pytest.fixture
def server(short_tmp: Path) -> Iterator[Path]:
    path = short_tmp / "s.sock"
    with UnixHttpServer(str(path), Handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        yield path
        httpd.shutdown()
        thread.join()


def with_library(path: Path, target: str) -> tuple[int, Any]:
    connection = UnixConnection(path)
    try:
        connection.request("GET", PREFIX + target)
        response = connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None
    finally:
        connection.close()


@pytest.mark.parametrize("target", sorted(ANSWERS))
def test_local_client_reads_what_http_client_reads(server: Path, target: str) -> None:
    status, expected = with_library(server, target)
    if status < 400:
        assert LocalClient(server).request("GET", target) == expected
        return
    with pytest.raises(ControlError) as raised:
        LocalClient(server).request("GET", target)
    assert raised.value.status == status
    assert (raised.value.code, str(raised.value)) == (
        expected["error"]["code"],
        expected["error"]["message"],
    )
