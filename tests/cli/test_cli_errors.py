"""kiroctl's failures: exit codes, hints, and output without colour where colour does not belong."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from kirod.cli import exits
from kirod.cli.main import cli
from kirod.errors import ControlError, DaemonUnreachable
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

KIROCTL = [sys.executable, "-c", "from kirod.cli.main import main; main()"]
COLOUR = re.compile(r"\x1b\[[0-9;]*(3[0-7]|9[0-7]|38;)[0-9;]*m")


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake)
    for _ in range(2):  # two accounts with one label: references by label are ambiguous
        import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


def kiroctl(socket_path: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--socket", str(socket_path), *args])


@pytest.mark.parametrize(
    "args", [("status",), ("accounts", "list"), ("keys", "list"), ("models",), ("stats",)]
)
def test_a_stopped_daemon_exits_3_with_how_to_start_it(short_tmp: Path, args: tuple[str]) -> None:
    result = kiroctl(short_tmp / "kirod.sock", *args)
    assert result.exit_code == 3
    assert f"kirod is not running (no control socket at {short_tmp / 'kirod.sock'})" in (
        result.stderr
    )
    assert "hint: start it with `" in result.stderr
    assert "KIROD_SOCKET_PATH" in result.stderr
    assert result.stdout == ""


def test_status_json_says_down(short_tmp: Path) -> None:
    result = kiroctl(short_tmp / "kirod.sock", "status", "--json")
    assert result.exit_code == 3
    assert result.stdout.strip().startswith("{")
    assert '"health": "down"' in result.stdout


def test_version_works_without_a_daemon(short_tmp: Path) -> None:
    result = kiroctl(short_tmp / "kirod.sock", "version")
    assert result.exit_code == 0
    assert "kirod   not running" in result.stdout


def test_a_stale_socket_is_told_apart(short_tmp: Path) -> None:
    path = short_tmp / "kirod.sock"
    with socket.socket(socket.AF_UNIX) as stale:
        stale.bind(str(path))  # bound, never listening: what a crashed daemon leaves
    result = kiroctl(path, "status")
    assert result.exit_code == 3
    assert "the socket is stale" in result.stderr
    assert "may have crashed" in result.stderr


def test_bad_files_exit_1(daemon: DaemonProcess, tmp_path: Path) -> None:
    garbage = tmp_path / "notes.txt"
    garbage.write_text("hello")
    result = kiroctl(daemon.socket_path, "accounts", "import", str(garbage))
    assert result.exit_code == 1
    assert "unrecognised file" in result.stderr
    assert "hint: give Kiro IDE's kiro-auth-token.json" in result.stderr

    missing = kiroctl(daemon.socket_path, "accounts", "import", str(tmp_path / "nope.json"))
    assert missing.exit_code == 1
    assert f"no such file: {tmp_path / 'nope.json'}" in missing.stderr

    truncated = tmp_path / "data.sqlite3"
    truncated.write_bytes(b"SQLite format 3\x00" + b"\x00" * 40)
    broken = kiroctl(daemon.socket_path, "accounts", "import", str(truncated))
    assert broken.exit_code == 1
    assert f"cannot copy the SQLite store {truncated}" in broken.stderr

    directory = kiroctl(daemon.socket_path, "accounts", "import", str(tmp_path))
    assert directory.exit_code == 2


def test_unknown_and_ambiguous_references(daemon: DaemonProcess) -> None:
    unknown = kiroctl(daemon.socket_path, "accounts", "disable", "nobody")
    assert unknown.exit_code == 5
    assert "no account matches 'nobody'" in unknown.stderr
    ambiguous = kiroctl(daemon.socket_path, "accounts", "remove", "Google")
    assert ambiguous.exit_code == 2
    assert "matches several accounts" in ambiguous.stderr
    assert kiroctl(daemon.socket_path, "keys", "revoke", "nope").exit_code == 5
    clash = kiroctl(daemon.socket_path, "keys", "create", "default")
    assert clash.exit_code == 1
    assert "revoke the old key" in clash.stderr


def test_usage_errors_exit_2(daemon: DaemonProcess, tmp_path: Path) -> None:
    assert kiroctl(daemon.socket_path, "keys", "create", "x", "--rpm", "0").exit_code == 2
    assert kiroctl(daemon.socket_path, "completion", "powershell").exit_code == 2
    both = kiroctl(daemon.socket_path, "accounts", "import", "--api-key", str(tmp_path))
    assert both.exit_code == 2


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            yield from walk(sub, (*path, name))


@pytest.mark.parametrize("path", list(walk(cli)), ids=lambda path: " ".join(path) or "kiroctl")
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0
    assert "Usage: " in result.stdout


def run_kiroctl(socket_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    scrubbed = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return subprocess.run(
        [*KIROCTL, "--socket", str(socket_path), *args],
        env={**scrubbed, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_no_colour_off_a_terminal_or_with_no_color(daemon: DaemonProcess, short_tmp: Path) -> None:
    piped = run_kiroctl(daemon.socket_path, "status")
    assert piped.returncode == 0
    assert "\x1b[" not in piped.stdout + piped.stderr
    down = run_kiroctl(short_tmp / "kirod.sock", "status")
    assert down.returncode == 3
    assert "\x1b[" not in down.stderr

    forced = run_kiroctl(daemon.socket_path, "accounts", "list", FORCE_COLOR="1")
    assert COLOUR.search(forced.stdout)  # as on a terminal
    plain = run_kiroctl(daemon.socket_path, "accounts", "list", FORCE_COLOR="1", NO_COLOR="1")
    assert plain.returncode == 0
    assert not COLOUR.search(plain.stdout)


def test_the_start_hint_names_this_platforms_service_manager() -> None:
    assert "launchctl kickstart gui/" in exits.start_hint("darwin")
    assert exits.start_hint("freebsd14").startswith("start it with `kirod`")
    linux = exits.start_hint("linux")
    systemd = Path("/run/systemd/system").is_dir()
    assert ("systemctl --user start kirod.service" in linux) is systemd


def test_text_from_the_daemon_cannot_drive_the_terminal() -> None:
    from kirod.cli import render

    assert render.printable("a\x1b[2Jb\x07\r\x9b") == "a\\x1b[2Jb\\x07\\x0d\\x9b"
    assert render.shown("[bold]x\x1b") == "\\[bold]x\\x1b"


HINTED_CODES = ("invalid_import", "refresh_failed", "upstream_failed", "login_failed", "name_taken")


def _hinted_errors() -> Iterator[exits.CliError]:
    """Every error kiroctl reports with a hint: each control-API code it has one for, and each
    way the daemon can be unreachable."""
    for code in HINTED_CODES:
        yield exits.refused(ControlError(400, code, f"kirod refused it ({code})"))
    socket_path = Path("/run/user/1000/kirod/kirod.sock")
    for cause in (PermissionError(), ConnectionRefusedError(), TimeoutError(), FileNotFoundError()):
        unreachable = DaemonUnreachable("cannot reach kirod")
        unreachable.__cause__ = cause
        yield exits.unreachable(unreachable, socket_path)


def test_every_hint_names_commands_that_exist_and_repeats_nothing() -> None:
    commands = {" ".join(path) for path in walk(cli)}
    for error in _hinted_errors():
        assert error.hint, error.message
        sentences = [s.strip().lower() for s in re.split(r"[.;]", error.hint) if s.strip()]
        assert len(sentences) == len(set(sentences)), error.hint
        assert not any(s in error.message.lower() for s in sentences), error
        for named in re.findall(r"`kiroctl ([a-z -]+?)(?: --[a-z-]+)*`", error.hint):
            assert named in commands, f"{error.hint!r} names `kiroctl {named}`"
