"""Running kiroctl in tests: in-process through click, and as a real process on a terminal."""

from __future__ import annotations

import base64
import contextlib
import os
import pty
import re
import select
import subprocess
import sys
import time
from typing import Any

from click.testing import CliRunner, Result

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import kiro_ide_token_file

KIROCTL = [sys.executable, "-c", "from kirod.cli.main import main; main()"]


def kiroctl(
    daemon: DaemonProcess, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> Result:
    return CliRunner().invoke(
        cli, ["--socket", str(daemon.socket_path), *args], env=env, input=stdin
    )


def ask_on_a_terminal(daemon: DaemonProcess, answer: str, *args: str) -> tuple[int, str]:
    """Run kiroctl with a pseudo-terminal as stdin, stdout and stderr; answer its question."""
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [*KIROCTL, "--socket", str(daemon.socket_path), *args],
        stdin=child,
        stdout=child,
        stderr=child,
        env={**os.environ, "NO_COLOR": "1"},
    )
    os.close(child)
    seen = b""
    deadline = time.monotonic() + 20
    while b"[y/N]" not in seen and time.monotonic() < deadline:
        if select.select([main], [], [], 0.5)[0]:
            seen += os.read(main, 4096)
    os.write(main, answer.encode() + b"\n")
    code = proc.wait(20)
    with contextlib.suppress(OSError):  # EIO once the child closed the terminal
        while select.select([main], [], [], 0.2)[0]:
            chunk = os.read(main, 4096)
            if not chunk:
                break
            seen += chunk
    os.close(main)
    return code, seen.decode(errors="replace")


def add_account(daemon: DaemonProcess, fake: ThreadedFake, plan: str, label: str) -> dict[str, Any]:
    """A new account on `plan`, as kirod lists it, with its id in the fake under `fake_id`."""
    tokens = fake.fake.issue_social_account(subscription=plan)
    content = base64.b64encode(kiro_ide_token_file(tokens)).decode()
    [imported] = daemon.client.import_accounts(content=content, label=label)
    return {**imported.account.to_json(), "fake_id": tokens.account_id}


def overage_shown(daemon: DaemonProcess, label: str) -> str:
    """The OVERAGE cell of `label`'s row in `accounts list`."""
    result = kiroctl(daemon, "accounts", "list")
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    label_at, start = header.index("LABEL"), header.index("OVERAGE")
    following = re.search(r"\S", header[start + len("OVERAGE") :])  # the next column's header
    stop = start + len("OVERAGE") + following.start() if following else None
    for line in rows:
        if line[label_at:].startswith(label + " "):
            return line[start:stop].strip()
    raise AssertionError(f"no row for {label}: {result.stdout}")
