"""`make demo` as a user starts it, for the tests that paste the lines it prints into a shell.

Imported by the client test modules (not a test module itself).
"""

from __future__ import annotations

import contextlib
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

START_TIMEOUT_S = 60.0
PASTE_TIMEOUT_S = 120.0


@contextlib.contextmanager
def demo(*args: str) -> Iterator[str]:
    """`python -m kirod.testing.demo ARGS…` running; what it printed up to "Press Ctrl-C".
    Stopped with Ctrl-C (SIGINT) at the end, as its last line says."""
    with subprocess.Popen(
        [sys.executable, "-m", "kirod.testing.demo", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as process:
        assert process.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        stdout = process.stdout
        reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout])
        reader.start()
        try:
            shown = ""
            deadline = time.monotonic() + START_TIMEOUT_S
            while "Press Ctrl-C" not in shown:
                shown += lines.get(timeout=max(0.1, deadline - time.monotonic()))
            yield shown
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            finally:
                process.kill()
                reader.join(10)


def line_after(shown: str, heading: str) -> str:
    """The one command line printed under the heading line that starts with `heading`."""
    (line,) = re.findall(rf"^{re.escape(heading)}.*:\n  (.+)$", shown, re.MULTILINE)
    return line


def paste(line: str, env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`line` run by a shell, as if pasted into a terminal with `env`."""
    return subprocess.run(
        ["/bin/sh", "-c", line],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=PASTE_TIMEOUT_S,
        check=False,
    )
