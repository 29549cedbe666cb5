"""Fixtures for the client tests: the real client binaries (Claude Code, Codex, opencode, Kilo
Code, Cline, Continue, Copilot CLI, aider, llm, pi, and the Python of the agent SDKs' venvs; Gemini
CLI's is test_gemini_cli.py's, whose daemon serves the Gemini API), and a daemon they talk to.

The binaries come from `.cache/clients` (`make clients`). Not installed: every test that needs
one skips, naming why (the installer's recorded failure, or "run `make clients`"). Installed (or
named by `KIROD_TEST_CLAUDE_BIN` / `KIROD_TEST_CLIENT_VERSION`, `KIROD_TEST_CODEX_BIN` /
`KIROD_TEST_CODEX_VERSION`, `KIROD_TEST_OPENCODE_BIN` / `KIROD_TEST_OPENCODE_VERSION`, and for
the others `KIROD_TEST_<CLIENT>_BIN` / `KIROD_TEST_<CLIENT>_VERSION`, e.g.
`KIROD_TEST_KILO_CODE_BIN`) but broken: those tests fail.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import DEFAULT_MODELS, FABLE_MODELS, FakeKiro, ThreadedFake
from tests.clients import codex_env, install, opencode_env
from tests.clients.cc_env import Binary, ClaudeCode, locate
from tests.support.kiro_env import import_account, start_daemon

Note = Callable[[str], None]


def _binary(
    name: str, found: install.Located, matches: Callable[[str, str], bool], drove: Note
) -> Binary:
    """The located binary of client `name`, checked to run and, when a version is asked for,
    to report it (`matches(reported, asked)`); not located: skip, saying why. A binary that
    runs is noted for the session's summary."""
    if found.path is None:
        if found.requested:
            pytest.fail(found.why)
        pytest.skip(f"{name} client tests: {found.why}")
    try:
        version = install.binary_version(found.path)
    except (install.InstallError, OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"{found.path} is installed but does not run: {exc}")
    if found.version is not None and not matches(version, found.version):
        pytest.fail(f"{found.path} says {version!r}, expected {found.version}")
    # Some clients name themselves in `--version` ("aider 0.86.2", "GitHub Copilot CLI …").
    said = version.rstrip(".")
    shown = said if said.lower().startswith(name.lower()) else f"{name} {said}"
    drove(f"client tests drove {shown} ({found.path})")
    return Binary(found.path, version)


@pytest.fixture(scope="session")
def claude_binary(drove: Note) -> Binary:
    # "2.1.332 (Claude Code)"
    return _binary("Claude Code", locate(), lambda said, asked: said.startswith(f"{asked} "), drove)


@pytest.fixture(scope="session")
def codex_binary(drove: Note) -> Binary:
    # "codex-cli 0.171.0"
    def matches(said: str, asked: str) -> bool:
        return codex_env.reported_version(said) == asked

    return _binary("Codex", codex_env.locate(), matches, drove)


@pytest.fixture(scope="session")
def opencode_binary(drove: Note) -> Binary:
    # "1.18.34"
    return _binary("opencode", opencode_env.locate(), lambda said, asked: said == asked, drove)


def _pinned(client: str, name: str, drove: Note) -> Binary:
    """The binary of `client` (a key of versions.json), named by `KIROD_TEST_<CLIENT>_BIN` or
    `KIROD_TEST_<CLIENT>_VERSION` (`make clients-latest`), else its pin; its `--version` names
    the version."""
    found = install.locate(client, *install.env_names(client))
    return _binary(name, found, lambda said, asked: asked in said, drove)


@pytest.fixture(scope="session")
def kilo_binary(drove: Note) -> Binary:
    return _pinned("kilo-code", "Kilo Code", drove)


@pytest.fixture(scope="session")
def cline_binary(drove: Note) -> Binary:
    return _pinned("cline", "Cline", drove)


@pytest.fixture(scope="session")
def continue_binary(drove: Note) -> Binary:
    return _pinned("continue", "Continue", drove)


@pytest.fixture(scope="session")
def copilot_binary(drove: Note) -> Binary:
    return _pinned("copilot", "GitHub Copilot CLI", drove)


@pytest.fixture(scope="session")
def aider_binary(drove: Note) -> Binary:
    return _pinned("aider", "aider", drove)


@pytest.fixture(scope="session")
def llm_binary(drove: Note) -> Binary:
    return _pinned("llm", "llm", drove)


@pytest.fixture(scope="session")
def pi_binary(drove: Note) -> Binary:
    return _pinned("pi", "pi", drove)


@pytest.fixture(scope="session")
def agents_python(drove: Note) -> Binary:
    """The Python of the OpenAI Agents SDK's venv (it says `openai-agents 0.24.0`)."""
    return _pinned("openai-agents", "openai-agents", drove)


@pytest.fixture(scope="session")
def claude_sdk_python(drove: Note) -> Binary:
    """The Python of the Claude Agent SDK's venv (it says `claude-agent-sdk 0.2.190`)."""
    return _pinned("claude-agent-sdk", "claude-agent-sdk", drove)


@pytest.fixture(scope="module")
def fake() -> Iterator[ThreadedFake]:
    """The fake Kiro with a catalog that also offers Fable, Claude Code's fourth line."""
    with ThreadedFake(FakeKiro(models=DEFAULT_MODELS + FABLE_MODELS)) as server:
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
def chat_daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    """A second kirod at the same fake, with Chat Completions turned on."""
    proc = start_daemon(module_tmp / "chat", fake, {"KIROD_ENABLE_CHAT_COMPLETIONS": "1"})
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
    """opencode with a fresh HOME, configured as the guide says, at the module's daemon."""
    client = opencode_env.OpenCode(opencode_binary, api_key, short_tmp)
    client.configure(opencode_env.config(daemon.base_url))
    return client
