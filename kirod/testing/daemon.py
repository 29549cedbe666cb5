"""Run the real kirod daemon as a subprocess in a private directory (tests, benchmarks, demos).

Everything the daemon writes (config, state, socket) lives under one root; the public listener
takes a free loopback port, which is read back from the control API's status.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from kirod.localapi.client import ControlError, DaemonUnreachable, LocalClient
from kirod.report_types import Status

# Variables of the surrounding environment that would change what the daemon does.
_SCRUBBED_PREFIXES = ("KIROD_", "XDG_", "NOTIFY_SOCKET", "WATCHDOG_")


def daemon_env(root: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env.update(
        XDG_CONFIG_HOME=str(root / "config"),
        XDG_STATE_HOME=str(root / "state"),
        XDG_RUNTIME_DIR=str(root / "run"),
        KIROD_PORT="0",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra or {})
    return env


class DaemonProcess:
    """A started daemon. `stop()` signals it and returns its exit code.

    `started` lists every daemon made in this process; each keeps its log and API key after its
    directory is gone, so a test session can scan everything every daemon wrote.
    """

    started: ClassVar[list[DaemonProcess]] = []

    def __init__(
        self,
        root: Path,
        *,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        self.root = root
        self.env = daemon_env(root, env)
        self.log_path = root / "kirod.log"
        self.socket_path = root / "run" / "kirod" / "kirod.sock"
        self.api_key_file = root / "config" / "kirod" / "api-key"
        self.state_dir = root / "state" / "kirod"
        base = list(command) if command is not None else [sys.executable, "-m", "kirod"]
        root.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [*base, *args],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        self.status: Status | None = None
        self._final_log: str | None = None
        self._api_key: str | None = None
        DaemonProcess.started.append(self)

    @property
    def client(self) -> LocalClient:
        return LocalClient(self.socket_path, timeout=5.0)

    def wait_ready(self, timeout_s: float = 20.0) -> Status:
        """Poll the control API until the daemon serves; fail fast if it exits."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kirod exited with {self.proc.returncode}:\n{self.log()}")
            try:
                status = self.client.status()
            except (DaemonUnreachable, ControlError):
                time.sleep(0.05)
                continue
            if status.state == "serving":
                self.status = status
                return status
            time.sleep(0.05)
        raise TimeoutError(f"kirod did not become ready in {timeout_s}s:\n{self.log()}")

    @property
    def address(self) -> str:
        if self.status is None:
            self.wait_ready()
        assert self.status is not None
        return next(item.address for item in self.status.listeners if item.kind == "tcp")

    @property
    def base_url(self) -> str:
        return f"http://{self.address}"

    @property
    def api_key(self) -> str:
        if self._api_key is None:
            self._api_key = self.api_key_file.read_text().strip()
        return self._api_key

    @property
    def known_api_key(self) -> str | None:
        """The generated key if it was ever read or can still be read."""
        if self._api_key is None and self.api_key_file.exists():
            self._api_key = self.api_key_file.read_text().strip()
        return self._api_key

    def log(self) -> str:
        if self._final_log is not None:
            return self._final_log
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _keep_log(self) -> None:
        """Once the process is gone, its log no longer changes: keep it past the directory."""
        if self.proc.poll() is not None and self._final_log is None:
            self._api_key = self.known_api_key  # read it while the file still exists
            self._final_log = self.log()

    def wait(self, timeout_s: float) -> int:
        code = self.proc.wait(timeout=timeout_s)
        self._keep_log()
        return code

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._keep_log()
