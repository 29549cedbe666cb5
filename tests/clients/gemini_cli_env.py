"""Driving the real Gemini CLI (`gemini -p … --yolo --output-format json`) against a kirod: its
settings file, its environment, one run.

Imported by the Gemini CLI tests and capture.py (not a test module itself).

Gemini CLI speaks only the Gemini API, through the `@google/genai` SDK: `GOOGLE_GEMINI_BASE_URL`
is kirod's root (the SDK adds `/v1beta`), `GEMINI_API_KEY` goes out as `x-goog-api-key`. Headless,
that is not enough: the base URL alone makes it pick an auth type that `-p` refuses ("Invalid
auth method selected.", exit 41), so `~/.gemini/settings.json` must select `gemini-api-key`; and
it refuses an untrusted folder (exit 55) unless `GEMINI_CLI_TRUST_WORKSPACE=true`. The settings
file holds only what the guide gives (the `json` block of its "Gemini CLI" section, or that
block minus `model.name` for the tests of Gemini CLI's own defaults), and the variables are its
`export` lines. `--output-format json`
prints one JSON document at the end: `response`, `session_id` and per-model `stats`; on an error
it prints that document on stderr instead.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.clients import install, runs
from tests.clients.guide_snippets import GUIDE_PORT, KEY_VARIABLE, client_section, guide_block

CLIENT = "gemini-cli"
HEADING = "Gemini CLI"
"""The guide's section for it."""
BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"
KEY_ENV = "GEMINI_API_KEY"
TRUST = {"GEMINI_CLI_TRUST_WORKSPACE": "true"}
"""Headless runs refuse an untrusted folder (exit 55); the tests trust their temp folder."""
RUN_TIMEOUT_S = 60.0
"""One `gemini -p`; the fake answers in milliseconds (a run takes about 5 s, most of it Node
starting), so this only bounds a hang."""
READ_TOOL = "read_file"
"""Gemini CLI's file-read tool: `{"file_path": …}`, relative to the working directory."""
SEARCH_TOOL = "google_web_search"
"""Its web search tool, which makes a side call with `tools: [{googleSearch: {}}]`."""
ROUTER_MODEL = "gemini-3.5-flash-lite"
"""The model of its router's side call when no model is set (0.61.0)."""
DEFAULT_MODEL = "gemini-3.1-pro-preview"
"""What it asks for when no model is set and the router fell back (0.61.0)."""

Binary = install.Binary


def guide_settings() -> dict[str, Any]:
    """`~/.gemini/settings.json` as the guide writes it (its section's one `json` block)."""
    (block,) = re.findall(r"^```json\n(.*?)^```", client_section(HEADING), re.S | re.M)
    settings: dict[str, Any] = json.loads(block)
    return settings


def without_model(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` with no `model.name`: Gemini CLI's own default and its router."""
    trimmed = copy.deepcopy(settings)
    trimmed.get("model", {}).pop("name", None)
    return trimmed


def guide_variables(base_url: str, key: str) -> dict[str, str]:
    """The guide's `export` lines for Gemini CLI, pointed at `base_url` with `key`."""
    found = {}
    for line in guide_block(HEADING, "sh").splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] == "export":
            name, _, value = words[1].partition("=")
            found[name] = value.replace(GUIDE_PORT, base_url).replace(f"${KEY_VARIABLE}", key)
    return found


def client_env(home: Path, base_url: str, key: str) -> dict[str, str]:
    """A private HOME, the guide's variables (the base URL and the key), a trusted folder."""
    variables = guide_variables(base_url, key)
    assert variables == {BASE_URL_ENV: base_url, KEY_ENV: key}, variables
    return runs.private_env(home, TRUST, variables)


def command(prompt: str, extra: Iterable[str] = ()) -> list[str]:
    return ["gemini", "-p", prompt, "--yolo", "--output-format", "json", *extra]


class Run(runs.Finished):
    """One finished `gemini -p … --output-format json`."""

    @property
    def document(self) -> dict[str, Any]:
        """The JSON document it printed: on stdout when it worked, on stderr when not."""
        for text in (self.stdout, self.stderr):
            start = text.find("{\n")
            if start < 0:
                continue
            try:
                found, _ = json.JSONDecoder().raw_decode(text[start:])
            except ValueError:
                continue
            if isinstance(found, dict):
                return found
        raise AssertionError(f"no JSON document\n{self.describe()}")

    def succeeded(self) -> str:
        """Exit 0 and an answer: its text."""
        assert self.exit_code == 0, self.describe()
        response = self.document.get("response")
        assert isinstance(response, str), self.describe()
        return response

    @property
    def models(self) -> dict[str, Any]:
        """`stats.models`: per model name as the answers named it (their `modelVersion`)."""
        stats: dict[str, Any] = self.document.get("stats", {}).get("models", {})
        return stats

    @property
    def tools(self) -> dict[str, Any]:
        """`stats.tools.byName`: the tools it ran, with their counts."""
        tools: dict[str, Any] = self.document.get("stats", {}).get("tools", {}).get("byName", {})
        return tools


class GeminiCli(runs.Client):
    """Gemini CLI in a private HOME and working directory, with one `~/.gemini/settings.json`."""

    def __init__(
        self, binary: Binary, base_url: str, key: str, root: Path, settings: dict[str, Any]
    ) -> None:
        super().__init__(binary, root)
        folder = self.home / ".gemini"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
        self.env = client_env(self.home, base_url, key)

    def run(self, prompt: str, *args: str, timeout_s: float = RUN_TIMEOUT_S) -> Run:
        return self.launch(Run, command(prompt, args), timeout_s)
