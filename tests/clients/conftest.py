"""Fixtures for the client tests: the real Claude Code, Codex and opencode binaries, and a
daemon they talk to.

The binaries come from `.cache/clients` (`make clients`). Not installed: every test that needs
one skips, naming why (the installer's recorded failure, or "run `make clients`"). Installed (or
named by `KIROD_TEST_CLAUDE_BIN` / `KIROD_TEST_CLIENT_VERSION`, `KIROD_TEST_CODEX_BIN` /
`KIROD_TEST_CODEX_VERSION`, `KIROD_TEST_OPENCODE_BIN` / `KIROD_TEST_OPENCODE_VERSION`) but broken:
those tests fail.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, ThreadedFake

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
import codex_env
import install
import opencode_env
from cc_env import Binary, ClaudeCode, locate
from kiro_env import import_account, start_daemon

_driven: list[Binary] = []
_codex_driven: list[codex_env.Binary] = []
_opencode_driven: list[opencode_env.Binary] = []


@pytest.fixture(scope="session")
def claude_binary() -> Binary:
    found = locate()
    if found.path is None:
        if found.requested:
            pytest.fail(found.why)
        pytest.skip(f"Claude Code client tests: {found.why}")
    try:
        version = install.binary_version(found.path)
    except (install.InstallError, OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"{found.path} is installed but does not run: {exc}")
    if found.version is not None and not version.startswith(f"{found.version} "):
        pytest.fail(f"{found.path} says {version!r}, expected {found.version}")
    binary = Binary(found.path, version)
    _driven.append(binary)
    return binary


@pytest.fixture(scope="session")
def codex_binary() -> codex_env.Binary:
    found = codex_env.locate()
    if found.path is None:
        if found.requested:
            pytest.fail(found.why)
        pytest.skip(f"Codex client tests: {found.why}")
    try:
        version = install.binary_version(found.path)
    except (install.InstallError, OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"{found.path} is installed but does not run: {exc}")
    if found.version is not None and codex_env.reported_version(version) != found.version:
        pytest.fail(f"{found.path} says {version!r}, expected {found.version}")
    binary = codex_env.Binary(found.path, version)
    _codex_driven.append(binary)
    return binary


@pytest.fixture(scope="session")
def opencode_binary() -> opencode_env.Binary:
    found = opencode_env.locate()
    if found.path is None:
        if found.requested:
            pytest.fail(found.why)
        pytest.skip(f"opencode client tests: {found.why}")
    try:
        version = install.binary_version(found.path)
    except (install.InstallError, OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"{found.path} is installed but does not run: {exc}")
    if found.version is not None and version != found.version:
        pytest.fail(f"{found.path} says {version!r}, expected {found.version}")
    binary = opencode_env.Binary(found.path, version)
    _opencode_driven.append(binary)
    return binary


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for binary in _driven:
        terminalreporter.write_line(
            f"client tests drove Claude Code {binary.version} ({binary.path})"
        )
    for codex in _codex_driven:
        terminalreporter.write_line(f"client tests drove Codex {codex.version} ({codex.path})")
    for opencode in _opencode_driven:
        terminalreporter.write_line(
            f"client tests drove opencode {opencode.version} ({opencode.path})"
        )


@pytest.fixture(scope="module")
def fake() -> Iterator[ThreadedFake]:
    with ThreadedFake() as server:
        yield server


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake)
    try:
        import_account(proc, fake.fake.issue_social_account())
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def api_key(daemon: DaemonProcess) -> Iterator[str]:
    """A key made for Claude Code through the control API (not the daemon's generated one)."""
    answer = daemon.client.request("POST", "/keys", {"name": "claude-code"})
    secret: str = answer["secret"]
    yield secret
    daemon.kill()
    assert secret not in daemon.log()


@pytest.fixture
def service(fake: ThreadedFake) -> FakeKiro:
    fake.fake.clear_scripts()
    fake.fake.clear_requests()
    fake.fake.default_script = None
    return fake.fake


@pytest.fixture
def claude(
    claude_binary: Binary, daemon: DaemonProcess, api_key: str, short_tmp: Path
) -> ClaudeCode:
    """Claude Code with a fresh HOME and working directory under a short path (it makes Unix
    sockets in its TMPDIR, and those paths are limited to about 100 bytes)."""
    return ClaudeCode(claude_binary, daemon.base_url, api_key, short_tmp)


@pytest.fixture
def opencode(
    opencode_binary: opencode_env.Binary, daemon: DaemonProcess, api_key: str, short_tmp: Path
) -> opencode_env.OpenCode:
    """opencode with a fresh HOME, configured as the README says, at the module's daemon."""
    client = opencode_env.OpenCode(opencode_binary, api_key, short_tmp)
    client.configure(opencode_env.config(daemon.base_url))
    return client
