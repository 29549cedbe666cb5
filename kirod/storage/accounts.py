"""Kiro accounts as stored: credentials, health state and usage snapshots.

Credentials are an opaque JSON object to the store. Their updates are compare-and-swap on
`generation`, so a token refresh that raced another refresh (or a removal) loses loudly instead of
overwriting a newer refresh token. State changes (`update_state`) decide on the row as it is inside
the write transaction and write it back only at that generation, so a decision never applies to
credentials it did not see and never brings back a removed account. Removed accounts are
tombstoned: hidden, with credentials wiped. After each committed status change (a new account,
a state decision that changes the status or its reason, a login or profile that ends
`needs_login`/`needs_profile`, a removal) the store tells its observers (`observe`), which is how
alerts learn of them.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

import aiosqlite

from kirod.errors import GenerationConflict
from kirod.log import redact_url
from kirod.storage.db import Database

AuthKind = Literal["social", "idc", "builder_id", "api_key", "external_idp"]
Status = Literal[
    "active", "cooling_down", "exhausted", "suspended", "needs_login", "needs_profile", "disabled"
]

AUTH_KINDS: frozenset[str] = frozenset(get_args(AuthKind))
STATUSES: frozenset[str] = frozenset(get_args(Status))


@dataclass(frozen=True, slots=True)
class AccountState:
    """An account's health: status with its reason and since/until, and the failure counters.

    `failures` counts consecutive failures (the circuit breaker's n), `auth_failures` consecutive
    rejections of freshly refreshed credentials. `transient` marks a cool-down opened by
    transient failures only (server, protocol, network), which panic mode may end early.
    """

    status: Status = "active"
    reason: str | None = None
    until: float | None = None
    failures: int = 0
    auth_failures: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    transient: bool = False


@dataclass(frozen=True, slots=True)
class AccountRecord:
    """One live account row. `credentials` is left out of repr so it cannot reach a log."""

    id: str
    label: str
    auth_kind: AuthKind
    region: str
    auth_region: str
    profile_arn: str | None
    credentials: Mapping[str, Any] = field(repr=False)
    status: Status
    status_reason: str | None
    status_since: float | None
    status_until: float | None
    usage: Mapping[str, Any] | None
    usage_at: float | None
    generation: int
    created_at: float
    updated_at: float
    failures: int = 0
    auth_failures: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    status_transient: bool = False
    # None: the global proxy setting; "direct": none; else the account's proxy URL (which may
    # hold a password: shown only through `redact_url`, and left out of repr).
    proxy_url: str | None = field(default=None, repr=False)
    # Credit ceilings a UTC day and month (None: none), and whether kirod may spend into the
    # account's overage once its plan credits are used up (kirod.budgets).
    budget_day: float | None = None
    budget_month: float | None = None
    allow_overage: bool = False

    @property
    def state(self) -> AccountState:
        return AccountState(
            status=self.status,
            reason=self.status_reason,
            until=self.status_until,
            failures=self.failures,
            auth_failures=self.auth_failures,
            last_error=self.last_error,
            last_error_at=self.last_error_at,
            transient=self.status_transient,
        )

    def redacted(self) -> dict[str, Any]:
        """The account as the control API shows it: everything but the secrets."""
        return {
            "id": self.id,
            "label": self.label,
            "auth_kind": self.auth_kind,
            "region": self.region,
            "auth_region": self.auth_region,
            "profile_arn": self.profile_arn,
            "status": self.status,
            "status_reason": self.status_reason,
            "status_since": self.status_since,
            "status_until": self.status_until,
            "usage": self.usage,
            "usage_at": self.usage_at,
            "failures": self.failures,
            "auth_failures": self.auth_failures,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "generation": self.generation,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "expires_at": self.credentials.get("expires_at"),
            # The OIDC client registration's (IdC, Builder ID): past it, only a new login helps.
            "registration_expires_at": self.credentials.get("client_secret_expires_at"),
            "proxy_url": redact_url(self.proxy_url),
            "budget_day": self.budget_day,
            "budget_month": self.budget_month,
            "allow_overage": self.allow_overage,
        }


@dataclass(frozen=True, slots=True)
class StatusChange:
    """A committed change of an account's status (or of its reason), as observers (alerts)
    are told it."""

    account_id: str
    label: str
    before: Status | None  # None: a new account
    after: Status | None  # None: removed
    reason: str | None
    until: float | None


StatusObserver = Callable[[StatusChange], None]


MAX_LABEL_CHARS = 128
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def clean_label(label: str) -> str:
    """A label fit for logs and terminals: no control characters, at most 128 characters
    (labels come from imported files and from what Kiro reports, both untrusted)."""
    text = _CONTROL.sub(" ", label).strip()[:MAX_LABEL_CHARS].strip()
    return text or "account"


def _record(row: sqlite3.Row) -> AccountRecord:
    return AccountRecord(
        id=row["id"],
        label=row["label"],
        auth_kind=cast(AuthKind, row["auth_kind"]),
        region=row["region"],
        auth_region=row["auth_region"],
        profile_arn=row["profile_arn"],
        credentials=json.loads(row["credentials"]),
        status=cast(Status, row["status"]),
        status_reason=row["status_reason"],
        status_since=row["status_since"],
        status_until=row["status_until"],
        usage=None if row["usage"] is None else json.loads(row["usage"]),
        usage_at=row["usage_at"],
        generation=row["generation"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        failures=row["failures"],
        auth_failures=row["auth_failures"],
        last_error=row["last_error"],
        last_error_at=row["last_error_at"],
        status_transient=bool(row["status_transient"]),
        proxy_url=row["proxy_url"],
        budget_day=row["budget_day"],
        budget_month=row["budget_month"],
        allow_overage=bool(row["allow_overage"]),
    )


def _dump(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), separators=(",", ":"))


class AccountStore:
    """Account rows in the kirod database; every write survives its caller's cancellation."""

    def __init__(self, db: Database) -> None:
        self._db = db
        # Bumped by every write, so readers that cache the accounts know when to re-read.
        self.revision = 0
        self._observers: list[StatusObserver] = []

    def check_room(self) -> None:
        """Raise `StoreFull` if the disk is known to have no room: an import or a login, whose
        purpose is to store an account, is refused before anything is asked of Kiro."""
        self._db.check_room()

    def observe(self, observer: StatusObserver) -> None:
        """Call `observer` after each committed status change (it must not block or raise)."""
        self._observers.append(observer)

    def _changed(
        self, record: AccountRecord, before: Status | None, reason: str | None = None
    ) -> None:
        """Tell of a new status, or of a new reason for the same one (`reason`: the one before):
        a cool-down that turns into a rest after Kiro flagged the account alerts too."""
        if before == record.status and reason == record.status_reason:
            return
        self._tell(
            StatusChange(
                record.id,
                record.label,
                before,
                record.status,
                record.status_reason,
                record.status_until,
            )
        )

    def _tell(self, change: StatusChange) -> None:
        for observer in self._observers:
            observer(change)

    async def insert(
        self,
        *,
        label: str,
        auth_kind: AuthKind,
        region: str,
        auth_region: str,
        credentials: Mapping[str, Any],
        profile_arn: str | None = None,
        proxy_url: str | None = None,
    ) -> AccountRecord:
        if auth_kind not in AUTH_KINDS:
            raise ValueError(f"unknown auth kind {auth_kind!r}")
        now = time.time()
        params = (
            uuid.uuid4().hex,
            clean_label(label),
            auth_kind,
            region,
            auth_region,
            profile_arn,
            _dump(credentials),
            now,
            now,
            proxy_url,
        )
        rows = await self._db.execute(
            "INSERT INTO accounts (id, label, auth_kind, region, auth_region, profile_arn,"
            " credentials, created_at, updated_at, proxy_url)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
            params,
        )
        self.revision += 1
        record = _record(rows[0])
        self._changed(record, None)
        return record

    async def get(self, account_id: str) -> AccountRecord | None:
        row = await self._db.read_one(
            "SELECT * FROM accounts WHERE id = ? AND removed_at IS NULL", (account_id,)
        )
        return None if row is None else _record(row)

    async def update_credentials(
        self, account_id: str, credentials: Mapping[str, Any], expected_generation: int
    ) -> AccountRecord:
        """Store refreshed credentials if nobody else did since `expected_generation`.

        Raises GenerationConflict when the account changed or was removed meanwhile; the caller
        should re-read the account and use (or refresh) the newer credentials. New credentials
        end a `needs_login` state: they are the new login.
        """
        now = time.time()
        rows = await self._db.execute(
            "UPDATE accounts SET credentials = ?, generation = generation + 1, updated_at = ?,"
            " status_since = CASE WHEN status = 'needs_login' THEN ? ELSE status_since END,"
            " status_reason = CASE WHEN status = 'needs_login' THEN NULL ELSE status_reason END,"
            " auth_failures = CASE WHEN status = 'needs_login' THEN 0 ELSE auth_failures END,"
            " status = CASE WHEN status = 'needs_login' THEN 'active' ELSE status END"
            " WHERE id = ? AND generation = ? AND removed_at IS NULL RETURNING *",
            (_dump(credentials), now, now, account_id, expected_generation),
        )
        self.revision += 1
        if not rows:
            raise GenerationConflict(
                f"account {account_id} changed or was removed since generation "
                f"{expected_generation}"
            )
        record = _record(rows[0])
        if record.status_since == now:  # set only when this login ended `needs_login`
            self._changed(record, "needs_login")
        return record

    async def update_state(
        self, account_id: str, decide: Callable[[AccountRecord], AccountState | None]
    ) -> AccountRecord | None:
        """Apply `decide(latest row)` to the account's state in one write transaction.

        `decide` returns the new state, or None to leave the row alone; it runs on the row as
        stored, so it can check that what it reacts to (a token, a status) is still current.
        `status_since` moves only when the status changes. Returns the row after the decision, or
        None if the account does not exist (or was removed).
        """

        unchanged = False
        before: Status | None = None
        reason: str | None = None

        async def transaction(conn: aiosqlite.Connection) -> AccountRecord | None:
            nonlocal unchanged, before, reason
            cursor = await conn.execute(
                "SELECT * FROM accounts WHERE id = ? AND removed_at IS NULL", (account_id,)
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            record = _record(row)
            before, reason = record.status, record.status_reason
            state = decide(record)
            if state is None or state == record.state:
                unchanged = True
                return record
            if state.status not in STATUSES:
                raise ValueError(f"unknown account status {state.status!r}")
            now = time.time()
            cursor = await conn.execute(
                "UPDATE accounts SET"
                " status_since = CASE WHEN status = ? THEN status_since ELSE ? END,"
                " status = ?, status_reason = ?, status_until = ?, failures = ?,"
                " auth_failures = ?, last_error = ?, last_error_at = ?, status_transient = ?,"
                " updated_at = ? WHERE id = ? AND generation = ? RETURNING *",
                (
                    state.status,
                    now,
                    state.status,
                    state.reason,
                    state.until,
                    state.failures,
                    state.auth_failures,
                    state.last_error,
                    state.last_error_at,
                    state.transient,
                    now,
                    account_id,
                    record.generation,
                ),
            )
            updated = await cursor.fetchone()
            assert updated is not None  # same transaction as the read
            return _record(updated)

        try:
            updated = await self._db.run_write(transaction)
        finally:
            if not unchanged:  # a decision that wrote nothing leaves the pool's view current
                self.revision += 1
        if updated is not None and not unchanged:
            self._changed(updated, before, reason)
        return updated

    async def set_profile(
        self, account_id: str, profile_arn: str, region: str
    ) -> AccountRecord | None:
        """Give the account its profile and that profile's API region; ends `needs_profile`."""
        now = time.time()
        rows = await self._db.execute(
            "UPDATE accounts SET profile_arn = ?, region = ?, updated_at = ?,"
            " status_since = CASE WHEN status = 'needs_profile' THEN ? ELSE status_since END,"
            " status_reason = CASE WHEN status = 'needs_profile' THEN NULL ELSE status_reason END,"
            " status = CASE WHEN status = 'needs_profile' THEN 'active' ELSE status END"
            " WHERE id = ? AND removed_at IS NULL RETURNING *",
            (profile_arn, region, now, now, account_id),
        )
        self.revision += 1
        if not rows:
            return None
        record = _record(rows[0])
        if record.status_since == now:  # set only when this profile ended `needs_profile`
            self._changed(record, "needs_profile")
        return record

    async def set_usage(self, account_id: str, usage: Mapping[str, Any]) -> AccountRecord | None:
        now = time.time()
        rows = await self._db.execute(
            "UPDATE accounts SET usage = ?, usage_at = ?, updated_at = ?"
            " WHERE id = ? AND removed_at IS NULL RETURNING *",
            (_dump(usage), now, now, account_id),
        )
        self.revision += 1
        return _record(rows[0]) if rows else None

    async def set_proxy(self, account_id: str, proxy_url: str | None) -> AccountRecord | None:
        """Set the account's proxy (None: the global one; `direct`: none); None if not found.

        `proxy_url` is checked by the caller (`kirod.upstream.proxies.check_proxy_url`).
        """
        now = time.time()
        rows = await self._db.execute(
            "UPDATE accounts SET proxy_url = ?, updated_at = ?"
            " WHERE id = ? AND removed_at IS NULL RETURNING *",
            (proxy_url, now, account_id),
        )
        self.revision += 1
        return _record(rows[0]) if rows else None

    async def set_budget(
        self,
        account_id: str,
        *,
        day: float | None,
        month: float | None,
        allow_overage: bool,
    ) -> AccountRecord | None:
        """Set the account's credit ceilings (None: none) and its overage permission."""
        rows = await self._db.execute(
            "UPDATE accounts SET budget_day = ?, budget_month = ?, allow_overage = ?,"
            " updated_at = ? WHERE id = ? AND removed_at IS NULL RETURNING *",
            (day, month, int(allow_overage), time.time(), account_id),
        )
        self.revision += 1
        return _record(rows[0]) if rows else None

    async def remove(self, account_id: str) -> bool:
        """Tombstone the account and wipe its secrets.

        The generation bump makes a refresh still in flight for it fail its compare-and-swap; the
        checkpoint drops the old row's copy from the WAL.
        """
        now = time.time()
        rows = await self._db.execute(
            "UPDATE accounts SET removed_at = ?, updated_at = ?, credentials = '{}',"
            " proxy_url = NULL,"  # it may hold the proxy's password
            " generation = generation + 1 WHERE id = ? AND removed_at IS NULL"
            " RETURNING id, label, status",
            (now, now, account_id),
        )
        self.revision += 1
        if rows:
            await self._db.checkpoint()
            self._tell(
                StatusChange(rows[0]["id"], rows[0]["label"], rows[0]["status"], None, None, None)
            )
        return bool(rows)

    async def count_active(self) -> int:
        """Accounts not removed whose status is `active`."""
        row = await self._db.read_one(
            "SELECT count(*) FROM accounts WHERE removed_at IS NULL AND status = 'active'"
        )
        return int(row[0]) if row is not None else 0

    async def list(self) -> list[AccountRecord]:
        rows = await self._db.read(
            "SELECT * FROM accounts WHERE removed_at IS NULL ORDER BY created_at, id"
        )
        return [_record(row) for row in rows]
