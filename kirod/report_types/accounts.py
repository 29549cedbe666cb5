"""Stored accounts as the control API lists and imports them (`GET /accounts`, `kiroctl
accounts`): everything but their secrets, with their credits as last probed.

kiroctl keeps the document each was read from: `to_json()` gives it back whole, fields this
kiroctl does not know included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kirod.report_types.budgets import Budget
from kirod.report_types.reading import number_or_none, text_or_none


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
            remaining=number_or_none(data.get("remaining")),
            limit=number_or_none(data.get("limit")),
            resets_at=number_or_none(data.get("resets_at")),
            subscription=text_or_none(data.get("subscription")),
            overage=text_or_none(data.get("overage")),
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
    budget: Budget = field(default_factory=Budget)  # its credit ceilings and spend (kirod.budgets)
    allow_overage: bool = False  # kirod may spend into its overage once its plan is used up

    @property
    def bills_overage(self) -> bool:
        """Past its plan credits, kirod's requests would be billed as overage."""
        return self.allow_overage and self.usage is not None and self.usage.overage == "enabled"

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
            status_reason=text_or_none(data.get("status_reason")),
            status_until=number_or_none(data.get("status_until")),
            usage=Usage.from_json(usage) if isinstance(usage, dict) else None,
            last_error=text_or_none(data.get("last_error")),
            expires_at=number_or_none(data.get("expires_at")),
            document=data,
            registration_expires_at=number_or_none(data.get("registration_expires_at")),
            registration_expired=data.get("registration_expired") is True,
            region=text_or_none(data.get("region")),
            profile_arn=text_or_none(data.get("profile_arn")),
            proxy_url=text_or_none(data.get("proxy_url")),
            budget=Budget.from_json(data.get("budget")),
            allow_overage=data.get("allow_overage") is True,
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
