from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiosqlite
import pytest

from kirod.errors import GenerationConflict, StoreError
from kirod.storage.db import MIGRATIONS, Database

INSERT_KEY = (
    "INSERT INTO api_keys (id, name, key_hash, prefix, created_at) VALUES ('k', 'n', 'h', 'p', 1.0)"
)


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "kirod" / "kirod.db"


@pytest.fixture
async def db(db_path: Path) -> AsyncIterator[Database]:
    async with Database(db_path) as database:
        yield database


def user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.usefixtures("permissive_umask")
async def test_files_are_private_despite_a_permissive_umask(db_path: Path) -> None:
    async with Database(db_path) as db:
        await db.execute(INSERT_KEY)
        assert mode(db_path.parent) == 0o700
        assert mode(db_path.parent.parent) == 0o700
        for suffix in ("", "-wal", "-shm"):
            assert mode(f"{db_path}{suffix}") == 0o600, suffix
    assert os.umask(0o022) == 0o022


@pytest.mark.usefixtures("permissive_umask")
async def test_existing_loose_files_are_tightened(db_path: Path) -> None:
    async with Database(db_path):
        pass
    os.chmod(db_path, 0o644)
    os.chmod(db_path.parent, 0o755)  # noqa: S103 - the loose mode is what is under test
    async with Database(db_path):
        assert mode(db_path) == 0o600
        assert mode(db_path.parent) == 0o700
        assert mode(f"{db_path}-wal") == 0o600
        assert mode(f"{db_path}-shm") == 0o600


async def test_empty_database_is_migrated(db: Database, db_path: Path) -> None:
    tables = await db.read("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    assert {"accounts", "api_keys", "responses"} <= {row["name"] for row in tables}
    assert user_version(db_path) == len(MIGRATIONS)
    mode_row = await db.read_one("PRAGMA journal_mode")
    assert mode_row is not None
    assert mode_row[0] == "wal"


async def test_reopen_keeps_data(db_path: Path) -> None:
    async with Database(db_path) as db, db.write() as conn:
        await conn.execute(INSERT_KEY)
    async with Database(db_path) as db:
        row = await db.read_one("SELECT name FROM api_keys WHERE id = ?", ("k",))
    assert row is not None
    assert row["name"] == "n"


async def test_newer_schema_is_refused(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="newer") as info:
        async with Database(db_path):
            pass
    assert str(db_path) in str(info.value)
    assert user_version(db_path) == 99


async def test_garbage_file_is_refused_by_name(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"this is certainly not an sqlite database\n" * 200)
    with pytest.raises(StoreError) as info:
        async with Database(db_path):
            pass
    message = str(info.value)
    assert str(db_path) in message
    assert "not a database" in message
    assert "Traceback" not in message
    assert "sqlite3." not in message


async def test_failed_migration_rolls_back(db_path: Path) -> None:
    broken = (*MIGRATIONS, "CREATE TABLE extra (a); INSERT INTO missing VALUES (1);")
    with pytest.raises(StoreError, match=f"schema version {len(broken)}") as info:
        async with Database(db_path, migrations=broken):
            pass
    assert str(db_path) in str(info.value)
    assert user_version(db_path) == len(MIGRATIONS)
    async with Database(db_path) as db:
        assert await db.read_one("SELECT 1 FROM sqlite_master WHERE name = 'extra'") is None


async def test_write_rolls_back_on_error(db: Database) -> None:
    async def failing_write() -> None:
        async with db.write() as conn:
            await conn.execute(INSERT_KEY)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await failing_write()
    assert await db.read("SELECT * FROM api_keys") == []


async def test_sqlite_errors_become_store_errors(db: Database, db_path: Path) -> None:
    await db.execute(INSERT_KEY)
    with pytest.raises(StoreError, match="UNIQUE") as info:
        await db.execute(INSERT_KEY)
    assert not isinstance(info.value, sqlite3.Error)
    assert str(db_path) in str(info.value)
    with pytest.raises(StoreError):
        await db.read("SELECT * FROM nowhere")

    async def bad_write() -> None:
        async with db.write() as conn:
            await conn.execute("UPDATE nowhere SET a = 1")

    with pytest.raises(StoreError):
        await bad_write()
    assert len(await db.read("SELECT * FROM api_keys")) == 1


async def test_run_write_returns_and_propagates(db: Database) -> None:
    async def insert(conn: aiosqlite.Connection) -> str:
        await conn.execute(INSERT_KEY)
        return "done"

    async def conflict(conn: aiosqlite.Connection) -> None:
        await conn.execute("DELETE FROM api_keys")
        raise GenerationConflict("lost")

    assert await db.run_write(insert) == "done"
    with pytest.raises(GenerationConflict):
        await db.run_write(conflict)
    assert len(await db.read("SELECT * FROM api_keys")) == 1


async def test_run_write_survives_caller_cancellation(db_path: Path) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow_insert(conn: aiosqlite.Connection) -> None:
        await conn.execute(INSERT_KEY)
        started.set()
        await release.wait()
        await conn.execute("UPDATE api_keys SET name = 'finished' WHERE id = 'k'")

    async with Database(db_path) as db:
        caller = asyncio.create_task(db.run_write(slow_insert))
        await started.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        asyncio.get_running_loop().call_later(0.05, release.set)
        # Leaving the block closes the database, which waits for the orphaned write.
    async with Database(db_path) as db:
        row = await db.read_one("SELECT name FROM api_keys WHERE id = 'k'")
    assert row is not None
    assert row["name"] == "finished"


async def test_orphaned_write_failure_is_logged(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def failing(conn: aiosqlite.Connection) -> None:
        started.set()
        await release.wait()
        await conn.execute("UPDATE nowhere SET a = 1")

    caller = asyncio.create_task(db.run_write(failing))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    release.set()
    await db.close()
    assert "a write whose caller went away failed" in caplog.text


async def test_close_races_cleanly_with_reads_and_writes(db: Database) -> None:
    results = await asyncio.gather(
        db.read("SELECT 1"),
        db.close(),
        db.read("SELECT 1"),
        db.execute("DELETE FROM api_keys"),
        return_exceptions=True,
    )
    assert all(r is None or isinstance(r, list | StoreError) for r in results), results
    with pytest.raises(StoreError):
        await db.execute("DELETE FROM api_keys")


async def test_ping_and_closed_database(db_path: Path) -> None:
    db = Database(db_path)
    assert await db.ping() is False
    async with db:
        assert await db.ping() is True
    assert await db.ping() is False
    with pytest.raises(StoreError, match="not open"):
        await db.read("SELECT 1")


async def test_checkpoint_truncates_the_wal(db: Database, db_path: Path) -> None:
    await db.execute(INSERT_KEY)
    assert os.path.getsize(f"{db_path}-wal") > 0
    await db.checkpoint()
    assert os.path.getsize(f"{db_path}-wal") == 0
