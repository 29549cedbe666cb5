"""`kirod demo` / `make demo`: what it prints works, `--check` answers, Ctrl-C leaves nothing."""

from __future__ import annotations

import json
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

import pytest

from kirod.testing import demo as demo_module

DEMO = [sys.executable, "-m", "kirod.testing.demo"]
README = Path(__file__).parents[2] / "README.md"


@contextmanager
def demo() -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str]]]:
    """The demo running, with a thread queueing its output lines so every wait is bounded."""
    with subprocess.Popen(
        DEMO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
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


def readme_codex_provider() -> dict[str, object]:
    """The `[model_providers.kirod]` table of README "Pointing clients at kirod"."""
    blocks = re.findall(r"```toml\n(.*?)```", README.read_text(), re.DOTALL)
    configs = [tomllib.loads(block) for block in blocks if "[model_providers.kirod]" in block]
    assert len(configs) == 1
    provider: dict[str, object] = configs[0]["model_providers"]["kirod"]
    return provider


def test_the_demo_prints_commands_and_configs_that_work_and_cleans_up() -> None:
    with demo() as (proc, lines):
        shown = read_until(lines, "Press Ctrl-C")
        commands = dict(re.findall(r"^(\S[^\n]*):\n  (.+)$", shown, re.MULTILINE))
        base_url = re.findall(r"serves the fake Kiro service on (\S+) ", shown)[0]
        checks = [("Anthropic SDK", "You said: Hello, Kiro!"), ("kiroctl", "healthy")]
        if shutil.which("curl"):
            checks.append(("curl", '"text": "You said: Hello!"'))
        for name, expected in checks:
            result = subprocess.run(  # as the user would: pasted into a shell
                ["/bin/sh", "-c", commands[name]],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert expected in result.stdout, (name, result.stdout, result.stderr)

        # Codex, both model families, with the README's provider at the demo's address.
        code_mode = commands["Codex with gpt-5.6-sol (code mode)"]
        claude = commands["Codex with a Claude model (claude-sonnet-4-6)"]
        assert "codex exec" in code_mode
        assert "-m claude-sonnet-4-6" in claude
        codex_home = Path(re.findall(r"CODEX_HOME=(\S+)", code_mode)[0])
        config = tomllib.loads((codex_home / "config.toml").read_text())
        assert config["model"] == "gpt-5.6-sol"
        assert config["model_provider"] == "kirod"
        expected = {**readme_codex_provider(), "base_url": f"{base_url}/v1"}
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


def test_check_answers_one_request_and_stops() -> None:
    result = subprocess.run(
        [*DEMO, "--check"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout
    assert "You said: Hello, Kiro!" in result.stdout


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
