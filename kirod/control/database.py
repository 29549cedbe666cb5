"""`kiroctl db check` and `db backup` with kirod running: on the daemon's own file, each on a
connection of its own, so requests go on meanwhile (kirod.storage.db)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from kirod import log
from kirod.errors import ControlConflict, InvalidControlRequest, StoreError
from kirod.report_types import DatabaseBackup, DatabaseCheck
from kirod.storage.db import Database

logger = logging.getLogger(__name__)


class DatabaseService:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def check(self) -> DatabaseCheck:
        started = time.monotonic()
        try:
            problems = await self._db.check()
        except StoreError as exc:
            raise InvalidControlRequest(str(exc), code="check_failed") from None
        seconds = time.monotonic() - started
        log.event(logger, "database_checked", problems=len(problems), seconds=round(seconds, 3))
        return DatabaseCheck(str(self._db.path), tuple(problems), round(seconds, 3), daemon=True)

    async def backup(self, target: str) -> DatabaseBackup:
        path = Path(target)
        if not path.is_absolute():
            raise InvalidControlRequest("the backup's path must be absolute", code="bad_path")
        started = time.monotonic()
        try:
            await self._db.backup(path)
        except FileExistsError:
            raise ControlConflict("exists", f"{path} exists; kirod never overwrites it") from None
        except OSError as exc:
            raise InvalidControlRequest(
                f"cannot write {path}: {exc.strerror or exc}", code="bad_path"
            ) from None
        seconds = time.monotonic() - started
        size = await asyncio.to_thread(lambda: path.stat().st_size)
        log.event(logger, "database_backed_up", path=str(path), bytes=size)
        return DatabaseBackup(str(self._db.path), str(path), size, round(seconds, 3), daemon=True)
