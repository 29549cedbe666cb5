"""Which format an uploaded file is (kiroctl finds the files: `kirod.paths.credential_files`).

`parse_upload` is what the daemon calls: the whole parse runs in a worker thread, under the
size and time bounds of `ImportLimits`, so a hostile upload never holds the event loop.
"""

from __future__ import annotations

import asyncio

from kirod.credentials.importers.api_key import parse_api_key
from kirod.credentials.importers.kiro_cli import kiro_cli_accounts
from kirod.credentials.importers.kiro_ide import parse_kiro_ide
from kirod.credentials.importers.opencode import opencode_db_accounts, parse_opencode_kiro_auth
from kirod.credentials.importers.record import ImportedAccount, decode, json_object
from kirod.credentials.importers.sqlite import (
    SQLITE_MAGIC,
    ImportLimits,
    check_size,
    sqlite_copy,
    table_names,
)
from kirod.upstream.errors import CredentialImportError

MAX_TEXT_BYTES = 4 * 1024 * 1024
"""Largest JSON or key upload: credential files are kilobytes, and a JSON parse holds the GIL."""


async def parse_upload(
    content: bytes, companion: bytes | None, limits: ImportLimits
) -> list[ImportedAccount]:
    """`detect_and_parse` in a worker thread: SQLite releases the GIL while it reads."""
    return await asyncio.to_thread(detect_and_parse, content, companion, limits)


def detect_and_parse(
    content: bytes, companion: bytes | None = None, limits: ImportLimits | None = None
) -> list[ImportedAccount]:
    """Recognise an uploaded file by its content and parse it.

    `companion` is the `{clientIdHash}.json` registration that goes with an IdC
    kiro-auth-token.json; it is refused with any other kind of file, which would ignore it.
    """
    limits = limits or ImportLimits()
    check_size(content, "the uploaded file", limits)
    if not content.strip():
        raise CredentialImportError("the uploaded file is empty")
    if content.startswith(SQLITE_MAGIC):
        _refuse_companion(companion, "an SQLite store")
        with sqlite_copy(content, "the uploaded SQLite file", limits) as conn:
            tables = table_names(conn)
            if "auth_kv" in tables:
                return kiro_cli_accounts(conn, tables)
            if "accounts" in tables:
                return opencode_db_accounts(conn)
        raise CredentialImportError(
            "the uploaded SQLite file has neither an auth_kv table (kiro-cli's data.sqlite3) nor "
            "an accounts table (opencode-kiro-auth's kiro.db)"
        )
    text_limits = ImportLimits(min(limits.max_bytes, MAX_TEXT_BYTES), limits.timeout_s)
    check_size(content, "the uploaded text file", text_limits)
    if companion is not None:
        check_size(companion, "the companion file", text_limits)
    text = decode(content, "the uploaded file").strip()
    if text.startswith("ksk_"):
        _refuse_companion(companion, "an API key")
        return [parse_api_key(text)]
    if text.startswith("{"):
        data = json_object(text, "the uploaded JSON file")
        if "accounts" in data:
            _refuse_companion(companion, "an opencode-kiro-auth accounts file")
            return parse_opencode_kiro_auth(content, text_limits)
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
