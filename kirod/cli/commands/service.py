"""`kiroctl service install|uninstall`: run kirod as a per-user service (systemd or launchd).

The unit and the agent are rendered here, from one template each; `contrib/` holds the same
files rendered for the default install locations (a test keeps them in step).
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from kirod.cli import exits
from kirod.cli.context import App, pass_app
from kirod.paths import LAUNCHD_LABEL, SYSTEMD_UNIT, service_file

COMMAND_TIMEOUT_S = 30.0

SYSTEMD_TEMPLATE = """\
# kirod as a systemd user service: `kiroctl service install` writes this file, or copy it to
# ~/.config/systemd/user/ and run `systemctl --user enable --now kirod`.
[Unit]
Description=kirod: your Kiro accounts as local Anthropic and OpenAI APIs
Documentation=man:kirod(8) man:kiroctl(1) man:kirod.toml(5)

[Service]
Type=notify
NotifyAccess=main
ExecStart={exec_start}
Restart=on-failure
RestartSec=2
# kirod pings the watchdog at half this interval.
WatchdogSec=30
# Long enough for kirod's own drain (shutdown_drain_s, 10 s by default).
TimeoutStopSec=30
# Open files: kirod raises its soft limit to this and fits max_connections (two descriptors
# each, 128 kept back) within it: 4096 holds up to 1984 connections. A value above the user
# manager's own hard limit would keep the unit from starting.
LimitNOFILE=4096
# The control socket, $XDG_RUNTIME_DIR/kirod/kirod.sock, where kiroctl looks by default.
RuntimeDirectory=kirod
RuntimeDirectoryMode=0700
# The only places kirod writes: its state (database, lock) and its first API key.
StateDirectory=kirod
StateDirectoryMode=0700
ConfigurationDirectory=kirod
ConfigurationDirectoryMode=0700
Environment=KIROD_STATE_DIR=%S/kirod KIROD_API_KEY_FILE=%E/kirod/api-key
UMask=0077
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
SystemCallArchitectures=native

[Install]
WantedBy=default.target
"""


def systemd_unit(kirod: str) -> str:
    return SYSTEMD_TEMPLATE.format(exec_start=kirod)


def launchd_plist(kirod: str, home: Path) -> bytes:
    log = str(home / "Library" / "Logs" / "kirod.log")
    agent: dict[str, Any] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": [kirod],
        "RunAtLoad": True,
        # Restart after a crash, not after a clean stop (SIGTERM, `kiroctl shutdown`).
        "KeepAlive": {"SuccessfulExit": False},
        "StandardOutPath": log,
        "StandardErrorPath": log,
    }
    return plistlib.dumps(agent)


def kirod_executable() -> str:
    """The `kirod` installed beside this kiroctl (a venv, pipx or system install), else on PATH."""
    beside = Path(sys.executable).parent / "kirod"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("kirod")
    if found is None:
        raise exits.CliError(
            exits.FAILED,
            "cannot find the kirod executable",
            "install kirod, e.g. `pipx install .` in a clone of kirod",
        )
    return str(Path(found).resolve())


NO_USER_MANAGER_HINT = (
    "there is no systemd user manager for this session (typical over SSH, su, sudo, or in a "
    "container). Either enable one: `loginctl enable-linger $USER`, log in again (a new SSH "
    "session), then `systemctl --user daemon-reload && systemctl --user enable --now "
    f"{SYSTEMD_UNIT}`; or run kirod in the foreground: `kirod` (`kiroctl service install "
    "--no-start` only writes the unit)"
)

NO_BUS_UNINSTALL = (
    "there is no systemd user manager for this session, so nothing runs as the service here; "
    "`kiroctl service uninstall --no-stop` removes the unit file alone"
)


def _no_user_bus(stderr: str) -> bool:
    """systemctl's words when it cannot reach the user manager: "Failed to connect to bus: No
    medium found", "… to user scope bus via local transport: $DBUS_SESSION_BUS_ADDRESS and
    $XDG_RUNTIME_DIR not defined", "Failed to connect to bus: No such file or directory"."""
    return "failed to connect to" in stderr.lower() and "bus" in stderr.lower()


def _run(*command: str, no_bus_hint: str = NO_USER_MANAGER_HINT) -> None:
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        hint = no_bus_hint if command[0] == "systemctl" else exits.start_hint()
        raise exits.CliError(exits.FAILED, f"{command[0]} is not available here", hint) from None
    except subprocess.TimeoutExpired:
        raise exits.CliError(exits.FAILED, f"`{' '.join(command)}` did not finish") from None
    if result.returncode != 0:
        if command[0] == "systemctl" and _no_user_bus(result.stderr):
            raise exits.CliError(
                exits.FAILED,
                "cannot reach the systemd user manager "
                f"(`{' '.join(command)}`: {result.stderr.strip()})",
                no_bus_hint,
            )
        raise exits.CliError(
            exits.FAILED,
            f"`{' '.join(command)}` failed: {result.stderr.strip() or result.returncode}",
        )


def _target() -> tuple[Path, bool]:
    if sys.platform == "darwin":
        return service_file(os.environ, sys.platform), True
    if sys.platform.startswith("linux"):
        return service_file(os.environ, sys.platform), False
    raise exits.CliError(
        exits.FAILED,
        "kiroctl service knows systemd (Linux) and launchd (macOS) only",
        exits.start_hint(),
    )


@click.group()
def service() -> None:
    """Install kirod as a per-user service (systemd on Linux, launchd on macOS)."""


@service.command()
@click.option("--no-start", is_flag=True, help="Only write the file; do not enable or start it.")
@click.option("--print", "print_only", is_flag=True, help="Print the file instead of writing it.")
@pass_app
def install(app: App, no_start: bool, print_only: bool) -> None:
    """Write the service file for this user, then enable and start the service."""
    path, launchd = _target()
    kirod = kirod_executable()
    content = launchd_plist(kirod, Path.home()) if launchd else systemd_unit(kirod).encode()
    if print_only:
        click.echo(content.decode(), nl=False)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    app.out.print(f"Wrote {path}")
    if no_start:
        return
    if launchd:
        _run("launchctl", "bootstrap", f"gui/{os.getuid()}", str(path))
    else:
        _run("systemctl", "--user", "daemon-reload")
        _run("systemctl", "--user", "enable", "--now", SYSTEMD_UNIT)
    app.out.print("kirod is enabled and started; check it with `kiroctl status`.")


@service.command()
@click.option("--no-stop", is_flag=True, help="Only remove the file; leave a running kirod alone.")
@pass_app
def uninstall(app: App, no_stop: bool) -> None:
    """Stop and disable the service, then remove its file."""
    path, launchd = _target()
    if not path.exists():
        raise exits.CliError(exits.NOT_FOUND, f"no service file at {path}")
    if not no_stop:
        if launchd:
            _run("launchctl", "bootout", f"gui/{os.getuid()}/{LAUNCHD_LABEL}")
        else:
            _run(
                "systemctl",
                "--user",
                "disable",
                "--now",
                SYSTEMD_UNIT,
                no_bus_hint=NO_BUS_UNINSTALL,
            )
    path.unlink()
    if not no_stop and not launchd:
        _run("systemctl", "--user", "daemon-reload", no_bus_hint=NO_BUS_UNINSTALL)
    app.out.print(f"Removed {path}")
