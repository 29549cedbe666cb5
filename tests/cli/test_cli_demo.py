"""`make demo`: what it prints works, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEMO = [sys.executable, "-m", "kirod.testing.demo"]


@contextmanager
def demo() -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str]]]:
    """The demo running, with a thread queueing its output lines so every wait is bounded."""
    with subprocess.Popen(
        DEMO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as proc:
        assert proc.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        stdout = proc.stdout
        reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout])
        reader.start()
        try:
            yield proc, lines
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            reader.join(10)


def read_until(lines: queue.Queue[str], marker: str, limit_s: float = 30.0) -> str:
    seen = ""
    deadline = time.monotonic() + limit_s
    while marker not in seen:
        try:
            seen += lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no {marker!r} within {limit_s} s:\n{seen}") from None
    return seen


def test_the_demo_prints_commands_that_work_and_cleans_up() -> None:
    with demo() as (proc, lines):
        shown = read_until(lines, "Press Ctrl-C")
        commands = dict(re.findall(r"^(\w[\w ]*):\n  (.+)$", shown, re.MULTILINE))
        checks = [("Anthropic SDK", "You said: Hello, Kiro!"), ("kiroctl", "healthy")]
        if shutil.which("curl"):
            checks.append(("curl", '"text": "You said: Hello!"'))
        for name, expected in checks:
            result = subprocess.run(  # as the user would: pasted into a shell
                ["/bin/sh", "-c", commands[name]],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert expected in result.stdout, (name, result.stdout, result.stderr)
        root = Path(re.findall(r"KIROD_SOCKET_PATH=(\S+)", shown)[0]).parents[2]
        assert root.name.startswith("kirod-demo-")
        proc.send_signal(signal.SIGINT)
        read_until(lines, "Stopped")
        assert proc.wait(timeout=30) == 0
    assert not root.exists()
