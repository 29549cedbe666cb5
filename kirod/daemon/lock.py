"""The single-instance lock, which fails closed.

An flock-style lock vanishes with its process, so a stale lock needs no clean-up. What flock cannot
see is the lock *file* being deleted or replaced while we hold it: another instance would then lock
a new inode and both would serve. `InstanceLock.intact()` compares the path's inode with the held
descriptor's, and the lifecycle stops the daemon when they differ.

The holder writes its pid and the command that stops it (`how_to_stop`: it alone knows whether a
service manager runs it) into the lock file, so a second instance can name both at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO

import portalocker
import portalocker.exceptions

from kirod.errors import AlreadyRunning, StartupError
from kirod.paths import private_umask

RETRY_INTERVAL_S = 1.0


def systemd_unit(cgroup: str) -> tuple[str, bool] | None:
    """The service unit a process runs in, from its /proc/PID/cgroup, and whether it is one
    of a user's units (under user@UID.service); None outside a service unit."""
    for line in cgroup.splitlines():
        path = line.split(":", 2)[-1]
        leaf = path.rstrip("/").rsplit("/", 1)[-1]
        if leaf.endswith(".service") and not leaf.startswith("user@"):
            return leaf, "/user@" in path
    return None


def how_to_stop(
    pid: int, *, systemd: bool, cgroup: str, launchd_label: str | None, uid: int
) -> str:
    """The command that stops the process `pid` for good, for how it was started."""
    unit = systemd_unit(cgroup) if systemd else None
    if unit is not None:
        name, user = unit
        name = name.removesuffix(".service")
        return f"systemctl --user stop {name}" if user else f"sudo systemctl stop {name}"
    if launchd_label is not None:
        if launchd_label.startswith("homebrew.mxcl."):
            return f"brew services stop {launchd_label.removeprefix('homebrew.mxcl.')}"
        return f"launchctl bootout gui/{uid}/{launchd_label}"
    return f"kill {pid}"


class Holder:
    """Who holds the lock, as its lock file says."""

    def __init__(self, text: str) -> None:
        lines = text.splitlines()
        first = lines[0].strip() if lines else ""
        self.pid = first if first.isdigit() else "unknown"
        stop = lines[1].strip() if len(lines) > 1 else ""
        if not stop:  # an older kirod wrote only its pid
            stop = f"kill {self.pid}" if self.pid != "unknown" else "stop the other kirod"
        self.stop = stop


class InstanceLock:
    def __init__(self, path: Path, stop_command: str = "") -> None:
        self.path = path
        self._stop_command = stop_command
        self._fd: int | None = None
        self._file: IO[str] | None = None

    def _try_once(self) -> bool:
        try:
            with private_umask():
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StartupError(f"cannot open lock file {self.path}: {exc.strerror}") from None
        handle = os.fdopen(fd, "r+")
        try:
            portalocker.lock(handle, portalocker.LOCK_EX | portalocker.LOCK_NB)
        except (portalocker.exceptions.LockException, OSError):
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n{self._stop_command}\n")
        handle.flush()
        self._file = handle
        self._fd = fd
        return True

    def holder(self) -> Holder:
        try:
            text = self.path.read_text(errors="replace")[:4096]
        except OSError:
            text = ""
        return Holder(text)

    def holder_pid(self) -> str:
        return self.holder().pid

    async def acquire(
        self, timeout_s: float, waiting: Callable[[Holder], None] | None = None
    ) -> None:
        """Take the lock, retrying each second for `timeout_s`: a predecessor may be draining.

        `waiting` is told once, at the first refusal, who holds the lock.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        told = False
        while not self._try_once():
            holder = self.holder()
            if loop.time() >= deadline:
                raise AlreadyRunning(
                    f"another kirod (pid {holder.pid}) holds the lock {self.path}; "
                    f"stop it first: {holder.stop}"
                )
            if waiting is not None and not told:
                waiting(holder)
                told = True
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
