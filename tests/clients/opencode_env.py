"""Driving the real opencode binary against a kirod: which binary, its configuration, one run.

Imported by the client tests' conftest, test modules and capture.py (not a test module itself).

opencode takes its provider from an `opencode.json`; each run here has a private HOME (nothing
in it) and a working directory holding the one `opencode.json` the run uses, read as the
project's configuration. The environment turns off what would reach other hosts (the models.dev
catalog, updates, default plugins, LSP downloads), as CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC
does for Claude Code; the provider configuration is the guide's.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.clients import install, runs

CLIENT = "opencode"
BIN_ENV = "KIROD_TEST_OPENCODE_BIN"
VERSION_ENV = "KIROD_TEST_OPENCODE_VERSION"
KEY_ENV = "KIROD_API_KEY"
MODEL = "claude-sonnet-4-6"
RUN_TIMEOUT_S = 60.0
"""One `opencode run`; the fake answers in milliseconds, so this only bounds a hang."""

ANTHROPIC = "@ai-sdk/anthropic"
"""The guide's provider package: the Messages API."""
OPENAI = "@ai-sdk/openai"
"""The Responses API."""
OPENAI_COMPATIBLE = "@ai-sdk/openai-compatible"
"""Chat Completions."""
OFFLINE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
}

Binary = install.Binary
Located = install.Located


def locate() -> Located:
    """The binary to drive (see `install.locate`)."""
    return install.locate(CLIENT, BIN_ENV, VERSION_ENV)


def config(base_url: str, npm: str = ANTHROPIC, models: Iterable[str] = (MODEL,)) -> dict[str, Any]:
    """An `opencode.json` with one provider, `kirod`, at `base_url` (kirod's, without `/v1`)."""
    names = list(models)
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "kirod": {
                "npm": npm,
                "name": "kirod",
                "options": {"baseURL": f"{base_url}/v1", "apiKey": f"{{env:{KEY_ENV}}}"},
                "models": {name: {"name": name} for name in names},
            }
        },
        "model": f"kirod/{names[0]}",
    }


def client_env(home: Path, token: str) -> dict[str, str]:
    """A private HOME (and XDG folders in it), the key in KIROD_API_KEY, no other hosts."""
    return runs.private_env(home, OFFLINE, {KEY_ENV: token})


def command(prompt: str, extra: Iterable[str] = ()) -> list[str]:
    return ["opencode", "run", "--format", "json", *extra, prompt]


class Run(runs.Finished):
    """One finished `opencode run --format json`: stdout is one JSON event per line."""

    def parts(self, kind: str) -> list[dict[str, Any]]:
        """The `part` of every event of type `kind` (`text`, `tool_use`, `step_finish`, …)."""
        return [event["part"] for event in self.events if event.get("type") == kind]

    def tool_output(self, tool: str) -> str:
        """The output of the run's one call of `tool`, which must have completed."""
        (used,) = [part for part in self.parts("tool_use") if part["tool"] == tool]
        assert used["state"]["status"] == "completed", used
        output: str = used["state"]["output"]
        return output

    def succeeded(self) -> str:
        """The answer (its text parts, in order) of a run that must have worked."""
        assert self.exit_code == 0, self.describe()
        assert not [e for e in self.events if e.get("type") == "error"], self.describe()
        texts = [part["text"] for part in self.parts("text")]
        assert texts, self.describe()
        return "\n".join(texts)

    def failed(self) -> dict[str, Any]:
        """The error opencode reported (`error.data`: message, statusCode, isRetryable, …)."""
        assert self.exit_code != 0, self.describe()
        errors = [event["error"] for event in self.events if event.get("type") == "error"]
        assert len(errors) == 1, self.describe()
        error: dict[str, Any] = errors[0]
        return error


class OpenCode(runs.Client):
    """opencode in a private HOME and working directory, with the key of one kirod."""

    def __init__(self, binary: Binary, token: str, root: Path) -> None:
        super().__init__(binary, root)
        self.env = client_env(self.home, token)

    def configure(self, document: Mapping[str, Any]) -> None:
        """Make `document` the `opencode.json` the next runs read."""
        (self.workdir / "opencode.json").write_text(json.dumps(document, indent=2) + "\n")

    def start(self, prompt: str, *args: str) -> subprocess.Popen[str]:
        """A run in its own process group (a terminal's foreground job), to interrupt it."""
        return runs.start(self.argv(command(prompt, args)), self.workdir, self.env)

    def run(self, prompt: str, *args: str, timeout_s: float = RUN_TIMEOUT_S) -> Run:
        return self.launch(Run, command(prompt, args), timeout_s)
