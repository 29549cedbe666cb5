"""Driving the real GitHub Copilot CLI against a kirod: its environment, one run.

Imported by the Copilot tests and capture.py (not a test module itself).

Copilot CLI takes a model provider of the user's own ("bring your own key") from the
environment, and then needs no GitHub account: `COPILOT_PROVIDER_TYPE=anthropic` speaks Messages
at `COPILOT_PROVIDER_BASE_URL` + `/v1/messages` (so the base URL has no `/v1`); `openai` speaks
Chat Completions, or Responses with `COPILOT_PROVIDER_WIRE_API=responses`, at the base URL +
`/chat/completions` or `/responses` (so it has `/v1`). `COPILOT_MODEL` is required.
`COPILOT_OFFLINE=true` turns off everything else that would leave the machine (GitHub sign-in,
telemetry, update checks, web tools, the GitHub MCP server); with it a run connects to kirod
only. `copilot -p PROMPT` runs one turn; it reads files in the working directory on its own,
while shell commands and edits need `--allow-all-tools` (or `--allow-tool`).

The first run in a cache folder unpacks the CLI's package (about 230 MB) into
`$XDG_CACHE_HOME/copilot/pkg`, which takes a few seconds; `Copilot` takes a cache folder that
tests share, since the package is the same for every run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.clients import install, runs

CLIENT = "copilot"
MODEL = "claude-sonnet-4-6"
ANTHROPIC = "anthropic"
"""Messages: the guide's provider type."""
OPENAI = "openai"
COMPLETIONS = "completions"
RESPONSES = "responses"
OFFLINE = {"COPILOT_OFFLINE": "true"}
RUN_TIMEOUT_S = 60.0
"""One `copilot -p`; the fake answers in milliseconds, so this only bounds a hang."""
READ_TOOL = "view"
"""Copilot's file-read tool: `{"path": …}`, an absolute path."""

Binary = install.Binary


def reported_version(printed: str) -> str:
    """`1.0.102` from `GitHub Copilot CLI 1.0.102.` (the first line of `copilot --version`)."""
    found = re.search(r"\d+\.\d+\.\d+", printed)
    return found[0] if found else printed


def provider_env(
    base_url: str, token: str, kind: str = ANTHROPIC, wire: str | None = None, model: str = MODEL
) -> dict[str, str]:
    """The variables that point Copilot at kirod's `base_url` (without `/v1`)."""
    env = {
        "COPILOT_PROVIDER_TYPE": kind,
        "COPILOT_PROVIDER_BASE_URL": base_url if kind == ANTHROPIC else f"{base_url}/v1",
        "COPILOT_PROVIDER_API_KEY": token,
        "COPILOT_MODEL": model,
    }
    if wire is not None:
        env["COPILOT_PROVIDER_WIRE_API"] = wire
    return env


def client_env(
    home: Path, provider: Mapping[str, str], cache: Path | None = None
) -> dict[str, str]:
    """A private HOME (Copilot keeps its settings and sessions in `~/.copilot`), offline, with
    the `provider` variables; the package cache in `cache` when given."""
    package = {} if cache is None else {"XDG_CACHE_HOME": str(cache)}
    return runs.private_env(home, OFFLINE, provider, package)


def command(prompt: str, extra: Iterable[str] = ()) -> list[str]:
    return ["copilot", "-p", prompt, *extra]


class Run(runs.Finished):
    """One finished `copilot -p` (with `--output-format json`: one JSON event per line)."""

    def data(self, kind: str) -> list[dict[str, Any]]:
        """The `data` of every event of type `kind` (`assistant.message`,
        `tool.execution_complete`, `model.call_failure`, `session.error`, …)."""
        return [event["data"] for event in self.events if event.get("type") == kind]

    def succeeded(self) -> str:
        """The last assistant message of a JSON run that must have worked."""
        assert self.exit_code == 0, self.describe()
        assert not self.data("session.error"), self.describe()
        messages = [data["content"] for data in self.data("assistant.message") if data["content"]]
        assert messages, self.describe()
        answer: str = messages[-1]
        return answer

    def failed(self) -> dict[str, Any]:
        """The `session.error` a JSON run that must have failed reported."""
        assert self.exit_code == 1, self.describe()
        (error,) = self.data("session.error")
        return error


class Copilot(runs.Client):
    """Copilot CLI in a private HOME and working directory, pointed at one kirod."""

    def __init__(
        self, binary: Binary, provider: Mapping[str, str], root: Path, cache: Path | None = None
    ) -> None:
        super().__init__(binary, root)
        self.env = client_env(self.home, provider, cache)

    def run(self, prompt: str, *args: str, timeout_s: float = RUN_TIMEOUT_S) -> Run:
        return self.launch(Run, command(prompt, args), timeout_s)

    def run_json(self, prompt: str, *args: str, timeout_s: float = RUN_TIMEOUT_S) -> Run:
        return self.run(prompt, "--output-format", "json", *args, timeout_s=timeout_s)
