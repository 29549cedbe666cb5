"""Running kiroctl in tests: in-process through click, and as a real process on a terminal."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import subprocess
import sys
import time

from click.testing import CliRunner, Result

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess

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
