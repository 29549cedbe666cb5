"""The start's integrity check at the operation log's size: what kirod pays before it serves.

    python -m bench.integrity [--rows 1000000] [--repeat 5] [--keep PATH]

Builds a database with kirod's own schema (`Database`) and `--rows` operation-log rows as
`bench.oplog` writes them (kirod's `OpLog`, realistic rows), checkpoints it, then times each way
of checking it in a fresh connection, `--repeat` times, and prints the medians: the check kirod
runs at start (`kirod.storage.integrity.quick`), kirod's whole opening of the store around it,
the check of the growing tables it runs right after the start (off the request path), SQLite's
`PRAGMA quick_check` of the whole file and its full `PRAGMA integrity_check` (`kiroctl db
check`). The page cache is the operating system's, warm
after the first run, as it is for a daemon restarted on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.oplog import Names, fill
from kirod.storage import integrity
from kirod.storage.db import Database

Check = Callable[[sqlite3.Connection, Path], object]


def _timed(check: Check, path: Path, repeat: int) -> list[float]:
    times: list[float] = []
    for _ in range(repeat):
        with contextlib.closing(sqlite3.connect(path)) as conn:
            started = time.perf_counter()
            check(conn, path)
            times.append(time.perf_counter() - started)
    return times


def _pragma(name: str) -> Check:
    def run(conn: sqlite3.Connection, path: Path) -> object:
        rows = conn.execute(f"PRAGMA {name}").fetchall()
        assert rows == [("ok",)], rows
        return rows

    return run


def _start_check(conn: sqlite3.Connection, path: Path) -> object:
    problem = integrity.quick(conn)
    assert problem is None, problem
    return problem


def _growing(conn: sqlite3.Connection, path: Path) -> object:
    problem = integrity.growing(conn)
    assert problem is None, problem
    return problem


def _open(conn: sqlite3.Connection, path: Path) -> object:
    """kirod's whole opening of the store: the start's check, the pragmas, no migration."""

    async def run() -> None:
        async with Database(path):
            pass

    asyncio.run(run())
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.integrity")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the database here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        path = args.keep or Path(scratch) / "kirod.db"
        if not path.exists():
            names = Names(accounts=("acct-1", "acct-2", "acct-3"), keys=("key-1", "key-2"))
            filled = asyncio.run(fill(path, args.rows, names, days=30, sampled=0))
            print(f"filled {args.rows} rows in {filled['seconds']:.0f} s")
        size = path.stat().st_size
        print(f"{path}: {size / 1e6:.0f} MB")
        for name, check in (
            ("start check (integrity.quick)", _start_check),
            ("kirod's opening of the store (Database)", _open),
            ("growing tables, after the start (integrity.growing)", _growing),
            ("PRAGMA quick_check", _pragma("quick_check")),
            ("PRAGMA integrity_check", _pragma("integrity_check")),
        ):
            times = _timed(check, path, args.repeat)
            print(
                f"{name}: median {statistics.median(times) * 1000:.0f} ms "
                f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}, n={len(times)})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
