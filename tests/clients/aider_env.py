"""Driving the real aider (from PyPI, in its own venv) against a kirod: its settings, one run.

Imported by the client test and capture modules (not a test module itself).

aider reaches Anthropic through litellm, which takes the base URL from `ANTHROPIC_API_BASE`
(kirod's, without `/v1`: litellm appends `/v1/messages`) and the key from `ANTHROPIC_API_KEY`,
sent as `x-api-key`; `--model anthropic/<id>` picks the provider. `--message` sends one message,
applies the edits of the answer and exits; `--yes-always` answers aider's questions.

aider makes no tool calls: the files named on its command line (what `/add` does in a chat) go
into the prompt, and the model answers with SEARCH/REPLACE blocks that aider applies to the
files itself.

Offline: `--no-check-update` and `--no-show-release-notes` (PyPI), `--no-analytics` (PostHog),
`LITELLM_LOCAL_MODEL_COST_MAP` (litellm's price list from GitHub) and a model metadata file in
HOME naming the model: without it aider downloads litellm's price list from GitHub (kept a day
in `~/.aider/caches`: in a fresh HOME, at every run) to learn the model's context window. With
these, a run's only connection is to kirod.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.clients import install, runs

CLIENT = "aider"
MODEL = "claude-sonnet-4-5"
"""A model aider knows (`diff` edit format: SEARCH/REPLACE blocks) and Kiro offers."""
ANTHROPIC_MODEL = f"anthropic/{MODEL}"
RESPONSES_MODEL = f"openai/responses/{MODEL}"
CHAT_MODEL = f"openai/{MODEL}"
PROVIDERS = {ANTHROPIC_MODEL: "anthropic", RESPONSES_MODEL: "openai", CHAT_MODEL: "openai"}
BASE_ENV = "ANTHROPIC_API_BASE"
KEY_ENV = "ANTHROPIC_API_KEY"
OPENAI_BASE_ENV = "OPENAI_API_BASE"
"""For `--model openai/<id>` (Chat Completions) and `openai/responses/<id>`: kirod's `/v1`."""
OPENAI_KEY_ENV = "OPENAI_API_KEY"
RUN_TIMEOUT_S = 60.0
"""One `aider --message` run (about 5 s, most of it importing litellm); bounds a hang."""

OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
OFFLINE_ARGS = ("--no-check-update", "--no-show-release-notes", "--no-analytics")
HEADLESS_ARGS = ("--yes-always", "--no-git", "--no-pretty")
"""No questions, no repository of its own (no commits of the edits), plain text output."""
METADATA_FILE = ".aider.model.metadata.json"
"""Read from HOME (and the git root and working directory) at every start."""

Binary = install.Binary


def model_metadata(provider: str) -> dict[str, Any]:
    """What aider would otherwise download for a model of litellm's `provider`: its context
    window and prices (none)."""
    return {
        "max_input_tokens": 200_000,
        "max_output_tokens": 64_000,
        "input_cost_per_token": 0,
        "output_cost_per_token": 0,
        "litellm_provider": provider,
        "mode": "chat",
    }


def write_metadata(home: Path, models: Mapping[str, str]) -> None:
    """The metadata file in `home` for `models` (`--model` value → litellm provider)."""
    document = {model: model_metadata(provider) for model, provider in models.items()}
    (home / METADATA_FILE).write_text(json.dumps(document, indent=2) + "\n")


def client_env(home: Path, base_url: str, token: str) -> dict[str, str]:
    """A private HOME, kirod's URL and the key (Anthropic's and OpenAI's variables), no other
    hosts."""
    settings = {
        BASE_ENV: base_url,
        KEY_ENV: token,
        OPENAI_BASE_ENV: f"{base_url}/v1",
        OPENAI_KEY_ENV: token,
    }
    return runs.private_env(home, OFFLINE_ENV, settings)


def command(
    message: str, files: Iterable[str] = (), model: str = ANTHROPIC_MODEL, extra: Iterable[str] = ()
) -> list[str]:
    return [
        "aider",
        "--model",
        model,
        *OFFLINE_ARGS,
        *HEADLESS_ARGS,
        *extra,
        "--message",
        message,
        *files,
    ]


class Run(runs.Finished):
    """One finished `aider --message`. aider exits 0 even when the API call failed (it shows
    the error and goes on to exit), so a run's outcome is in its output."""

    @property
    def text(self) -> str:
        """stdout with its white space collapsed: aider wraps its messages at 80 columns."""
        return " ".join(self.stdout.split())

    def succeeded(self) -> str:
        """The output of a run that must have worked."""
        assert self.exit_code == 0, self.describe()
        assert "Error" not in self.stdout, self.describe()
        return self.stdout


class Aider(runs.Client):
    """aider in a private HOME and working directory, at one kirod with one key."""

    def __init__(self, binary: Binary, base_url: str, token: str, root: Path) -> None:
        super().__init__(binary, root)
        self.env = client_env(self.home, base_url, token)
        write_metadata(self.home, PROVIDERS)

    def run(
        self,
        message: str,
        files: Iterable[str] = (),
        model: str = ANTHROPIC_MODEL,
        timeout_s: float = RUN_TIMEOUT_S,
    ) -> Run:
        """`aider --model MODEL … --message MESSAGE FILES…`."""
        return self.launch(Run, command(message, files, model), timeout_s)
