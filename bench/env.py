"""The processes a benchmark runs: the fake Kiro service and the real daemon, both on loopback.

The fake runs as `python -m kirod.testing.fake_kiro` in its own process and is driven through its
admin API (`RemoteFake`); the daemon runs as `python -m kirod` (`DaemonProcess`). The load
generator is the harness process itself, so each of the three has its own interpreter.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import Latency, RemoteFake

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
UNLIMITED_CREDITS = 1e12


@dataclass(frozen=True)
class FakeAccount:
    token_set: dict[str, Any]

    @property
    def access_token(self) -> str:
        return str(self.token_set["accessToken"])

    @property
    def account_id(self) -> str:
        return str(self.token_set["accountId"])

    def kiro_ide_token_file(self) -> bytes:
        """The account as Kiro IDE's `kiro-auth-token.json`, for the daemon's importer."""
        expires = time.strftime(
            "%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(float(self.token_set["expiresAt"]))
        )
        return json.dumps(
            {
                "accessToken": self.token_set["accessToken"],
                "refreshToken": self.token_set["refreshToken"],
                "profileArn": self.token_set["profileArn"],
                "expiresAt": expires,
                "authMethod": "social",
                "provider": "Google",
            }
        ).encode()


class AnnouncedProcess:
    """A child that prints one JSON line on stdout once it serves (`announced`); its stderr goes
    to `log_path`. A context manager; `stop` sends SIGTERM, then SIGKILL after STOP_TIMEOUT_S."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        log_path: Path,
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._name = name
        self._log = log_path.open("ab")
        self.proc = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        try:
            self.announced: dict[str, Any] = json.loads(self._first_line())
        except BaseException:
            self.stop()
            raise

    def _first_line(self) -> bytes:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
        if not ready:
            raise RuntimeError(
                f"the {self._name} did not announce itself within {START_TIMEOUT_S} s"
            )
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self._name} exited with {self.proc.wait(STOP_TIMEOUT_S)}")
        return line

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> int | None:
        """The exit status (None if it never ended)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(STOP_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
        return self.proc.returncode

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class FakeProcess(AnnouncedProcess):
    """`python -m kirod.testing.fake_kiro` with a latency profile, on a free loopback port."""

    def __init__(self, latency: Latency, log_path: Path) -> None:
        super().__init__(
            "fake",
            [
                sys.executable,
                "-m",
                "kirod.testing.fake_kiro",
                "--latency-first",
                str(latency.first_s),
                "--latency-between",
                str(latency.between_s),
            ],
            log_path,
            env={k: v for k, v in os.environ.items() if not k.startswith("KIROD_")},
        )
        self.url: str = self.announced["url"]
        self.first_account = FakeAccount(self.announced["account"])
        self.remote = RemoteFake(self.url)

    def issue_account(self) -> FakeAccount:
        return FakeAccount(self.remote.issue_account("social"))


def daemon_env(fake_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        "KIROD_KIRO_ENDPOINT": fake_url,
        "KIROD_KIRO_AUTH_ENDPOINT": fake_url,
        "KIROD_OIDC_ENDPOINT": fake_url,
    }
    env.update(extra or {})
    return env


def import_account(daemon: DaemonProcess, account: FakeAccount) -> None:
    content = base64.b64encode(account.kiro_ide_token_file()).decode()
    daemon.client.request("POST", "/accounts/import", {"content_b64": content})


class NotifyListener:
    """A systemd-style NOTIFY_SOCKET, to time a daemon's start to its READY=1."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "notify.sock"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(self.path))

    def wait_ready(self, timeout_s: float) -> float:
        """Block until a datagram with READY=1 arrives; return the monotonic time it did."""
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._sock], [], [], remaining)
            if ready:
                message = self._sock.recv(4096)
                if b"READY=1" in message.split(b"\n"):
                    return time.monotonic()
        raise TimeoutError(f"no READY=1 within {timeout_s} s")

    def close(self) -> None:
        self._sock.close()


class Bench:
    """The fake plus a daemon pointed at it with `accounts` imported; a context manager."""

    def __init__(
        self,
        *,
        latency: Latency,
        accounts: int = 4,
        daemon_extra_env: Mapping[str, str] | None = None,
        daemon_command: Sequence[str] | None = None,
        keep_root: bool = False,
    ) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="kb-"))
        self._latency = latency
        self._accounts = accounts
        self._extra = dict(daemon_extra_env or {})
        self._command = daemon_command
        self._keep_root = keep_root
        self.fake: FakeProcess | None = None
        self.daemon: DaemonProcess | None = None
        self.accounts: list[FakeAccount] = []

    def __enter__(self) -> Bench:
        try:
            self.fake = FakeProcess(self._latency, self.root / "fake.log")
            self.daemon = DaemonProcess(
                self.root / "daemon",
                env=daemon_env(self.fake.url, self._extra),
                command=self._command,
            )
            self.daemon.wait_ready(START_TIMEOUT_S)
            self.accounts = [self.fake.first_account]
            self.accounts += [self.fake.issue_account() for _ in range(self._accounts - 1)]
            for account in self.accounts:
                # A run sends tens of thousands of requests: more than a plan's monthly credits.
                self.fake.remote.set_usage(account.account_id, limit=UNLIMITED_CREDITS)
                import_account(self.daemon, account)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self.daemon is not None:
                try:
                    self.daemon.stop(timeout_s=STOP_TIMEOUT_S)
                except Exception:
                    self.daemon.kill()
        finally:
            if self.fake is not None:
                self.fake.stop()
            if not self._keep_root:
                shutil.rmtree(self.root, ignore_errors=True)

    @contextlib.contextmanager
    def daemon_stopped(self) -> Iterator[Path]:
        """The daemon stopped (SIGTERM, drained) while the block runs, then started again on the
        same state: for a benchmark that prepares the database (the path yielded) by itself."""
        daemon = self.daemon_process
        daemon.stop(timeout_s=STOP_TIMEOUT_S)
        yield daemon.state_dir / "kirod.db"
        self.daemon = DaemonProcess(daemon.root, env=daemon.env, command=self._command)
        self.daemon.wait_ready(START_TIMEOUT_S)

    @property
    def fake_process(self) -> FakeProcess:
        assert self.fake is not None
        return self.fake

    @property
    def daemon_process(self) -> DaemonProcess:
        assert self.daemon is not None
        return self.daemon
