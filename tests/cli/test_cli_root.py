"""kiroctl stays a thin client: it starts without importing the server stack."""

from __future__ import annotations

import subprocess
import sys

from kirod import __version__

SERVER_MODULES = ("aiohttp", "aiosqlite", "botocore", "kirod.http", "kirod.storage", "kirod.daemon")


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


def test_kiroctl_version() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from kirod.cli.main import main; main()", "--version"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0
    assert result.stdout.strip() == f"kiroctl, version {__version__}"
