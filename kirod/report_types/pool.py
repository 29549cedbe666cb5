"""The account pool as the dispatcher sees it (`GET /pool`, `kiroctl top`, `accounts list`):
each account's state, slots and usage, the requests queued for a slot, and pacing.

The account layer builds these (`AccountPool.status`); kiroctl reads them back leniently.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kirod.report_types.reading import number_or_none, text_or_none


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
                    held_until=number_or_none(item.get("held_until")),
                )
                for item in data["accounts"]
            ),
        )


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
            reason=text_or_none(data.get("reason")),
            until=number_or_none(data.get("until")),
            in_flight=int(data["in_flight"]),
            capacity=int(data["capacity"]),
            last_error=text_or_none(data.get("last_error")),
            last_error_at=number_or_none(data.get("last_error_at")),
            auth_kind=text_or_none(data.get("auth_kind")),
            since=number_or_none(data.get("since")),
            half_open=bool(data.get("half_open", False)),
            failures=int(data.get("failures") or 0),
            auth_failures=int(data.get("auth_failures") or 0),
            remaining_credits=number_or_none(data.get("remaining_credits")),
            usage_limit=number_or_none(data.get("usage_limit")),
            resets_at=number_or_none(data.get("resets_at")),
            usage_at=number_or_none(data.get("usage_at")),
            subscription=text_or_none(data.get("subscription")),
            expires_at=number_or_none(data.get("expires_at")),
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
