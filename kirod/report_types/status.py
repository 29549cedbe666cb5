"""The daemon's status (`GET /status`, `kiroctl status`): its health and why, its listeners,
its accounts by status, its maintenance loop and its pacing.

The daemon reports `DaemonInfo` about itself; `Status.of` adds the account layer's reports and
judges the health from them (`HEALTHY` or `DEGRADED`; `DOWN` is kiroctl's word when nothing
answers).
"""

from __future__ import annotations

import time
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
            by_status={str(k): int(v) for k, v in data.get("by_status", {}).items()},
        )


# What an older kirod's status leaves out: counts it did not send, and the problem kiroctl names.
UNKNOWN = AccountCounts(total=0, usable=0, by_status={})
NOT_JUDGED = "this kirod does not judge its health: it is older than kiroctl"


@dataclass(frozen=True)
class DaemonInfo:
    """What the daemon itself reports; the control API adds accounts and health to it."""

    version: str
    pid: int
    uptime_s: float
    state: str  # "starting", "serving" or "draining"
    listeners: tuple[Listener, ...]
    lock_path: str
    # The database file while its disk is full (a write found no room, none has since), else None.
    disk_full: str | None = None
    skipped_writes: int = 0  # best-effort writes (a key's last use, the log, …) lost since start
    # Why the store went read-only while serving (the damage and what to run); None: sound.
    database_damaged: str | None = None


@dataclass(frozen=True)
class Outage:
    """A Kiro host no route connects to from this machine, since when and why (the first
    failure's: an exception type and the system's reason, never an address or secret)."""

    host: str
    since: float
    detail: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outage:
        return cls(host=str(data["host"]), since=float(data["since"]), detail=str(data["detail"]))


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
    # Kiro hosts this machine cannot reach now (an older daemon's document has none).
    unreachable: tuple[Outage, ...] = ()
    # DaemonInfo's; an older daemon's document has neither.
    disk_full: str | None = None
    skipped_writes: int = 0
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
        unreachable: tuple[Outage, ...] = (),
    ) -> Status:
        problems = _problems(info, accounts, maintenance) + tuple(
            f"cannot reach Kiro at {outage.host} since "
            f"{time.strftime('%H:%M:%S UTC', time.gmtime(outage.since))}: {outage.detail}; "
            "no account rests for it"
            for outage in unreachable
        )
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
            unreachable=unreachable,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Status:
        """The document of any kirod: the first ones sent only what `DaemonInfo` holds, so the
        health, accounts and maintenance loop they leave out read as not known, never as fine."""
        state = str(data.get("state", "unknown"))
        judged = "health" in data and "accounts" in data and "maintenance" in data
        accounts = AccountCounts.from_json(data["accounts"]) if "accounts" in data else UNKNOWN
        maintenance = Maintenance.from_json(data.get("maintenance", {}))
        if judged:
            health, problems = str(data["health"]), tuple(str(p) for p in data["problems"])
        else:
            health, problems = DEGRADED, (NOT_JUDGED,)
        return cls(
            version=str(data.get("version", "unknown")),
            pid=int(data.get("pid", 0)),
            uptime_s=float(data.get("uptime_s", 0.0)),
            state=state,
            listeners=tuple(
                Listener(str(i["kind"]), str(i["address"])) for i in data.get("listeners", ())
            ),
            lock_path=str(data.get("lock_path", "")),
            health=health,
            problems=problems,
            accounts=accounts,
            maintenance=maintenance,
            pacing=Pacing.from_json(data["pacing"]) if "pacing" in data else Pacing(),
            drift=DriftSummary.from_json(data["drift"]) if data.get("drift") else None,
            unreachable=tuple(Outage.from_json(o) for o in data.get("unreachable") or ()),
            disk_full=str(data["disk_full"]) if data.get("disk_full") else None,
            skipped_writes=int(data.get("skipped_writes") or 0),
            database_damaged=str(damaged) if (damaged := data.get("database_damaged")) else None,
        )


def _problems(
    info: DaemonInfo, accounts: AccountCounts, maintenance: Maintenance
) -> tuple[str, ...]:
    problems: list[str] = []
    if info.state != "serving":
        problems.append(f"kirod is {info.state}")
    if info.disk_full is not None:
        problems.append(
            f"disk full: kirod cannot write to {info.disk_full}; free space on its filesystem"
            f" ({info.skipped_writes} best-effort writes lost so far)"
        )
    if accounts.usable == 0:
        problems.append("no usable account")
    for status in sorted(ATTENTION_STATES & accounts.by_status.keys()):
        count = accounts.by_status[status]
        problems.append(f"{count} of {accounts.total} accounts: {status.replace('_', ' ')}")
    if maintenance.last_pass_error:
        problems.append(f"account maintenance failed: {maintenance.last_pass_error}")
    return tuple(problems)
