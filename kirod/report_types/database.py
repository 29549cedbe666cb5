"""The database's checks and copies (`GET /db/check`, `POST /db/backup`, `kiroctl db …`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class DatabaseCheck:
    """SQLite's full integrity check of the file: `problems` in its words, none when sound."""

    path: str
    problems: tuple[str, ...]
    seconds: float
    daemon: bool  # run by the running kirod (True) or by kiroctl on the file (False)

    @property
    def sound(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "problems": list(self.problems), "sound": self.sound}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DatabaseCheck:
        return cls(
            path=str(data["path"]),
            problems=tuple(str(p) for p in data["problems"]),
            seconds=float(data["seconds"]),
            daemon=bool(data["daemon"]),
        )


@dataclass(frozen=True)
class DatabaseBackup:
    """A copy made with SQLite's online backup API."""

    source: str
    path: str
    bytes: int
    seconds: float
    daemon: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DatabaseBackup:
        return cls(
            source=str(data["source"]),
            path=str(data["path"]),
            bytes=int(data["bytes"]),
            seconds=float(data["seconds"]),
            daemon=bool(data["daemon"]),
        )
