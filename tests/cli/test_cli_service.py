"""The systemd unit and launchd agent kiroctl installs, and the copies of them in contrib/."""

from __future__ import annotations

import plistlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from kirod.cli.commands.service import kirod_executable, launchd_plist, systemd_unit
from kirod.cli.main import cli

ROOT = Path(__file__).parents[2]
CONTRIB = ROOT / "contrib"
LINUX = sys.platform.startswith("linux")


def test_the_unit_asks_for_notify_watchdog_restarts_and_hardening() -> None:
    unit = systemd_unit("/usr/bin/kirod").splitlines()
    for line in (
        "Type=notify",
        "WatchdogSec=30",
        "Restart=on-failure",
        "RuntimeDirectory=kirod",
        "StateDirectory=kirod",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "PrivateTmp=yes",
        "ExecStart=/usr/bin/kirod",
    ):
        assert line in unit


def installed_man_tree(root: Path) -> Path:
    """The man pages laid out as the wheel installs them (pyproject's data-files)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for target, sources in pyproject["tool"]["setuptools"]["data-files"].items():
        if target.startswith("share/man/"):
            (root / target).mkdir(parents=True, exist_ok=True)
            for source in sources:
                shutil.copy(ROOT / source, root / target)
    return root / "share" / "man"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd is not installed")
@pytest.mark.skipif(shutil.which("man") is None, reason="systemd-analyze checks pages with man")
def test_systemd_accepts_the_unit_and_finds_its_documentation(tmp_path: Path) -> None:
    unit = tmp_path / "kirod.service"
    unit.write_text(systemd_unit(kirod_executable()))
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    result = subprocess.run(  # without --man=no: each Documentation=man:… page must resolve
        ["systemd-analyze", "--user", "verify", str(unit)],
        env={
            "XDG_RUNTIME_DIR": str(runtime),
            "HOME": str(tmp_path),
            "PATH": "/usr/bin:/bin",
            "MANPATH": str(installed_man_tree(tmp_path / "prefix")),
        },
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Unknown" not in result.stderr


def test_the_launchd_agent_parses() -> None:
    agent = plistlib.loads(launchd_plist("/opt/homebrew/bin/kirod", Path("/Users/me")))
    assert agent["Label"] == "dev.kirod"
    assert agent["ProgramArguments"] == ["/opt/homebrew/bin/kirod"]
    assert agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["StandardErrorPath"] == "/Users/me/Library/Logs/kirod.log"


def test_contrib_holds_the_same_files() -> None:
    assert (CONTRIB / "kirod.service").read_text() == systemd_unit("%h/.local/bin/kirod")
    assert (CONTRIB / "dev.kirod.plist").read_bytes() == launchd_plist(
        "/usr/local/bin/kirod", Path("/Users/YOU")
    )


@pytest.mark.skipif(not LINUX, reason="writes a systemd user unit")
def test_install_and_uninstall_the_unit(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    runner = CliRunner()
    printed = runner.invoke(cli, ["service", "install", "--print"], env=env)
    assert printed.exit_code == 0
    assert printed.stdout == systemd_unit(kirod_executable())

    installed = runner.invoke(cli, ["service", "install", "--no-start"], env=env)
    assert installed.exit_code == 0, installed.output
    unit = tmp_path / "systemd" / "user" / "kirod.service"
    assert unit.read_text() == printed.stdout

    removed = runner.invoke(cli, ["service", "uninstall", "--no-stop"], env=env)
    assert removed.exit_code == 0, removed.output
    assert not unit.exists()
    again = runner.invoke(cli, ["service", "uninstall", "--no-stop"], env=env)
    assert again.exit_code == 5


@pytest.mark.skipif(not LINUX, reason="systemd user units are Linux only")
def test_install_without_a_user_manager_says_what_to_do(tmp_path: Path) -> None:
    """No user bus (SSH without lingering, su, a container): the unit is written, and the error
    names `loginctl enable-linger` and the foreground `kirod` instead of "Failed to connect"."""
    runtime = tmp_path / "run"  # an empty runtime directory: no systemd/private, no bus
    runtime.mkdir(mode=0o700)
    env = {
        "XDG_CONFIG_HOME": str(tmp_path),
        "XDG_RUNTIME_DIR": str(runtime),
        "DBUS_SESSION_BUS_ADDRESS": None,
    }
    runner = CliRunner()
    installed = runner.invoke(cli, ["service", "install"], env=env)
    assert installed.exit_code == 1, installed.output
    assert (tmp_path / "systemd" / "user" / "kirod.service").exists()
    assert "loginctl enable-linger" in installed.stderr
    assert "`kirod`" in installed.stderr
    if shutil.which("systemctl"):
        assert "cannot reach the systemd user manager" in installed.stderr

    removed = runner.invoke(cli, ["service", "uninstall"], env=env)
    assert removed.exit_code == 1, removed.output
    assert "--no-stop" in removed.stderr
