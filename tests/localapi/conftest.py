"""The daemon the control API's modules call: a real one per module on the module's fake Kiro
(`fake`, tests/conftest.py), with no account yet. A module that needs another (accounts
imported, other settings) defines its own `daemon`, which wins over this one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import start_daemon


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    """A real daemon on the module's fake Kiro, with no account."""
    proc = start_daemon(module_tmp, fake)
    try:
        yield proc
    finally:
        proc.kill()
