"""Shapes exchanged over the local control API, shared by the server and kiroctl.

Plain stdlib dataclasses so that kiroctl can import them without the server stack. Each
`to_json()` is the documented, stable shape that `kiroctl … --json` prints; fields are only ever
added. Times are epoch seconds; durations are named with their unit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

PREFIX = "/localapi/v1"

HEALTHY = "healthy"  # serving, at least one usable account, none needing attention
DEGRADED = "degraded"  # serving, but something needs attention (see `Status.problems`)
DOWN = "down"  # not serving (kiroctl's verdict when nothing answers)

# Account states that need the user (or time) before the account serves again.
ATTENTION_STATES = frozenset({"needs_login", "suspended", "exhausted"})


@dataclass(frozen=True)
class Listener:
    kind: str  # "tcp" (public API) or "unix" (this control API)
    address: str


@dataclass(frozen=True)
class AccountCounts:
    total: int
    usable: int  # active
    by_status: dict[str, int]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AccountCounts:
        return cls(
            total=int(data["total"]),
            usable=int(data["usable"]),
            by_status={str(k): int(v) for k, v in data["by_status"].items()},
        )


@dataclass(frozen=True)
class MaintenanceResult:
    """What the last maintenance pass did for one account; `error` is None when it all worked."""

    account_id: str
    at: float
    actions: tuple[str, ...]  # "refresh", "usage"
    error: str | None


@dataclass(frozen=True)
class Maintenance:
    """The account pool's background loop: token refreshes, usage probes, pruning."""

    interval_s: float
    running: bool
    last_pass_started: float | None
    last_pass_finished: float | None
    last_pass_error: str | None
    next_pass_at: float | None
    results: tuple[MaintenanceResult, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Maintenance:
        return cls(
            interval_s=float(data["interval_s"]),
            running=bool(data["running"]),
            last_pass_started=data.get("last_pass_started"),
            last_pass_finished=data.get("last_pass_finished"),
            last_pass_error=data.get("last_pass_error"),
            next_pass_at=data.get("next_pass_at"),
            results=tuple(
                MaintenanceResult(
                    account_id=str(item["account_id"]),
                    at=float(item["at"]),
                    actions=tuple(item["actions"]),
                    error=item.get("error"),
                )
                for item in data["results"]
            ),
        )


@dataclass(frozen=True)
class DaemonInfo:
    """What the daemon itself reports; the control API adds accounts and health to it."""

    version: str
    pid: int
    uptime_s: float
    state: str  # "starting", "serving" or "draining"
    listeners: tuple[Listener, ...]
    lock_path: str


@dataclass(frozen=True)
class Status:
    version: str
    pid: int
    uptime_s: float
    state: str
    listeners: tuple[Listener, ...]
    lock_path: str
    health: str  # HEALTHY or DEGRADED
    problems: tuple[str, ...]  # why the health is degraded, one sentence each
    accounts: AccountCounts
    maintenance: Maintenance

    @classmethod
    def of(cls, info: DaemonInfo, accounts: AccountCounts, maintenance: Maintenance) -> Status:
        problems = _problems(info.state, accounts, maintenance)
        return cls(
            **{item.name: getattr(info, item.name) for item in fields(DaemonInfo)},
            health=DEGRADED if problems else HEALTHY,
            problems=problems,
            accounts=accounts,
            maintenance=maintenance,
        )

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
            health=str(data["health"]),
            problems=tuple(str(p) for p in data["problems"]),
            accounts=AccountCounts.from_json(data["accounts"]),
            maintenance=Maintenance.from_json(data["maintenance"]),
        )


def _problems(state: str, accounts: AccountCounts, maintenance: Maintenance) -> tuple[str, ...]:
    problems: list[str] = []
    if state != "serving":
        problems.append(f"kirod is {state}")
    if accounts.usable == 0:
        problems.append("no usable account")
    for status in sorted(ATTENTION_STATES & accounts.by_status.keys()):
        count = accounts.by_status[status]
        problems.append(f"{count} of {accounts.total} accounts: {status.replace('_', ' ')}")
    if maintenance.last_pass_error:
        problems.append(f"account maintenance failed: {maintenance.last_pass_error}")
    return tuple(problems)


@dataclass(frozen=True)
class Login:
    """A device-code login driven by the daemon; kiroctl polls it by `id`.

    `state` is pending, then one of approved, denied, expired, cancelled or failed. `account` is
    the new account (redacted) once approved; `error` says why it ended otherwise.
    """

    id: str
    state: str
    auth_kind: str
    start_url: str
    region: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    expires_at: float
    interval_s: float
    account: dict[str, Any] | None
    error: dict[str, str] | None

    PENDING = "pending"
    FINISHED = frozenset({"approved", "denied", "expired", "cancelled", "failed"})

    @property
    def finished(self) -> bool:
        return self.state in self.FINISHED

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Login:
        names = {item.name for item in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


@dataclass(frozen=True)
class ApiKey:
    """An API key as listed: never the key itself nor its hash."""

    id: str
    name: str
    prefix: str
    created_at: float
    last_used_at: float | None
    models: tuple[str, ...]  # glob patterns; empty: any model
    rpm: int | None  # requests per minute; None: unlimited

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ApiKey:
        return cls(
            id=str(data["id"]),
            name=str(data["name"]),
            prefix=str(data["prefix"]),
            created_at=float(data["created_at"]),
            last_used_at=data.get("last_used_at"),
            models=tuple(data.get("models") or ()),
            rpm=data.get("rpm"),
        )


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p95: float
    p99: float


@dataclass(frozen=True)
class StatsGroup:
    """The requests of one account or one model."""

    key: str
    requests: int
    errors: int
    credits: float


@dataclass(frozen=True)
class Stats:
    """A summary of the operation log from `since` (None: all it keeps) until now."""

    since: float | None
    requests: int
    succeeded: int
    input_tokens: int
    output_tokens: int
    credits: float  # Kiro credits spent, as metered by the upstream
    ttfb_ms: Percentiles | None  # time to first byte; None without timed requests
    accounts: tuple[StatsGroup, ...]  # most requests first
    models: tuple[StatsGroup, ...]  # by the name the client asked for
    errors: dict[str, int]  # by error code

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.requests if self.requests else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "success_rate": self.success_rate}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Stats:
        ttfb = data.get("ttfb_ms")
        return cls(
            since=data.get("since"),
            requests=int(data["requests"]),
            succeeded=int(data["succeeded"]),
            input_tokens=int(data["input_tokens"]),
            output_tokens=int(data["output_tokens"]),
            credits=float(data["credits"]),
            ttfb_ms=Percentiles(**ttfb) if ttfb else None,
            accounts=tuple(StatsGroup(**group) for group in data["accounts"]),
            models=tuple(StatsGroup(**group) for group in data["models"]),
            errors={str(k): int(v) for k, v in data["errors"].items()},
        )


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
