"""`python -m bench.instructions --check` once, so the stages it counts never rot."""

from __future__ import annotations

import pytest

from bench.instructions import STAGES
from tests.bench.bench_run import run_module


@pytest.mark.timeout(90)
def test_every_stage_runs() -> None:
    done = run_module("bench.instructions", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [f"{stage}: ran" for stage in STAGES]
