"""`kiroctl top` against a live daemon and the fake Kiro: one snapshot off a terminal, and the live
view on a pseudo-terminal, which q quits with the terminal's settings restored."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

KIROCTL = [sys.executable, "-c", "from kirod.cli.main import main; main()"]
REQUESTS = 3


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    """A daemon with one account labelled `topper`, which has served a few requests."""
    proc = start_daemon(module_tmp, fake)
    try:
        import_account(proc, fake.fake.issue_social_account())
        for _ in range(REQUESTS):
            send_message(proc)
        yield proc
    finally:
        proc.kill()


def send_message(proc: DaemonProcess) -> None:
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "hello"}],
    }
    request = urllib.request.Request(  # noqa: S310 - the daemon on loopback
        proc.base_url + "/v1/messages",
        data=json.dumps(body).encode(),
        headers={"authorization": f"Bearer {proc.api_key}", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
        assert answer.status == 200
        answer.read()


def kiroctl(daemon: DaemonProcess, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--socket", str(daemon.socket_path), *args])


def pooled(daemon: DaemonProcess) -> dict[str, Any]:
    [account] = daemon.client.request("GET", "/pool")["accounts"]
    assert isinstance(account, dict)
    return account


def account_label(daemon: DaemonProcess) -> str:
    label: str = pooled(daemon)["label"]
    return label


@pytest.mark.parametrize("args", [(), ("--once",)], ids=["plain", "once"])
def test_off_a_terminal_top_prints_one_snapshot(
    daemon: DaemonProcess, args: tuple[str, ...]
) -> None:
    result = kiroctl(daemon, "top", *args)
    assert result.exit_code == 0, result.output
    text = result.stdout
    account = pooled(daemon)
    assert f"kirod - healthy - 0/{account['capacity']} in flight - 0 queued" in text
    [row] = [line for line in text.splitlines() if line.startswith(account["label"] + " ")]
    cells = row[len(account["label"]) :].split()
    assert cells[:5] == ["active", f"0/{account['capacity']}", str(REQUESTS), "0", "-"], row
    assert f"requests   {REQUESTS}  (succeeded 100.0%)" in text
    assert "first byte p50 " in text
    assert re.search(r"tokens +\d+ in - [1-9]\d* out", text), text  # ASCII off a terminal
    assert re.search(r"credits +[\d.]+/min", text), text
    assert "errors     none" in text
    assert "q quits" not in text


def test_top_without_a_terminal_in_a_subprocess(daemon: DaemonProcess) -> None:
    done = subprocess.run(
        [*KIROCTL, "--socket", str(daemon.socket_path), "top"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert account_label(daemon).encode() in done.stdout
    assert f"requests   {REQUESTS}".encode() in done.stdout


def test_top_json(daemon: DaemonProcess) -> None:
    result = kiroctl(daemon, "top", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {
        "at",
        "health",
        "in_flight",
        "capacity",
        "queued",
        "window_s",
        "pool",
        "last_minute",
    }
    assert doc["at"] == pytest.approx(time.time(), abs=30)
    assert doc["health"] == "healthy"
    assert doc["in_flight"] == 0
    assert doc["queued"] == 0
    assert doc["window_s"] == 60
    [account] = doc["pool"]["accounts"]
    assert {"id", "label", "status", "in_flight", "capacity", "reason", "until"} <= set(account)
    assert doc["capacity"] == account["capacity"] > 0
    minute = doc["last_minute"]
    assert minute["requests"] == minute["succeeded"] == REQUESTS
    assert minute["since"] == pytest.approx(doc["at"] - 60, abs=1)
    assert minute["output_tokens"] > 0
    assert minute["accounts"][0]["key"] == account["id"]


def test_top_when_kirod_is_not_running(short_tmp: Path) -> None:
    result = CliRunner().invoke(cli, ["--socket", str(short_tmp / "none.sock"), "top", "--once"])
    assert result.exit_code == 3
    assert "kirod is not running" in result.stderr


Act = Callable[[subprocess.Popen[bytes], int, bytes], bool]


def on_a_terminal(socket: Path, act: Act, *args: str) -> tuple[int, str, bool]:
    """Run `kiroctl top` on a pseudo-terminal; call `act(proc, main, seen)` on what it has drawn
    until it returns True; then the exit code, the output, and whether the terminal's settings
    are as they were before."""
    main, child = pty.openpty()
    before = termios.tcgetattr(child)
    proc = subprocess.Popen(
        [*KIROCTL, "--socket", str(socket), "top", "--interval", "0.2", *args],
        stdin=child,
        stdout=child,
        stderr=child,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "160", "LINES": "40"},
    )
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None and not act(proc, main, seen):
            if select.select([main], [], [], 0.2)[0]:
                with contextlib.suppress(OSError):
                    seen += os.read(main, 65536)
        # Read on while it stops: a terminal nobody reads fills, and its last frame would block.
        stop_by = time.monotonic() + 15
        while proc.poll() is None and time.monotonic() < stop_by:
            if select.select([main], [], [], 0.2)[0]:
                with contextlib.suppress(OSError):
                    seen += os.read(main, 65536)
        code = proc.wait(1)
        with contextlib.suppress(OSError):  # EIO once nothing holds the terminal
            for _ in range(100):
                if not select.select([main], [], [], 0.2)[0]:
                    break
                chunk = os.read(main, 65536)
                if not chunk:
                    break
                seen += chunk
        restored = termios.tcgetattr(child) == before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        os.close(child)
        os.close(main)
    return code, seen.decode(errors="replace"), restored


def after_frames(
    count: int, marker: bytes, then: Callable[[subprocess.Popen[bytes], int], None]
) -> Act:
    """An `act` that does `then` once `marker` has been drawn `count` times."""

    def act(proc: subprocess.Popen[bytes], main: int, seen: bytes) -> bool:
        if seen.count(marker) < count:
            return False
        then(proc, main)
        return True

    return act


def press_q(proc: subprocess.Popen[bytes], main: int) -> None:
    os.write(main, b"q")


def test_live_view_redraws_and_q_quits(daemon: DaemonProcess) -> None:
    started = time.monotonic()
    code, seen, restored = on_a_terminal(daemon.socket_path, after_frames(2, b"in flight", press_q))
    assert code == 0, seen
    assert restored
    assert time.monotonic() - started < 20
    assert seen.count("in flight") >= 2
    assert account_label(daemon) in seen
    assert "q quits" in seen
    assert "\x1b[?25l" in seen  # the cursor hidden while live …
    assert "\x1b[?25h" in seen  # … and shown again


def test_live_view_ctrl_c_quits_and_sigterm_stops(daemon: DaemonProcess) -> None:
    code, seen, restored = on_a_terminal(
        daemon.socket_path,
        after_frames(2, b"in flight", lambda proc, _: proc.send_signal(signal.SIGINT)),
    )
    assert (code, restored) == (0, True), seen
    code, seen, restored = on_a_terminal(
        daemon.socket_path,
        after_frames(1, b"in flight", lambda proc, _: proc.send_signal(signal.SIGTERM)),
    )
    assert (code, restored) == (130, True), seen


def test_live_view_max_seconds(daemon: DaemonProcess) -> None:
    started = time.monotonic()
    code, seen, restored = on_a_terminal(
        daemon.socket_path, lambda proc, main, seen: False, "--max-seconds", "1"
    )
    assert (code, restored) == (0, True), seen
    assert time.monotonic() - started < 15
    assert seen.count("in flight") >= 2


def test_live_view_keeps_trying_while_kirod_is_away(short_tmp: Path) -> None:
    code, seen, restored = on_a_terminal(
        short_tmp / "none.sock", after_frames(2, b"retrying every", press_q)
    )
    assert (code, restored) == (0, True), seen
    assert "kirod is not running" in seen
    assert seen.count("retrying every 0.2s") >= 2
