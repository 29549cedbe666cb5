"""Where each tool keeps its credentials, and which format an uploaded file is."""

from __future__ import annotations

import sys
from pathlib import Path

from kirod.upstream.errors import CredentialImportError
from kirod.upstream.importers.api_key import parse_api_key
from kirod.upstream.importers.kiro_cli import kiro_cli_accounts
from kirod.upstream.importers.kiro_ide import parse_kiro_ide
from kirod.upstream.importers.opencode import opencode_db_accounts, parse_opencode_kiro_auth
from kirod.upstream.importers.record import ImportedAccount, decode, json_object
from kirod.upstream.importers.sqlite import SQLITE_MAGIC, sqlite_copy, table_names


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
        with sqlite_copy(content, "the uploaded SQLite file") as conn:
            tables = table_names(conn)
            if "auth_kv" in tables:
                return kiro_cli_accounts(conn, tables)
            if "accounts" in tables:
                return opencode_db_accounts(conn)
        raise CredentialImportError(
            "the uploaded SQLite file has neither an auth_kv table (kiro-cli's data.sqlite3) nor "
            "an accounts table (opencode-kiro-auth's kiro.db)"
        )
    text = decode(content, "the uploaded file").strip()
    if text.startswith("ksk_"):
        _refuse_companion(companion, "an API key")
        return [parse_api_key(text)]
    if text.startswith("{"):
        data = json_object(text, "the uploaded JSON file")
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


def _refuse_companion(companion: bytes | None, kind: str) -> None:
    if companion is not None:
        raise CredentialImportError(
            f"a companion file only goes with an IdC kiro-auth-token.json, not with {kind}"
        )
