"""Damaging a real SQLite file as a disk does: whole pages of one table overwritten with garbage
at their offsets (found with SQLite's `dbstat`), or the file cut short."""

from __future__ import annotations

import contextlib
import hashlib
import random
import sqlite3
from pathlib import Path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leaf_pages(path: Path, table: str) -> tuple[int, list[int]]:
    """The page size and the table's b-tree pages, leaves only (its root when it has no other)."""
    uri = f"file:{path}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        rows = conn.execute(
            "SELECT pageno, pagetype FROM dbstat WHERE name = ? ORDER BY pageno", (table,)
        ).fetchall()
    leaves = [int(page) for page, kind in rows if kind == "leaf"]
    return size, leaves or [int(rows[0][0])]


def overwrite(path: Path, page_size: int, pages: list[int], seed: int = 47) -> None:
    """Garbage over whole pages, at their offsets in the file."""
    garbage = random.Random(seed)
    with path.open("r+b") as handle:
        for page in pages:
            handle.seek((page - 1) * page_size)
            handle.write(garbage.randbytes(page_size))


def damage(path: Path, table: str, count: int = 4) -> list[int]:
    """Overwrite `count` leaf pages from the middle of `table` (all of them if it has fewer)."""
    page_size, leaves = leaf_pages(path, table)
    middle = max(0, len(leaves) // 2 - count // 2)
    chosen = leaves[middle : middle + count]
    overwrite(path, page_size, chosen)
    return chosen
