"""Collects the reliability suite's figures: each test module's passed and failed tests and
time, beside what the tests record themselves (`figures.FIGURES`); saves them at the end of the
session and, with `KIROD_RELIABILITY_REPORT=1` after a complete and green run, rewrites the
figures section of docs/RELIABILITY.md. Each module's `transcript` is made here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.reliability.figures import FIGURES, ROOT, SAVED, write_doc
from tests.reliability.reliability_env import Transcript

HERE = Path(__file__).parent
CHECKER = "test_figures_doc.py"  # checks the document the run rewrites: not a figure itself


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = ROOT / report.fspath  # relative to the rootdir, where pyproject.toml is
    if path.parent != HERE or path.name == CHECKER:
        return
    counted = report.when == "call" or report.outcome == "failed"
    FIGURES.count(
        "suite",
        path.name,
        passed=int(counted and report.passed),
        failed=int(counted and report.failed),
        seconds=report.duration,
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    suite = FIGURES.data["suite"]
    if not suite:
        return
    SAVED.parent.mkdir(parents=True, exist_ok=True)
    SAVED.write_text(json.dumps(FIGURES.data, indent=1, sort_keys=True) + "\n")
    complete = {path.name for path in HERE.glob("test_*.py")} - {CHECKER} <= set(suite)
    green = exitstatus == 0 and not any(row.get("failed") for row in suite.values())
    if os.environ.get("KIROD_RELIABILITY_REPORT") == "1" and complete and green:
        write_doc(FIGURES.data)


@pytest.fixture(scope="module")
def transcript() -> Transcript:
    """What the module's tests received from kirod, scanned for secrets by its daemon fixture."""
    return Transcript()
