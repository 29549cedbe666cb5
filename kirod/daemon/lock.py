"""The single-instance lock, which fails closed.

An flock-style lock vanishes with its process, so a stale lock needs no clean-up. What flock cannot
see is the lock *file* being deleted or replaced while we hold it: another instance would then lock
a new inode and both would serve. `InstanceLock.intact()` compares the path's inode with the held
descriptor's, and the lifecycle stops the daemon when they differ.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from types import TracebackType
from typing import IO

import portalocker
import portalocker.exceptions

from kirod.errors import AlreadyRunning, StartupError

RETRY_INTERVAL_S = 1.0


class InstanceLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._file: IO[str] | None = None

    def _try_once(self) -> bool:
        old = os.umask(0o077)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StartupError(f"cannot open lock file {self.path}: {exc.strerror}") from None
        finally:
            os.umask(old)
        handle = os.fdopen(fd, "r+")
        try:
            portalocker.lock(handle, portalocker.LOCK_EX | portalocker.LOCK_NB)
        except (portalocker.exceptions.LockException, OSError):
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle
        self._fd = fd
        return True

    def holder_pid(self) -> str:
        try:
            text = self.path.read_text().strip()
        except OSError:
            return "unknown"
        return text if text.isdigit() else "unknown"

    async def acquire(self, timeout_s: float) -> None:
        """Take the lock, retrying each second for `timeout_s`: a predecessor may be draining."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self._try_once():
            if loop.time() >= deadline:
                raise AlreadyRunning(
                    f"another kirod (pid {self.holder_pid()}) holds the lock {self.path}; "
                    "stop it first (systemctl --user stop kirod)"
                )
            await asyncio.sleep(min(RETRY_INTERVAL_S, max(0.0, deadline - loop.time())))

    def intact(self) -> bool:
        """True while the lock path still names the inode we hold locked."""
        if self._fd is None:
            return False
        try:
            held = os.fstat(self._fd)
            current = os.stat(self.path)
        except OSError:
            return False
        return (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino)

    def release(self) -> None:
        handle, self._file, self._fd = self._file, None, None
        if handle is None:
            return
        with contextlib.suppress(OSError, portalocker.exceptions.LockException):
            portalocker.unlock(handle)
        with contextlib.suppress(OSError):
            handle.close()

    async def __aenter__(self) -> InstanceLock:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
