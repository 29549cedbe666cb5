"""Runs one `python -m bench.<name>` benchmark with tiny settings, as the bench smoke tests do.

Imported by those tests (not a test module itself).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 80


def run_module(*args: str, timeout_s: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """`python -m ARGS` in its own interpreter, from the repository's root."""
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def run_bench(module: str, tmp: Path, *args: str) -> tuple[str, dict[str, Any]]:
    """The benchmark's printed table and its JSON results; it must exit 0."""
    out = tmp / "results.json"
    done = run_module(module, *args, "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    results: dict[str, Any] = json.loads(out.read_text())
    return done.stdout, results
