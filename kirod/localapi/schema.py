"""Shapes exchanged over the local control API, shared by the server and kiroctl.

Plain stdlib dataclasses so that kiroctl can import them without the server stack.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PREFIX = "/localapi/v1"


@dataclass(frozen=True)
class Listener:
    kind: str  # "tcp" (public API) or "unix" (this control API)
    address: str


@dataclass(frozen=True)
class Status:
    version: str
    pid: int
    uptime_s: float
    state: str  # "serving" or "draining"
    listeners: tuple[Listener, ...]
    lock_path: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Status:
        return cls(
            version=str(data["version"]),
            pid=int(data["pid"]),
            uptime_s=float(data["uptime_s"]),
            state=str(data["state"]),
            listeners=tuple(Listener(**item) for item in data["listeners"]),
            lock_path=str(data["lock_path"]),
        )


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
