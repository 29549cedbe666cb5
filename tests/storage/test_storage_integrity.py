"""The store and a damaged file, on real SQLite files damaged as a disk does
(tests/support/damage.py): refused at open untouched, or read-only once damage is found."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from kirod.errors import DatabaseDamaged, StoreError
from kirod.storage import integrity
from kirod.storage.db import Database
from tests.support.damage import damage, digest

ROWS = 400  # operation-log rows: some 40 pages, so the damage is in the middle of a real tree


async def filled(path: Path) -> None:
    """A store with a key, an account and `ROWS` operation-log rows, closed (its log folded in)."""
    async with Database(path) as db:
        await db.execute(
            "INSERT INTO api_keys (id, name, key_hash, prefix, created_at)"
            " VALUES ('k', 'n', 'h', 'p', 1.0)"
        )
        await db.execute(
            "INSERT INTO accounts (id, label, auth_kind, region, auth_region, credentials,"
            " created_at, updated_at) VALUES ('a', 'l', 'social', 'r', 'r', '{}', 1, 1)"
        )
        for n in range(ROWS):
            await db.execute(
                "INSERT INTO oplog (at, request_id, key_id, protocol, model, stream, attempts,"
                " total_ms, status, dropped) VALUES (?, ?, 'k', 'messages', 'm', 1, ?, 1, 200, '')",
                (float(n), f"req_{n:020d}", "[" + '{"account_id": "a"},' * 8 + "{}]"),
            )


@pytest.mark.parametrize("table", ["accounts", "api_keys", "oplog_rollup", "sqlite_schema"])
async def test_the_start_refuses_damage_in_a_table_it_checks_and_leaves_the_file_untouched(
    tmp_path: Path, table: str
) -> None:
    path = tmp_path / "kirod.db"
    await filled(path)
    damage(path, table, count=1)
    before = digest(path)

    with pytest.raises(DatabaseDamaged) as refused:
        async with Database(path):
            pass

    assert refused.value.path == str(path)
    assert f"the database {path} is damaged" in str(refused.value)
    assert "`kiroctl db recover`" in str(refused.value)
    assert digest(path) == before


async def test_a_file_shorter_than_its_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "kirod.db"
    await filled(path)
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size - 4096)

    with pytest.raises(DatabaseDamaged, match="malformed"):
        async with Database(path):
            pass


async def test_damage_in_a_growing_table_is_found_after_the_start_and_makes_the_store_read_only(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kirod.db"
    await filled(path)
    damage(path, "oplog")
    async with Database(path) as db:
        assert db.damaged is None  # the start left the growing tables to after it
        await db.execute("UPDATE accounts SET label = 'm' WHERE id = 'a'")  # in the log
        before = digest(path)
        await db.check_growing()
        assert db.damaged is not None
        assert "kiroctl db recover" in str(db.damaged)
        with pytest.raises(DatabaseDamaged):
            await db.execute("UPDATE api_keys SET last_used_at = 2 WHERE id = 'k'")
        await db.checkpoint()  # does nothing: it would fold the log into the damaged file
        # Reads of sound pages go on.
        assert (await db.read_one("SELECT id FROM accounts"))["id"] == "a"
        assert digest(path) == before
    assert digest(path) == before  # the close folded nothing into it


async def test_damage_met_by_a_query_makes_the_store_read_only(tmp_path: Path) -> None:
    path = tmp_path / "kirod.db"
    await filled(path)
    async with Database(path) as db:
        await db.checkpoint()
        damage(path, "oplog")
        with pytest.raises(DatabaseDamaged):
            await db.read("SELECT count(*), sum(length(attempts)) FROM oplog")
        assert db.damaged is not None
        with pytest.raises(DatabaseDamaged):
            await db.execute("DELETE FROM oplog WHERE id = 1")


async def test_the_full_check_finds_damage_the_start_left_and_a_sound_store_passes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kirod.db"
    await filled(path)
    async with Database(path) as db:
        assert await db.check() == []
        assert db.damaged is None
    damage(path, "oplog")
    async with Database(path) as db:
        problems = await db.check()
        assert problems
        assert db.damaged is not None


def test_only_corruption_counts_as_damage(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    with contextlib.closing(sqlite3.connect(path)) as one:
        one.execute("CREATE TABLE t (x)")
        one.execute("BEGIN IMMEDIATE")
        with contextlib.closing(sqlite3.connect(path, timeout=0)) as two:
            with pytest.raises(sqlite3.OperationalError) as busy:
                two.execute("BEGIN IMMEDIATE")
            assert not integrity.is_damage(busy.value)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 300)
    with contextlib.closing(sqlite3.connect(garbage)) as conn:
        with pytest.raises(sqlite3.DatabaseError) as notadb:
            conn.execute("SELECT * FROM sqlite_schema")
        assert integrity.is_damage(notadb.value)
    assert issubclass(DatabaseDamaged, StoreError)
