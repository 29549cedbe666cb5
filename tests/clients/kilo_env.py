"""Driving the real Kilo Code CLI (`kilo`, an opencode fork) against a kirod: its configuration,
its environment, one run.

Imported by the Kilo Code tests and capture.py (not a test module itself).

Kilo reads opencode's provider format from `kilo.json`. The file goes in the user's global
configuration folder (`$XDG_CONFIG_HOME/kilo/kilo.json`, i.e. `~/.config/kilo/kilo.json`): 7.7.7
refuses `{env:…}` references in a project's own `kilo.json` ("environment references are not
allowed in project config") and then ignores the whole file. `enabled_providers` names only kirod,
so Kilo does not ask its own gateway (api.kilo.ai) for models; the environment turns off the
rest that would leave the machine (telemetry to PostHog unless `KILO_TELEMETRY_LEVEL` is `all`,
models.dev, updates, default plugins, LSP downloads). Measured with strace on 7.7.7: with all of
these a run resolves no host name and connects only to the base URL.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.clients import install, opencode_env, runs

CLIENT = "kilo-code"
# An opencode fork: Kilo takes opencode's provider packages and key variable, and `kilo run
# --format json` prints opencode's events.
ANTHROPIC = opencode_env.ANTHROPIC
OPENAI = opencode_env.OPENAI
KEY_ENV = opencode_env.KEY_ENV
MODEL = opencode_env.MODEL
Run = opencode_env.Run
PROVIDER = "kirod"
RUN_TIMEOUT_S = 60.0
"""One `kilo run`: 8 to 20 s on two busy cores, most of it before the first request; this only
bounds a hang."""
OFFLINE = {
    "KILO_TELEMETRY_LEVEL": "off",
    "KILO_DISABLE_MODELS_FETCH": "1",
    "KILO_DISABLE_AUTOUPDATE": "1",
    "KILO_DISABLE_DEFAULT_PLUGINS": "1",
    "KILO_DISABLE_LSP_DOWNLOAD": "1",
}

Binary = install.Binary


def config(base_url: str, npm: str = ANTHROPIC, models: Iterable[str] = (MODEL,)) -> dict[str, Any]:
    """A `kilo.json` with one provider, `kirod`, at `base_url` (kirod's, without `/v1`): opencode's
    `opencode.json`, with Kilo's schema and kirod the only provider enabled."""
    opencode = opencode_env.config(base_url, npm, models)
    return {
        "$schema": "https://app.kilo.ai/config.json",
        "enabled_providers": [PROVIDER],
        "provider": opencode["provider"],
        "model": opencode["model"],
    }


def client_env(home: Path, token: str) -> dict[str, str]:
    """A private HOME (and XDG folders in it), the key in KIROD_API_KEY, no other hosts."""
    return runs.private_env(home, OFFLINE, {KEY_ENV: token})


def config_path(env: Mapping[str, str]) -> Path:
    """Where Kilo reads the user's `kilo.json` in `env`."""
    return Path(env["XDG_CONFIG_HOME"]) / "kilo" / "kilo.json"


def command(prompt: str, extra: Iterable[str] = ()) -> list[str]:
    return ["kilo", "run", "--format", "json", *extra, prompt]


class KiloCode(runs.Client):
    """Kilo Code in a private HOME and working directory, with the key of one kirod."""

    def __init__(self, binary: Binary, token: str, root: Path) -> None:
        super().__init__(binary, root)
        self.env = client_env(self.home, token)

    @property
    def config_file(self) -> Path:
        return config_path(self.env)

    def configure(self, document: Mapping[str, Any]) -> None:
        """Make `document` the `kilo.json` the next runs read."""
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(json.dumps(document, indent=2) + "\n")

    def run(self, prompt: str, *args: str, timeout_s: float = RUN_TIMEOUT_S) -> Run:
        return self.launch(Run, command(prompt, args), timeout_s)
