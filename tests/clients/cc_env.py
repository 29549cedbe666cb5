"""Driving the real Claude Code binary against a kirod: which binary, its environment, one run,
its outcome.

Imported by the client tests' conftest, test modules and capture.py (not a test module itself).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tests.clients import install, runs

CLIENT = "claude-code"
BIN_ENV = "KIROD_TEST_CLAUDE_BIN"
VERSION_ENV = "KIROD_TEST_CLIENT_VERSION"
RUN_TIMEOUT_S = 40.0
"""One `claude -p` run; the fake answers in milliseconds, so this only bounds a hang."""
OFFLINE = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
"""No traffic beyond the gateway."""

T = TypeVar("T")


Binary = install.Binary
Located = install.Located


def locate() -> Located:
    """The binary to drive (see `install.locate`)."""
    return install.locate(CLIENT, BIN_ENV, VERSION_ENV)


def client_env(home: Path, base_url: str, token: str) -> dict[str, str]:
    """The environment Claude Code runs in for tests and captures: a private HOME, kirod's (or
    the capture server's) URL and key, and no traffic beyond the gateway."""
    return runs.private_env(
        home, {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_AUTH_TOKEN": token}, OFFLINE
    )


def command(prompt: str, extra: Iterable[str] = ()) -> list[str]:
    return ["claude", "-p", prompt, "--output-format", "json", *extra]


def wait_until(check: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll `check` every 50 ms until it returns something truthy, for at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


class Run(runs.Finished):
    """One finished `claude` process."""

    def describe(self) -> str:
        """The run for an assertion message: the result's telling fields first."""
        try:
            document = json.loads(self.stdout.strip().splitlines()[-1])
            keys = ("is_error", "subtype", "terminal_reason", "api_error_status", "result")
            summary = {key: document.get(key) for key in keys if key in document}
        except (ValueError, IndexError, AttributeError):
            summary = {}
        return (
            f"`{' '.join(self.argv)}` exited {self.exit_code} after {self.elapsed_s:.1f} s\n"
            f"result: {json.dumps(summary)[:2000]}\n"
            f"stdout: {self.stdout[-3000:]}\nstderr: {self.stderr[-3000:]}"
        )

    @property
    def result(self) -> dict[str, Any]:
        """The `--output-format json` document (the last JSON line of stdout)."""
        lines = [line for line in self.stdout.splitlines() if line.startswith("{")]
        assert lines, f"no JSON result: {self.describe()}"
        document = json.loads(lines[-1])
        assert isinstance(document, dict), self.describe()
        return document

    def succeeded(self) -> dict[str, Any]:
        """The result of a run that must have worked: exit 0, no error, a success subtype."""
        document = self.result
        assert self.exit_code == 0, self.describe()
        assert document.get("is_error") is False, self.describe()
        assert document.get("subtype") == "success", self.describe()
        assert document.get("type") == "result", self.describe()
        return document


class ClaudeCode(runs.Client):
    """Claude Code in a private HOME and working directory, pointed at one base URL and key."""

    def __init__(self, binary: Binary, base_url: str, token: str, root: Path) -> None:
        super().__init__(binary, root)
        self.env = client_env(self.home, base_url, token)

    def run(self, prompt: str, *args: str, timeout_s: float = RUN_TIMEOUT_S) -> Run:
        return self.launch(Run, command(prompt, args), timeout_s)

    def start(self, prompt: str, *args: str) -> Started:
        """Start a run in its own process group (a terminal's foreground job), to interrupt it."""
        argv = self.argv(command(prompt, args))
        return Started(argv, runs.start(argv, self.workdir, self.env), time.monotonic())

    def transcript(self, session_id: str) -> list[dict[str, Any]]:
        """The session's entries as Claude Code stored them (`~/.claude/projects/*/<id>.jsonl`)."""
        files = list((self.home / ".claude" / "projects").glob(f"*/{session_id}.jsonl"))
        assert len(files) == 1, f"transcript of {session_id}: {files}"
        return [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]


@dataclass
class Started:
    argv: list[str]
    process: subprocess.Popen[str]
    started: float

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the whole foreground process group."""
        os.killpg(self.process.pid, signal.SIGINT)

    def finish(self, timeout_s: float) -> Run:
        try:
            stdout, stderr = self.process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            stdout, stderr = self.process.communicate()
            raise AssertionError(
                f"`{' '.join(self.argv)}` still ran {timeout_s} s after Ctrl-C; "
                f"stdout: {stdout[-2000:]!r} stderr: {stderr[-2000:]!r}"
            ) from None
        elapsed = time.monotonic() - self.started
        return Run(self.argv, self.process.returncode, stdout, stderr, elapsed)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def assistant_blocks(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every content block of every assistant message in a transcript."""
    blocks: list[dict[str, Any]] = []
    for entry in entries:
        message = entry.get("message")
        if entry.get("type") == "assistant" and isinstance(message, dict):
            content = message.get("content")
            blocks += [block for block in content or [] if isinstance(block, dict)]
    return blocks
