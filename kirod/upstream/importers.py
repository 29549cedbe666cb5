"""Read the credentials other Kiro tools saved, so an account joins kirod without a new login.

kiroctl uploads the files through the control API, so every parser takes a file's content, never
a path; nothing here touches the network, kirod's store or the user's own files. Formats, with the
sources their shapes come from:

- Kiro IDE `~/.aws/sso/cache/kiro-auth-token.json`; a Builder ID / IAM Identity Center login also
  needs its OIDC client registration `{clientIdHash}.json` beside it (kiro-protocol.md §5.1).
- kiro-cli's SQLite store `data.sqlite3`: tables `auth_kv` and `state` (§5.6). Values are the serde
  JSON of AWS's own CLI (`aws/amazon-q-developer-cli`, `crates/chat-cli/src/auth/builder_id.rs`
  `DeviceRegistration`/`BuilderIdToken`, `social.rs` `SocialToken`, `external_idp.rs`).
- opencode-kiro-auth's account store: SQLite `kiro.db`, table `accounts`, or the older JSON
  `kiro-accounts.json` (`tickernelz/opencode-kiro-auth`, `src/plugin/storage/sqlite.ts`,
  `storage/migrations.ts`, `src/plugin/storage.ts`, `src/plugin/types.ts`).
- a Kiro API key `ksk_…` (§5.7).

Every error is a `CredentialImportError` naming the kind of file and the field at fault. Messages
quote only values that passed validation (regions, key names), never a token or secret.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from kirod.upstream.credentials import AuthKind, Credentials
from kirod.upstream.errors import CredentialImportError

ImportSource = Literal["kiro-ide", "kiro-cli", "opencode-kiro-auth", "api-key"]

DEFAULT_REGION = "us-east-1"
BUILDER_ID_START_URL = "https://view.awsapps.com/start"
# kiro.rs `validate_refresh_token`: Kiro refresh tokens run ~232 characters; shorter ones, or
# ones with an ellipsis, were cut when copied from a log or a UI.
MIN_REFRESH_TOKEN_LENGTH = 100
SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_HEADER_SIZE = 100

_REGION = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d{1,2}")
_PROFILE_ARN = re.compile(
    r"arn:aws[a-z-]*:codewhisperer:(?P<region>[a-z]{2}(?:-[a-z]+)+-\d{1,2})"
    r":\d{12}:profile/[A-Za-z0-9_-]+"
)
_CLIENT_ID_HASH = re.compile(r"[A-Za-z0-9_-]{1,128}")
# No published format: the prefix is what every peer checks; the alphabet is the widest one a
# peer accepts (`[A-Za-z0-9._~+/=:-]`), and the lengths only reject the obviously cut or bogus.
_API_KEY = re.compile(r"ksk_[A-Za-z0-9._~+/=:-]{20,1024}")
_EXTRA_FRACTION = re.compile(r"(\.\d{6})\d+")  # kiro-cli writes nanoseconds

_KIRO_IDE_FILE = "Kiro IDE token file (kiro-auth-token.json)"
_KIRO_CLI = "kiro-cli store (data.sqlite3)"
_OPENCODE_DB = "opencode-kiro-auth store (kiro.db)"
_OPENCODE_JSON = "opencode-kiro-auth accounts file (kiro-accounts.json)"
_API_KEY_FILE = "Kiro API key"

_KIND_NAMES = {
    AuthKind.SOCIAL: "Social login",
    AuthKind.BUILDER_ID: "Builder ID",
    AuthKind.IDC: "IAM Identity Center",
    AuthKind.EXTERNAL_IDP: "External IdP",
    AuthKind.API_KEY: "Kiro API key",
}
_SOCIAL_PROVIDERS = {"google": "Google", "github": "Github"}
_IDE_OIDC_PROVIDERS = {"builderid": AuthKind.BUILDER_ID, "enterprise": AuthKind.IDC}
_OIDC_PROVIDERS = {AuthKind.BUILDER_ID: "BuilderId", AuthKind.IDC: "Enterprise"}
_IDE_METHODS_BY_PROVIDER = {
    "google": "social",
    "github": "social",
    "builderid": "idc",
    "enterprise": "idc",
    "externalidp": "external_idp",
}

# kiro-cli `auth_kv` keys, preferred first; the `codewhisperer:` ones are from before the rename.
_CLI_SOCIAL_KEYS = ("kirocli:social:token", "codewhisperer:social:token")
_CLI_OIDC_KEYS = ("kirocli:odic:token", "codewhisperer:odic:token")  # sic, "odic"
_CLI_EXTERNAL_KEY = "kirocli:external-idp:token"
_CLI_REGISTRATION_KEYS = (
    "kirocli:odic:device-registration",
    "codewhisperer:odic:device-registration",
)
_CLI_PROFILE_KEY = "api.codewhisperer.profile"

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


@dataclass(frozen=True)
class ImportedAccount:
    """An account read from another tool's files, ready to be stored. repr shows no secret."""

    label: str
    auth_kind: AuthKind
    region: str  # the Kiro API region
    auth_region: str  # the SSO OIDC region that refreshes the token (IdC, Builder ID)
    profile_arn: str | None
    credentials: Credentials
    source: ImportSource


def default_locations(home: Path, platform: str = sys.platform) -> dict[str, Path]:
    """Where each tool keeps its credentials by default, for kiroctl to offer them for upload.

    `kiro-ide-registrations` is the directory holding the `{clientIdHash}.json` files an IdC token
    names. kiro-cli follows `dirs::data_local_dir()`; opencode-kiro-auth uses `~/.config/opencode`
    on macOS too. XDG overrides are not applied: this module reads no environment.
    """
    sso_cache = home / ".aws" / "sso" / "cache"
    if platform == "darwin":
        kiro_cli = home / "Library" / "Application Support" / "kiro-cli"
    else:
        kiro_cli = home / ".local" / "share" / "kiro-cli"
    opencode = home / ".config" / "opencode"
    return {
        "kiro-ide": sso_cache / "kiro-auth-token.json",
        "kiro-ide-registrations": sso_cache,
        "kiro-cli": kiro_cli / "data.sqlite3",
        "opencode-kiro-auth": opencode / "kiro.db",
        "opencode-kiro-auth-legacy": opencode / "kiro-accounts.json",
    }


def detect_and_parse(content: bytes, companion: bytes | None = None) -> list[ImportedAccount]:
    """Recognise an uploaded file by its content and parse it.

    `companion` is the `{clientIdHash}.json` registration that goes with an IdC
    kiro-auth-token.json; it is refused with any other kind of file, which would ignore it.
    """
    if not content.strip():
        raise CredentialImportError("the uploaded file is empty")
    if content.startswith(SQLITE_MAGIC):
        _refuse_companion(companion, "an SQLite store")
        with _sqlite(content, "the uploaded SQLite file") as conn:
            tables = _tables(conn)
            if "auth_kv" in tables:
                return _kiro_cli_accounts(conn, tables)
            if "accounts" in tables:
                return _opencode_db_accounts(conn)
        raise CredentialImportError(
            "the uploaded SQLite file has neither an auth_kv table (kiro-cli's data.sqlite3) nor "
            "an accounts table (opencode-kiro-auth's kiro.db)"
        )
    text = _decode(content, "the uploaded file").strip()
    if text.startswith("ksk_"):
        _refuse_companion(companion, "an API key")
        return [parse_api_key(text)]
    if text.startswith("{"):
        data = _json_object(text, "the uploaded JSON file")
        if "accounts" in data:
            _refuse_companion(companion, "an opencode-kiro-auth accounts file")
            return parse_opencode_kiro_auth(content)
        if {"accessToken", "refreshToken", "authMethod", "clientIdHash"} & data.keys():
            return [parse_kiro_ide(text, companion)]
        if {"clientId", "clientSecret"} <= data.keys():
            raise CredentialImportError(
                "the uploaded file is an OIDC client registration ({clientIdHash}.json); upload "
                "kiro-auth-token.json and give this file as its companion"
            )
    raise CredentialImportError(
        "unrecognised file: expected Kiro IDE's kiro-auth-token.json, kiro-cli's data.sqlite3, "
        "opencode-kiro-auth's kiro.db or kiro-accounts.json, or a ksk_ API key"
    )


# --- Kiro IDE -------------------------------------------------------------------------------


def parse_kiro_ide(
    token_json: str | bytes, registration_json: str | bytes | None = None
) -> ImportedAccount:
    """Parse kiro-auth-token.json; an IdC token also needs its `{clientIdHash}.json`.

    A registration given with a social or external-IdP token is ignored: the cache directory keeps
    registrations of earlier logins, and kiroctl may pass one along.
    """
    token = _Record(_json_object(token_json, _KIRO_IDE_FILE), _KIRO_IDE_FILE)
    method = _ide_auth_method(token)
    if method == "social":
        return _ide_social(token)
    if method == "idc":
        return _ide_oidc(token, registration_json)
    return _ide_external_idp(token)


def _ide_auth_method(token: _Record) -> str:
    method = (token.text("authMethod") or "").lower()
    if method in ("social", "idc", "external_idp"):
        return method
    if method:
        raise token.fail("authMethod is not one of social, IdC, external_idp")
    provider = (token.text("provider") or "").lower()
    if provider in _IDE_METHODS_BY_PROVIDER:  # older files carry only the provider
        return _IDE_METHODS_BY_PROVIDER[provider]
    raise token.fail("authMethod is missing and provider does not tell the login kind")


def _ide_social(token: _Record) -> ImportedAccount:
    provider = _social_provider(token.text("provider"))
    arn = _profile_arn(token, "profileArn")
    credentials = Credentials(
        access_token=token.secret("accessToken"),
        refresh_token=token.refresh_token("refreshToken"),
        expires_at=token.time("expiresAt"),
        provider=provider,
    )
    return _account(AuthKind.SOCIAL, "kiro-ide", credentials, arn, DEFAULT_REGION, provider)


def _ide_oidc(token: _Record, registration_json: str | bytes | None) -> ImportedAccount:
    client_id_hash = token.require("clientIdHash")
    if not _CLIENT_ID_HASH.fullmatch(client_id_hash):
        raise token.fail("clientIdHash is not a cache file name")
    provider = token.text("provider")
    kind = _IDE_OIDC_PROVIDERS.get((provider or "").lower())
    if kind is None:
        raise token.fail("provider of an IdC login must be BuilderId or Enterprise")
    if registration_json is None:
        raise token.fail(
            f"an IdC login cannot be refreshed without its client registration: also provide "
            f"~/.aws/sso/cache/{client_id_hash}.json"
        )
    where = f"Kiro IDE client registration ({client_id_hash}.json)"
    registration = _Record(_json_object(registration_json, where), where)
    if {"accessToken", "refreshToken"} & registration.data.keys():
        raise registration.fail(
            f"this is a token file, not a client registration; provide "
            f"~/.aws/sso/cache/{client_id_hash}.json"
        )
    credentials = Credentials(
        access_token=token.secret("accessToken"),
        refresh_token=token.refresh_token("refreshToken"),
        expires_at=token.time("expiresAt"),
        client_id=registration.secret("clientId"),
        client_secret=registration.secret("clientSecret"),
        client_secret_expires_at=registration.time("expiresAt"),
        scopes=registration.scopes("scopes"),
        provider=_OIDC_PROVIDERS[kind],
        start_url=token.text("startUrl") or registration.text("startUrl"),
    )
    arn = _profile_arn(token, "profileArn")
    auth_region = token.region("region") or DEFAULT_REGION
    return _account(kind, "kiro-ide", credentials, arn, auth_region)


def _ide_external_idp(token: _Record) -> ImportedAccount:
    credentials = Credentials(
        access_token=token.secret("accessToken"),
        refresh_token=token.refresh_token("refreshToken", kiro_issued=False),
        expires_at=token.time("expiresAt"),
        client_id=token.secret("clientId"),
        client_secret=token.optional_secret("clientSecret"),
        token_endpoint=token.https_url("tokenEndpoint"),
        scopes=token.scopes("scopes"),
        provider="ExternalIdp",
    )
    # Kiro IDE keeps an external-IdP login's profile ARN in its extension storage, not here.
    arn = _profile_arn(token, "profileArn")
    return _account(AuthKind.EXTERNAL_IDP, "kiro-ide", credentials, arn, DEFAULT_REGION)


# --- kiro-cli -------------------------------------------------------------------------------


def parse_kiro_cli(db_bytes: bytes) -> list[ImportedAccount]:
    """Every login in kiro-cli's store: at most one social, one Builder ID/IdC, one external IdP.

    The legacy `codewhisperer:` keys are read only when the `kirocli:` one of the same kind is
    absent, since they hold an older copy of the same login slot.
    """
    with _sqlite(db_bytes, _KIRO_CLI) as conn:
        return _kiro_cli_accounts(conn, _tables(conn))


def _kiro_cli_accounts(conn: sqlite3.Connection, tables: set[str]) -> list[ImportedAccount]:
    if "auth_kv" not in tables:
        raise CredentialImportError(
            f"{_KIRO_CLI}: there is no auth_kv table; is this kiro-cli's data.sqlite3?"
        )
    entries = dict(conn.execute("SELECT key, value FROM auth_kv"))
    records = {
        key: _cli_record(key, entries[key])
        for key in (*_CLI_SOCIAL_KEYS, *_CLI_OIDC_KEYS, _CLI_EXTERNAL_KEY, *_CLI_REGISTRATION_KEYS)
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


def _cli_record(key: str, value: object) -> _Record:
    where = f"{_KIRO_CLI}, key {key}"
    if not isinstance(value, str | bytes):
        raise CredentialImportError(f"{where}: the value is not JSON text")
    return _Record(_json_object(value, where), where)


def _cli_state_profile(conn: sqlite3.Connection) -> str | None:
    """The profile kiro-cli selected (`kiro-cli profile`), which OIDC tokens do not carry."""
    row = conn.execute("SELECT value FROM state WHERE key = ?", (_CLI_PROFILE_KEY,)).fetchone()
    if row is None or row[0] is None or _is_json_null(row[0]):
        return None
    where = f"{_KIRO_CLI}, state {_CLI_PROFILE_KEY}"
    if not isinstance(row[0], str | bytes):
        raise CredentialImportError(f"{where}: the value is not JSON text")
    return _profile_arn(_Record(_json_object(row[0], where), where), "arn")


def _cli_social(token: _Record, state_profile: str | None) -> ImportedAccount:
    provider = _social_provider(token.text("provider"))
    credentials = Credentials(
        access_token=token.secret("access_token"),
        refresh_token=token.refresh_token("refresh_token"),
        expires_at=token.time("expires_at"),
        provider=provider,
    )
    arn = _profile_arn(token, "profile_arn") or state_profile
    return _account(AuthKind.SOCIAL, "kiro-cli", credentials, arn, DEFAULT_REGION, provider)


def _cli_oidc(
    token: _Record, registration: _Record | None, state_profile: str | None
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
        provider=_OIDC_PROVIDERS[kind],
        start_url=start_url,
    )
    auth_region = token_region or registration_region or DEFAULT_REGION
    return _account(kind, "kiro-cli", credentials, state_profile, auth_region)


def _cli_external_idp(token: _Record, state_profile: str | None) -> ImportedAccount:
    credentials = Credentials(
        access_token=token.secret("access_token"),
        refresh_token=token.refresh_token("refresh_token", kiro_issued=False),
        expires_at=token.time("expires_at"),
        client_id=token.secret("client_id"),
        token_endpoint=token.https_url("token_endpoint"),
        scopes=token.scopes("scopes"),
        provider="ExternalIdp",
    )
    return _account(AuthKind.EXTERNAL_IDP, "kiro-cli", credentials, state_profile, DEFAULT_REGION)


# --- opencode-kiro-auth ---------------------------------------------------------------------


def parse_opencode_kiro_auth(content: bytes) -> list[ImportedAccount]:
    """Every account in opencode-kiro-auth's `kiro.db`, or in its older `kiro-accounts.json`.

    Rows sharing a refresh token are one login (its kiro-cli sync leaves placeholder-email rows
    behind): the enabled, healthy row wins.
    """
    if content.startswith(SQLITE_MAGIC):
        with _sqlite(content, _OPENCODE_DB) as conn:
            if "accounts" not in _tables(conn):
                raise CredentialImportError(
                    f"{_OPENCODE_DB}: there is no accounts table; is this opencode-kiro-auth's "
                    f"kiro.db?"
                )
            return _opencode_db_accounts(conn)
    data = _json_object(content, _OPENCODE_JSON)
    rows = data.get("accounts")
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise CredentialImportError(f"{_OPENCODE_JSON}: accounts must be a list of objects")
    records = [
        _Record(
            {_OPENCODE_JSON_FIELDS[k]: v for k, v in row.items() if k in _OPENCODE_JSON_FIELDS},
            f"{_OPENCODE_JSON}, account {number}",
        )
        for number, row in enumerate(rows, start=1)
    ]
    return _opencode_accounts(records, _OPENCODE_JSON)


def _opencode_db_accounts(conn: sqlite3.Connection) -> list[ImportedAccount]:
    conn.row_factory = sqlite3.Row
    records = [
        _Record(dict(row), f"{_OPENCODE_DB}, account {number}")
        for number, row in enumerate(conn.execute("SELECT * FROM accounts"), start=1)
    ]
    return _opencode_accounts(records, _OPENCODE_DB)


def _opencode_accounts(records: list[_Record], where: str) -> list[ImportedAccount]:
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


def _opencode_account(row: _Record) -> ImportedAccount:
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
        provider=_OIDC_PROVIDERS.get(kind),
        start_url=start_url,
    )
    arn = _profile_arn(row, "profile_arn")
    auth_region = (row.region("oidc_region") or row.region("region")) if oidc else None
    email = row.text("real_email") or row.text("email")
    return _account(
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


# --- API key --------------------------------------------------------------------------------


def parse_api_key(text: str | bytes) -> ImportedAccount:
    """A headless `ksk_…` key: sent as the bearer itself, never refreshed."""
    key = _decode(text, _API_KEY_FILE).strip()
    if not key.startswith("ksk_"):
        raise CredentialImportError(f"{_API_KEY_FILE}: does not start with ksk_")
    if not _API_KEY.fullmatch(key):
        raise CredentialImportError(
            f"{_API_KEY_FILE}: expected ksk_ followed by 20 to 1024 letters, digits or ._~+/=:- "
            f"characters ({len(key)} characters given, on one line)"
        )
    credentials = Credentials(access_token=key)
    return _account(AuthKind.API_KEY, "api-key", credentials, None, DEFAULT_REGION)


# --- shared ---------------------------------------------------------------------------------


class _Record:
    """One JSON object or table row being read, named for error messages."""

    def __init__(self, data: Mapping[str, Any], where: str) -> None:
        self.data = data
        self.where = where

    def fail(self, problem: str) -> CredentialImportError:
        return CredentialImportError(f"{self.where}: {problem}")

    def text(self, name: str) -> str | None:
        value = self.data.get(name)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise self.fail(f"{name} must be a string")
        return value

    def require(self, name: str) -> str:
        value = self.text(name)
        if value is None:
            raise self.fail(f"{name} is missing")
        return value

    def secret(self, name: str) -> str:
        """A token or client credential: it goes into HTTP headers and bodies verbatim."""
        value = self.require(name)
        if any(char.isspace() or not char.isprintable() for char in value):
            raise self.fail(f"{name} contains whitespace or control characters")
        return value

    def optional_secret(self, name: str) -> str | None:
        return None if self.text(name) is None else self.secret(name)

    def refresh_token(self, name: str, *, kiro_issued: bool = True, packed: bool = False) -> str:
        """Reject the truncated copies kiro.rs reports; external IdPs issue short tokens too.

        `packed`: older opencode-kiro-auth versions stored `refresh|clientId|…|method`.
        """
        value = self.secret(name)
        if packed:
            value = value.split("|", 1)[0]
        if "..." in value or (kiro_issued and len(value) < MIN_REFRESH_TOKEN_LENGTH):
            raise self.fail(
                f"{name} looks truncated ({len(value)} characters"
                f"{', with an ellipsis' if '...' in value else ''}); copy the whole file again"
            )
        return value

    def time(self, name: str) -> float | None:
        """An ISO-8601 time as epoch seconds; a time without an offset is taken as UTC."""
        value = self.text(name)
        if value is None:
            return None
        try:
            moment = datetime.fromisoformat(_EXTRA_FRACTION.sub(r"\1", value))
        except ValueError:
            raise self.fail(f"{name} is not an ISO-8601 time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()

    def epoch_ms(self, name: str) -> float | None:
        value = self.data.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise self.fail(f"{name} must be epoch milliseconds")
        return value / 1000

    def region(self, name: str) -> str | None:
        value = self.text(name)
        if value is not None and not _REGION.fullmatch(value):
            raise self.fail(f"{name} is not an AWS region name")
        return value

    def scopes(self, name: str) -> tuple[str, ...]:
        """A scope list, or the space-separated string OAuth (and kiro-cli's external IdP) uses."""
        value = self.data.get(name)
        if value is None:
            return ()
        if isinstance(value, str):
            return tuple(value.split())
        if isinstance(value, list) and all(isinstance(scope, str) for scope in value):
            return tuple(value)
        raise self.fail(f"{name} must be a list of strings or a space-separated string")

    def https_url(self, name: str) -> str:
        value = self.require(name)
        parts = urlsplit(value)
        if parts.scheme != "https" or not parts.hostname:
            raise self.fail(f"{name} must be an https URL")
        return value


def _account(
    kind: AuthKind,
    source: ImportSource,
    credentials: Credentials,
    profile_arn: str | None,
    auth_region: str,
    name: str | None = None,
) -> ImportedAccount:
    """Assemble the account; the API region is the profile's, which is where Kiro serves it."""
    match = _PROFILE_ARN.fullmatch(profile_arn) if profile_arn else None
    return ImportedAccount(
        label=f"{name or _KIND_NAMES[kind]} ({source})",
        auth_kind=kind,
        region=match["region"] if match else DEFAULT_REGION,
        auth_region=auth_region,
        profile_arn=profile_arn,
        credentials=credentials,
        source=source,
    )


def _profile_arn(record: _Record, name: str) -> str | None:
    value = record.text(name)
    if value is not None and not _PROFILE_ARN.fullmatch(value):
        raise record.fail(
            f"{name} is not a CodeWhisperer profile ARN "
            f"(arn:aws:codewhisperer:<region>:<account>:profile/<id>)"
        )
    return value


def _social_provider(provider: str | None) -> str | None:
    """Kiro IDE writes `Google`/`Github`, kiro-cli `google`/`github`; keep the IDE's spelling."""
    return _SOCIAL_PROVIDERS.get(provider.lower(), provider) if provider else None


def _decode(content: str | bytes, where: str) -> str:
    if isinstance(content, str):
        return content
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CredentialImportError(f"{where}: is not UTF-8 text") from None


def _json_object(content: str | bytes, where: str) -> dict[str, Any]:
    text = _decode(content, where)
    if not text.strip():
        raise CredentialImportError(f"{where}: is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:  # the position only: exc.doc would quote the content
        raise CredentialImportError(
            f"{where}: is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            f"the file may be truncated"
        ) from None
    if not isinstance(data, dict):
        raise CredentialImportError(f"{where}: is JSON but not an object")
    return data


def _is_json_null(value: object) -> bool:
    """serde writes an absent `Option` token as `null`."""
    return value == "null" or value == b"null"


def _refuse_companion(companion: bytes | None, kind: str) -> None:
    if companion is not None:
        raise CredentialImportError(
            f"a companion file only goes with an IdC kiro-auth-token.json, not with {kind}"
        )


@contextlib.contextmanager
def _sqlite(content: bytes, where: str) -> Iterator[sqlite3.Connection]:
    """A private, read-only in-memory copy of an uploaded SQLite file.

    The header's WAL flag is cleared in the copy because an in-memory database cannot open in WAL
    mode; the upload must therefore be a checkpointed copy (e.g. made with SQLite's backup API).
    """
    if not content.startswith(SQLITE_MAGIC):
        raise CredentialImportError(f"{where}: is not an SQLite database")
    if len(content) < _SQLITE_HEADER_SIZE:
        raise CredentialImportError(f"{where}: is truncated")
    image = bytearray(content)
    image[18:20] = b"\x01\x01"  # file format read/write versions: 1 = rollback journal, 2 = WAL
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(bytes(image))
        conn.execute("PRAGMA query_only = ON")
        yield conn
    except sqlite3.Error as exc:  # SQLite's own text names the fault, never row content
        raise CredentialImportError(
            f"{where}: cannot be read ({exc}); the file may be truncated or copied mid-write"
        ) from None
    finally:
        conn.close()


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {
        str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
    }
