"""Is the database file sound? SQLite's own checks, split by what they cost.

`PRAGMA quick_check` reads every page of the file: about 0.45-0.9 s on two cores at the 1M
operation-log rows retention allows (bench/README.md, "Issue 47: the integrity check at start"),
too long to make every start wait for. So the start checks, before anything writes:

- the file's length: SQLite refuses to read a file shorter than its header's page count (a
  truncated file fails here, whatever table it cut);
- the schema, and every table that does not grow with use (accounts, API keys, affinity, the
  rollups, windows, drift), each with its indexes: `PRAGMA quick_check(TABLE)`, milliseconds.

The tables that grow with use (`GROWING`) get the same check right after the start, off the
request path (`growing`); damage found there, or by any query later, makes the store read-only
(kirod.storage.db). `kiroctl db check` runs the full `PRAGMA integrity_check` (`full`).
"""

from __future__ import annotations

import sqlite3

# The tables whose size follows the traffic (retention bounds them: 1M log rows, 256 MB of stored
# responses, the cache's cap); every other table holds a handful of rows per account or key.
GROWING = ("oplog", "responses", "response_cache")

# SQLite's primary result codes for a damaged file: the low byte of any extended code.
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26


def is_damage(exc: BaseException) -> bool:
    """Whether `exc` is SQLite saying the file is damaged, not busy, full or missing."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


def _problems(conn: sqlite3.Connection, pragma: str) -> list[str]:
    rows = conn.execute(pragma).fetchall()
    found = [str(row[0]) for row in rows]
    return [] if found == ["ok"] else found


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
    return [str(row[0]) for row in rows]


def quick(conn: sqlite3.Connection) -> str | None:
    """The start's check of the file open on `conn`: None if sound, else what is wrong.

    Reads only; SQLite's errors that are damage become the answer, the others are raised.
    """
    try:
        problems = _problems(conn, "PRAGMA quick_check(sqlite_schema)")
        for table in _tables(conn):
            if problems:
                break
            if table not in GROWING:
                problems = _problems(conn, f'PRAGMA quick_check("{table}")')
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise
        return str(exc)
    return "; ".join(problems[:3]) or None


def growing(conn: sqlite3.Connection) -> str | None:
    """The same check of the tables that grow with use; None if sound, else what is wrong."""
    try:
        present = set(_tables(conn))
        for table in GROWING:
            if table in present and (problems := _problems(conn, f"PRAGMA quick_check({table})")):
                return "; ".join(problems[:3])
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise
        return str(exc)
    return None


def full(conn: sqlite3.Connection) -> list[str]:
    """SQLite's full `PRAGMA integrity_check`: every problem it reports (up to its 100)."""
    try:
        return _problems(conn, "PRAGMA integrity_check")
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise
        return [str(exc)]
