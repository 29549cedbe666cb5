"""`kirod demo` / `make demo`: what it prints works, `--check` answers, Ctrl-C leaves nothing;
Chat Completions is off as in a real kirod, and on with `--chat-completions` or the user's own
`enable_chat_completions` (flag before `demo`, environment, config file); the Gemini API the same
with `--gemini`, which also writes Gemini CLI's settings."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai
import pytest

from kirod.testing import demo as demo_module

DEMO = [sys.executable, "-m", "kirod.testing.demo"]
KIROD = [sys.executable, "-m", "kirod"]
CLIENTS_PAGE = Path(__file__).parents[2] / "docs" / "guide" / "client-settings.md"


@pytest.fixture
def user_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user with no kirod settings: none of ours, an empty config home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KIROD_")}
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "config")}


@contextmanager
def demo(
    *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str]]]:
    """The demo running, with a thread queueing its output lines so every wait is bounded."""
    with subprocess.Popen(
        [*DEMO, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        stdout = proc.stdout
        reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout])
        reader.start()
        try:
            yield proc, lines
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            reader.join(10)


def read_until(lines: queue.Queue[str], marker: str, limit_s: float = 30.0) -> str:
    seen = ""
    deadline = time.monotonic() + limit_s
    while marker not in seen:
        try:
            seen += lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no {marker!r} within {limit_s} s:\n{seen}") from None
    return seen


def guide_codex_provider() -> dict[str, object]:
    """The `[model_providers.kirod]` table of docs/guide/client-settings.md, "Codex CLI"."""
    blocks = re.findall(r"```toml\n(.*?)```", CLIENTS_PAGE.read_text(), re.DOTALL)
    configs = [tomllib.loads(block) for block in blocks if "[model_providers.kirod]" in block]
    assert len(configs) == 1
    provider: dict[str, object] = configs[0]["model_providers"]["kirod"]
    return provider


def pasted(command: str) -> subprocess.CompletedProcess[str]:
    """`command` run as the user would: pasted into a shell."""
    return subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60, check=False
    )


def shown_commands(shown: str) -> dict[str, str]:
    """Each `Title:` line of the demo's output and the first indented line under it."""
    return dict(re.findall(r"^(\S[^\n]*):\n  (.+)$", shown, re.MULTILINE))


def test_the_demo_prints_commands_and_configs_that_work_and_cleans_up(
    user_env: dict[str, str],
) -> None:
    with demo(env=user_env) as (proc, lines):
        shown = read_until(lines, "Press Ctrl-C")
        commands = shown_commands(shown)
        base_url = re.findall(r"serves the fake Kiro service on (\S+) ", shown)[0]
        checks = [("Anthropic SDK", "You said: Hello, Kiro!"), ("kiroctl", "healthy")]
        if shutil.which("curl"):
            checks.append(("curl", '"text": "You said: Hello!"'))
        for name, expected in checks:
            result = pasted(commands[name])
            assert expected in result.stdout, (name, result.stdout, result.stderr)

        # The demo logs as a real kirod does: `kiroctl logs` shows each request's access line.
        logs = pasted(commands["kiroctl"].replace(" status", " logs"))
        assert re.search(r" request method=POST path=/v1/messages status=200 ", logs.stdout), (
            logs.stdout,
            logs.stderr,
        )
        tail = json.loads(pasted(commands["kiroctl"].replace(" status", " logs --json")).stdout)
        assert any("path=/v1/messages status=200" in line for line in tail["lines"])
        assert tail["next"] >= len(tail["lines"])

        # Chat Completions is off, as in a real kirod: the demo says how to turn it on, and the
        # 404 names the setting.
        off = next(title for title in commands if title.startswith("Chat Completions"))
        assert "is off" in off
        assert commands[off].startswith("kirod demo --chat-completions ")
        assert "KIROD_ENABLE_CHAT_COMPLETIONS=1" in commands[off]
        assert f"enable_chat_completions = true in {user_env['XDG_CONFIG_HOME']}" in commands[off]
        key = re.findall(r"\(API key (\S+)\)", shown)[0]
        with (
            openai.OpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0) as client,
            pytest.raises(openai.NotFoundError) as refused,
        ):
            client.chat.completions.create(
                model=demo_module.MODEL, messages=[{"role": "user", "content": "Hello!"}]
            )
        assert "enable_chat_completions = true" in str(refused.value)
        gemini_off = next(title for title in commands if title.startswith("The Gemini API"))
        assert "is off" in gemini_off
        assert commands[gemini_off].startswith("kirod demo --gemini ")
        assert f"enable_gemini_api = true in {user_env['XDG_CONFIG_HOME']}" in commands[gemini_off]

        # Codex, both model families, with the guide's provider at the demo's address.
        code_mode = commands["Codex with gpt-5.6-sol (code mode)"]
        claude = commands["Codex with a Claude model (claude-sonnet-4-6)"]
        assert "codex exec" in code_mode
        assert "-m claude-sonnet-4-6" in claude
        codex_home = Path(re.findall(r"CODEX_HOME=(\S+)", code_mode)[0])
        config = tomllib.loads((codex_home / "config.toml").read_text())
        assert config["model"] == "gpt-5.6-sol"
        assert config["model_provider"] == "kirod"
        expected = {**guide_codex_provider(), "base_url": f"{base_url}/v1"}
        assert config["model_providers"]["kirod"] == expected

        claude_code = next(v for k, v in commands.items() if k.startswith("Claude Code"))
        assert f"ANTHROPIC_BASE_URL={base_url} " in claude_code
        opencode_path = Path(re.findall(r"OPENCODE_CONFIG=(\S+)", shown)[0])
        opencode = json.loads(opencode_path.read_text())
        assert opencode["provider"]["kirod"]["options"]["baseURL"] == f"{base_url}/v1"
        fake_url = commands["The fake Kiro service (every answer echoes the prompt)"]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", fake_url)

        root = Path(re.findall(r"to stop both and remove (\S+)\.", shown)[0])
        assert root.name.startswith("kirod-demo-")
        assert codex_home.is_relative_to(root)
        proc.send_signal(signal.SIGINT)
        read_until(lines, "Stopped")
        assert proc.wait(timeout=30) == 0
    assert not root.exists()


def test_check_answers_one_request_and_stops(user_env: dict[str, str]) -> None:
    result = subprocess.run(
        [*DEMO, "--check"], capture_output=True, text=True, timeout=60, check=False, env=user_env
    )
    assert result.returncode == 0, result.stderr
    assert "ok through /v1/messages" in result.stdout
    assert "You said: Hello, Kiro!" in result.stdout


def test_chat_completions_in_the_demo_give_an_ide_its_settings(user_env: dict[str, str]) -> None:
    """`kirod demo --chat-completions`: what an OpenAI-compatible IDE provider asks for, which
    the official SDK then uses as the IDE would."""
    with demo("--chat-completions", env=user_env) as (proc, lines):
        shown = read_until(lines, "Press Ctrl-C")
        assert "Chat Completions (/v1/chat/completions" not in shown  # no "is off" hint
        ide = shown.split("OpenAI-compatible IDE provider", 1)[1].split("\n", 1)[1]
        settings = dict(re.findall(r"^  (base URL|API key|model) +(\S+)$", ide, re.MULTILINE))
        base_url = re.findall(r"serves the fake Kiro service on (\S+) ", shown)[0]
        assert settings["base URL"] == f"{base_url}/v1"
        assert settings["API key"] == re.findall(r"\(API key (\S+)\)", shown)[0]
        with openai.OpenAI(
            base_url=settings["base URL"], api_key=settings["API key"], max_retries=0
        ) as client:
            listed = [model.id for model in client.models.list()]
            assert settings["model"] in listed
            answer = client.chat.completions.create(
                model=settings["model"], messages=[{"role": "user", "content": "Hello, IDE!"}]
            )
        assert answer.choices[0].message.content == "You said: Hello, IDE!"
        if shutil.which("curl"):
            curl = pasted(shown_commands(shown)["curl (Chat Completions)"])
            assert '"content": "You said: Hello!"' in curl.stdout, (curl.stdout, curl.stderr)
        proc.send_signal(signal.SIGINT)
        read_until(lines, "Stopped")
        assert proc.wait(timeout=30) == 0


@pytest.mark.parametrize(
    "how",
    ["--chat-completions", "flag before demo", "environment", "config file"],
)
def test_check_answers_through_chat_completions_when_it_is_on(
    how: str, user_env: dict[str, str], tmp_path: Path
) -> None:
    """`kirod demo --chat-completions --check`, and the demo honouring the user's own setting."""
    command, env = [*KIROD, "demo", "--check", "--chat-completions"], user_env
    if how == "flag before demo":
        command = [*KIROD, "--enable-chat-completions", "demo", "--check"]
    elif how == "environment":
        command, env = [*KIROD, "demo", "--check"], {**env, "KIROD_ENABLE_CHAT_COMPLETIONS": "1"}
    elif how == "config file":
        config = Path(user_env["XDG_CONFIG_HOME"]) / "kirod" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text("enable_chat_completions = true\n")
        command = [*KIROD, "demo", "--check"]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=60, check=False, env=env
    )
    assert result.returncode == 0, result.stderr
    assert "ok through /v1/chat/completions" in result.stdout
    assert "You said: Hello, Kiro!" in result.stdout


def guide_gemini_settings() -> dict[str, object]:
    """The `~/.gemini/settings.json` block of docs/guide/client-settings.md, "Gemini CLI"."""
    section = CLIENTS_PAGE.read_text().split("\n## Gemini CLI\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```json\n(.*?)```", section, re.DOTALL)
    settings: dict[str, object] = json.loads(block)
    return settings


def test_the_gemini_demo_writes_the_guides_settings_for_its_models_window(
    user_env: dict[str, str],
) -> None:
    """`kirod demo --gemini`: Gemini CLI's settings as the guide gives them, with the threshold
    fitted to the window kirod's Gemini API reports for the model (the fake lists 1,000,000
    tokens for it: Gemini CLI's own 0.5), in the folder its command names."""
    with demo("--gemini", env=user_env) as (proc, lines):
        shown = read_until(lines, "Press Ctrl-C")
        assert "The Gemini API (/v1beta/models" not in shown  # no "is off" hint
        command = next(v for k, v in shown_commands(shown).items() if k.startswith("Gemini CLI"))
        base_url = re.findall(r"serves the fake Kiro service on (\S+) ", shown)[0]
        key = re.findall(r"\(API key (\S+)\)", shown)[0]
        assert f"GOOGLE_GEMINI_BASE_URL={base_url} GEMINI_API_KEY={key} gemini -p " in command
        home = Path(re.findall(r"GEMINI_CLI_HOME=(\S+)", command)[0])
        written = json.loads((home / ".gemini" / "settings.json").read_text())
        assert written == guide_gemini_settings()
        assert json.dumps(written, indent=2) in shown.replace("\n  ", "\n")
        proc.send_signal(signal.SIGINT)
        read_until(lines, "Stopped")
        assert proc.wait(timeout=30) == 0
    assert not home.exists()


@pytest.mark.parametrize("how", ["--gemini", "flag before demo", "environment"])
def test_check_answers_through_the_gemini_api_when_it_is_on(
    how: str, user_env: dict[str, str]
) -> None:
    command, env = [*KIROD, "demo", "--check", "--gemini"], user_env
    if how == "flag before demo":
        command = [*KIROD, "--enable-gemini-api", "demo", "--check"]
    elif how == "environment":
        command, env = [*KIROD, "demo", "--check"], {**env, "KIROD_ENABLE_GEMINI_API": "1"}
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=60, check=False, env=env
    )
    assert result.returncode == 0, result.stderr
    assert f"ok through /v1beta/models/{demo_module.MODEL}:generateContent" in result.stdout
    assert "You said: Hello, Kiro!" in result.stdout


def test_a_daemon_flag_before_demo_says_where_the_flags_go(user_env: dict[str, str]) -> None:
    result = subprocess.run(
        [*KIROD, "--port", "9", "demo", "--check"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=user_env,
    )
    assert result.returncode == 2
    assert "--port would not reach it" in result.stderr
    assert "reads only --enable-chat-completions and --enable-gemini-api" in result.stderr
    assert "--chat-completions, --gemini and --check" in result.stderr
    assert result.stdout == ""


def test_a_bad_setting_for_the_demo_is_a_configuration_error(user_env: dict[str, str]) -> None:
    env = {**user_env, "KIROD_ENABLE_CHAT_COMPLETIONS": "maybe"}
    result = subprocess.run(
        [*KIROD, "demo", "--check"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=env,
    )
    assert result.returncode == 2
    assert "KIROD_ENABLE_CHAT_COMPLETIONS" in result.stderr
    assert "Traceback" not in result.stderr


def test_kirod_help_lists_demo() -> None:
    result = subprocess.run(
        [*KIROD, "--help"], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stderr
    usage = result.stdout.split("\n\n", 1)[0]
    assert "kirod [--enable-chat-completions] demo [--chat-completions] [--check]" in usage
    assert "kirod [--enable-gemini-api] demo [--gemini] [--check]" in usage
    assert "kirod demo: no Kiro account needed." in result.stdout
    demo_help = subprocess.run(
        [*KIROD, "demo", "--help"], capture_output=True, text=True, timeout=30, check=False
    )
    assert "--chat-completions" in demo_help.stdout
    assert "KIROD_ENABLE_CHAT_COMPLETIONS" in demo_help.stdout
    assert "--gemini" in demo_help.stdout
    assert "KIROD_ENABLE_GEMINI_API" in demo_help.stdout


def test_a_missing_sdk_line_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # what find_spec sees as not installed
    shown = demo_module.instructions(
        demo_module.Demo(tmp_path, "http://127.0.0.1:1", "http://127.0.0.1:2", "k", tmp_path)
    )
    lines = shown.splitlines()
    anthropic = lines.index("Anthropic SDK:")
    assert lines[anthropic + 1].startswith("  python3 -c ")
    assert "pip install anthropic" in lines[anthropic + 2]
    openai = lines.index("OpenAI SDK:")
    assert lines[openai + 1].startswith(f"  {sys.executable} -c ")
