"""The SQLite connection: private file modes, schema migrations and the single writer.

kirod keeps one aiosqlite connection. Every transaction takes one asyncio lock, so a reader never
sees another coroutine's half-done write on the shared connection. Writes that must survive the
caller's cancellation (a client disconnect mid-request) go through `run_write`, which runs them in
an owned task that `close` waits for. sqlite3/aiosqlite exceptions become `StoreError` here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiosqlite

from kirod.errors import StoreError
from kirod.paths import ensure_private_dir, private_umask
from kirod.storage import rollup
from kirod.tasks import TaskOwner

log = logging.getLogger(__name__)

T = TypeVar("T")
Params = Sequence[Any] | Mapping[str, Any]

# Schema migrations, applied in order; migration N brings `PRAGMA user_version` to N. Never edit a
# released entry: append a new one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE accounts (
        id            TEXT PRIMARY KEY,
        label         TEXT NOT NULL,
        auth_kind     TEXT NOT NULL,
        region        TEXT NOT NULL,
        auth_region   TEXT NOT NULL,
        profile_arn   TEXT,
        credentials   TEXT NOT NULL,
        status        TEXT NOT NULL DEFAULT 'active',
        status_reason TEXT,
        status_since  REAL,
        status_until  REAL,
        usage         TEXT,
        usage_at      REAL,
        generation    INTEGER NOT NULL DEFAULT 1,
        created_at    REAL NOT NULL,
        updated_at    REAL NOT NULL,
        removed_at    REAL
    );
    CREATE TABLE api_keys (
        id           TEXT PRIMARY KEY,
        name         TEXT NOT NULL,
        key_hash     TEXT NOT NULL UNIQUE,
        prefix       TEXT NOT NULL,
        created_at   REAL NOT NULL,
        last_used_at REAL,
        revoked_at   REAL
    );
    """,
    """
    CREATE TABLE responses (
        id           TEXT PRIMARY KEY,
        tenant       TEXT NOT NULL,
        created_at   REAL NOT NULL,
        model        TEXT NOT NULL,
        previous_id  TEXT,
        response     TEXT NOT NULL,
        input_items  TEXT NOT NULL,
        history      TEXT NOT NULL,
        size         INTEGER NOT NULL
    );
    CREATE INDEX responses_by_age ON responses (created_at);
    """,
    # 3: the account pool: health counters and last error, affinity bindings, operation log.
    """
    ALTER TABLE accounts ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE accounts ADD COLUMN auth_failures INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE accounts ADD COLUMN last_error TEXT;
    ALTER TABLE accounts ADD COLUMN last_error_at REAL;
    CREATE TABLE affinity (
        key_hash        TEXT PRIMARY KEY,
        account_id      TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        created_at      REAL NOT NULL,
        last_used_at    REAL NOT NULL
    );
    CREATE INDEX affinity_by_use ON affinity (last_used_at);
    CREATE TABLE oplog (
        id            INTEGER PRIMARY KEY,
        at            REAL NOT NULL,
        request_id    TEXT NOT NULL,
        key_id        TEXT NOT NULL,
        protocol      TEXT NOT NULL,
        model         TEXT NOT NULL,
        stream        INTEGER NOT NULL,
        account_id    TEXT,
        attempts      TEXT NOT NULL,
        stop_reason   TEXT,
        input_tokens  INTEGER,
        output_tokens INTEGER,
        credits       REAL,
        ttfb_ms       REAL,
        total_ms      REAL NOT NULL,
        status        INTEGER NOT NULL,
        error         TEXT,
        dropped       TEXT NOT NULL
    );
    CREATE INDEX oplog_by_time ON oplog (at);
    """,
    # 4: API-key scopes: model patterns and a request rate.
    """
    ALTER TABLE api_keys ADD COLUMN models TEXT;   -- JSON array of model patterns; NULL: any
    ALTER TABLE api_keys ADD COLUMN rpm INTEGER;   -- requests per minute; NULL: unlimited
    """,
    # 5: whether a cool-down is the breaker's for transient failures (panic mode may end it).
    """
    ALTER TABLE accounts ADD COLUMN status_transient INTEGER NOT NULL DEFAULT 0;
    """,
    # 6: tool calls Kiro cut off in a request, and the continuations kirod sent after them.
    """
    ALTER TABLE oplog ADD COLUMN truncations INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE oplog ADD COLUMN continuations INTEGER NOT NULL DEFAULT 0;
    """,
    # 7: an account's own proxy: NULL takes the global proxy_url, 'direct' none, else a URL.
    """
    ALTER TABLE accounts ADD COLUMN proxy_url TEXT;
    """,
    # 8: the extensions whose on_request changed a request, comma-separated in hook order.
    """
    ALTER TABLE oplog ADD COLUMN extensions TEXT NOT NULL DEFAULT '';
    """,
    # 9: the opt-in response cache: a key's permission, the cached answers, hits in the log.
    """
    ALTER TABLE api_keys ADD COLUMN cache INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE oplog ADD COLUMN cache TEXT;  -- 'hit' or 'miss'; NULL: the cache was not asked
    CREATE TABLE response_cache (
        key_id     TEXT NOT NULL,
        hash       TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        bytes      INTEGER NOT NULL,
        body       TEXT NOT NULL,
        PRIMARY KEY (key_id, hash)
    );
    CREATE INDEX response_cache_by_age ON response_cache (created_at);
    """,
    # 10: the operation log's rollups (storage/rollup.py), built here from the rows by the
    # statements that keep them as rows are written and dropped (should those ever change, a
    # later migration rebuilds them); and the index that finds a request's rows (`kiroctl trace
    # ID`), cheap to keep since request ids begin with their second (http/ingress.py).
    """
    CREATE TABLE oplog_rollup (
        span          INTEGER NOT NULL,  -- a slot's seconds: 86400, 3600 or 10
        slot          INTEGER NOT NULL,  -- the rows' whole second // span
        kind          TEXT NOT NULL,     -- total, account, model, key, error, status or ttfb
        value         TEXT NOT NULL,     -- the account's id, …; '' for the total; ttfb: a bucket
        requests      INTEGER NOT NULL,  -- ttfb: the rows of the bucket
        succeeded     INTEGER NOT NULL,
        input_tokens  INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        credits       REAL NOT NULL,
        truncated     INTEGER NOT NULL,
        recovered     INTEGER NOT NULL,
        PRIMARY KEY (span, slot, kind, value)
    ) WITHOUT ROWID;
    CREATE INDEX oplog_by_request ON oplog (request_id);
    """
    + rollup.fill(f"CAST(strftime('%s', 'now') AS INTEGER) - {rollup.RECENT.keep_s}"),
    # 11: the context window each account really has for a model, where it is not the listed
    # one (kirod.accounts.windows): a handful of rows, read whole at start.
    """
    CREATE TABLE model_windows (
        account_id TEXT NOT NULL,
        model      TEXT NOT NULL,     -- the Kiro id
        listed     INTEGER NOT NULL,  -- the catalog's maxInputTokens when it was learned
        learned    INTEGER NOT NULL,  -- the window: what Kiro's context percentage is of
        learned_at REAL NOT NULL,
        PRIMARY KEY (account_id, model)
    ) WITHOUT ROWID;
    """,
    # 12: answers Kiro ended cleanly without their tail frames (cut generations, sent on as
    # max_tokens: docs/KIRO-PROTOCOL.md §3.4).
    """
    ALTER TABLE oplog ADD COLUMN cuts INTEGER NOT NULL DEFAULT 0;
    """,
    # 13: what Kiro answered that kirod does not know, by shape (kirod.drift): a row per UTC day,
    # kind and shape, at most kirod.drift.MAX_SHAPES_PER_DAY shapes of a kind a day.
    """
    CREATE TABLE drift (
        day        TEXT NOT NULL,     -- YYYY-MM-DD, UTC
        kind       TEXT NOT NULL,
        place      TEXT NOT NULL,     -- the Kiro operation where it was met
        shape      TEXT NOT NULL,     -- JSON: [[fact, value], ...], never content
        count      INTEGER NOT NULL,
        first_seen REAL NOT NULL,
        last_seen  REAL NOT NULL,
        region     TEXT,
        version    TEXT NOT NULL,     -- the kirod that saw it last
        PRIMARY KEY (day, kind, place, shape)
    ) WITHOUT ROWID;
    """,
    # 14: the running totals that the stores bounded by size read instead of summing their table
    # (kirod.storage.totals), kept by triggers in the transaction of every write and started
    # here from the rows there are.
    """
    CREATE TABLE responses_total (
        one   INTEGER PRIMARY KEY CHECK (one = 1),
        rows  INTEGER NOT NULL,
        bytes INTEGER NOT NULL
    );
    INSERT INTO responses_total SELECT 1, count(*), COALESCE(SUM(size), 0) FROM responses;
    CREATE TRIGGER responses_total_insert AFTER INSERT ON responses BEGIN
        UPDATE responses_total SET rows = rows + 1, bytes = bytes + NEW.size;
    END;
    CREATE TRIGGER responses_total_delete AFTER DELETE ON responses BEGIN
        UPDATE responses_total SET rows = rows - 1, bytes = bytes - OLD.size;
    END;
    CREATE TRIGGER responses_total_update AFTER UPDATE OF size ON responses BEGIN
        UPDATE responses_total SET bytes = bytes - OLD.size + NEW.size;
    END;
    CREATE TABLE response_cache_total (
        one   INTEGER PRIMARY KEY CHECK (one = 1),
        rows  INTEGER NOT NULL,
        bytes INTEGER NOT NULL
    );
    INSERT INTO response_cache_total SELECT 1, count(*), COALESCE(SUM(bytes), 0)
        FROM response_cache;
    CREATE TRIGGER response_cache_total_insert AFTER INSERT ON response_cache BEGIN
        UPDATE response_cache_total SET rows = rows + 1, bytes = bytes + NEW.bytes;
    END;
    CREATE TRIGGER response_cache_total_delete AFTER DELETE ON response_cache BEGIN
        UPDATE response_cache_total SET rows = rows - 1, bytes = bytes - OLD.bytes;
    END;
    CREATE TRIGGER response_cache_total_update AFTER UPDATE OF bytes ON response_cache BEGIN
        UPDATE response_cache_total SET bytes = bytes - OLD.bytes + NEW.bytes;
    END;
    """,
)

_SIBLINGS = ("", "-wal", "-shm", "-journal")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class Database:
    """The kirod database file; use as `async with Database(path) as db:`."""

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = 5.0,
        migrations: Sequence[str] = MIGRATIONS,
    ) -> None:
        self._path = path
        self._busy_timeout_ms = int(busy_timeout * 1000)
        self._migrations = tuple(migrations)
        self._conn: aiosqlite.Connection | None = None
        self._closing = False
        self._lock = asyncio.Lock()
        self._writes = TaskOwner("store")

    @property
    def path(self) -> Path:
        return self._path

    async def __aenter__(self) -> Database:
        try:
            ensure_private_dir(self._path.parent)
        except OSError as exc:
            raise StoreError(f"cannot create {self._path.parent}: {_reason(exc)}") from exc
        # Files SQLite creates meanwhile (the db, and lazily -wal/-shm) start out 0600.
        with private_umask():
            conn = await self._open()
        self._conn = conn
        self._closing = False
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Wait for pending `run_write` tasks and open transactions, then close the file."""
        conn = self._conn
        if conn is None or self._closing:
            return
        self._closing = True
        await self._writes.join()
        async with self._lock:
            try:
                await conn.close()
            except sqlite3.Error as exc:
                log.warning("closing %s: %s", self._path, _reason(exc))
            finally:
                self._conn = None

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One `BEGIN IMMEDIATE` transaction: committed on success, rolled back on any error.

        Use the yielded connection directly; calling `read` inside would wait on this lock.
        """
        async with self._lock:
            conn = self._connection()
            try:
                await conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._error("cannot write to database", exc) from exc
            try:
                yield conn
                await conn.execute("COMMIT")
            except BaseException as exc:
                await self._rollback(conn)
                if isinstance(exc, sqlite3.Error):
                    raise self._error("cannot write to database", exc) from exc
                raise

    async def run_write(self, fn: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        """Run `fn` in a write transaction that the caller's cancellation cannot interrupt.

        If the caller is cancelled the write still finishes (or rolls back) on its own, and
        `close` waits for it.
        """
        self._connection()
        if self._closing:
            raise StoreError(f"database {self._path} is closing")

        async def transaction() -> T:
            async with self.write() as conn:
                return await fn(conn)

        task = self._writes.spawn(transaction(), name="write", awaited=True)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(self._log_orphaned_failure)
            raise

    async def execute(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """One write statement via `run_write`; returns its rows (for `RETURNING`)."""

        async def statement(conn: aiosqlite.Connection) -> list[sqlite3.Row]:
            # Fetch every row: a RETURNING statement is complete only once fully stepped.
            return list(await conn.execute_fetchall(sql, params))

        return await self.run_write(statement)

    async def read(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        async with self._lock:
            conn = self._connection()
            try:
                return list(await conn.execute_fetchall(sql, params))
            except sqlite3.Error as exc:
                raise self._error("cannot read database", exc) from exc

    async def read_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        rows = await self.read(sql, params)
        return rows[0] if rows else None

    async def checkpoint(self) -> None:
        """Fold the WAL into the file and truncate it, so overwritten secrets leave no copy."""
        async with self._lock:
            conn = self._connection()
            try:
                await conn.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise self._error("cannot checkpoint database", exc) from exc

    async def ping(self) -> bool:
        """Whether the file is open and readable; for readiness checks, so it never raises."""
        conn = self._conn
        if conn is None or self._closing:
            return False
        try:
            await conn.execute_fetchall("SELECT count(*) FROM sqlite_master")
        except (sqlite3.Error, ValueError):
            return False
        return True

    def _connection(self) -> aiosqlite.Connection:
        """The open connection; take it under the lock, so `close` cannot pull it away."""
        if self._conn is None:
            raise StoreError(f"database {self._path} is not open")
        return self._conn

    def _error(self, action: str, exc: BaseException) -> StoreError:
        return StoreError(f"{action} {self._path}: {_reason(exc)}")

    async def _open(self) -> aiosqlite.Connection:
        """Connect, configure, migrate and force -wal/-shm into existence, all under 0077."""
        try:
            self._tighten_modes()
            conn = await aiosqlite.connect(self._path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise self._error("cannot open database", exc) from exc
        try:
            conn.row_factory = sqlite3.Row
            try:
                await conn.execute("PRAGMA journal_mode=WAL")
                await conn.execute("PRAGMA synchronous=NORMAL")
                await conn.execute("PRAGMA foreign_keys=ON")
                # Zero freed space, so wiped credentials leave no copy in the file.
                await conn.execute("PRAGMA secure_delete=ON")
                await conn.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
                # Reading opens the WAL and its index, creating -wal/-shm under our umask.
                rows = await conn.execute_fetchall("PRAGMA user_version")
            except sqlite3.Error as exc:
                raise self._error("cannot open database", exc) from exc
            await self._migrate(conn, next(iter(rows))[0])
            try:
                self._tighten_modes()
            except OSError as exc:
                raise self._error("cannot secure database", exc) from exc
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                await conn.close()
            raise
        return conn

    async def _migrate(self, conn: aiosqlite.Connection, version: int) -> None:
        known = len(self._migrations)
        if version > known:
            raise StoreError(
                f"database {self._path} has schema version {version}, newer than this kirod "
                f"supports ({known}); upgrade kirod"
            )
        for target in range(version + 1, known + 1):
            script = self._migrations[target - 1]
            try:
                # executescript commits any open transaction first, so BEGIN goes in the script.
                await conn.executescript(
                    f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version = {target};\nCOMMIT;"
                )
            except sqlite3.Error as exc:
                await self._rollback(conn)
                raise StoreError(
                    f"cannot migrate database {self._path} to schema version {target}: "
                    f"{_reason(exc)}"
                ) from exc
            log.debug("migrated %s to schema version %d", self._path, target)

    async def _rollback(self, conn: aiosqlite.Connection) -> None:
        try:
            await conn.rollback()
        except (sqlite3.Error, ValueError) as exc:
            log.warning("rollback in %s failed: %s", self._path, _reason(exc))

    def _tighten_modes(self) -> None:
        if os.name != "posix":
            return
        for suffix in _SIBLINGS:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(f"{self._path}{suffix}", 0o600)

    def _log_orphaned_failure(self, task: asyncio.Task[Any]) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("a write whose caller went away failed: %s", exc)
