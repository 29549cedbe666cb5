"""Bounds on reading an uploaded credentials store: size, time, value length, rows, and what is
read at all (ordinary tables of plain columns; never a view, a virtual table or a generated
column). The daemon-level measure (event loop, peak memory) is in
tests/reliability/test_resource_bounds.py."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable

import pytest

from kirod.credentials.importers import (
    ImportLimits,
    detect_and_parse,
    parse_kiro_cli,
    parse_opencode_kiro_auth,
    parse_upload,
)
from kirod.upstream.errors import CredentialImportError

EXPENSIVE = "hex(zeroblob(100000000))"  # 200 MB of text each time the column is read


def store(*statements: str, rows: tuple[str, list[tuple[object, ...]]] | None = None) -> bytes:
    db = sqlite3.connect(":memory:")
    for statement in statements[:1]:
        db.execute(statement)
    if rows is not None:
        table, values = rows
        marks = ", ".join("?" * len(values[0]))
        db.executemany(f"INSERT INTO {table} VALUES ({marks})", values)  # noqa: S608
    for statement in statements[1:]:
        db.execute(statement)
    db.commit()
    content = db.serialize()
    db.close()
    return content


def refused(parse: Callable[..., object], *args: object) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(CredentialImportError) as caught:
        parse(*args)
    return str(caught.value), time.monotonic() - started


GENERATED = {
    "kiro-cli": store(
        "CREATE TABLE auth_kv (key TEXT PRIMARY KEY)",
        f"ALTER TABLE auth_kv ADD COLUMN value TEXT AS ({EXPENSIVE})",
        rows=("auth_kv", [("kirocli:social:token",)]),
    ),
    "opencode": store(
        "CREATE TABLE accounts (id INTEGER PRIMARY KEY, auth_method TEXT)",
        f"ALTER TABLE accounts ADD COLUMN refresh_token TEXT AS ({EXPENSIVE})",
        rows=("accounts", [(1, "desktop")]),
    ),
}


@pytest.mark.parametrize("kind", list(GENERATED))
def test_a_generated_column_is_refused_before_it_is_computed(kind: str) -> None:
    content = GENERATED[kind]
    assert len(content) < 16 * 1024
    message, elapsed = refused(detect_and_parse, content)
    assert "generated" in message
    assert elapsed < 0.5


def test_a_stored_generated_column_is_refused_too() -> None:
    content = store(
        "CREATE TABLE auth_kv (key TEXT PRIMARY KEY, value TEXT AS (key || 'x') STORED)",
        rows=("auth_kv", [("kirocli:social:token",)]),
    )
    assert "generated" in refused(parse_kiro_cli, content)[0]


def test_a_view_or_virtual_table_is_not_read() -> None:
    view = store(
        "CREATE TABLE t (x)",
        f"CREATE VIEW accounts AS SELECT 'desktop' AS auth_method, {EXPENSIVE} AS refresh_token",
    )
    message, elapsed = refused(parse_opencode_kiro_auth, view)
    assert "no accounts table" in message
    assert elapsed < 0.5
    virtual = store("CREATE VIRTUAL TABLE auth_kv USING fts5(key, value)")
    assert "not an ordinary table" in refused(parse_kiro_cli, virtual)[0]


def test_reading_is_bounded_in_time() -> None:
    # No index on key: finding the login rows scans every row.
    content = store(
        "CREATE TABLE auth_kv (key TEXT, value TEXT)",
        rows=("auth_kv", [(f"other:{i}", "{}") for i in range(50_000)]),
    )
    message, elapsed = refused(parse_kiro_cli, content, ImportLimits(timeout_s=0.0))
    assert "took longer than 0 s (import_timeout_s)" in message
    assert elapsed < 1.0
    with pytest.raises(CredentialImportError, match="holds no login"):
        parse_kiro_cli(content)  # within the default bound, the same file is read through


def test_a_value_longer_than_a_megabyte_is_an_error_not_a_read() -> None:
    content = store(
        "CREATE TABLE auth_kv (key TEXT PRIMARY KEY, value TEXT)",
        rows=("auth_kv", [("kirocli:social:token", "x" * (2 * 1024 * 1024))]),
    )
    assert "too big" in refused(parse_kiro_cli, content)[0]


def test_rows_are_bounded() -> None:
    content = store(
        "CREATE TABLE accounts (auth_method TEXT, refresh_token TEXT)",
        rows=("accounts", [("desktop", f"r{i}") for i in range(1001)]),
    )
    assert "more than 1000 rows" in refused(parse_opencode_kiro_auth, content)[0]


def test_uploads_are_bounded_in_size() -> None:
    content = store(
        "CREATE TABLE auth_kv (key TEXT PRIMARY KEY, value TEXT)",
        rows=("auth_kv", [(f"k{i}", "v" * 100) for i in range(100)]),
    )
    message = refused(detect_and_parse, content, None, ImportLimits(max_bytes=len(content) - 1))[0]
    assert "(import_max_bytes)" in message
    # JSON is held to 4 MiB whatever import_max_bytes allows: a parse holds the GIL.
    text = json.dumps({"accounts": [], "pad": "x" * (5 * 1024 * 1024)}).encode()
    assert "(import_max_bytes)" in refused(detect_and_parse, text)[0]


async def test_parse_upload_runs_beside_the_event_loop() -> None:
    content = store(
        "CREATE TABLE auth_kv (key TEXT, value TEXT)",
        rows=("auth_kv", [(f"other:{i}", "{}") for i in range(200_000)]),
    )
    ticks = 0

    # Each tick is one turn of the event loop: a parse run inline would leave none, one in a
    # thread leaves some however loaded the machine is (a timed sleep might not come round).
    async def tick() -> None:
        nonlocal ticks
        for _ in range(10_000):
            await asyncio.sleep(0)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    try:
        with pytest.raises(CredentialImportError, match="holds no login"):
            await parse_upload(content, None, ImportLimits())
    finally:
        ticker.cancel()
    assert ticks > 0
