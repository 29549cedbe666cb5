"""The daemon's status (`GET /status`, `kiroctl status`): its health and why, its listeners,
its accounts by status, its maintenance loop and its pacing.

The daemon reports `DaemonInfo` about itself; `Status.of` adds the account layer's reports and
judges the health from them (`HEALTHY` or `DEGRADED`; `DOWN` is kiroctl's word when nothing
answers).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from kirod.report_types.drift import DriftSummary
from kirod.report_types.maintenance import Maintenance
from kirod.report_types.pool import Pacing

HEALTHY = "healthy"  # serving, at least one usable account, none needing attention
DEGRADED = "degraded"  # serving, but something needs attention (see `Status.problems`)
DOWN = "down"  # not serving (kiroctl's verdict when nothing answers)

# Account states that need the user (or time) before the account serves again.
ATTENTION_STATES = frozenset({"needs_login", "needs_profile", "suspended", "exhausted"})


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
class DaemonInfo:
    """What the daemon itself reports; the control API adds accounts and health to it."""

    version: str
    pid: int
    uptime_s: float
    state: str  # "starting", "serving" or "draining"
    listeners: tuple[Listener, ...]
    lock_path: str
    # Why the store went read-only while serving (the damage and what to run); None: sound.
    database_damaged: str | None = None


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
    # An older daemon's document has none: off. Pacing is frozen, so one default serves all.
    pacing: Pacing = Pacing()  # noqa: RUF009
    # What Kiro answered in the last `SUMMARY_DAYS` days that kirod does not know; None: nothing
    # (and an older daemon's document has none).
    drift: DriftSummary | None = None
    # DaemonInfo's; an older daemon's document has none.
    database_damaged: str | None = None

    @classmethod
    def of(
        cls,
        info: DaemonInfo,
        accounts: AccountCounts,
        maintenance: Maintenance,
        pacing: Pacing,
        drift: DriftSummary | None = None,
    ) -> Status:
        problems = _problems(info.state, accounts, maintenance)
        if (damaged := info.database_damaged) is not None:
            # First, and once: a maintenance pass that failed on it says the same.
            problems = (damaged, *(p for p in problems if damaged not in p))
        return cls(
            **{item.name: getattr(info, item.name) for item in fields(DaemonInfo)},
            health=DEGRADED if problems else HEALTHY,
            problems=problems,
            accounts=accounts,
            maintenance=maintenance,
            pacing=pacing,
            drift=drift,
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
            listeners=tuple(Listener(str(i["kind"]), str(i["address"])) for i in data["listeners"]),
            lock_path=str(data["lock_path"]),
            health=str(data["health"]),
            problems=tuple(str(p) for p in data["problems"]),
            accounts=AccountCounts.from_json(data["accounts"]),
            maintenance=Maintenance.from_json(data["maintenance"]),
            pacing=Pacing.from_json(data["pacing"]) if "pacing" in data else Pacing(),
            drift=DriftSummary.from_json(data["drift"]) if data.get("drift") else None,
            database_damaged=str(damaged) if (damaged := data.get("database_damaged")) else None,
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
