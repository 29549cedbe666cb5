"""An account's secrets and how they are stored (the `credentials` JSON column).

Only the upstream layer reads these; everything that leaves it (logs, the control API) uses the
redacted account record instead. `repr` never shows a secret.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class AuthKind(enum.Enum):
    SOCIAL = "social"  # Google / GitHub login through Kiro's auth service
    BUILDER_ID = "builder_id"  # AWS Builder ID via SSO OIDC
    IDC = "idc"  # IAM Identity Center (enterprise) via SSO OIDC
    EXTERNAL_IDP = "external_idp"  # enterprise OAuth provider (Entra, Okta)
    API_KEY = "api_key"  # headless `ksk_…` key, no refresh


@dataclass(frozen=True)
class Credentials:
    access_token: str = dataclasses.field(repr=False)
    refresh_token: str | None = dataclasses.field(default=None, repr=False)
    expires_at: float | None = None  # epoch seconds of the access token's expiry
    client_id: str | None = dataclasses.field(default=None, repr=False)
    client_secret: str | None = dataclasses.field(default=None, repr=False)
    client_secret_expires_at: float | None = None
    token_endpoint: str | None = None  # external IdP only
    scopes: tuple[str, ...] = ()
    provider: str | None = None  # Google, Github, BuilderId, Enterprise, ExternalIdp
    start_url: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["scopes"] = list(self.scopes)
        return {key: value for key, value in data.items() if value not in (None, [])}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Credentials:
        names = {field.name for field in dataclasses.fields(cls)}
        values = {key: value for key, value in data.items() if key in names}
        values["scopes"] = tuple(values.get("scopes") or ())
        return cls(**values)

    def secrets(self) -> tuple[str, ...]:
        """Every secret value, for leak scans in tests."""
        return tuple(
            value for value in (self.access_token, self.refresh_token, self.client_secret) if value
        )
