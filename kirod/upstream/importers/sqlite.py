"""Uploaded SQLite stores (kiro-cli's data.sqlite3, opencode-kiro-auth's kiro.db), in memory."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from kirod.upstream.errors import CredentialImportError

SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_HEADER_SIZE = 100


@contextlib.contextmanager
def sqlite_copy(content: bytes, where: str) -> Iterator[sqlite3.Connection]:
    """A private, read-only in-memory copy of an uploaded SQLite file.

    The header's WAL flag is cleared in the copy because an in-memory database cannot open in WAL
    mode; the upload must therefore be a checkpointed copy (e.g. made with SQLite's backup API).
    """
    if not content.startswith(SQLITE_MAGIC):
        raise CredentialImportError(f"{where}: is not an SQLite database")
    if len(content) < _SQLITE_HEADER_SIZE:
        raise CredentialImportError(f"{where}: is truncated")
    image = bytearray(content)
    image[18:20] = b"\x01\x01"  # file format read/write versions: 1 = rollback journal, 2 = WAL
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(bytes(image))
        conn.execute("PRAGMA query_only = ON")
        yield conn
    except sqlite3.Error as exc:  # SQLite's own text names the fault, never row content
        raise CredentialImportError(
            f"{where}: cannot be read ({exc}); the file may be truncated or copied mid-write"
        ) from None
    finally:
        conn.close()


def table_names(conn: sqlite3.Connection) -> set[str]:
    return {
        str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
    }
