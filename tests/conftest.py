"""Shared fixtures: short private directories (Unix socket paths are limited to ~100 bytes), one
fake Kiro service per module (`fake`; a module that needs another defines its own), the
session-wide check that no daemon ever logged a secret, and the summary of the real programs the
session drove (client binaries, the browser), gathered from every pytest-xdist worker."""

from __future__ import annotations

import gc
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, ThreadedFake


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def fake() -> Iterator[ThreadedFake]:
    """The fake Kiro service on a thread of its own, for the module's daemons to point at."""
    with ThreadedFake() as server:
        yield server


@pytest.fixture(scope="session", autouse=True)
def no_secret_in_any_daemon_log() -> Iterator[None]:
    """Every token, refresh token and client secret any fake issued, and every daemon's API
    key, must be absent from every log line every daemon of the session wrote."""
    yield
    daemons = list(DaemonProcess.started)
    for daemon in daemons:
        daemon.kill()
    secrets = {secret for fake in FakeKiro.created for secret in fake.issued_secrets()}
    secrets |= {key for daemon in daemons if (key := daemon.known_api_key)}
    leaks = [
        (str(daemon.root), secret[:8] + "…")
        for daemon in daemons
        for secret in secrets
        if secret in daemon.log()
    ]
    assert not leaks, f"secrets found in daemon logs: {leaks}"


@pytest.fixture(scope="module")
def module_tmp() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


_DROVE: list[str] = []
"""One line per real program the session drove besides kirod, for the terminal summary."""


def _note(line: str) -> None:
    if line not in _DROVE:
        _DROVE.append(line)


@pytest.fixture(scope="session")
def drove() -> Callable[[str], None]:
    """Notes a line (`client tests drove …`) for the summary CI prints."""
    return _note


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # a pytest-xdist worker: the controller prints the summary
        output["drove"] = list(_DROVE)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    for line in getattr(node, "workeroutput", {}).get("drove", []):
        _note(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _DROVE:
        terminalreporter.write_line(line)


@pytest.fixture(scope="module", autouse=True)
def _collect_what_the_module_left() -> Iterator[None]:
    """A socket or transport a module leaves unclosed warns when it is collected, which without
    this happens in whichever test runs then (on another module's test, on some runs only); a
    collection at each module's end makes the warning fail the module that leaked it."""
    yield
    gc.collect()
