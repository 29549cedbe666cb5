"""One run of a client binary, as the client drivers (the `*_env` modules) make it: stdin
closed, output captured, in a process group of its own, bounded in time; and `Client`, what
every driver's class shares: a private HOME and working directory, and runs in them.

Imported by those modules (not a test module itself).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tests.clients import install


@dataclass
class Finished:
    """One finished client process."""

    argv: list[str]
    exit_code: int
    stdout: str
    stderr: str
    elapsed_s: float

    def describe(self) -> str:
        """The run for an assertion message."""
        return (
            f"`{' '.join(self.argv)}` exited {self.exit_code} after {self.elapsed_s:.1f} s\n"
            f"stdout: {self.stdout[-4000:]}\nstderr: {self.stderr[-3000:]}"
        )

    @property
    def events(self) -> list[dict[str, Any]]:
        """The stdout lines that are JSON objects, in order (clients' `--json` events)."""
        found = []
        for line in self.stdout.splitlines():
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                found.append(event)
        return found


F = TypeVar("F", bound=Finished)


def private_env(home: Path, *settings: Mapping[str, str]) -> dict[str, str]:
    """PATH, locale and terminal from this environment; HOME, TMPDIR and the XDG folders in
    `home`, so that a client reads no configuration of the machine's user and writes none; then
    the client's `settings`, in order."""
    keep = {"PATH", "LANG", "LC_ALL", "TERM", "TZ", "SYSTEMROOT"}
    env = {name: value for name, value in os.environ.items() if name in keep}
    tmp = home / "tmp"  # Claude Code leaves `claude-<uid>/fswatch-probe-*` folders in TMPDIR
    tmp.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
    )
    for more in settings:
        env.update(more)
    return env


def start(argv: list[str], cwd: Path, env: Mapping[str, str]) -> subprocess.Popen[str]:
    """`argv` started with stdin closed and its output piped, in its own process group (a
    terminal's foreground job: Ctrl-C goes to the group)."""
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def run(kind: type[F], argv: list[str], cwd: Path, env: Mapping[str, str], timeout_s: float) -> F:
    """Run `argv` to its end as `kind`; on a timeout, kill it and fail. Whatever it started in
    its process group (shells, helper processes) is killed when it ends."""
    started = time.monotonic()
    process = start(argv, cwd, env)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise AssertionError(
            f"TIMEOUT: `{' '.join(argv)}` did not finish in {timeout_s:.0f} s\n"
            f"stdout: {stdout[-3000:]}\nstderr: {stderr[-3000:]}"
        ) from None
    finally:
        kill_group(process)
    return kind(argv, process.returncode, stdout, stderr, time.monotonic() - started)


def kill_group(process: subprocess.Popen[str]) -> None:
    """Whatever is left of a run's process group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    if process.poll() is None:
        process.wait(timeout=10)


class Client:
    """A client binary in a private HOME and working directory (`root/home`, `root/work`), with
    the environment its driver gives it: what the drivers' classes share."""

    env: dict[str, str]
    """Made by each driver, from `home`."""

    def __init__(self, binary: install.Binary, root: Path) -> None:
        self.binary = binary
        self.home = root / "home"
        self.workdir = root / "work"
        self.home.mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(parents=True, exist_ok=True)

    def argv(self, command: Sequence[str]) -> list[str]:
        """A driver's `command` (the program's name first) with this client's binary."""
        return [str(self.binary.path), *command[1:]]

    def launch(self, kind: type[F], command: Sequence[str], timeout_s: float) -> F:
        """`command` run to its end in the working directory, as `kind` (see `run`)."""
        return run(kind, self.argv(command), self.workdir, self.env, timeout_s)
