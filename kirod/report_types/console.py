"""A one-time link to the web console (`POST /console`, `kiroctl console`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ConsoleLink:
    """POST /console: a one-time link that signs a browser in to the web console."""

    url: str  # the token rides in the fragment, which browsers never send to a server
    expires_in_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConsoleLink:
        return cls(url=str(data["url"]), expires_in_s=float(data["expires_in_s"]))
