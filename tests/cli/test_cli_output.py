"""kiroctl's output where it goes: plain ASCII off a terminal and under NO_COLOR or TERM=dumb, and
a quiet end when the reader goes away or the disk is full."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import kiro_ide_token_file, start_daemon

KIROCTL = [sys.executable, "-c", "from kirod.cli.main import main; main()"]


@pytest.fixture(scope="module")
def daemon(module_tmp: Path) -> Iterator[DaemonProcess]:
    with ThreadedFake() as fake:
        proc = start_daemon(module_tmp, fake)
        try:
            token = module_tmp / "kiro-auth-token.json"
            token.write_bytes(kiro_ide_token_file(fake.fake.issue_social_account()))
            args = ["--socket", str(proc.socket_path), "accounts", "import", str(token)]
            assert CliRunner().invoke(cli, args).exit_code == 0
            deadline = time.monotonic() + 15  # the usage (for the bars) is read just after
            while not proc.client.request("GET", "/accounts")["accounts"][0].get("usage"):
                assert time.monotonic() < deadline, "no usage read"
                time.sleep(0.05)
            yield proc
        finally:
            proc.kill()


def on_a_terminal(daemon: DaemonProcess, env: dict[str, str], *args: str) -> str:
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [*KIROCTL, "--socket", str(daemon.socket_path), *args],
        stdin=child,
        stdout=child,
        stderr=child,
        env={**os.environ, **env},
    )
    os.close(child)
    seen = b""
    deadline = time.monotonic() + 20
    while proc.poll() is None or select.select([main], [], [], 0)[0]:
        if time.monotonic() > deadline:
            break
        if select.select([main], [], [], 0.2)[0]:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    proc.wait(20)
    os.close(main)
    return seen.decode()


@pytest.mark.parametrize("command", [["status"], ["accounts", "list"]], ids=" ".join)
def test_piped_output_is_ascii(daemon: DaemonProcess, command: list[str]) -> None:
    result = CliRunner().invoke(cli, ["--socket", str(daemon.socket_path), *command])
    assert result.exit_code == 0, result.output
    assert result.stdout.isascii(), result.stdout
    assert "#" in result.stdout  # the credits bar, in ASCII
    assert "\x1b[" not in result.stdout


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}], ids=lambda e: str(e))
def test_no_color_or_a_dumb_terminal_gets_ascii(daemon: DaemonProcess, env: dict[str, str]) -> None:
    shown = on_a_terminal(daemon, env, "status")
    assert "CREDITS LEFT" in shown
    assert shown.isascii(), shown


def test_a_colour_terminal_gets_the_bars(daemon: DaemonProcess) -> None:
    shown = on_a_terminal(daemon, {"TERM": "xterm-256color", "NO_COLOR": ""}, "status")
    assert "█" in shown


@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["config"]], ids=" ".join)
def test_a_reader_that_left_ends_kiroctl_quietly(daemon: DaemonProcess, command: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run(
            [*KIROCTL, "--socket", str(daemon.socket_path), *command],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        os.close(write)
    assert result.returncode == 141
    assert result.stderr == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_full_disk_is_one_error_line(daemon: DaemonProcess) -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [*KIROCTL, "--socket", str(daemon.socket_path), "status"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
            check=False,
        )
    assert result.returncode == 1
    assert result.stderr == "kiroctl: error: cannot write the output: No space left on device\n"


def test_only_a_non_active_account_shows_its_reason_and_until() -> None:
    from kirod.cli import render
    from kirod.report_types import Account, PacedAccount

    now = time.time()
    named = {"id": "a1", "label": "x", "auth_kind": "social"}
    cooling = Account.from_json(
        {**named, "status": "cooling_down", "status_reason": "throttled", "status_until": now + 90}
    )
    # A cooling account's own reason comes first, whatever pacing says of it.
    why, until = render.why_and_until(cooling, PacedAccount("a1", now + 30))
    assert why == "throttled"
    assert until.startswith("in 1m (")  # relative, then the clock time
    assert until.endswith(")")
    over = Account.from_json(
        {**named, "status": "active", "status_reason": "cool-down over", "status_until": None}
    )
    assert render.why_and_until(over, None) == (render.DASH, render.DASH)
    why, until = render.why_and_until(over, PacedAccount("a1", now + 30))
    assert why == "paced"
    assert until.startswith("in 2")  # its next start, 30 s away
    held = PacedAccount("a1", now + 90, held_until=now + 90)
    assert render.why_and_until(over, held)[0] == "held: shared back-off"
