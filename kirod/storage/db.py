"""The SQLite connection: private file modes, schema migrations and the single writer.

kirod keeps one aiosqlite connection. Every transaction takes one asyncio lock, so a reader never
sees another coroutine's half-done write on the shared connection. Writes that must survive the
caller's cancellation (a client disconnect mid-request) go through `run_write`, which runs them in
an owned task that `close` waits for. sqlite3/aiosqlite exceptions become `StoreError` here, and
a write refused for want of space `StoreFull`.

A full disk is a condition of the machine, not of one write: the first write it refuses marks
the store full (`full`, for `/ready` and `kiroctl status`), the first that commits clears it. A
write no request exists for (a key's last use, the operation log, a cache) is best effort: its
caller hands the failure to `skipped`, which counts it and logs at most once a minute.

A damaged file (kirod.storage.integrity) is refused at open, untouched: `DatabaseDamaged`, whose
message names the file and `kiroctl db recover`. Damage met later, by any statement or by the
check of the growing tables after the start, makes the store read-only: every write is refused
with `DatabaseDamaged` without touching the file, reads go on where the pages they need are sound,
and `damaged` says why (for `/ready` and `kiroctl status`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import sqlite3
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiosqlite

from kirod import log as events
from kirod.errors import DatabaseDamaged, StoreError, StoreFull
from kirod.paths import ensure_private_dir, private_umask
from kirod.storage import integrity, rollup
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
    # 15: budgets (kirod.budgets): a key's credits a day and a month and tokens a minute; an
    # account's credit ceilings and whether kirod may spend into its overage; what a request
    # reserved; and the spend per key and per account per UTC day, kept by a trigger in the
    # transaction of every operation-log row (so it agrees with the rows at every commit) and
    # not dropped with them: the month's budget outlives the log's retention.
    """
    ALTER TABLE api_keys ADD COLUMN credits_per_day REAL;
    ALTER TABLE api_keys ADD COLUMN credits_per_month REAL;
    ALTER TABLE api_keys ADD COLUMN tokens_per_minute INTEGER;
    ALTER TABLE accounts ADD COLUMN budget_day REAL;
    ALTER TABLE accounts ADD COLUMN budget_month REAL;
    ALTER TABLE accounts ADD COLUMN allow_overage INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE oplog ADD COLUMN reserved_credits REAL;
    ALTER TABLE oplog ADD COLUMN reserved_tokens INTEGER;
    CREATE TABLE spend (
        scope         TEXT NOT NULL,     -- 'key' or 'account'
        id            TEXT NOT NULL,
        day           INTEGER NOT NULL,  -- the rows' whole second // 86400 (a UTC day)
        requests      INTEGER NOT NULL,
        input_tokens  INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        credits       REAL NOT NULL,
        PRIMARY KEY (scope, id, day)
    ) WITHOUT ROWID;
    INSERT INTO spend
        SELECT 'key', key_id, CAST(at AS INTEGER) / 86400, count(*),
               COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
               COALESCE(SUM(credits), 0)
        FROM oplog GROUP BY key_id, CAST(at AS INTEGER) / 86400;
    INSERT INTO spend
        SELECT 'account', account_id, CAST(at AS INTEGER) / 86400, count(*),
               COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
               COALESCE(SUM(credits), 0)
        FROM oplog WHERE account_id IS NOT NULL GROUP BY account_id, CAST(at AS INTEGER) / 86400;
    CREATE TRIGGER spend_of_key AFTER INSERT ON oplog BEGIN
        INSERT INTO spend VALUES ('key', NEW.key_id, CAST(NEW.at AS INTEGER) / 86400, 1,
            COALESCE(NEW.input_tokens, 0), COALESCE(NEW.output_tokens, 0),
            COALESCE(NEW.credits, 0))
        ON CONFLICT (scope, id, day) DO UPDATE SET
            requests = requests + 1,
            input_tokens = input_tokens + excluded.input_tokens,
            output_tokens = output_tokens + excluded.output_tokens,
            credits = credits + excluded.credits;
    END;
    CREATE TRIGGER spend_of_account AFTER INSERT ON oplog WHEN NEW.account_id IS NOT NULL BEGIN
        INSERT INTO spend VALUES ('account', NEW.account_id, CAST(NEW.at AS INTEGER) / 86400, 1,
            COALESCE(NEW.input_tokens, 0), COALESCE(NEW.output_tokens, 0),
            COALESCE(NEW.credits, 0))
        ON CONFLICT (scope, id, day) DO UPDATE SET
            requests = requests + 1,
            input_tokens = input_tokens + excluded.input_tokens,
            output_tokens = output_tokens + excluded.output_tokens,
            credits = credits + excluded.credits;
    END;
    """,
)

_SIBLINGS = ("", "-wal", "-shm", "-journal")
SKIPPED_LOG_INTERVAL_S = 60.0  # a full disk fails every best-effort write: one line a minute


def _no_room(exc: BaseException) -> bool:
    """Whether `exc` says the filesystem is full: SQLite's SQLITE_FULL, or the OS's ENOSPC."""
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


RECOVER_COMMAND = "kiroctl db recover"


def damaged_error(path: Path, reason: str, *, serving: bool = False) -> DatabaseDamaged:
    """The one message for a damaged file: which file, SQLite's words, and what to run."""
    if serving:
        what = "kirod stopped writing to it and serves what needs no write. Stop kirod and run"
    else:
        what = "kirod left it untouched and will not start on it. Run"
    return DatabaseDamaged(
        str(path),
        reason,
        f"the database {path} is damaged ({reason}); {what} `{RECOVER_COMMAND}`: it salvages "
        f"accounts and keys first, then the rest, into a new file and keeps the damaged one "
        f"beside it",
    )


def read_only(path: Path) -> sqlite3.Connection:
    """A connection that only reads `path`: it never checkpoints a log into a damaged file."""
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)


def _skipped_reason(exc: StoreError) -> str:
    """Why a best-effort write was lost, in a word where the store said the rest once already."""
    if isinstance(exc, StoreFull):
        return "disk full"
    if isinstance(exc, DatabaseDamaged):
        return "database damaged"  # its sentence was logged when the damage was found
    return str(exc)


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
        self._full = False
        self._free_when_full = 0  # the free bytes when a write last found no room
        self.skipped_writes = 0  # best-effort writes lost since start
        self._skipped_log = events.Throttle(log, SKIPPED_LOG_INTERVAL_S)
        self._damaged: DatabaseDamaged | None = None

    @property
    def path(self) -> Path:
        return self._path

    @property
    def full(self) -> bool:
        """Whether the last write failed for want of space and none has committed since."""
        return self._full

    def check_room(self) -> None:
        """Raise `StoreFull` if a write would find no room: its filesystem has no block left, or
        the store is `full` and nothing was freed since; for a request whose purpose is a write,
        before it is sent upstream (a write is tried as soon as anything was freed)."""
        free = self._free_bytes()
        if free == 0 or (self._full and free is not None and free <= self._free_when_full):
            raise StoreFull(str(self._path), "cannot write to database")

    def _free_bytes(self) -> int | None:
        """What the filesystem holding the store has free for us; None where it cannot say."""
        try:
            stats = os.statvfs(self._path.parent)
        except (OSError, AttributeError):  # no statvfs (Windows): the write will tell
            return None
        return stats.f_bavail * stats.f_frsize

    def skipped(self, what: str, exc: StoreError) -> None:
        """A best-effort write (`what`: key_last_use, oplog, …) failed: count it, and log it at
        most once a minute with the path and why."""
        self.skipped_writes += 1
        self._skipped_log.event(
            "store_write_skipped",
            level=logging.WARNING,
            what=what,
            path=str(self._path),
            reason=_skipped_reason(exc),
            skipped=self.skipped_writes,
        )

    @property
    def damaged(self) -> DatabaseDamaged | None:
        """Why the store went read-only while serving; None while it is sound."""
        return self._damaged

    def mark_damaged(self, reason: str) -> DatabaseDamaged:
        """Stop writing: from now on every write is refused. Logged once, at the first damage."""
        if self._damaged is None:
            self._damaged = damaged_error(self._path, reason, serving=True)
            log.error("%s", self._damaged)
        return self._damaged

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
            # The last connection to close folds the log into the file; a damaged file gets
            # nothing more, so a reader that cannot write stays open past ours (the log is kept
            # beside the file for `kiroctl db recover`).
            keeper = None if self._damaged is None else await asyncio.to_thread(self._reader)
            try:
                await conn.close()
            except sqlite3.Error as exc:
                log.warning("closing %s: %s", self._path, _reason(exc))
            finally:
                self._conn = None
                if keeper is not None:
                    await asyncio.to_thread(keeper.close)

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One `BEGIN IMMEDIATE` transaction: committed on success, rolled back on any error.

        Use the yielded connection directly; calling `read` inside would wait on this lock.
        """
        async with self._lock:
            conn = self._connection()
            if self._damaged is not None:
                raise self._damaged
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
            self._room_again()

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
            if self._damaged is not None:
                return  # the log stays beside the damaged file, for `kiroctl db recover`
            try:
                await conn.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise self._error("cannot checkpoint database", exc) from exc

    async def check(self) -> list[str]:
        """SQLite's full integrity check, on a connection of its own (writes go on meanwhile);
        damage found marks the store read-only. Returns the problems, none when sound."""
        self._connection()

        def run() -> list[str]:
            with contextlib.closing(read_only(self._path)) as conn:
                return integrity.full(conn)

        try:
            problems = await asyncio.to_thread(run)
        except sqlite3.Error as exc:
            raise self._error("cannot check database", exc) from exc
        if problems:
            self.mark_damaged(problems[0])
        return problems

    async def check_growing(self) -> None:
        """The start's check of the tables it left out (`integrity.GROWING`), off the request
        path: damage found there makes the store read-only, as damage met by a query does."""

        def run() -> str | None:
            with contextlib.closing(read_only(self._path)) as conn:
                return integrity.growing(conn)

        started = time.monotonic()
        try:
            problem = await asyncio.to_thread(run)
        except sqlite3.Error as exc:
            log.warning("cannot check %s: %s", self._path, _reason(exc))
            return
        if problem is not None:
            self.mark_damaged(problem)
        else:
            log.debug("%s: growing tables sound in %.3f s", self._path, time.monotonic() - started)

    async def backup(self, target: Path) -> None:
        """SQLite's online backup of the file into `target` (a new 0600 file), in one step: one
        read transaction, so the copy is one moment of the store while writes go on."""
        self._connection()
        await asyncio.to_thread(backup_file, self._path, target)

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

    def _reader(self) -> sqlite3.Connection | None:
        """A read-only connection holding the log open (see `close`); None if it cannot."""
        try:
            reader = read_only(self._path)
        except sqlite3.Error:
            return None
        try:
            reader.execute("SELECT 1 FROM sqlite_schema LIMIT 1").fetchall()
        except sqlite3.Error:
            reader.close()
            return None
        return reader

    def _connection(self) -> aiosqlite.Connection:
        """The open connection; take it under the lock, so `close` cannot pull it away."""
        if self._conn is None:
            raise StoreError(f"database {self._path} is not open")
        return self._conn

    def _error(self, action: str, exc: BaseException) -> StoreError:
        if _no_room(exc):
            self._free_when_full = self._free_bytes() or 0
            if not self._full:
                self._full = True
                events.event(
                    log, "disk_full", level=logging.ERROR, path=str(self._path), action=action
                )
            return StoreFull(str(self._path), action)
        if integrity.is_damage(exc):
            return self.mark_damaged(_reason(exc))
        return StoreError(f"{action} {self._path}: {_reason(exc)}")

    def _room_again(self) -> None:
        if self._full:
            self._full = False
            events.event(log, "disk_room_again", path=str(self._path), skipped=self.skipped_writes)

    async def _check_at_start(self) -> None:
        """Refuse a damaged file before anything writes to it (kirod.storage.integrity)."""
        if not self._path.exists() or self._path.stat().st_size == 0:
            return  # a new store

        def run() -> str | None:
            with contextlib.closing(read_only(self._path)) as conn:
                return integrity.quick(conn)

        started = time.monotonic()
        try:
            problem = await asyncio.to_thread(run)
        except sqlite3.Error as exc:
            raise self._opening_error(exc) from exc
        if problem is not None:
            raise damaged_error(self._path, problem)
        log.debug("%s: start check in %.3f s", self._path, time.monotonic() - started)

    def _opening_error(self, exc: BaseException) -> StoreError:
        if integrity.is_damage(exc):
            return damaged_error(self._path, _reason(exc))
        return StoreError(f"cannot open database {self._path}: {_reason(exc)}")

    async def _open(self) -> aiosqlite.Connection:
        """Connect, configure, migrate and force -wal/-shm into existence, all under 0077."""
        await self._check_at_start()
        try:
            self._tighten_modes()
            conn = await aiosqlite.connect(self._path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise self._opening_error(exc) from exc
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
                raise self._opening_error(exc) from exc
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
                if integrity.is_damage(exc):
                    raise damaged_error(self._path, _reason(exc)) from exc
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


def backup_file(source: Path, target: Path) -> None:
    """Copy the database at `source` into the new file `target` with SQLite's backup API.

    Written beside `target` under a temporary name and renamed when complete, so `target` is
    never half a copy; never overwrites (FileExistsError). Usable with kirod running or not.
    """
    if target.exists():
        raise FileExistsError(f"{target} exists")
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    try:
        # Made 0600 before a byte is in it; no journal, so SQLite creates no other file.
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        with (
            contextlib.closing(read_only(source)) as src,
            contextlib.closing(sqlite3.connect(partial, isolation_level=None)) as dst,
        ):
            dst.execute("PRAGMA journal_mode=OFF")
            src.backup(dst)  # pages=-1: one step, one read transaction
        os.link(partial, target)  # fails rather than replace a file made meanwhile
    finally:
        partial.unlink(missing_ok=True)
