"""Shared fixtures: short private directories (Unix socket paths are limited to ~100 bytes), and
the session-wide check that no daemon ever logged a secret."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


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
