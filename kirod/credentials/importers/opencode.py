"""opencode-kiro-auth's account store: SQLite `kiro.db` or the older JSON `kiro-accounts.json`.

`kiro.db` keeps its rows in table `accounts`. The shapes come from `tickernelz/opencode-kiro-auth`,
`src/plugin/storage/sqlite.ts`, `storage/migrations.ts`, `src/plugin/storage.ts` and
`src/plugin/types.ts`.
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
)
from kirod.credentials.importers.sqlite import (
    SQLITE_MAGIC,
    ImportLimits,
    check_size,
    read_rows,
    sqlite_copy,
    table_names,
)
from kirod.upstream.errors import CredentialImportError
from kirod.upstream.secrets import AuthKind, Credentials

_OPENCODE_DB = "opencode-kiro-auth store (kiro.db)"
_OPENCODE_JSON = "opencode-kiro-auth accounts file (kiro-accounts.json)"

# opencode-kiro-auth: `auth_method` values across its versions. `desktop` refreshes through Kiro's
# auth service (a social login); the others are SSO OIDC clients.
_OPENCODE_METHODS = {
    "desktop": AuthKind.SOCIAL,
    "idc": AuthKind.BUILDER_ID,
    "identity-center": AuthKind.IDC,
    "sso": AuthKind.IDC,
}
# kiro-accounts.json keys → kiro.db columns, so one reader serves both.
_OPENCODE_JSON_FIELDS = {
    "email": "email",
    "realEmail": "real_email",
    "authMethod": "auth_method",
    "region": "region",
    "oidcRegion": "oidc_region",
    "clientId": "client_id",
    "clientSecret": "client_secret",
    "profileArn": "profile_arn",
    "ssoStartUrl": "start_url",
    "startUrl": "start_url",
    "refreshToken": "refresh_token",
    "accessToken": "access_token",
    "expiresAt": "expires_at",
    "isHealthy": "is_healthy",
    "enabled": "enabled",
}


_OPENCODE_COLUMNS = tuple(dict.fromkeys(_OPENCODE_JSON_FIELDS.values()))


def parse_opencode_kiro_auth(
    content: bytes, limits: ImportLimits | None = None
) -> list[ImportedAccount]:
    """Every account in opencode-kiro-auth's `kiro.db`, or in its older `kiro-accounts.json`.

    Rows sharing a refresh token are one login (its kiro-cli sync leaves placeholder-email rows
    behind): the enabled, healthy row wins.
    """
    limits = limits or ImportLimits()
    if content.startswith(SQLITE_MAGIC):
        with sqlite_copy(content, _OPENCODE_DB, limits) as conn:
            if "accounts" not in table_names(conn):
                raise CredentialImportError(
                    f"{_OPENCODE_DB}: there is no accounts table; is this opencode-kiro-auth's "
                    f"kiro.db?"
                )
            return opencode_db_accounts(conn)
    check_size(content, _OPENCODE_JSON, limits)
    data = json_object(content, _OPENCODE_JSON)
    rows = data.get("accounts")
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise CredentialImportError(f"{_OPENCODE_JSON}: accounts must be a list of objects")
    records = [
        Record(
            {_OPENCODE_JSON_FIELDS[k]: v for k, v in row.items() if k in _OPENCODE_JSON_FIELDS},
            f"{_OPENCODE_JSON}, account {number}",
        )
        for number, row in enumerate(rows, start=1)
    ]
    return _opencode_accounts(records, _OPENCODE_JSON)


def opencode_db_accounts(conn: sqlite3.Connection) -> list[ImportedAccount]:
    """The accounts in an open kiro.db, which has an `accounts` table (its known columns only)."""
    rows = read_rows(conn, "accounts", _OPENCODE_COLUMNS, _OPENCODE_DB)
    records = [
        Record(row, f"{_OPENCODE_DB}, account {number}") for number, row in enumerate(rows, 1)
    ]
    return _opencode_accounts(records, _OPENCODE_DB)


def _opencode_accounts(records: list[Record], where: str) -> list[ImportedAccount]:
    if not records:
        raise CredentialImportError(f"{where}: holds no accounts")
    preferred = sorted(
        records, key=lambda r: r.data.get("enabled") == 0 or r.data.get("is_healthy") == 0
    )
    accounts: dict[str, ImportedAccount] = {}
    for record in preferred:
        account = _opencode_account(record)
        assert account.credentials.refresh_token is not None
        accounts.setdefault(account.credentials.refresh_token, account)
    return list(accounts.values())


def _opencode_account(row: Record) -> ImportedAccount:
    method = row.require("auth_method").lower()
    kind = _OPENCODE_METHODS.get(method)
    if kind is None:
        raise row.fail("auth_method is not one of desktop, idc, identity-center, sso")
    start_url = row.text("start_url")
    if kind is AuthKind.BUILDER_ID and start_url not in (None, BUILDER_ID_START_URL):
        kind = AuthKind.IDC  # `idc` also covers Identity Center logins with their own start URL
    oidc = kind is not AuthKind.SOCIAL
    credentials = Credentials(
        access_token=row.secret("access_token"),
        refresh_token=row.refresh_token("refresh_token", packed=True),
        expires_at=row.epoch_ms("expires_at"),
        client_id=row.secret("client_id") if oidc else None,
        client_secret=row.secret("client_secret") if oidc else None,
        provider=OIDC_PROVIDERS.get(kind),
        start_url=start_url,
    )
    arn = row.profile_arn("profile_arn")
    auth_region = (row.region("oidc_region") or row.region("region")) if oidc else None
    email = row.text("real_email") or row.text("email")
    return imported_account(
        kind,
        "opencode-kiro-auth",
        credentials,
        arn,
        auth_region or DEFAULT_REGION,
        email if email and _is_real_email(email) else None,
    )


def _is_real_email(email: str) -> bool:
    """opencode-kiro-auth invents an address when it cannot learn the real one; don't label by it.

    Its placeholders: `idc-placeholder+…` (kiro-cli sync), `…@awsapps.local` (IdC sync) and
    `builder-id@aws.amazon.com…` (early versions; see its `migrateRealEmailColumn`).
    """
    return (
        "@" in email
        and "placeholder" not in email
        and not email.endswith("@awsapps.local")
        and not email.startswith("builder-id@aws.amazon.com")
    )
