"""What happened, for `kiroctl trace` and `kiroctl logs`: operation-log rows with each attempt
(`GET /trace`; never prompt or tool content) and lines of the daemon's log (`GET /logs`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class TraceAttempt:
    """One account a request tried, as `kiroctl trace` shows it; None: not known or not apt.

    `failover_reason` is why the request left the attempt before (its outcome), or
    `retried after bearer` for the same account after a refreshed token.
    """

    account_id: str
    outcome: str  # ok, or the failure class
    region: str | None = None
    model: str | None = None  # the Kiro model id routed to
    upstream_status: int | None = None  # Kiro's HTTP status, when it answered an error
    upstream_reason: str | None = None  # Kiro's reason code, when it gave one
    ended_ms: float | None = None  # since the request began
    frames: int | None = None  # upstream frames read (the attempt that answered)
    bytes_read: int | None = None  # their event-stream bytes
    failover_reason: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TraceAttempt:
        names = {item.name for item in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


@dataclass(frozen=True)
class TraceRequest:
    """One operation-log row: a request's attempts and how it went. Never prompt or tool content."""

    id: int  # the row's id, the cursor of `GET /trace?after=`
    at: float
    request_id: str
    key_id: str
    protocol: str
    model: str  # as the client named it
    stream: bool
    account_id: str | None
    status: int
    error: str | None
    stop_reason: str | None
    ttfb_ms: float | None  # time to the first event sent on
    total_ms: float
    input_tokens: int | None
    output_tokens: int | None
    credits: float | None
    truncations: int  # tool calls Kiro cut off
    continuations: int  # of those, the ones kirod continued the turn after
    dropped: tuple[str, ...]
    attempts: tuple[TraceAttempt, ...]
    extensions: tuple[str, ...] = ()  # the extensions whose on_request changed the request
    cache: str | None = None  # "hit" or "miss" when the request asked for the cache
    cuts: int = 0  # answers Kiro ended without their tail frames, sent on as max_tokens
    reserved_credits: float | None = None  # what its key's or account's budget held for it
    reserved_tokens: int | None = None

    @property
    def recovered(self) -> bool:
        return self.continuations > 0 and self.status < 400 and self.error is None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "recovered": self.recovered}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TraceRequest:
        names = {item.name for item in fields(cls)} - {"attempts", "dropped", "extensions"}
        return cls(
            **{key: value for key, value in data.items() if key in names},
            dropped=tuple(data.get("dropped", ())),
            extensions=tuple(data.get("extensions", ())),
            attempts=tuple(TraceAttempt.from_json(item) for item in data["attempts"]),
        )


@dataclass(frozen=True)
class Trace:
    """Operation-log rows, oldest first, and the cursor to ask for the rows after them."""

    requests: tuple[TraceRequest, ...]
    cursor: int

    def to_json(self) -> dict[str, Any]:
        return {"requests": [row.to_json() for row in self.requests], "cursor": self.cursor}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trace:
        return cls(
            requests=tuple(TraceRequest.from_json(item) for item in data["requests"]),
            cursor=int(data["cursor"]),
        )


@dataclass(frozen=True)
class LogLines:
    """Lines of the daemon's log after a cursor (`GET /logs`).

    `next` is the number of the last line answered, to pass as `after`; `missed` counts lines
    that left the daemon's in-memory tail before they could be read; `more` is true when the
    byte bound stopped the answer before the newest line.
    """

    lines: tuple[str, ...]
    next: int
    missed: int = 0
    more: bool = False

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "lines": list(self.lines)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LogLines:
        return cls(
            lines=tuple(str(line) for line in data["lines"]),
            next=int(data["next"]),
            missed=int(data.get("missed", 0)),
            more=bool(data.get("more", False)),
        )
