"""Driving the real pi coding agent (`pi -p`) against a kirod: which binary, its models.json,
one run.

Imported by the client tests' conftest, test and capture modules (not a test module itself).

pi reads its providers from `~/.pi/agent/models.json`: each provider has a `baseUrl`, an `api`
(the wire protocol), `apiKey` (here the name of the variable that holds the key) and its
`models`. The guide's file (docs/guide/client-settings.md, `## pi`) declares kirod twice: `kirod`
over Anthropic Messages (its base URL without `/v1`: the Anthropic SDK adds it) and
`kirod-responses` over OpenAI Responses (with `/v1`); `--model kirod/claude-sonnet-4-6` picks
one. `pi -p --mode json` prints one JSON event per line (`agent_start`, `message_end`,
`tool_execution_end`, `agent_end` with every message of the run). `PI_OFFLINE=1` keeps pi from
its start-up calls to pi.dev (update check, install telemetry), so its one host is kirod.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.clients import install, runs

CLIENT = "pi"
KEY_ENV = "KIROD_API_KEY"
MODEL = "claude-sonnet-4-6"
MESSAGES = "kirod"
"""The guide's provider over Anthropic Messages (`api: anthropic-messages`)."""
RESPONSES = "kirod-responses"
"""The guide's provider over OpenAI Responses (`api: openai-responses`)."""
PROVIDERS = {"anthropic-messages": MESSAGES, "openai-responses": RESPONSES}
"""Each API (its `api` in models.json, and the name of its capture) → the guide's provider."""
READ_TOOL = "read"
"""pi's built-in file reader: `{"path": …}`, its answer the file's lines."""
OFFLINE = {"PI_OFFLINE": "1"}
RUN_TIMEOUT_S = 60.0
"""One `pi -p` run; the fake answers in milliseconds, so this only bounds a hang."""

Binary = install.Binary
Located = install.Located


def locate() -> Located:
    """The binary to drive (see `install.locate`)."""
    return install.locate(CLIENT, *install.env_names(CLIENT))


def models_json(base_url: str) -> dict[str, Any]:
    """The guide's `~/.pi/agent/models.json`, at `base_url` (kirod's, without `/v1`)."""
    models = [{"id": MODEL}]
    return {
        "providers": {
            MESSAGES: {
                "baseUrl": base_url,
                "api": "anthropic-messages",
                "apiKey": KEY_ENV,
                "models": models,
            },
            RESPONSES: {
                "baseUrl": f"{base_url}/v1",
                "api": "openai-responses",
                "apiKey": KEY_ENV,
                "models": models,
            },
        }
    }


def client_env(home: Path, key: str) -> dict[str, str]:
    """A private HOME, the key in KIROD_API_KEY, no start-up calls to pi.dev."""
    return runs.private_env(home, OFFLINE, {KEY_ENV: key})


def command(prompt: str, provider: str = MESSAGES, extra: Iterable[str] = ()) -> list[str]:
    """`pi -p --mode json --model <provider>/claude-sonnet-4-6 …`."""
    return ["pi", "-p", "--mode", "json", "--model", f"{provider}/{MODEL}", *extra, prompt]


class Run(runs.Finished):
    """One finished `pi -p --mode json`."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Every message of the run (`agent_end`): the user's, the assistant's, tool results."""
        ends = [event for event in self.events if event.get("type") == "agent_end"]
        assert len(ends) == 1, self.describe()
        found: list[dict[str, Any]] = ends[0]["messages"]
        return found

    def assistant(self) -> list[dict[str, Any]]:
        return [message for message in self.messages if message.get("role") == "assistant"]

    def tool_results(self, tool: str) -> list[dict[str, Any]]:
        """The results of `tool` as pi sent them back (`toolResult` messages)."""
        return [
            message
            for message in self.messages
            if message.get("role") == "toolResult" and message.get("toolName") == tool
        ]

    @property
    def answer(self) -> str:
        """The text of the last assistant message."""
        content = self.assistant()[-1]["content"]
        return "".join(part["text"] for part in content if part.get("type") == "text")

    def succeeded(self) -> str:
        """The answer of a run that must have worked: exit 0, no assistant message that stopped
        on an error, no retry."""
        assert self.exit_code == 0, self.describe()
        stops = [message.get("stopReason") for message in self.assistant()]
        assert stops, self.describe()
        assert not {"error", "aborted"} & set(stops), self.describe()
        assert not [e for e in self.events if e.get("type") == "auto_retry_start"], self.describe()
        return self.answer


class Pi(runs.Client):
    """pi in a private HOME and working directory, with one models.json."""

    def __init__(self, binary: Binary, key: str, root: Path) -> None:
        super().__init__(binary, root)
        self.env = client_env(self.home, key)

    @property
    def models_file(self) -> Path:
        return self.home / ".pi" / "agent" / "models.json"

    def configure(self, document: Mapping[str, Any]) -> None:
        """Make `document` the models.json the next runs read."""
        self.models_file.parent.mkdir(parents=True, exist_ok=True)
        self.models_file.write_text(json.dumps(document, indent=2) + "\n")

    def run(
        self,
        prompt: str,
        provider: str = MESSAGES,
        *args: str,
        timeout_s: float = RUN_TIMEOUT_S,
    ) -> Run:
        return self.launch(Run, command(prompt, provider, args), timeout_s)
