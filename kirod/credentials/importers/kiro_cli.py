"""kiro-cli's SQLite store `data.sqlite3`: tables `auth_kv` and `state`
(docs/KIRO-PROTOCOL.md §5.6).

Values are the serde JSON of AWS's own CLI (`aws/amazon-q-developer-cli`,
`crates/chat-cli/src/auth/builder_id.rs` `DeviceRegistration`/`BuilderIdToken`, `social.rs`
`SocialToken`, `external_idp.rs`).
"""

from __future__ import annotations

import sqlite3

from kirod.credentials.importers.record import (
    BUILDER_ID_START_URL,
    DEFAULT_REGION,
    OIDC_PROVIDERS,
    ImportedAccount,
    Record,
    imported_account,
    json_object,
    social_provider,
)
from kirod.credentials.importers.sqlite import ImportLimits, read_rows, sqlite_copy, table_names
from kirod.upstream.errors import CredentialImportError
from kirod.upstream.secrets import AuthKind, Credentials

_KIRO_CLI = "kiro-cli store (data.sqlite3)"

# kiro-cli `auth_kv` keys, preferred first; the `codewhisperer:` ones are from before the rename.
_CLI_SOCIAL_KEYS = ("kirocli:social:token", "codewhisperer:social:token")
_CLI_OIDC_KEYS = ("kirocli:odic:token", "codewhisperer:odic:token")  # sic, "odic"
_CLI_EXTERNAL_KEY = "kirocli:external-idp:token"
_CLI_REGISTRATION_KEYS = (
    "kirocli:odic:device-registration",
    "codewhisperer:odic:device-registration",
)
_CLI_PROFILE_KEY = "api.codewhisperer.profile"


_CLI_AUTH_KEYS = (*_CLI_SOCIAL_KEYS, *_CLI_OIDC_KEYS, _CLI_EXTERNAL_KEY, *_CLI_REGISTRATION_KEYS)


def parse_kiro_cli(db_bytes: bytes, limits: ImportLimits | None = None) -> list[ImportedAccount]:
    """Every login in kiro-cli's store: at most one social, one Builder ID/IdC, one external IdP.

    The legacy `codewhisperer:` keys are read only when the `kirocli:` one of the same kind is
    absent, since they hold an older copy of the same login slot.
    """
    with sqlite_copy(db_bytes, _KIRO_CLI, limits) as conn:
        return kiro_cli_accounts(conn, table_names(conn))


def kiro_cli_accounts(conn: sqlite3.Connection, tables: set[str]) -> list[ImportedAccount]:
    """The logins in an open kiro-cli store whose table names are `tables`.

    Only the `auth_kv` rows of the login keys and the `state` row of the profile are read.
    """
    if "auth_kv" not in tables:
        raise CredentialImportError(
            f"{_KIRO_CLI}: there is no auth_kv table; is this kiro-cli's data.sqlite3?"
        )
    rows = read_rows(conn, "auth_kv", ("key", "value"), _KIRO_CLI, keys=("key", _CLI_AUTH_KEYS))
    entries = {row["key"]: row.get("value") for row in rows}
    records = {
        key: _cli_record(key, entries[key])
        for key in _CLI_AUTH_KEYS
        if entries.get(key) is not None and not _is_json_null(entries[key])
    }
    state_profile = _cli_state_profile(conn) if "state" in tables else None

    accounts: list[ImportedAccount] = []
    social_key = next((key for key in _CLI_SOCIAL_KEYS if key in records), None)
    if social_key is not None:
        accounts.append(_cli_social(records[social_key], state_profile))
    oidc_key = next((key for key in _CLI_OIDC_KEYS if key in records), None)
    if oidc_key is not None:
        # A token pairs with the registration of its own generation, else with the other one.
        prefix = oidc_key.split(":", 1)[0]
        ordered = sorted(_CLI_REGISTRATION_KEYS, key=lambda key: not key.startswith(prefix))
        registration = next((records[key] for key in ordered if key in records), None)
        accounts.append(_cli_oidc(records[oidc_key], registration, state_profile))
    if _CLI_EXTERNAL_KEY in records:
        accounts.append(_cli_external_idp(records[_CLI_EXTERNAL_KEY], state_profile))
    if not accounts:
        raise CredentialImportError(
            f"{_KIRO_CLI}: holds no login (no kirocli:*:token entry); sign in with "
            f"`kiro-cli login` first"
        )
    return accounts


def _cli_record(key: str, value: object) -> Record:
    where = f"{_KIRO_CLI}, key {key}"
    if not isinstance(value, str | bytes):
        raise CredentialImportError(f"{where}: the value is not JSON text")
    return Record(json_object(value, where), where)


def _is_json_null(value: object) -> bool:
    """serde writes an absent `Option` token as `null`."""
    return value == "null" or value == b"null"


def _cli_state_profile(conn: sqlite3.Connection) -> str | None:
    """The profile kiro-cli selected (`kiro-cli profile`), which OIDC tokens do not carry."""
    rows = read_rows(conn, "state", ("key", "value"), _KIRO_CLI, keys=("key", (_CLI_PROFILE_KEY,)))
    value = rows[0].get("value") if rows else None
    if value is None or _is_json_null(value):
        return None
    where = f"{_KIRO_CLI}, state {_CLI_PROFILE_KEY}"
    if not isinstance(value, str | bytes):
        raise CredentialImportError(f"{where}: the value is not JSON text")
    return Record(json_object(value, where), where).profile_arn("arn")


def _cli_social(token: Record, state_profile: str | None) -> ImportedAccount:
    provider = social_provider(token.text("provider"))
    credentials = Credentials(
        access_token=token.secret("access_token"),
        refresh_token=token.refresh_token("refresh_token"),
        expires_at=token.time("expires_at"),
        provider=provider,
    )
    arn = token.profile_arn("profile_arn") or state_profile
    return imported_account(AuthKind.SOCIAL, "kiro-cli", credentials, arn, DEFAULT_REGION, provider)


def _cli_oidc(
    token: Record, registration: Record | None, state_profile: str | None
) -> ImportedAccount:
    if registration is None:
        raise token.fail(
            "has no device registration (kirocli:odic:device-registration), so it cannot be "
            "refreshed; sign in again with `kiro-cli login`"
        )
    token_region = token.region("region")
    registration_region = registration.region("region")
    if token_region and registration_region and token_region != registration_region:
        raise registration.fail(
            f"is for region {registration_region} but the token is for {token_region}; sign in "
            f"again with `kiro-cli login`"
        )
    token_flow, registration_flow = token.text("oauth_flow"), registration.text("oauth_flow")
    if token_flow and registration_flow and token_flow.lower() != registration_flow.lower():
        raise registration.fail(
            "belongs to a different login flow than the token (oauth_flow differs); sign in "
            "again with `kiro-cli login`"
        )
    start_url = token.text("start_url")
    kind = AuthKind.BUILDER_ID if start_url in (None, BUILDER_ID_START_URL) else AuthKind.IDC
    credentials = Credentials(
        access_token=token.secret("access_token"),
        refresh_token=token.refresh_token("refresh_token"),
        expires_at=token.time("expires_at"),
        client_id=registration.secret("client_id"),
        client_secret=registration.secret("client_secret"),
        client_secret_expires_at=registration.time("client_secret_expires_at"),
        scopes=token.scopes("scopes") or registration.scopes("scopes"),
        provider=OIDC_PROVIDERS[kind],
        start_url=start_url,
    )
    auth_region = token_region or registration_region or DEFAULT_REGION
    return imported_account(kind, "kiro-cli", credentials, state_profile, auth_region)


def _cli_external_idp(token: Record, state_profile: str | None) -> ImportedAccount:
    credentials = Credentials(
        access_token=token.secret("access_token"),
        refresh_token=token.refresh_token("refresh_token", kiro_issued=False),
        expires_at=token.time("expires_at"),
        client_id=token.secret("client_id"),
        token_endpoint=token.https_url("token_endpoint"),
        scopes=token.scopes("scopes"),
        provider="ExternalIdp",
    )
    return imported_account(
        AuthKind.EXTERNAL_IDP, "kiro-cli", credentials, state_profile, DEFAULT_REGION
    )
