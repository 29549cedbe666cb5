"""Which format an uploaded file is (kiroctl finds the files: `kirod.paths.credential_files`)."""

from __future__ import annotations

from kirod.upstream.errors import CredentialImportError
from kirod.upstream.importers.api_key import parse_api_key
from kirod.upstream.importers.kiro_cli import kiro_cli_accounts
from kirod.upstream.importers.kiro_ide import parse_kiro_ide
from kirod.upstream.importers.opencode import opencode_db_accounts, parse_opencode_kiro_auth
from kirod.upstream.importers.record import ImportedAccount, decode, json_object
from kirod.upstream.importers.sqlite import SQLITE_MAGIC, sqlite_copy, table_names


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
