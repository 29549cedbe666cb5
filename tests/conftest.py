"""Shared fixtures: short private directories (Unix socket paths are limited to ~100 bytes)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
