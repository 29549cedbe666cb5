"""Uploaded SQLite stores (kiro-cli's data.sqlite3, opencode-kiro-auth's kiro.db), in memory.

An upload is untrusted: a 12 KB file whose table has a generated column can make a plain
`SELECT *` compute half a gigabyte for seconds. So the copy is opened read-only with SQLite's
defensive limits (values of at most `MAX_VALUE_BYTES`, no attached databases, an untrusted
schema), every statement runs under the caller's deadline (a progress handler interrupts it),
and only the expected tables are read, each of which must be an ordinary table of plain stored
columns, read by naming the columns, a bounded number of rows at most. Nothing else in the file
is ever queried. The caller runs all of this in a worker thread.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kirod.upstream.errors import CredentialImportError

SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_HEADER_SIZE = 100

MAX_VALUE_BYTES = 1024 * 1024
"""Largest string or blob SQLite may hold or compute while reading an upload (a token is a few
kilobytes)."""
MAX_ROWS = 1000
"""Most rows read from one table (an opencode store holds one row per account)."""
_PROGRESS_OPCODES = 10_000  # how often, in SQLite VM instructions, the deadline is checked

# sqlite3.SQLITE_LIMIT_* and the value each is set to for an upload.
_LIMITS = {
    "SQLITE_LIMIT_LENGTH": MAX_VALUE_BYTES,
    "SQLITE_LIMIT_SQL_LENGTH": 100_000,
    "SQLITE_LIMIT_EXPR_DEPTH": 100,
    "SQLITE_LIMIT_COMPOUND_SELECT": 10,
    "SQLITE_LIMIT_FUNCTION_ARG": 8,
    "SQLITE_LIMIT_ATTACHED": 0,
    "SQLITE_LIMIT_LIKE_PATTERN_LENGTH": 100,
    "SQLITE_LIMIT_TRIGGER_DEPTH": 1,
}
_PRAGMAS = (
    "PRAGMA trusted_schema = OFF",  # no functions with side effects from the file's schema
    "PRAGMA cell_size_check = ON",  # a corrupt page is an error, not a wild read
    "PRAGMA mmap_size = 0",
    "PRAGMA query_only = ON",
)


@dataclass(frozen=True)
class ImportLimits:
    """How large an uploaded file may be, and how long reading it may take."""

    max_bytes: int = 32 * 1024 * 1024
    timeout_s: float = 5.0


class _Deadline:
    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._end = time.monotonic() + timeout_s
        self.expired = False

    def __call__(self) -> int:
        """SQLite's progress handler: non-zero interrupts the statement."""
        if time.monotonic() >= self._end:
            self.expired = True
        return int(self.expired)


def _apply_limits(conn: sqlite3.Connection) -> None:
    for name, value in _LIMITS.items():
        category = getattr(sqlite3, name, None)
        if category is not None:  # Python 3.11 names them all; be lenient about older SQLite
            conn.setlimit(category, value)


@contextlib.contextmanager
def sqlite_copy(
    content: bytes, where: str, limits: ImportLimits | None = None
) -> Iterator[sqlite3.Connection]:
    """A private, read-only, bounded in-memory copy of an uploaded SQLite file.

    The header's WAL flag is cleared in the copy because an in-memory database cannot open in WAL
    mode; the upload must therefore be a checkpointed copy (e.g. made with SQLite's backup API).
    """
    limits = limits or ImportLimits()
    if not content.startswith(SQLITE_MAGIC):
        raise CredentialImportError(f"{where}: is not an SQLite database")
    if len(content) < _SQLITE_HEADER_SIZE:
        raise CredentialImportError(f"{where}: is truncated")
    check_size(content, where, limits)
    image = bytearray(content)
    image[18:20] = b"\x01\x01"  # file format read/write versions: 1 = rollback journal, 2 = WAL
    deadline = _Deadline(limits.timeout_s)
    conn = sqlite3.connect(":memory:")
    try:
        _apply_limits(conn)
        conn.set_progress_handler(deadline, _PROGRESS_OPCODES)
        conn.deserialize(image)
        del image
        for pragma in _PRAGMAS:
            conn.execute(pragma)
        yield conn
    except sqlite3.Error as exc:  # SQLite's own text names the fault, never row content
        if deadline.expired:
            raise CredentialImportError(
                f"{where}: reading it took longer than {deadline.timeout_s:g} s "
                f"(import_timeout_s); is this really a credentials store?"
            ) from None
        raise CredentialImportError(
            f"{where}: cannot be read ({exc}); the file may be truncated or copied mid-write"
        ) from None
    finally:
        conn.close()


def check_size(content: bytes, where: str, limits: ImportLimits) -> None:
    if len(content) > limits.max_bytes:
        raise CredentialImportError(
            f"{where}: is {len(content)} bytes, more than the {limits.max_bytes} bytes an "
            f"import may be (import_max_bytes)"
        )


def table_names(conn: sqlite3.Connection) -> set[str]:
    return {
        str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
    }


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def plain_columns(conn: sqlite3.Connection, table: str, where: str) -> list[str]:
    """The columns of `table`, which must be an ordinary table of stored, visible columns.

    A view, a virtual table or a generated column would make reading compute what the file's
    author chose; kiro-cli and opencode-kiro-auth write none of them.
    """
    row = conn.execute(
        "SELECT type, sql FROM sqlite_master WHERE name = ? AND type IN ('table', 'view')",
        (table,),
    ).fetchone()
    if row is None:
        raise CredentialImportError(f"{where}: there is no {table} table")
    kind, sql = row
    if kind != "table" or not isinstance(sql, str) or sql.upper().startswith("CREATE VIRTUAL"):
        raise CredentialImportError(f"{where}: {table} is not an ordinary table")
    columns: list[str] = []
    for info in conn.execute(f"PRAGMA table_xinfo({_quoted(table)})"):
        name, hidden = str(info[1]), int(info[6])
        if hidden != 0:
            raise CredentialImportError(
                f"{where}: table {table} has a generated or hidden column ({name}); "
                f"only plain stored columns are read"
            )
        columns.append(name)
    return columns


def read_rows(
    conn: sqlite3.Connection,
    table: str,
    wanted: Iterable[str],
    where: str,
    *,
    keys: tuple[str, tuple[str, ...]] | None = None,
) -> list[dict[str, object]]:
    """The `wanted` columns that `table` has, of at most `MAX_ROWS` rows, as dicts.

    `keys` = (column, values) reads only the rows whose column holds one of the values.
    """
    present = plain_columns(conn, table, where)
    names = [name for name in wanted if name in present]
    if not names:
        raise CredentialImportError(f"{where}: table {table} has none of the expected columns")
    # Identifiers are the expected names only (quoted), values are bound.
    query = f"SELECT {', '.join(map(_quoted, names))} FROM {_quoted(table)}"  # noqa: S608
    params: tuple[str, ...] = ()
    if keys is not None:
        column, values = keys
        if column not in present:
            raise CredentialImportError(f"{where}: table {table} has no {column} column")
        query += f" WHERE {_quoted(column)} IN ({', '.join('?' * len(values))})"
        params = values
    rows = conn.execute(query + f" LIMIT {MAX_ROWS + 1}", params).fetchall()
    if len(rows) > MAX_ROWS:
        raise CredentialImportError(f"{where}: table {table} has more than {MAX_ROWS} rows")
    return [dict(zip(names, row, strict=True)) for row in rows]
