"""Driving the real Cline CLI (`cline`) against a kirod: its settings, its environment, one run.

Imported by the Cline tests and capture.py (not a test module itself).

Cline keeps its provider in `~/.cline/data/settings/providers.json`. `cline auth --provider
anthropic` writes it but refuses a base URL ("base URL is only supported for OpenAI and
OpenAI-compatible providers"), and ANTHROPIC_BASE_URL is ignored; the file itself takes
`baseUrl` for Anthropic too, so the Messages API is configured by writing that file (the
guide's). Without an entry's `updatedAt` the whole file is silently ignored: Cline then calls
its own service (api.cline.bot). The OpenAI-compatible providers are configured as documented,
with `cline auth … --baseurl`.

Offline: `telemetryOptOut` in `settings/global-settings.json` turns off its OpenTelemetry export
(otel.cline.bot) and `E2E_TEST=true` its PostHog feature-flag polling (data.cline.bot), which has
no other switch in 3.0.65. The global settings are read from `~/.cline/data` whatever
`--data-dir` says, so each run here has a private HOME holding both files, and names that same
folder with `--data-dir`: without it Cline starts a hub daemon of its own (`cline
--cline-hub-daemon`, on 127.0.0.1:25463, outside the run's process group) that outlives the run
and that later runs look for. Measured with strace, a run with it resolves no host name and
connects only to the base URL.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.clients import install, runs

CLIENT = "cline"
MODEL = "claude-sonnet-4-6"
ANTHROPIC = "anthropic"
"""The guide's provider: the Messages API, at `baseUrl`."""
OPENAI_NATIVE = "openai-native"
"""The Responses API (`cline auth --provider openai-native --baseurl …`)."""
OPENAI_COMPATIBLE = "openai"
"""Chat Completions (`cline auth --provider openai`, stored as `openai-compatible`)."""
RUN_TIMEOUT_S = 60.0
"""One `cline` run: 2 s when kirod answers. Cline retries a connection it cannot open for a
minute, so this only bounds a hang."""
UPDATED_AT = "2026-12-05T00:00:00.000Z"
"""Any ISO time: an entry needs one to be used."""
GLOBAL_SETTINGS = {"telemetryOptOut": True, "autoUpdateEnabled": False}
OFFLINE = {"E2E_TEST": "true"}

Binary = install.Binary


def providers(base_url: str, token: str, model: str = MODEL) -> dict[str, Any]:
    """A `providers.json` whose one provider is Anthropic at `base_url` (kirod's, without
    `/v1`) with `token`."""
    settings = {
        "provider": ANTHROPIC,
        "apiKey": token,
        "model": model,
        "baseUrl": f"{base_url}/v1",
    }
    return {
        "version": 1,
        "lastUsedProvider": ANTHROPIC,
        "providers": {ANTHROPIC: {"settings": settings, "updatedAt": UPDATED_AT}},
    }


def client_env(home: Path) -> dict[str, str]:
    """A private HOME (and XDG folders in it), no other hosts."""
    return runs.private_env(home, OFFLINE)


def data_dir(home: Path) -> Path:
    return home / ".cline" / "data"


def settings_dir(home: Path) -> Path:
    return data_dir(home) / "settings"


def command(prompt: str, home: Path, extra: Iterable[str] = ()) -> list[str]:
    """A run printing NDJSON, in process (see the module's docstring). The prompt must be more
    than one word: Cline takes a lone word for an unknown command ("Unknown command or unquoted
    prompt: hello")."""
    return ["cline", "--json", "--data-dir", str(data_dir(home)), *extra, prompt]


def hubs(workdir: Path) -> list[int]:
    """The process ids of Cline hub daemons started from `workdir` (Linux: from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # not a process, or gone meanwhile
            continue
        if b"--cline-hub-daemon" in argv and os.fsencode(workdir) in argv:
            found.append(int(entry.name))
    return found


def stop_hubs(workdir: Path) -> None:
    """End the hub daemons started from `workdir` (a run here must start none)."""
    for pid in hubs(workdir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class Run(runs.Finished):
    """One finished `cline --json …`: stdout is one JSON event per line, the last ones a
    `run_result` and, when the run failed, an `error`."""

    def result(self) -> dict[str, Any]:
        """The `run_result` event: `finishReason` (`completed`, `error`), `text`, `usage`."""
        results = [event for event in self.events if event.get("type") == "run_result"]
        assert len(results) == 1, self.describe()
        result: dict[str, Any] = results[0]
        return result

    def agent_events(self, kind: str) -> list[dict[str, Any]]:
        """The `event` of every `agent_event` of type `kind` (`content_end`, `error`, …)."""
        return [
            event["event"]
            for event in self.events
            if event.get("type") == "agent_event" and event["event"].get("type") == kind
        ]

    def tool_outputs(self, name: str) -> list[Any]:
        """The output of every finished call of the tool `name`, in order."""
        return [
            event["output"]
            for event in self.agent_events("content_end")
            if event.get("contentType") == "tool" and event.get("toolName") == name
        ]

    def succeeded(self) -> str:
        """The answer of a run that must have worked (the `run_result` text)."""
        assert self.exit_code == 0, self.describe()
        result = self.result()
        assert result["finishReason"] == "completed", self.describe()
        assert not [e for e in self.events if e.get("type") == "error"], self.describe()
        text: str = result["text"]
        return text

    def failed(self) -> dict[str, Any]:
        """The agent's error of a run that must have failed: `error.message`, `errorClass`
        (`auth`, …), `recoverable`."""
        assert self.exit_code != 0, self.describe()
        assert self.result()["finishReason"] == "error", self.describe()
        errors = self.agent_events("error")
        assert len(errors) == 1, self.describe()
        return errors[0]


class Cline(runs.Client):
    """Cline in a private HOME and working directory."""

    def __init__(self, binary: Binary, root: Path) -> None:
        super().__init__(binary, root)
        settings = settings_dir(self.home)
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "global-settings.json").write_text(json.dumps(GLOBAL_SETTINGS) + "\n")
        self.env = client_env(self.home)

    @property
    def providers_file(self) -> Path:
        return settings_dir(self.home) / "providers.json"

    def configure(self, document: Mapping[str, Any]) -> None:
        """Make `document` the `providers.json` the next runs read."""
        self.providers_file.write_text(json.dumps(document, indent=2) + "\n")

    def auth(self, provider: str, token: str, base_url: str, model: str = MODEL) -> runs.Finished:
        """`cline auth` as its help says, for an OpenAI-compatible `provider` at `base_url`
        (kirod's, without `/v1`); it replaces `providers.json`."""
        argv = [str(self.binary.path), "auth", "--provider", provider, "--apikey", token]
        argv += ["--modelid", model, "--baseurl", f"{base_url}/v1"]
        argv += ["--data-dir", str(data_dir(self.home))]
        done = runs.run(runs.Finished, argv, self.workdir, self.env, RUN_TIMEOUT_S)
        assert done.exit_code == 0, done.describe().replace(token, "<token>")
        return done

    def run(self, prompt: str, *args: str, timeout_s: float = RUN_TIMEOUT_S) -> Run:
        return self.launch(Run, command(prompt, self.home, args), timeout_s)
