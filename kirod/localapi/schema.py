"""Shapes exchanged over the local control API, shared by the server and kiroctl.

Plain stdlib dataclasses so that kiroctl can import them without the server stack; each report
is defined here once, and the daemon's layers build it (storage and accounts may import this
module, as they may `kirod.errors`). Each
`to_json()` is the documented, stable shape that `kiroctl … --json` prints; fields are only ever
added. Times are epoch seconds; durations are named with their unit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

PREFIX = "/localapi/v1"

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
class ConsoleLink:
    """POST /console: a one-time link that signs a browser in to the web console."""

    url: str  # the token rides in the fragment, which browsers never send to a server
    expires_in_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConsoleLink:
        return cls(url=str(data["url"]), expires_in_s=float(data["expires_in_s"]))


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
    actions: tuple[str, ...]  # "refresh", "usage", "catalog"
    error: str | None


@dataclass(frozen=True)
class Maintenance:
    """The account pool's background loop: token refreshes, usage probes, pruning."""

    interval_s: float
    running: bool
    last_pass_started: float | None
    last_pass_finished: float | None
    last_pass_error: str | None  # why the last pass fell short (its deadline, the store)
    next_pass_at: float | None
    results: tuple[MaintenanceResult, ...]  # each account's last result, by account id

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

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
class PacedAccount:
    """An account pacing keeps from starting a request now."""

    account_id: str
    next_start_at: float  # the earliest its next request may start
    # The end of its login's shared back-off (Kiro throttled an entry of the same login);
    # None: only its own spacing holds it.
    held_until: float | None = None


@dataclass(frozen=True)
class Pacing:
    """The pool's pacing: the spacing of request starts on one account (0: off), the limits it
    comes from, and the accounts held or paced now. A shared back-off holds accounts even with
    the spacing off."""

    spacing_s: float = 0.0
    account_rpm: float = 0.0
    account_min_interval_s: float = 0.0
    accounts: tuple[PacedAccount, ...] = ()

    @property
    def on(self) -> bool:
        return self.spacing_s > 0

    def of(self, account_id: str) -> PacedAccount | None:
        return next((item for item in self.accounts if item.account_id == account_id), None)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Pacing:
        return cls(
            spacing_s=float(data["spacing_s"]),
            account_rpm=float(data["account_rpm"]),
            account_min_interval_s=float(data["account_min_interval_s"]),
            accounts=tuple(
                PacedAccount(
                    account_id=str(item["account_id"]),
                    next_start_at=float(item["next_start_at"]),
                    held_until=_number(item.get("held_until")),
                )
                for item in data["accounts"]
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
    pacing: Pacing = Pacing()  # an older daemon's document has none: off

    @classmethod
    def of(
        cls, info: DaemonInfo, accounts: AccountCounts, maintenance: Maintenance, pacing: Pacing
    ) -> Status:
        problems = _problems(info.state, accounts, maintenance)
        return cls(
            **{item.name: getattr(info, item.name) for item in fields(DaemonInfo)},
            health=DEGRADED if problems else HEALTHY,
            problems=problems,
            accounts=accounts,
            maintenance=maintenance,
            pacing=pacing,
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

    @property
    def added(self) -> Account | None:
        """The account an approved login added."""
        return None if self.account is None else Account.from_json(self.account)

    @property
    def error_message(self) -> str | None:
        return None if self.error is None else self.error.get("message")

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
    cache: bool = False  # may ask for cached answers (`x-kirod-cache: use`)

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
            cache=bool(data.get("cache", False)),
        )


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p95: float
    p99: float


@dataclass(frozen=True)
class StatsGroup:
    """The requests of one account, model, API key or UTC day."""

    key: str
    requests: int
    errors: int
    credits: float

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StatsGroup:
        return cls(
            key=str(data["key"]),
            requests=int(data["requests"]),
            errors=int(data["errors"]),
            credits=float(data["credits"]),
        )


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
    truncated: int = 0  # requests in which Kiro cut a tool call off
    recovered: int = 0  # of those, answered in the end after kirod continued the turn
    days: tuple[StatsGroup, ...] = ()  # keyed by UTC date (YYYY-MM-DD), oldest first
    keys: tuple[StatsGroup, ...] = ()  # by API key id, most requests first

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.requests if self.requests else None

    @property
    def truncation_rate(self) -> float | None:
        return self.truncated / self.requests if self.requests else None

    @property
    def recovery_rate(self) -> float | None:
        return self.recovered / self.truncated if self.truncated else None

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "success_rate": self.success_rate,
            "truncation_rate": self.truncation_rate,
            "recovery_rate": self.recovery_rate,
        }

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
            ttfb_ms=Percentiles(float(ttfb["p50"]), float(ttfb["p95"]), float(ttfb["p99"]))
            if ttfb
            else None,
            accounts=tuple(StatsGroup.from_json(group) for group in data["accounts"]),
            models=tuple(StatsGroup.from_json(group) for group in data["models"]),
            errors={str(k): int(v) for k, v in data["errors"].items()},
            truncated=int(data.get("truncated", 0)),
            recovered=int(data.get("recovered", 0)),
            days=tuple(StatsGroup.from_json(group) for group in data.get("days", ())),
            keys=tuple(StatsGroup.from_json(group) for group in data.get("keys", ())),
        )


@dataclass(frozen=True)
class CreatedKey:
    """A new API key and its secret, which kirod shows in this answer only."""

    key: ApiKey
    secret: str

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key.to_json(), "secret": self.secret}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CreatedKey:
        return cls(key=ApiKey.from_json(data["key"]), secret=str(data["secret"]))


# The views below are read by kiroctl only: the daemon builds their documents, so each keeps the
# one it was read from, and `to_json()` gives it back whole (`kiroctl … --json` prints what kirod
# sent, fields this kiroctl does not know included). Optional fields are read with `.get`, so an
# older daemon that lacks one does not break kiroctl.


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Usage:
    """An account's credits as its last usage probe found them."""

    remaining: float | None
    limit: float | None
    resets_at: float | None
    subscription: str | None  # e.g. "KIRO PRO"
    overage: str | None = None  # "enabled" or "disabled" at Kiro; None: not said
    overage_capable: bool | None = None  # False: the plan cannot use overage (Free)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Usage:
        capable = data.get("overage_capable")
        return cls(
            remaining=_number(data.get("remaining")),
            limit=_number(data.get("limit")),
            resets_at=_number(data.get("resets_at")),
            subscription=_text(data.get("subscription")),
            overage=_text(data.get("overage")),
            overage_capable=capable if isinstance(capable, bool) else None,
        )


@dataclass(frozen=True)
class Account:
    """An account as GET /accounts lists it: everything but its secrets."""

    id: str
    label: str
    auth_kind: str
    status: str
    status_reason: str | None
    status_until: float | None
    usage: Usage | None  # None until a usage probe succeeded
    last_error: str | None
    expires_at: float | None  # the access token's
    document: dict[str, Any] = field(repr=False, compare=False)
    registration_expires_at: float | None = None  # the OIDC client registration's (IdC)
    registration_expired: bool = False  # past it, the account needs a new login
    region: str | None = None  # the Kiro API region that serves it
    profile_arn: str | None = None
    # None: the global proxy_url; "direct": none; else a proxy URL, its password masked
    proxy_url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return self.document

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Account:
        usage = data.get("usage")
        return cls(
            id=str(data["id"]),
            label=str(data["label"]),
            auth_kind=str(data["auth_kind"]),
            status=str(data["status"]),
            status_reason=_text(data.get("status_reason")),
            status_until=_number(data.get("status_until")),
            usage=Usage.from_json(usage) if isinstance(usage, dict) else None,
            last_error=_text(data.get("last_error")),
            expires_at=_number(data.get("expires_at")),
            document=data,
            registration_expires_at=_number(data.get("registration_expires_at")),
            registration_expired=data.get("registration_expired") is True,
            region=_text(data.get("region")),
            profile_arn=_text(data.get("profile_arn")),
            proxy_url=_text(data.get("proxy_url")),
        )


@dataclass(frozen=True)
class Imported:
    """An account an import stored; `created` is False when it updated one already there."""

    account: Account
    created: bool

    def to_json(self) -> dict[str, Any]:
        return self.account.to_json()  # the account's document, "created" included

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Imported:
        return cls(account=Account.from_json(data), created=bool(data["created"]))


@dataclass(frozen=True)
class PoolAccount:
    """One account as the dispatcher sees it: its state, its slots in use, its usage. The
    account layer builds it (`AccountPool.status`); `kiroctl top` and `accounts list` read it."""

    id: str
    label: str
    status: str
    reason: str | None
    until: float | None
    in_flight: int
    capacity: int
    last_error: str | None
    last_error_at: float | None
    auth_kind: str | None = None
    since: float | None = None
    half_open: bool = False  # cooling down, but its cool-down has passed: the next is a trial
    failures: int = 0
    auth_failures: int = 0
    remaining_credits: float | None = None
    usage_limit: float | None = None
    resets_at: float | None = None
    usage_at: float | None = None
    subscription: str | None = None
    expires_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PoolAccount:
        return cls(
            id=str(data["id"]),
            label=str(data["label"]),
            status=str(data["status"]),
            reason=_text(data.get("reason")),
            until=_number(data.get("until")),
            in_flight=int(data["in_flight"]),
            capacity=int(data["capacity"]),
            last_error=_text(data.get("last_error")),
            last_error_at=_number(data.get("last_error_at")),
            auth_kind=_text(data.get("auth_kind")),
            since=_number(data.get("since")),
            half_open=bool(data.get("half_open", False)),
            failures=int(data.get("failures") or 0),
            auth_failures=int(data.get("auth_failures") or 0),
            remaining_credits=_number(data.get("remaining_credits")),
            usage_limit=_number(data.get("usage_limit")),
            resets_at=_number(data.get("resets_at")),
            usage_at=_number(data.get("usage_at")),
            subscription=_text(data.get("subscription")),
            expires_at=_number(data.get("expires_at")),
        )


@dataclass(frozen=True)
class Pool:
    """GET /pool: the accounts in the dispatcher's order and the requests waiting for a slot.
    `document` is the JSON it was read from (what `--json` prints), None when built here."""

    strategy: str
    queued: int
    accounts: tuple[PoolAccount, ...]
    capacity_per_account: int | None = None
    document: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        if self.document is not None:
            return self.document
        return {
            "strategy": self.strategy,
            "capacity_per_account": self.capacity_per_account,
            "queued": self.queued,
            "accounts": [account.to_json() for account in self.accounts],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Pool:
        capacity = data.get("capacity_per_account")
        return cls(
            strategy=str(data["strategy"]),
            queued=int(data["queued"]),
            accounts=tuple(PoolAccount.from_json(item) for item in data["accounts"]),
            capacity_per_account=int(capacity) if isinstance(capacity, int) else None,
            document=data,
        )


@dataclass(frozen=True)
class ModelRow:
    id: str  # the public id clients ask for
    kiro_id: str
    context_window: int
    max_output_tokens: int
    accounts: tuple[str, ...]  # the ids of the accounts that offer it

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelRow:
        return cls(
            id=str(data["id"]),
            kiro_id=str(data["kiro_id"]),
            context_window=int(data["context_window"]),
            max_output_tokens=int(data["max_output_tokens"]),
            accounts=tuple(str(item) for item in data.get("accounts") or ()),
        )


@dataclass(frozen=True)
class Substitution:
    """A model name that was served by another model since kirod started."""

    requested: str
    served: str
    via: str  # how: "alias", "family" (Claude line), "tier" or "newest" (GPT)


@dataclass(frozen=True)
class ClientModelRow:
    """An id a supported client sends by default, and what serves it now (None: nothing)."""

    client: str
    role: str
    id: str
    served: str | None
    via: str | None
    why: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClientModelRow:
        served, via = data.get("served"), data.get("via")
        return cls(
            client=str(data["client"]),
            role=str(data["role"]),
            id=str(data["id"]),
            served=None if served is None else str(served),
            via=None if via is None else str(via),
            why=str(data.get("why") or ""),
        )


@dataclass(frozen=True)
class Models:
    """GET /models: what the accounts offer (`source` "accounts"), or the built-in list
    ("static") before any catalog is known, and how other names are resolved."""

    source: str
    models: tuple[ModelRow, ...]
    fallback: str  # "family" or "strict"
    aliases: dict[str, str]
    families: dict[str, str]  # family word → the Kiro id it resolves to
    substitutions: tuple[Substitution, ...]
    clients: tuple[ClientModelRow, ...]
    document: dict[str, Any] = field(repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return self.document

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Models:
        return cls(
            source=str(data["source"]),
            models=tuple(ModelRow.from_json(item) for item in data["models"]),
            fallback=str(data["fallback"]),
            aliases={str(k): str(v) for k, v in (data.get("aliases") or {}).items()},
            families={str(k): str(v) for k, v in (data.get("families") or {}).items()},
            substitutions=tuple(
                Substitution(str(s["requested"]), str(s["served"]), str(s["via"]))
                for s in data.get("substitutions") or ()
            ),
            clients=tuple(ClientModelRow.from_json(row) for row in data.get("clients") or ()),
            document=data,
        )


@dataclass(frozen=True)
class Config:
    """GET /config: the effective settings by name, secrets replaced by a marker."""

    config_path: str | None  # None: defaults and the environment only
    settings: dict[str, Any]
    document: dict[str, Any] = field(repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return self.document

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Config:
        return cls(
            config_path=_text(data.get("config_path")),
            settings=dict(data["settings"]),
            document=data,
        )


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


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


# Traffic windows: name → (buckets, seconds per bucket). Buckets align to multiples of their
# length in UTC (a minute, an hour, a day), the last one holding now.
TRAFFIC_WINDOWS: dict[str, tuple[int, int]] = {
    "hour": (60, 60),
    "day": (24, 3600),
    "month": (30, 86400),
}


@dataclass(frozen=True)
class TrafficBucket:
    """The requests that reached the account layer in `[start, start + bucket_s)`."""

    start: float
    requests: int
    errors: int  # not succeeded: a status of 400 or more, or a stream that ended in an error
    ttfb_p50_ms: float | None  # nearest-rank; None without a timed request
    ttfb_p95_ms: float | None
    credits: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrafficBucket:
        p50, p95 = data.get("ttfb_p50_ms"), data.get("ttfb_p95_ms")
        return cls(
            start=float(data["start"]),
            requests=int(data["requests"]),
            errors=int(data["errors"]),
            ttfb_p50_ms=None if p50 is None else float(p50),
            ttfb_p95_ms=None if p95 is None else float(p95),
            credits=float(data["credits"]),
        )


@dataclass(frozen=True)
class CreditsDay:
    """The Kiro credits one account used on one UTC day, and the requests it answered."""

    day: str  # YYYY-MM-DD
    account_id: str
    credits: float
    requests: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CreditsDay:
        return cls(
            day=str(data["day"]),
            account_id=str(data["account_id"]),
            credits=float(data["credits"]),
            requests=int(data["requests"]),
        )


@dataclass(frozen=True)
class Traffic:
    """The operation log over one window (`GET /traffic`), in buckets of `bucket_s` seconds.

    Every bucket is present, oldest first, the first starting at `since`; `errors` counts the
    window's failed requests by error code (`http_<status>` without one), most first;
    `credits_by_day` is by UTC day, then account.
    """

    window: str  # a key of TRAFFIC_WINDOWS
    since: float
    bucket_s: int
    buckets: tuple[TrafficBucket, ...]
    errors: dict[str, int]
    credits_by_day: tuple[CreditsDay, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "since": self.since,
            "bucket_s": self.bucket_s,
            "buckets": [bucket.to_json() for bucket in self.buckets],
            "errors": dict(self.errors),
            "credits_by_day": [row.to_json() for row in self.credits_by_day],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Traffic:
        return cls(
            window=str(data["window"]),
            since=float(data["since"]),
            bucket_s=int(data["bucket_s"]),
            buckets=tuple(TrafficBucket.from_json(item) for item in data["buckets"]),
            errors={str(k): int(v) for k, v in data["errors"].items()},
            credits_by_day=tuple(CreditsDay.from_json(item) for item in data["credits_by_day"]),
        )


@dataclass(frozen=True)
class AlertDelivery:
    """One webhook's answer to a test alert; `webhook` shows no path, query or user part."""

    webhook: str
    delivered: bool
    status: int | None  # the HTTP status, if the webhook answered
    error: str | None  # why it was not delivered: a network error, a timeout, the status

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AlertDelivery:
        status = data.get("status")
        error = data.get("error")
        return cls(
            webhook=str(data["webhook"]),
            delivered=bool(data["delivered"]),
            status=None if status is None else int(status),
            error=None if error is None else str(error),
        )


@dataclass(frozen=True)
class AlertTest:
    """POST /alerts/test: one `test` alert sent to every webhook, each webhook's answer, and
    the desktop notification's outcome (None: desktop notifications are off)."""

    webhooks: tuple[AlertDelivery, ...]
    desktop: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"webhooks": [hook.to_json() for hook in self.webhooks], "desktop": self.desktop}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AlertTest:
        desktop = data.get("desktop")
        return cls(
            webhooks=tuple(AlertDelivery.from_json(item) for item in data["webhooks"]),
            desktop=None if desktop is None else str(desktop),
        )


@dataclass(frozen=True)
class ExtensionInfo:
    """One loaded extension; options its schema marks secret show as `<redacted>`."""

    name: str  # its entry-point name, as in [extensions.NAME]
    version: str  # its distribution's version
    priority: int  # lower runs first
    on_failure: str  # "fail" or "skip"
    timeout_s: float  # the bound of each hook call
    hooks: tuple[str, ...]  # the hooks it implements
    options: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "hooks": list(self.hooks)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExtensionInfo:
        return cls(
            name=str(data["name"]),
            version=str(data["version"]),
            priority=int(data["priority"]),
            on_failure=str(data["on_failure"]),
            timeout_s=float(data["timeout_s"]),
            hooks=tuple(data.get("hooks", ())),
            options=dict(data.get("options", {})),
        )


@dataclass(frozen=True)
class ExtensionList:
    """GET /extensions: the loaded extensions, in the order their hooks run."""

    extensions: tuple[ExtensionInfo, ...]

    def to_json(self) -> dict[str, Any]:
        return {"extensions": [item.to_json() for item in self.extensions]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExtensionList:
        return cls(tuple(ExtensionInfo.from_json(item) for item in data["extensions"]))


@dataclass(frozen=True)
class CacheStats:
    """GET /cache: what the response cache holds, and how it answered since the daemon started."""

    entries: int
    bytes: int
    max_bytes: int
    ttl_s: float
    oldest_at: float | None  # when the oldest live entry was stored
    hits: int
    misses: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CacheStats:
        return cls(
            entries=int(data["entries"]),
            bytes=int(data["bytes"]),
            max_bytes=int(data["max_bytes"]),
            ttl_s=float(data["ttl_s"]),
            oldest_at=data.get("oldest_at"),
            hits=int(data["hits"]),
            misses=int(data["misses"]),
        )
