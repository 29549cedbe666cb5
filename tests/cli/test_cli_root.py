"""kiroctl stays a thin client: it starts without importing the server stack, and it imports a
command's module, rich and the control client only when they are used."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from kirod import __version__
from kirod.cli.main import cli

SERVER_MODULES = ("aiohttp", "aiosqlite", "botocore", "kirod.http", "kirod.storage", "kirod.daemon")
LAZY_MODULES = ("kirod.cli.commands", "kirod.localapi", "rich", "http.client", "email")


def imported_by(*args: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with `prefixes` that running `kiroctl ARGS` imports."""
    code = (
        "import sys\n"
        "from kirod.cli.main import cli\n"
        f"cli({list(args)!r}, prog_name='kiroctl', standalone_mode=False)\n"
        f"print(','.join(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    return [name for name in result.stdout.splitlines()[-1].split(",") if name]


def test_kiroctl_imports_no_server_modules() -> None:
    code = (
        "import sys, kirod.cli.main\n"
        f"bad = [m for m in sys.modules if m.startswith({SERVER_MODULES!r})]\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    assert result.stdout.strip() == ""


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_help_and_version_import_no_command_rich_or_client(args: tuple[str, ...]) -> None:
    assert imported_by(*args, prefixes=LAZY_MODULES) == []


def test_a_command_imports_its_own_module_only() -> None:
    imported = imported_by("status", "--help", prefixes=("kirod.cli.commands.",))
    assert imported == ["kirod.cli.commands.daemon"]


def test_json_output_needs_no_rich() -> None:
    args = ("--socket", "/nonexistent/kirod.sock", "version", "--json")
    assert imported_by(*args, prefixes=("rich",)) == []


@pytest.mark.parametrize("width", [40, 80, 120])
def test_the_help_lists_each_commands_own_summary(width: int) -> None:
    ctx = click.Context(cli, info_name="kiroctl")
    listed, loaded = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
    cli.format_commands(ctx, listed)
    click.Group.format_commands(cli, ctx, loaded)  # click's own listing loads every command
    assert listed.getvalue() == loaded.getvalue()


def test_kiroctl_version() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from kirod.cli.main import main; main()", "--version"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0
    assert result.stdout.strip() == f"kiroctl, version {__version__}"
