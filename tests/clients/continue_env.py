"""Driving the real Continue CLI (`cn`) against a kirod: its configuration, environment, one run.

Imported by the Continue tests and capture.py (not a test module itself).

`cn -p --config FILE PROMPT` runs one headless turn with the models of a local `config.yaml`
(Continue's `schema: v1`): provider `anthropic` speaks Messages at `apiBase` + `messages`,
provider `openai` Chat Completions at `apiBase` + `chat/completions`, or Responses for a model
whose name starts with `gpt-5` or `o<digit>` (`apiBase` ends in `/v1`, with or without a
trailing slash). The key stays out of the file: `${{ secrets.KIROD_API_KEY }}` is read
from the environment. Without `--config`, cn asks Continue's hub for an assistant and fails
offline. It prints the answer on stdout; a failure is `{"status":"error","message":…}` on
stderr with exit code 1.

Offline: OpenTelemetry metrics stay off without an OTLP endpoint (and
`CONTINUE_CLI_ENABLE_TELEMETRY=0` says so explicitly), but every start asks
`https://api.continue.dev/cn/info` for the newest version (with the machine id); no setting turns
that off, and when it fails cn goes on silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.clients import install, runs

CLIENT = "continue"
KEY_ENV = "KIROD_API_KEY"
MODEL = "claude-sonnet-4-6"
ANTHROPIC = "anthropic"
"""Messages, the configuration the guide shows."""
OPENAI = "openai"
"""Chat Completions; Responses for `gpt-5…` and `o1…` model names."""
OFFLINE = {"CONTINUE_CLI_ENABLE_TELEMETRY": "0"}
RUN_TIMEOUT_S = 60.0
"""One `cn -p`; the fake answers in milliseconds, so this only bounds a hang."""
READ_TOOL = "Read"
"""cn's file-read tool: `{"filepath": …}`, relative to the working directory."""

Binary = install.Binary


def config(base_url: str, provider: str = ANTHROPIC, model: str = MODEL) -> str:
    """A `config.yaml` with one model at kirod's `base_url` (without `/v1`)."""
    return (
        "name: kirod\n"
        "version: 1.0.0\n"
        "schema: v1\n"
        "models:\n"
        f"  - name: {model} (kirod)\n"
        f"    provider: {provider}\n"
        f"    model: {model}\n"
        f"    apiBase: {base_url}/v1/\n"
        f"    apiKey: ${{{{ secrets.{KEY_ENV} }}}}\n"
        "    roles: [chat, edit, apply]\n"
    )


def client_env(home: Path, token: str) -> dict[str, str]:
    """A private HOME (cn keeps sessions and logs in `~/.continue`), the key in KIROD_API_KEY."""
    return runs.private_env(home, OFFLINE, {KEY_ENV: token})


def command(prompt: str, config_file: str = "config.yaml", extra: Iterable[str] = ()) -> list[str]:
    return ["cn", "-p", "--config", config_file, *extra, prompt]


class Run(runs.Finished):
    """One finished `cn -p`."""

    def succeeded(self) -> str:
        """The answer of a run that must have worked."""
        assert self.exit_code == 0, self.describe()
        assert self.stdout.strip(), self.describe()
        return self.stdout.strip()

    def failed(self) -> str:
        """The message cn reported for a run that must have failed."""
        assert self.exit_code == 1, self.describe()
        error: dict[str, Any] = json.loads(self.stderr.strip().splitlines()[-1])
        assert error["status"] == "error", self.describe()
        message: str = error["message"]
        return message


class Continue(runs.Client):
    """cn in a private HOME and working directory, with the key of one kirod."""

    def __init__(self, binary: Binary, token: str, root: Path) -> None:
        super().__init__(binary, root)
        self.config_file = self.home / "kirod.yaml"
        self.env = client_env(self.home, token)

    def configure(self, text: str) -> None:
        """Make `text` the configuration the next runs read."""
        self.config_file.write_text(text)

    def run(self, prompt: str, *args: str, timeout_s: float = RUN_TIMEOUT_S) -> Run:
        return self.launch(Run, command(prompt, str(self.config_file), args), timeout_s)
