"""A device-code login the daemon drives (`POST /logins`, `kiroctl accounts login`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from kirod.report_types.accounts import Account


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
