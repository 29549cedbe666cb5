"""A stdlib HTTP client for the control API over its Unix socket (kiroctl's only transport).

It imports nothing of the server stack, so `kiroctl` starts fast. For the same reason it speaks
HTTP on a plain socket rather than through `http.client`, which imports `email` and `ssl` (some
20 ms of kiroctl's start-up): one HTTP/1.0 request per connection, so that the daemon's answer
has a Content-Length or ends with the connection, never a chunked body.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, BinaryIO

from kirod.errors import KirodError
from kirod.localapi.schema import PREFIX, Status

DEFAULT_TIMEOUT_S = 10.0
MAX_LINE = 65536  # the longest status or header line taken, as in http.client
MAX_HEADERS = 100


class DaemonUnreachable(KirodError):
    """Nothing answers on the control socket."""


class ControlError(KirodError):
    """The daemon answered with an error document."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class _NotHttp(Exception):
    """What answered on the socket is not an HTTP answer kiroctl can read."""


def _message(method: str, target: str, payload: bytes | None) -> bytes:
    if any(char <= " " or char == "\x7f" for char in target):
        raise ValueError(
            f"a request target cannot contain spaces or control characters: {target!r}"
        )
    head = [f"{method} {target} HTTP/1.0", "Host: localhost", "Accept-Encoding: identity"]
    if payload is not None:
        head.append("Content-Type: application/json")
    if payload is not None or method in ("POST", "PUT", "PATCH"):
        head.append(f"Content-Length: {len(payload or b'')}")
    return "\r\n".join([*head, "", ""]).encode("ascii") + (payload or b"")


def _line(answer: BinaryIO) -> bytes:
    line = answer.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise _NotHttp("an answer line is too long")
    return line


def _read_answer(answer: BinaryIO) -> tuple[int, bytes]:
    """The status and body of the answer on `answer`."""
    status_line = _line(answer)
    if not status_line:  # the daemon went away: an OSError, worded as http.client words it
        raise ConnectionResetError("Remote end closed connection without response")
    version, _, rest = status_line.partition(b" ")
    code = rest[:3]
    if not version.startswith(b"HTTP/") or not code.isdigit():
        raise _NotHttp(f"not an HTTP status line: {status_line[:80]!r}")
    headers: dict[bytes, bytes] = {}
    for _ in range(MAX_HEADERS + 1):  # the headers, then the empty line ending them
        line = _line(answer)
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    else:
        raise _NotHttp(f"more than {MAX_HEADERS} headers")
    length = headers.get(b"content-length")
    if length is None:
        return int(code), answer.read()
    if not length.isdigit():
        raise _NotHttp(f"bad Content-Length: {length[:80]!r}")
    body = answer.read(int(length))
    if len(body) < int(length):
        raise _NotHttp(f"the answer ended after {len(body)} of {int(length)} bytes")
    return int(code), body


def _exchange(socket_path: Path, timeout: float, message: bytes) -> tuple[int, bytes]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(socket_path))
        sock.sendall(message)
        with sock.makefile("rb") as answer:
            return _read_answer(answer)


class LocalClient:
    def __init__(self, socket_path: Path, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.socket_path = socket_path
        self.timeout = timeout

    def request(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> Any:
        """Call `PREFIX + path`; returns the decoded JSON body or raises `ControlError`.

        `timeout` overrides the client's for calls that wait on purpose (a login poll) or on Kiro
        (a refresh, a usage probe).
        """
        payload = None if body is None else json.dumps(body).encode()
        message = _message(method, PREFIX + path, payload)
        try:
            status, raw = _exchange(self.socket_path, timeout or self.timeout, message)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonUnreachable(
                f"kirod is not running (no answer on {self.socket_path})"
            ) from exc
        except (OSError, _NotHttp) as exc:
            raise DaemonUnreachable(f"cannot reach kirod on {self.socket_path}: {exc}") from exc
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            raise ControlError(status, "bad_response", "kirod sent a non-JSON answer") from None
        if status >= 400:
            error = (data or {}).get("error", {}) if isinstance(data, dict) else {}
            raise ControlError(
                status,
                str(error.get("code", "error")),
                str(error.get("message", f"HTTP {status}")),
            )
        return data

    def status(self) -> Status:
        return Status.from_json(self.request("GET", "/status"))
