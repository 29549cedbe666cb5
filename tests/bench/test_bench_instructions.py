"""`python -m bench.instructions --check` once, so the stages it counts never rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.instructions import STAGES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(90)
def test_every_stage_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.instructions", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=80,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [f"{stage}: ran" for stage in STAGES]
