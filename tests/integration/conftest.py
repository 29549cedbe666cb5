"""The fixtures most end-to-end modules share: one real daemon per module on the module's fake
Kiro (`fake`, tests/conftest.py), with one social account imported, and the official SDKs pointed
at it. A module that needs another daemon (several accounts, other settings) defines its own
`daemon`, which wins over this one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake)
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def service(fake: ThreadedFake) -> FakeKiro:
    """The module's fake, with no scripts queued and no requests recorded."""
    fake.fake.clear_scripts()
    fake.fake.clear_requests()
    return fake.fake


@pytest.fixture
def claude(daemon: DaemonProcess) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as client:
        yield client


@pytest.fixture
def gpt(daemon: DaemonProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=f"{daemon.base_url}/v1", api_key=daemon.api_key, max_retries=0
    ) as client:
        yield client
