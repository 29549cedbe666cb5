"""kiroctl's work on the database file itself, with no daemon: check, back up, recover.

`recover_file` needs the file to itself: it takes the daemon's instance lock (a kirod that starts
meanwhile waits, then finds the new file), works on a copy of the damaged file, builds the new
file with kirod's own migrations (so it has the current schema whatever the damaged one had),
and fills it table by table, accounts and API keys first: what a person cannot make again comes
before what kirod can. Rows come from SQLite's own `.recover` (the `sqlite3` command, which also
reads rows out of pages no b-tree reaches any more) when it is installed and works, else from
reading each table row by row, stepping over the pages SQLite finds damaged. The damaged file is
renamed beside the new one with the time in its name, never changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import portalocker
import portalocker.exceptions

from kirod.paths import StatePaths
from kirod.report_types import DatabaseBackup, DatabaseCheck
from kirod.storage import db, integrity

# Salvaged first, in this order; the other tables follow in the schema's order.
FIRST = ("accounts", "api_keys")
SQLITE_CLI = "sqlite3"
CLI_TIMEOUT_S = 3600.0
_SIBLINGS = ("-wal", "-shm")
_MAX_ROWID = 2**63 - 1


class Busy(Exception):
    """A kirod holds the instance lock: the file is not ours to recover."""


@dataclass
class Recovery:
    """What `recover_file` did: the new file, the kept damaged one, and the rows per table."""

    path: str
    kept: str
    method: str  # "sqlite3 .recover" or "row by row"
    rows: dict[str, int] = field(default_factory=dict)  # table → rows in the new file
    unreadable: list[str] = field(default_factory=list)  # tables the salvage could not read
    damaged: list[str] = field(default_factory=list)  # tables whose reading met damaged pages
    problems: list[str] = field(default_factory=list)  # the new file's full check: none

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "kept": self.kept,
            "method": self.method,
            "rows": self.rows,
            "unreadable": self.unreadable,
            "damaged": self.damaged,
            "problems": self.problems,
        }


def check_file(path: Path) -> DatabaseCheck:
    """SQLite's full integrity check of the file, read-only."""
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    started = time.monotonic()
    with contextlib.closing(db.read_only(path)) as conn:
        problems = integrity.full(conn)
    return DatabaseCheck(str(path), tuple(problems), round(time.monotonic() - started, 3), False)


def backup_file(path: Path, target: Path) -> DatabaseBackup:
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    started = time.monotonic()
    db.backup_file(path, target)
    seconds = round(time.monotonic() - started, 3)
    return DatabaseBackup(str(path), str(target), target.stat().st_size, seconds, daemon=False)


@contextlib.contextmanager
def _instance_lock(path: Path) -> Iterator[None]:
    """The daemon's own lock (kirod.daemon.lock takes it the same way), held while we work."""
    lock = StatePaths(path.parent).lock
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    with os.fdopen(fd, "r+") as handle:
        try:
            portalocker.lock(handle, portalocker.LOCK_EX | portalocker.LOCK_NB)
        except (portalocker.exceptions.LockException, OSError):
            raise Busy(f"a kirod holds {lock}") from None
        try:
            yield
        finally:
            portalocker.unlock(handle)


def recover_file(path: Path, *, cli: str | None = SQLITE_CLI) -> Recovery:
    """Salvage the damaged database at `path` into a new file in its place (see the module).

    `cli` is the `sqlite3` command to try first; None reads row by row only.
    """
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    with _instance_lock(path):
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        kept = path.with_name(f"{path.name}.damaged-{stamp}")
        fresh = path.with_name(f".{path.name}.recovered-{stamp}")
        work = path.with_name(f".{path.name}.recover-{stamp}")
        work.mkdir(mode=0o700)
        try:
            source = work / "damaged.db"
            for suffix in ("", "-wal"):  # the -shm is an index SQLite rebuilds
                if Path(f"{path}{suffix}").exists():
                    shutil.copyfile(f"{path}{suffix}", f"{source}{suffix}")
            asyncio.run(_create(fresh))
            method = "row by row"
            recovered = _sqlite_recover(cli, source, work / "recovered.db") if cli else None
            if recovered is not None:
                source, method = recovered, f"{SQLITE_CLI} .recover"
            recovery = Recovery(str(path), str(kept), method)
            _fill(source, fresh, recovery)
            with contextlib.closing(sqlite3.connect(fresh)) as conn:
                recovery.problems = integrity.full(conn)
            os.rename(path, kept)
            for suffix in _SIBLINGS:
                with contextlib.suppress(FileNotFoundError):
                    os.rename(f"{path}{suffix}", f"{kept}{suffix}")
            os.rename(fresh, path)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            for suffix in ("", *_SIBLINGS):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{fresh}{suffix}")
    return recovery


async def _create(path: Path) -> None:
    """An empty database with kirod's current schema (its own migrations, its file modes)."""
    async with db.Database(path):
        pass


def _sqlite_recover(cli: str, damaged: Path, target: Path) -> Path | None:
    """`sqlite3 DAMAGED .recover | sqlite3 TARGET`; None if the command is missing or fails
    (some builds lack what `.recover` needs and stop with "SQL logic error")."""
    if shutil.which(cli) is None:
        return None
    try:
        dump = subprocess.run(
            [cli, str(damaged), ".recover"], capture_output=True, timeout=CLI_TIMEOUT_S, check=False
        )
        if dump.returncode != 0 or b"error" in dump.stderr:
            return None
        load = subprocess.run(
            [cli, str(target)], input=dump.stdout, capture_output=True, timeout=CLI_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return target if load.returncode == 0 and target.exists() else None


def _fill(source: Path, fresh: Path, recovery: Recovery) -> None:
    with (
        contextlib.closing(sqlite3.connect(source, isolation_level=None)) as src,
        contextlib.closing(sqlite3.connect(fresh, isolation_level=None)) as dst,
    ):
        # Lenient reading of the copy: a file shorter than its header says is read as far as it
        # goes, instead of refused whole (SQLite's own reading of a writable schema).
        src.execute("PRAGMA writable_schema = ON")
        tables = [
            str(row[0])
            for row in dst.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        ordered = [t for t in FIRST if t in tables] + [t for t in tables if t not in FIRST]
        for table in ordered:
            columns = _columns(src, table)
            if columns is None:
                recovery.unreadable.append(table)
                continue
            wanted = [c for c in _columns(dst, table) or [] if c in columns]
            names = ", ".join(f'"{c}"' for c in wanted)
            marks = ", ".join("?" for _ in wanted)
            dst.execute("BEGIN")
            dst.execute(f'DELETE FROM "{table}"')  # noqa: S608 - kirod's own table names
            met: list[bool] = []
            for row in _rows(src, table, names, met):
                dst.execute(f'INSERT OR IGNORE INTO "{table}" ({names}) VALUES ({marks})', row)  # noqa: S608
            dst.execute("COMMIT")
            if met:
                recovery.damaged.append(table)
            recovery.rows[table] = int(dst.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])  # noqa: S608


def _columns(conn: sqlite3.Connection, table: str) -> list[str] | None:
    """The table's columns; None if the table is missing or its schema unreadable."""
    try:
        found = [str(row[1]) for row in conn.execute(f'PRAGMA table_info("{table}")')]
    except sqlite3.DatabaseError:
        return None
    return found or None


def _has_rowid(src: sqlite3.Connection, table: str) -> bool:
    try:
        src.execute(f'SELECT rowid FROM "{table}" LIMIT 0')  # noqa: S608
    except sqlite3.OperationalError:
        return False  # WITHOUT ROWID
    return True


def _rows(
    src: sqlite3.Connection, table: str, names: str, met: list[bool]
) -> Iterator[tuple[object, ...]]:
    """Every row SQLite can still read: in rowid order, stepping over damaged pages. `met` gets
    an entry for each damaged run stepped over."""
    if not _has_rowid(src, table):
        try:
            yield from src.execute(f'SELECT {names} FROM "{table}"')  # noqa: S608
        except sqlite3.DatabaseError as exc:
            if not integrity.is_damage(exc):
                raise
            met.append(True)
        return
    after: int | None = -_MAX_ROWID - 1
    select = f'SELECT rowid, {names} FROM "{table}" WHERE rowid > ? ORDER BY rowid'  # noqa: S608
    while after is not None:
        try:
            for row in src.execute(select, (after,)):
                after = int(row[0])
                yield tuple(row[1:])
            return
        except sqlite3.DatabaseError as exc:
            if not integrity.is_damage(exc):
                raise
            met.append(True)
            after = _past_damage(src, table, after)


def _first_at(src: sqlite3.Connection, table: str, rowid: int) -> int | None:
    """The first rowid ≥ `rowid`; -1 if the seek meets damage, None past the last row."""
    try:
        row = src.execute(
            f'SELECT rowid FROM "{table}" WHERE rowid >= ? ORDER BY rowid LIMIT 1',  # noqa: S608
            (rowid,),
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        if not integrity.is_damage(exc):
            raise
        return -1
    return None if row is None else int(row[0])


def _past_damage(src: sqlite3.Connection, table: str, after: int) -> int | None:
    """The rowid to read on after (exclusive), the damaged run after `after` stepped over;
    None when nothing readable follows. Steps double until a seek lands past the damage, then
    a binary search finds where readable rows begin again, so few sound rows are skipped."""
    low, step = after + 1, 1
    while True:
        probe = min(low + step, _MAX_ROWID)
        found = _first_at(src, table, probe)
        if found is None:
            return None
        if found >= 0:
            break
        if probe == _MAX_ROWID:
            return None
        step *= 2
    bad, good = low + step // 2 if step > 1 else low, probe  # seeks at `bad` meet damage
    while good - bad > 1:
        middle = (bad + good) // 2
        if _first_at(src, table, middle) == -1:
            bad = middle
        else:
            good = middle
    return good - 1
