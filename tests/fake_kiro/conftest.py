"""A fake Kiro served on loopback for each test, and an HTTP session to talk to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from kirod.testing.fake_kiro import FakeKiro, running_fake


@pytest.fixture
async def served() -> AsyncIterator[tuple[FakeKiro, str]]:
    async with running_fake() as (fake, base_url):
        yield fake, base_url


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    timeout = aiohttp.ClientTimeout(total=20)
    async with aiohttp.ClientSession(timeout=timeout) as client:
        yield client
