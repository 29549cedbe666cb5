"""A stdlib HTTP client for the control API over its Unix socket (kiroctl's only transport).

It imports nothing of the server stack, so `kiroctl` starts fast.
"""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path
from typing import Any

from kirod.errors import KirodError
from kirod.localapi.schema import PREFIX, Status

DEFAULT_TIMEOUT_S = 10.0


class DaemonUnreachable(KirodError):
    """Nothing answers on the control socket."""


class ControlError(KirodError):
    """The daemon answered with an error document."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self._path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


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
        connection = _UnixConnection(self.socket_path, timeout or self.timeout)
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        try:
            connection.request(method, PREFIX + path, body=payload, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonUnreachable(
                f"kirod is not running (no answer on {self.socket_path})"
            ) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise DaemonUnreachable(f"cannot reach kirod on {self.socket_path}: {exc}") from exc
        finally:
            connection.close()
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            raise ControlError(
                response.status, "bad_response", "kirod sent a non-JSON answer"
            ) from None
        if response.status >= 400:
            error = (data or {}).get("error", {}) if isinstance(data, dict) else {}
            raise ControlError(
                response.status,
                str(error.get("code", "error")),
                str(error.get("message", f"HTTP {response.status}")),
            )
        return data

    def status(self) -> Status:
        return Status.from_json(self.request("GET", "/status"))
