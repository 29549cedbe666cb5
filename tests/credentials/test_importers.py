"""Credential import: each format, each broken variant, and no secret in any message or repr."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kirod.credentials.importers import (
    BUILDER_ID_START_URL,
    ImportedAccount,
    detect_and_parse,
    parse_api_key,
    parse_kiro_cli,
    parse_kiro_ide,
    parse_opencode_kiro_auth,
)
from kirod.upstream.errors import CredentialImportError
from kirod.upstream.secrets import AuthKind

# Every secret carries a marker, so a leak of even part of one is caught.
ACCESS = "aoaACCESSMARK" + "a" * 300
REFRESH = "aorREFRESHMARK" + "r" * 218  # 232 characters, like a real Kiro refresh token
CLIENT_ID = "CLIENTIDMARK" + "c" * 20
CLIENT_SECRET = "eyJSECRETMARK" + "s" * 400
EXTERNAL_REFRESH = "EXTREFRESHMARK-okta"  # external IdPs issue short opaque refresh tokens
API_KEY = "ksk_APIKEYMARK" + "k" * 40
MARKERS = (
    "ACCESSMARK",
    "REFRESHMARK",
    "CLIENTIDMARK",
    "SECRETMARK",
    "EXTREFRESHMARK",
    "APIKEYMARK",
)

PROFILE = "arn:aws:codewhisperer:us-east-1:699475941385:profile/EHGA3GRVQMUK"
EU_PROFILE = "arn:aws:codewhisperer:eu-central-1:123456789012:profile/ABCDEFGHIJKL"
CLIENT_ID_HASH = "fe42de6e9e88ee8bd3796e591bc6c860a3774d4e"
IDC_START_URL = "https://d-1234567890.awsapps.com/start"
TOKEN_ENDPOINT = "https://login.microsoftonline.com/tenant/oauth2/v2.0/token"
SCOPES = ["codewhisperer:completions", "codewhisperer:analysis", "codewhisperer:conversations"]


def epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def assert_no_secret(text: str) -> None:
    for marker in MARKERS:
        assert marker not in text


def import_error(parse: Callable[..., object], *args: object) -> str:
    with pytest.raises(CredentialImportError) as caught:
        parse(*args)
    message = str(caught.value)
    assert_no_secret(message)
    return message


def changed(base: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """`base` with `changes` applied; a change to `...` removes the field."""
    data = {**base, **changes}
    return {key: value for key, value in data.items() if value is not ...}


def dumps(data: object) -> bytes:
    return json.dumps(data).encode()


# --- Kiro IDE -------------------------------------------------------------------------------

IDE_SOCIAL = {
    "accessToken": ACCESS,
    "refreshToken": REFRESH,
    "profileArn": PROFILE,
    "expiresAt": "2025-12-31T02:32:45.144Z",
    "authMethod": "social",
    "provider": "Google",
}
IDE_IDC = {
    "accessToken": ACCESS,
    "refreshToken": REFRESH,
    "expiresAt": "2026-01-01T00:00:00Z",
    "clientIdHash": CLIENT_ID_HASH,
    "authMethod": "IdC",
    "provider": "BuilderId",
    "region": "us-east-1",
}
IDE_REGISTRATION = {
    "clientId": CLIENT_ID,
    "clientSecret": CLIENT_SECRET,
    "expiresAt": "2026-03-31T00:00:00Z",
}
IDE_EXTERNAL = {
    "accessToken": ACCESS,
    "refreshToken": EXTERNAL_REFRESH,
    "expiresAt": "2026-06-26T09:46:28.654Z",
    "authMethod": "external_idp",
    "provider": "ExternalIdp",
    "tokenEndpoint": TOKEN_ENDPOINT,
    "issuerUrl": "https://login.microsoftonline.com/tenant/v2.0",
    "clientId": CLIENT_ID,
    "scopes": "api://azure-client/codewhisperer:conversations offline_access",
}


def test_kiro_ide_social_login() -> None:
    account = parse_kiro_ide(dumps(IDE_SOCIAL))

    assert account == ImportedAccount(
        label="Google (kiro-ide)",
        auth_kind=AuthKind.SOCIAL,
        region="us-east-1",
        auth_region="us-east-1",
        profile_arn=PROFILE,
        credentials=account.credentials,
        source="kiro-ide",
    )
    credentials = account.credentials
    assert (credentials.access_token, credentials.refresh_token) == (ACCESS, REFRESH)
    assert credentials.expires_at == pytest.approx(epoch("2025-12-31T02:32:45.144"))
    assert credentials.provider == "Google"
    assert credentials.client_id is None


def test_kiro_ide_api_region_comes_from_the_profile_arn() -> None:
    account = parse_kiro_ide(json.dumps(changed(IDE_SOCIAL, profileArn=EU_PROFILE)))
    assert (account.region, account.profile_arn) == ("eu-central-1", EU_PROFILE)


def test_kiro_ide_file_with_only_a_provider_is_read_by_its_provider() -> None:
    account = parse_kiro_ide(dumps(changed(IDE_SOCIAL, authMethod=..., provider="Github")))
    assert (account.auth_kind, account.label) == (AuthKind.SOCIAL, "Github (kiro-ide)")


def test_kiro_ide_builder_id_login_with_its_registration() -> None:
    account = parse_kiro_ide(dumps(IDE_IDC), dumps(IDE_REGISTRATION))

    assert account.auth_kind is AuthKind.BUILDER_ID
    assert account.label == "Builder ID (kiro-ide)"
    assert (account.region, account.auth_region, account.profile_arn) == (
        "us-east-1",
        "us-east-1",
        None,
    )
    credentials = account.credentials
    assert (credentials.client_id, credentials.client_secret) == (CLIENT_ID, CLIENT_SECRET)
    assert credentials.client_secret_expires_at == epoch("2026-03-31T00:00:00")
    assert credentials.expires_at == epoch("2026-01-01T00:00:00")
    assert credentials.provider == "BuilderId"


def test_kiro_ide_identity_center_login_keeps_its_sso_region() -> None:
    token = changed(IDE_IDC, provider="Enterprise", region="eu-west-1", startUrl=IDC_START_URL)
    account = parse_kiro_ide(dumps(token), dumps(IDE_REGISTRATION))

    assert account.auth_kind is AuthKind.IDC
    # No profile ARN: the API region follows the IdC region's map (docs/UPSTREAM.md §5.1).
    assert (account.region, account.auth_region) == ("eu-central-1", "eu-west-1")
    assert account.credentials.start_url == IDC_START_URL
    assert account.label == "IAM Identity Center (kiro-ide)"


def test_kiro_ide_external_idp_login() -> None:
    account = parse_kiro_ide(dumps(IDE_EXTERNAL))

    assert account.auth_kind is AuthKind.EXTERNAL_IDP
    credentials = account.credentials
    assert credentials.refresh_token == EXTERNAL_REFRESH  # short, but not a Kiro token
    assert credentials.token_endpoint == TOKEN_ENDPOINT
    assert credentials.client_id == CLIENT_ID
    assert credentials.scopes == (
        "api://azure-client/codewhisperer:conversations",
        "offline_access",
    )
    assert account.profile_arn is None
    assert account.region == "us-east-1"


def test_kiro_ide_ignores_a_registration_given_with_a_social_token() -> None:
    account = parse_kiro_ide(dumps(IDE_SOCIAL), dumps(IDE_REGISTRATION))
    assert account.credentials.client_secret is None


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        pytest.param(b"", "is empty", id="empty"),
        pytest.param(b"  \n", "is empty", id="blank"),
        pytest.param(dumps(IDE_SOCIAL)[:-40], "not valid JSON", id="truncated-json"),
        pytest.param(dumps([IDE_SOCIAL]), "not an object", id="json-array"),
        pytest.param(b"\xff\xfe{}", "not UTF-8", id="not-utf8"),
        pytest.param(dumps(changed(IDE_SOCIAL, accessToken=...)), "accessToken is missing"),
        pytest.param(dumps(changed(IDE_SOCIAL, accessToken=42)), "accessToken must be a string"),
        pytest.param(dumps(changed(IDE_SOCIAL, refreshToken=...)), "refreshToken is missing"),
        pytest.param(
            dumps(changed(IDE_SOCIAL, refreshToken=REFRESH[:60])),
            "refreshToken looks truncated (60 characters)",
            id="short-refresh-token",
        ),
        pytest.param(
            dumps(changed(IDE_SOCIAL, refreshToken=REFRESH[:150] + "...")),
            "refreshToken looks truncated (153 characters, with an ellipsis)",
            id="ellipsis-refresh-token",
        ),
        pytest.param(
            dumps(changed(IDE_SOCIAL, accessToken=ACCESS + "\r\nX-Injected: 1")),
            "accessToken contains whitespace or control characters",
            id="header-injection",
        ),
        pytest.param(
            dumps(changed(IDE_SOCIAL, expiresAt="tomorrow")), "expiresAt is not an ISO-8601 time"
        ),
        pytest.param(
            dumps(changed(IDE_SOCIAL, profileArn="arn:aws:iam::123456789012:role/Demo")),
            "profileArn is not a CodeWhisperer profile ARN",
        ),
        pytest.param(dumps(changed(IDE_SOCIAL, authMethod="password")), "authMethod is not one of"),
        pytest.param(
            dumps(changed(IDE_SOCIAL, authMethod=..., provider=...)), "authMethod is missing"
        ),
        pytest.param(
            dumps(changed(IDE_EXTERNAL, tokenEndpoint="http://idp.example/token")),
            "tokenEndpoint must be an https URL",
        ),
        pytest.param(dumps(changed(IDE_EXTERNAL, clientId=...)), "clientId is missing"),
        pytest.param(
            dumps(changed(IDE_EXTERNAL, refreshToken="EXTREFRESHMARK...")),
            "refreshToken looks truncated",
            id="external-ellipsis",
        ),
        pytest.param(
            dumps(changed(IDE_EXTERNAL, scopes={"a": 1})), "scopes must be a list of strings"
        ),
    ],
)
def test_kiro_ide_broken_token_file(token: bytes, expected: str) -> None:
    message = import_error(parse_kiro_ide, token, None)
    assert message.startswith("Kiro IDE token file (kiro-auth-token.json): ")
    assert expected in message


def test_kiro_ide_idc_token_without_registration_says_which_file_to_add() -> None:
    message = import_error(parse_kiro_ide, dumps(IDE_IDC), None)
    assert f"~/.aws/sso/cache/{CLIENT_ID_HASH}.json" in message


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        pytest.param(changed(IDE_IDC, clientIdHash=...), "clientIdHash is missing"),
        pytest.param(
            changed(IDE_IDC, clientIdHash="../../etc/passwd"), "clientIdHash is not a cache file"
        ),
        pytest.param(changed(IDE_IDC, provider="Google"), "must be BuilderId or Enterprise"),
        pytest.param(changed(IDE_IDC, region="moon"), "region is not an AWS region name"),
    ],
)
def test_kiro_ide_broken_idc_token(token: dict[str, Any], expected: str) -> None:
    assert expected in import_error(parse_kiro_ide, dumps(token), dumps(IDE_REGISTRATION))


@pytest.mark.parametrize(
    ("registration", "expected"),
    [
        pytest.param(dumps(changed(IDE_REGISTRATION, clientId=...)), "clientId is missing"),
        pytest.param(dumps(changed(IDE_REGISTRATION, clientSecret=...)), "clientSecret is missing"),
        pytest.param(dumps(IDE_REGISTRATION)[:-30], "not valid JSON", id="truncated"),
        pytest.param(b"", "is empty", id="empty"),
        pytest.param(dumps(IDE_SOCIAL), "is a token file, not a client registration", id="token"),
        pytest.param(
            dumps(changed(IDE_REGISTRATION, expiresAt="soon")), "expiresAt is not an ISO-8601"
        ),
    ],
)
def test_kiro_ide_wrong_registration(registration: bytes, expected: str) -> None:
    message = import_error(parse_kiro_ide, dumps(IDE_IDC), registration)
    assert message.startswith(f"Kiro IDE client registration ({CLIENT_ID_HASH}.json): ")
    assert expected in message


# --- kiro-cli -------------------------------------------------------------------------------

CLI_SOCIAL = {
    "access_token": ACCESS,
    "expires_at": "2026-01-01T00:00:00.123456789Z",
    "refresh_token": REFRESH,
    "provider": "google",
    "profile_arn": PROFILE,
}
CLI_ODIC = {
    "access_token": ACCESS,
    "expires_at": "2026-01-01T00:00:00Z",
    "refresh_token": REFRESH,
    "region": "us-east-1",
    "start_url": BUILDER_ID_START_URL,
    "oauth_flow": "DeviceCode",
    "scopes": SCOPES,
}
CLI_REGISTRATION = {
    "client_id": CLIENT_ID,
    "client_secret": CLIENT_SECRET,
    "client_secret_expires_at": "2026-04-01T00:00:00Z",
    "region": "us-east-1",
    "oauth_flow": "DeviceCode",
    "scopes": SCOPES,
}
CLI_EXTERNAL = {
    "access_token": ACCESS,
    "expires_at": "2026-01-01T00:00:00Z",
    "refresh_token": EXTERNAL_REFRESH,
    "issuer_url": "https://example.okta.com",
    "token_endpoint": "https://example.okta.com/oauth2/v1/token",
    "client_id": CLIENT_ID,
    "scopes": "openid offline_access",
}
CLI_PROFILE = {"arn": EU_PROFILE, "profile_name": "QDefaultProfile"}


def sqlite_file(path: Path, script: str, rows: Mapping[str, Mapping[str, object]]) -> bytes:
    """A real SQLite file made by `script`, with `rows` inserted per table, read back as bytes."""
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript(script)
        for table, values in rows.items():
            for key, value in values.items():
                text = value if isinstance(value, str) else json.dumps(value)
                conn.execute(f"INSERT INTO {table} VALUES (?, ?)", (key, text))  # noqa: S608
        conn.commit()
    return path.read_bytes()


KIRO_CLI_SCHEMA = """
    CREATE TABLE auth_kv (key TEXT PRIMARY KEY, value TEXT);
    CREATE TABLE state (key TEXT PRIMARY KEY, value BLOB);
"""


def kiro_cli_db(
    tmp_path: Path, auth: Mapping[str, object], state: Mapping[str, object] | None = None
) -> bytes:
    return sqlite_file(
        tmp_path / "data.sqlite3", KIRO_CLI_SCHEMA, {"auth_kv": auth, "state": state or {}}
    )


def test_kiro_cli_store_with_every_kind_of_login(tmp_path: Path) -> None:
    db = kiro_cli_db(
        tmp_path,
        {
            "kirocli:social:token": CLI_SOCIAL,
            "kirocli:odic:token": CLI_ODIC,
            "kirocli:odic:device-registration": CLI_REGISTRATION,
            "kirocli:external-idp:token": CLI_EXTERNAL,
        },
        {"api.codewhisperer.profile": CLI_PROFILE},
    )

    social, builder_id, external = parse_kiro_cli(db)

    assert social.auth_kind is AuthKind.SOCIAL
    assert social.label == "Google (kiro-cli)"
    assert (social.profile_arn, social.region) == (PROFILE, "us-east-1")  # its own profile
    assert social.credentials.expires_at == pytest.approx(epoch("2026-01-01T00:00:00.123456"))
    assert social.credentials.provider == "Google"

    assert builder_id.auth_kind is AuthKind.BUILDER_ID
    assert (builder_id.profile_arn, builder_id.region) == (EU_PROFILE, "eu-central-1")
    assert builder_id.auth_region == "us-east-1"
    credentials = builder_id.credentials
    assert (credentials.client_id, credentials.client_secret) == (CLIENT_ID, CLIENT_SECRET)
    assert credentials.client_secret_expires_at == epoch("2026-04-01T00:00:00")
    assert credentials.scopes == tuple(SCOPES)
    assert credentials.start_url == BUILDER_ID_START_URL

    assert external.auth_kind is AuthKind.EXTERNAL_IDP
    assert external.credentials.token_endpoint == "https://example.okta.com/oauth2/v1/token"
    assert external.credentials.scopes == ("openid", "offline_access")
    assert external.profile_arn == EU_PROFILE
    assert {account.source for account in (social, builder_id, external)} == {"kiro-cli"}


def test_kiro_cli_identity_center_login(tmp_path: Path) -> None:
    token = changed(CLI_ODIC, start_url=IDC_START_URL, region="eu-west-1")
    registration = changed(CLI_REGISTRATION, region="eu-west-1")
    db = kiro_cli_db(
        tmp_path,
        {"kirocli:odic:token": token, "kirocli:odic:device-registration": registration},
    )

    [account] = parse_kiro_cli(db)

    assert account.auth_kind is AuthKind.IDC
    assert (account.auth_region, account.region, account.profile_arn) == (
        "eu-west-1",
        "eu-central-1",
        None,
    )
    assert account.label == "IAM Identity Center (kiro-cli)"


def test_kiro_cli_legacy_keys_are_read_when_the_new_ones_are_absent(tmp_path: Path) -> None:
    db = kiro_cli_db(
        tmp_path,
        {
            "codewhisperer:odic:token": CLI_ODIC,
            "codewhisperer:odic:device-registration": CLI_REGISTRATION,
        },
    )
    [account] = parse_kiro_cli(db)
    assert account.auth_kind is AuthKind.BUILDER_ID


def test_kiro_cli_token_pairs_with_the_registration_of_its_own_key(tmp_path: Path) -> None:
    legacy = changed(CLI_REGISTRATION, client_id="CLIENTIDMARK-legacy")
    db = kiro_cli_db(
        tmp_path,
        {
            "kirocli:odic:token": CLI_ODIC,
            "codewhisperer:odic:device-registration": legacy,
            "kirocli:odic:device-registration": CLI_REGISTRATION,
        },
    )
    [account] = parse_kiro_cli(db)
    assert account.credentials.client_id == CLIENT_ID


def test_kiro_cli_null_token_is_no_login(tmp_path: Path) -> None:
    db = kiro_cli_db(tmp_path, {"kirocli:social:token": "null", "kirocli:odic:token": CLI_ODIC})
    message = import_error(parse_kiro_cli, db)  # the OIDC token still lacks a registration
    assert "kirocli:odic:token: has no device registration" in message


def test_kiro_cli_store_in_wal_mode(tmp_path: Path) -> None:
    script = "PRAGMA journal_mode=WAL;" + KIRO_CLI_SCHEMA
    db = sqlite_file(
        tmp_path / "data.sqlite3", script, {"auth_kv": {"kirocli:social:token": CLI_SOCIAL}}
    )
    assert db[18:20] == b"\x02\x02"  # the header says WAL
    [account] = parse_kiro_cli(db)
    assert account.auth_kind is AuthKind.SOCIAL


@pytest.mark.parametrize(
    ("auth", "state", "expected"),
    [
        pytest.param({}, {}, "holds no login", id="empty"),
        pytest.param(
            {"kirocli:odic:token": CLI_ODIC},
            {},
            "key kirocli:odic:token: has no device registration",
            id="no-registration",
        ),
        pytest.param(
            {
                "kirocli:odic:token": CLI_ODIC,
                "kirocli:odic:device-registration": changed(CLI_REGISTRATION, region="eu-west-1"),
            },
            {},
            "is for region eu-west-1 but the token is for us-east-1",
            id="region-mismatch",
        ),
        pytest.param(
            {
                "kirocli:odic:token": CLI_ODIC,
                "kirocli:odic:device-registration": changed(CLI_REGISTRATION, oauth_flow="Pkce"),
            },
            {},
            "oauth_flow differs",
            id="flow-mismatch",
        ),
        pytest.param(
            {
                "kirocli:odic:token": CLI_ODIC,
                "kirocli:odic:device-registration": changed(CLI_REGISTRATION, client_secret=...),
            },
            {},
            "key kirocli:odic:device-registration: client_secret is missing",
            id="registration-without-secret",
        ),
        pytest.param(
            {"kirocli:social:token": json.dumps(CLI_SOCIAL)[:-25]},
            {},
            "key kirocli:social:token: is not valid JSON",
            id="truncated-value",
        ),
        pytest.param(
            {"kirocli:social:token": changed(CLI_SOCIAL, refresh_token=None)},
            {},
            "refresh_token is missing",
            id="no-refresh-token",
        ),
        pytest.param(
            {"kirocli:social:token": changed(CLI_SOCIAL, refresh_token=REFRESH[:99])},
            {},
            "refresh_token looks truncated (99 characters)",
            id="truncated-refresh-token",
        ),
        pytest.param(
            {"kirocli:social:token": changed(CLI_SOCIAL, expires_at="2026-13-45T00:00:00Z")},
            {},
            "expires_at is not an ISO-8601 time",
            id="bad-expiry",
        ),
        pytest.param(
            {"kirocli:external-idp:token": changed(CLI_EXTERNAL, token_endpoint=...)},
            {},
            "token_endpoint is missing",
            id="external-without-endpoint",
        ),
        pytest.param(
            {"kirocli:social:token": CLI_SOCIAL},
            {"api.codewhisperer.profile": {"arn": "not-an-arn"}},
            "state api.codewhisperer.profile: arn is not a CodeWhisperer profile ARN",
            id="bad-state-profile",
        ),
    ],
)
def test_kiro_cli_broken_store(
    tmp_path: Path, auth: dict[str, object], state: dict[str, object], expected: str
) -> None:
    message = import_error(parse_kiro_cli, kiro_cli_db(tmp_path, auth, state))
    assert message.startswith("kiro-cli store (data.sqlite3)")
    assert expected in message


def test_kiro_cli_file_without_auth_kv(tmp_path: Path) -> None:
    db = sqlite_file(tmp_path / "data.sqlite3", "CREATE TABLE state (key TEXT, value BLOB);", {})
    assert "there is no auth_kv table" in import_error(parse_kiro_cli, db)


@pytest.mark.parametrize(
    ("cut", "expected"),
    [
        pytest.param(lambda db: b"", "is not an SQLite database", id="empty"),
        pytest.param(lambda db: b"\x00garbage" * 64, "is not an SQLite database", id="garbage"),
        pytest.param(lambda db: db[:50], "is truncated", id="header-only"),
        pytest.param(lambda db: db[:4096], "cannot be read", id="first-page-only"),
        pytest.param(
            lambda db: db[:100] + b"\xa5" * (len(db) - 100), "cannot be read", id="scrambled"
        ),
    ],
)
def test_kiro_cli_unreadable_file(
    tmp_path: Path, cut: Callable[[bytes], bytes], expected: str
) -> None:
    db = kiro_cli_db(tmp_path, {"kirocli:social:token": CLI_SOCIAL})
    assert len(db) > 4096
    assert expected in import_error(parse_kiro_cli, cut(db))


# --- opencode-kiro-auth ---------------------------------------------------------------------

OPENCODE_SCHEMA = """
    CREATE TABLE accounts (
        id TEXT PRIMARY KEY, email TEXT NOT NULL, auth_method TEXT NOT NULL,
        region TEXT NOT NULL, oidc_region TEXT, client_id TEXT, client_secret TEXT,
        profile_arn TEXT, start_url TEXT,
        refresh_token TEXT NOT NULL, access_token TEXT NOT NULL, expires_at INTEGER NOT NULL,
        rate_limit_reset INTEGER DEFAULT 0, enabled INTEGER DEFAULT 1,
        is_healthy INTEGER DEFAULT 1, unhealthy_reason TEXT, recovery_time INTEGER,
        fail_count INTEGER DEFAULT 0, last_used INTEGER DEFAULT 0, used_count INTEGER DEFAULT 0,
        limit_count INTEGER DEFAULT 0, last_sync INTEGER DEFAULT 0
    );
"""
# The first schema (sqlite.ts before its migrations added oidc_region, start_url, enabled).
OPENCODE_FIRST_SCHEMA = """
    CREATE TABLE accounts (
        id TEXT PRIMARY KEY, email TEXT NOT NULL, auth_method TEXT NOT NULL,
        region TEXT NOT NULL, client_id TEXT, client_secret TEXT, profile_arn TEXT,
        refresh_token TEXT NOT NULL, access_token TEXT NOT NULL, expires_at INTEGER NOT NULL,
        rate_limit_reset INTEGER DEFAULT 0, is_healthy INTEGER DEFAULT 1, unhealthy_reason TEXT,
        recovery_time INTEGER, fail_count INTEGER DEFAULT 0, last_used INTEGER DEFAULT 0,
        used_count INTEGER DEFAULT 0, limit_count INTEGER DEFAULT 0, last_sync INTEGER DEFAULT 0
    );
"""
EXPIRES_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
OPENCODE_SOCIAL = {
    "id": "a1",
    "email": "dev@example.com",
    "auth_method": "desktop",
    "region": "us-east-1",
    "profile_arn": PROFILE,
    "refresh_token": REFRESH,
    "access_token": ACCESS,
    "expires_at": EXPIRES_MS,
}
OPENCODE_IDC = {
    "id": "a2",
    "email": "builder@example.com",
    "auth_method": "idc",
    "region": "us-east-1",
    "oidc_region": "us-east-1",
    "client_id": CLIENT_ID,
    "client_secret": CLIENT_SECRET,
    "refresh_token": "aorSECONDREFRESHMARK" + "q" * 200,
    "access_token": ACCESS,
    "expires_at": EXPIRES_MS,
}


def opencode_db(
    tmp_path: Path, rows: Sequence[Mapping[str, object]], schema: str = OPENCODE_SCHEMA
) -> bytes:
    path = tmp_path / "kiro.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript("PRAGMA journal_mode=WAL;" + schema)  # as opencode-kiro-auth does
        for row in rows:
            columns, marks = ", ".join(row), ", ".join("?" * len(row))
            insert = f"INSERT INTO accounts ({columns}) VALUES ({marks})"  # noqa: S608
            conn.execute(insert, tuple(row.values()))
        conn.commit()
    return path.read_bytes()


def test_opencode_kiro_auth_database(tmp_path: Path) -> None:
    social, builder_id = parse_opencode_kiro_auth(
        opencode_db(tmp_path, [OPENCODE_SOCIAL, OPENCODE_IDC])
    )

    assert social.auth_kind is AuthKind.SOCIAL
    assert social.label == "dev@example.com (opencode-kiro-auth)"
    assert social.credentials.expires_at == epoch("2026-01-01T00:00:00")
    assert (social.profile_arn, social.region) == (PROFILE, "us-east-1")

    assert builder_id.auth_kind is AuthKind.BUILDER_ID
    assert builder_id.credentials.client_secret == CLIENT_SECRET
    assert builder_id.auth_region == "us-east-1"
    assert builder_id.source == "opencode-kiro-auth"


@pytest.mark.parametrize(
    ("changes", "kind"),
    [
        pytest.param({"auth_method": "identity-center"}, AuthKind.IDC),
        pytest.param({"auth_method": "sso"}, AuthKind.IDC),
        pytest.param({"start_url": IDC_START_URL}, AuthKind.IDC, id="idc-with-own-start-url"),
        pytest.param({"start_url": BUILDER_ID_START_URL}, AuthKind.BUILDER_ID),
    ],
)
def test_opencode_kiro_auth_oidc_kinds(
    tmp_path: Path, changes: dict[str, object], kind: AuthKind
) -> None:
    [account] = parse_opencode_kiro_auth(opencode_db(tmp_path, [changed(OPENCODE_IDC, **changes)]))
    assert account.auth_kind is kind


def test_opencode_kiro_auth_oidc_region_is_the_auth_region(tmp_path: Path) -> None:
    row = changed(OPENCODE_IDC, oidc_region="eu-west-1", profile_arn=EU_PROFILE)
    [account] = parse_opencode_kiro_auth(opencode_db(tmp_path, [row]))
    assert (account.auth_region, account.region) == ("eu-west-1", "eu-central-1")


def test_opencode_kiro_auth_placeholder_email_is_not_a_label(tmp_path: Path) -> None:
    row = changed(OPENCODE_IDC, email="idc-placeholder+3f2a@awsapps.local")
    [account] = parse_opencode_kiro_auth(opencode_db(tmp_path, [row]))
    assert account.label == "Builder ID (opencode-kiro-auth)"


def test_opencode_kiro_auth_duplicate_logins_keep_the_healthy_row(tmp_path: Path) -> None:
    placeholder = changed(
        OPENCODE_IDC, id="p", email="idc-placeholder+1@awsapps.local", is_healthy=0
    )
    real = changed(OPENCODE_IDC, id="r", email="real@example.com")
    [account] = parse_opencode_kiro_auth(opencode_db(tmp_path, [placeholder, real]))
    assert account.label == "real@example.com (opencode-kiro-auth)"


def test_opencode_kiro_auth_packed_refresh_token(tmp_path: Path) -> None:
    row = changed(OPENCODE_IDC, refresh_token=f"{REFRESH}|{CLIENT_ID}|{CLIENT_SECRET}|idc")
    [account] = parse_opencode_kiro_auth(opencode_db(tmp_path, [row]))
    assert account.credentials.refresh_token == REFRESH


def test_opencode_kiro_auth_first_schema(tmp_path: Path) -> None:
    rows = [OPENCODE_SOCIAL, changed(OPENCODE_IDC, oidc_region=..., region="us-west-2")]
    social, builder_id = parse_opencode_kiro_auth(
        opencode_db(tmp_path, rows, OPENCODE_FIRST_SCHEMA)
    )
    assert social.auth_kind is AuthKind.SOCIAL
    assert builder_id.auth_region == "us-west-2"  # `region` served both before oidc_region


def test_opencode_kiro_auth_accounts_json() -> None:
    content = dumps(
        {
            "version": 1,
            "activeIndex": 0,
            "accounts": [
                {
                    "id": "a",
                    "email": "builder-id@aws.amazon.com",
                    "realEmail": "me@example.com",
                    "authMethod": "idc",
                    "region": "us-east-1",
                    "clientId": CLIENT_ID,
                    "clientSecret": CLIENT_SECRET,
                    "refreshToken": f"{REFRESH}|{CLIENT_ID}|{CLIENT_SECRET}|idc",
                    "accessToken": ACCESS,
                    "expiresAt": EXPIRES_MS,
                    "rateLimitResetTime": 0,
                    "isHealthy": True,
                }
            ],
        }
    )
    [account] = parse_opencode_kiro_auth(content)
    assert account.label == "me@example.com (opencode-kiro-auth)"
    assert account.credentials.refresh_token == REFRESH
    assert account.credentials.client_id == CLIENT_ID


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        pytest.param([], "holds no accounts", id="empty"),
        pytest.param(
            [changed(OPENCODE_SOCIAL, auth_method="password")], "auth_method is not one of"
        ),
        pytest.param(
            [changed(OPENCODE_IDC, client_secret=...)],
            "account 1: client_secret is missing",
            id="idc-without-secret",
        ),
        pytest.param(
            [OPENCODE_SOCIAL, changed(OPENCODE_IDC, refresh_token="aorSHORTREFRESHMARK")],
            "account 2: refresh_token looks truncated",
            id="truncated-refresh-token",
        ),
        pytest.param(
            [changed(OPENCODE_SOCIAL, expires_at="tomorrow")],
            "expires_at must be epoch milliseconds",
        ),
        pytest.param(
            [changed(OPENCODE_IDC, oidc_region="nowhere")], "oidc_region is not an AWS region"
        ),
    ],
)
def test_opencode_kiro_auth_broken_database(
    tmp_path: Path, rows: list[dict[str, object]], expected: str
) -> None:
    message = import_error(parse_opencode_kiro_auth, opencode_db(tmp_path, rows))
    assert message.startswith("opencode-kiro-auth store (kiro.db)")
    assert expected in message


def test_opencode_kiro_auth_database_without_accounts(tmp_path: Path) -> None:
    db = sqlite_file(tmp_path / "kiro.db", "CREATE TABLE usage (account_id TEXT);", {})
    assert "there is no accounts table" in import_error(parse_opencode_kiro_auth, db)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(dumps({"version": 1, "accounts": {}}), "accounts must be a list of objects"),
        pytest.param(dumps({"version": 1, "accounts": []}), "holds no accounts"),
        pytest.param(b'{"version": 1, "accounts": [{"email": "a', "not valid JSON"),
    ],
)
def test_opencode_kiro_auth_broken_accounts_json(content: bytes, expected: str) -> None:
    message = import_error(parse_opencode_kiro_auth, content)
    assert message.startswith("opencode-kiro-auth accounts file (kiro-accounts.json)")
    assert expected in message


# --- API key --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [API_KEY, f"  {API_KEY}\n", f"{API_KEY}\n".encode()])
def test_api_key(text: str | bytes) -> None:
    account = parse_api_key(text)

    assert account.auth_kind is AuthKind.API_KEY
    assert account.credentials.access_token == API_KEY
    assert account.credentials.refresh_token is None
    assert (account.label, account.source) == ("Kiro API key (api-key)", "api-key")
    assert (account.region, account.auth_region, account.profile_arn) == (
        "us-east-1",
        "us-east-1",
        None,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", "does not start with ksk_", id="empty"),
        pytest.param("sk-APIKEYMARK" + "k" * 40, "does not start with ksk_", id="wrong-prefix"),
        pytest.param("ksk_APIKEYMARK", "expected ksk_ followed by 20 to 1024", id="too-short"),
        pytest.param(API_KEY + " ksk_other", "on one line", id="two-words"),
        pytest.param(API_KEY + "é", "letters, digits", id="accent"),
        pytest.param(b"ksk_\xff\xfe", "is not UTF-8", id="not-utf8"),
    ],
)
def test_api_key_rejected(text: str | bytes, expected: str) -> None:
    message = import_error(parse_api_key, text)
    assert message.startswith("Kiro API key: ")
    assert expected in message


# --- detection ------------------------------------------------------------------------------


def test_detect_each_format(tmp_path: Path) -> None:
    cli = kiro_cli_db(tmp_path, {"kirocli:social:token": CLI_SOCIAL})
    opencode = opencode_db(tmp_path, [OPENCODE_SOCIAL])
    opencode_json = dumps(
        {
            "version": 1,
            "accounts": [changed(IDE_SOCIAL, authMethod="desktop", expiresAt=EXPIRES_MS)],
        }
    )
    cases: list[tuple[bytes, bytes | None, str]] = [
        (dumps(IDE_SOCIAL), None, "kiro-ide"),
        (b"\xef\xbb\xbf" + dumps(IDE_IDC), dumps(IDE_REGISTRATION), "kiro-ide"),  # with a BOM
        (cli, None, "kiro-cli"),
        (opencode, None, "opencode-kiro-auth"),
        (opencode_json, None, "opencode-kiro-auth"),
        (f"{API_KEY}\n".encode(), None, "api-key"),
    ]
    for content, companion, source in cases:
        [account] = detect_and_parse(content, companion)
        assert account.source == source


@pytest.mark.parametrize(
    ("content", "companion", "expected"),
    [
        pytest.param(b"", None, "the uploaded file is empty", id="empty"),
        pytest.param(b" \n\t", None, "the uploaded file is empty", id="blank"),
        pytest.param(b"\x89PNG\r\n\x1a\n\xff\x00", None, "is not UTF-8 text", id="binary"),
        pytest.param(b"hello world", None, "unrecognised file", id="text"),
        pytest.param(dumps({"some": "json"}), None, "unrecognised file", id="other-json"),
        pytest.param(dumps(IDE_SOCIAL)[:-10], None, "is not valid JSON", id="truncated-json"),
        pytest.param(
            dumps(IDE_REGISTRATION), None, "give this file as its companion", id="registration"
        ),
        pytest.param(dumps(IDE_IDC), None, f"{CLIENT_ID_HASH}.json", id="idc-alone"),
        pytest.param(
            API_KEY.encode(), dumps(IDE_REGISTRATION), "companion file only goes", id="companion"
        ),
    ],
)
def test_detect_rejects(content: bytes, companion: bytes | None, expected: str) -> None:
    assert expected in import_error(detect_and_parse, content, companion)


def test_detect_rejects_an_unknown_sqlite_file(tmp_path: Path) -> None:
    db = sqlite_file(tmp_path / "other.db", "CREATE TABLE notes (body TEXT);", {})
    assert "neither an auth_kv table" in import_error(detect_and_parse, db)


def test_detect_refuses_a_companion_for_a_sqlite_store(tmp_path: Path) -> None:
    db = kiro_cli_db(tmp_path, {"kirocli:social:token": CLI_SOCIAL})
    assert "companion file only goes" in import_error(detect_and_parse, db, dumps(IDE_REGISTRATION))


def test_the_uploaded_file_is_left_as_it_was(tmp_path: Path) -> None:
    db = kiro_cli_db(tmp_path, {"kirocli:social:token": CLI_SOCIAL})
    before = (tmp_path / "data.sqlite3").stat()
    parse_kiro_cli(db)
    after = (tmp_path / "data.sqlite3").stat()
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data.sqlite3"]


# --- repr and locations ---------------------------------------------------------------------


def test_repr_shows_no_secret(tmp_path: Path) -> None:
    accounts = [
        parse_kiro_ide(dumps(IDE_SOCIAL)),
        parse_kiro_ide(dumps(IDE_IDC), dumps(IDE_REGISTRATION)),
        parse_kiro_ide(dumps(IDE_EXTERNAL)),
        *parse_kiro_cli(
            kiro_cli_db(
                tmp_path,
                {
                    "kirocli:odic:token": CLI_ODIC,
                    "kirocli:odic:device-registration": CLI_REGISTRATION,
                    "kirocli:external-idp:token": CLI_EXTERNAL,
                },
            )
        ),
        *parse_opencode_kiro_auth(opencode_db(tmp_path, [OPENCODE_IDC])),
        parse_api_key(API_KEY),
    ]
    for account in accounts:
        assert account.credentials.secrets()
        assert_no_secret(repr(account))
        assert_no_secret(str(account))
