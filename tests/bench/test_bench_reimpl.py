"""`python -m bench.reimpl` once, so the re-implementation figures never rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(90)
def test_reimplementation_bench_measures_every_pair() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.reimpl", "--repeat", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=80,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.endswith("x |")]
    assert len(rows) == 7, done.stdout
