"""Driving the real Codex CLI (`codex exec`) against a kirod: which binary, its config, one run.

Imported by the client tests' conftest, test and capture modules (not a test module itself).

Codex reads everything from `$CODEX_HOME/config.toml`: the model, and a provider
`[model_providers.kirod]` with kirod's `/v1` base URL, the name of the environment variable that
holds the key (`env_key`), `wire_api = "responses"` and whether to try WebSockets. Retries are
off (`request_max_retries`, `stream_max_retries` = 0) so a failure shows at once instead of after
Codex's back-off, unless a test is about whether Codex retries. `codex exec --json` prints one
JSON event per line (`thread.started`, `item.completed` with `agent_message` /
`command_execution` / `error` items, `turn.completed` or `turn.failed`); the session's items as
the model produced them go to a rollout file under `$CODEX_HOME/sessions/`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.clients import install, runs
from tests.support.captures import CLAUDE_MODEL as CLAUDE_MODEL
from tests.support.captures import CODE_MODE_MODEL as CODE_MODE_MODEL

CLIENT = "codex"
BIN_ENV = "KIROD_TEST_CODEX_BIN"
VERSION_ENV = "KIROD_TEST_CODEX_VERSION"
KEY_ENV = "KIROD_API_KEY"
RUN_TIMEOUT_S = 75.0
"""One `codex exec` run; the fake answers in milliseconds (a run takes about a second), so this
only bounds a hang."""

DEFAULT_MODEL = "gpt-6.2-sol"
"""What 0.171.0 asks for with no `model` line: its catalog's first (`codex debug models`:
priority 1, `tool_mode: code_mode_only`); Kiro offers no such model."""

SANDBOX_ARGS = ("--sandbox", "danger-full-access")
"""How the tests let Codex run the commands the fake asks for. In this container (root) the
bundled bubblewrap works, and `codex exec` never asks for approval, so the default read-only
sandbox runs `cat` and refuses writes; `workspace-write`, `danger-full-access` and
`--dangerously-bypass-approvals-and-sandbox` all run a writing command. The tests only run
commands they scripted, in a private directory, so they take no sandbox at all: that keeps them
independent of user namespaces, which many CI containers lack."""

QUIET_CONFIG: Mapping[str, Mapping[str, Any]] = {
    "features": {"plugins": False},
    "analytics": {"enabled": False},
}
"""Tests only: no traffic beyond the gateway. Without these, 0.171.0 also looks up github.com,
api.github.com, chatgpt.com (plugins) and ab.chatgpt.com (analytics); with them its one TCP
connection is to kirod."""


# -- the binary ---------------------------------------------------------------------------------


Binary = install.Binary
Located = install.Located


def locate() -> Located:
    """The binary to drive (see `install.locate`)."""
    return install.locate(CLIENT, BIN_ENV, VERSION_ENV)


def reported_version(printed: str) -> str:
    """`codex-cli 0.171.0` → `0.171.0`."""
    return printed.split()[-1] if printed.split() else ""


# -- configuration ------------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string is a JSON string for these values
    raise TypeError(f"no TOML for {value!r}")


def config_toml(
    model: str | None,
    base_url: str,
    *,
    provider_name: str = "kirod",
    websockets: bool | None = False,
    retries: bool = False,
    settings: Mapping[str, Any] | None = None,
    tables: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """`config.toml` for a provider `kirod` at `base_url` (kirod's root, without `/v1`).

    `model=None` writes no `model` line, as many users do: Codex then asks for its catalog's
    first model. `provider_name` is what Codex compares with "OpenAI" to choose remote compaction;
    `websockets=None` leaves `supports_websockets` unset; `retries=True` leaves Codex's own
    retries on (0.171.0: a broken stream is sent again five times); `settings` are more
    top-level keys (e.g. `model_auto_compact_token_limit`); `tables` more tables (`features`,
    `analytics`).
    """
    lines = [f"model = {_toml_value(model)}"] if model is not None else []
    lines.append('model_provider = "kirod"')
    lines += [f"{key} = {_toml_value(value)}" for key, value in (settings or {}).items()]
    provider: dict[str, Any] = {
        "name": provider_name,
        "base_url": f"{base_url.rstrip('/')}/v1",
        "env_key": KEY_ENV,
        "wire_api": "responses",
    }
    if websockets is not None:
        provider["supports_websockets"] = websockets
    if not retries:
        provider.update(request_max_retries=0, stream_max_retries=0)
    for name, table in {"model_providers.kirod": provider, **(tables or {})}.items():
        lines += ["", f"[{name}]"]
        lines += [f"{key} = {_toml_value(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"


def client_env(home: Path, key: str) -> dict[str, str]:
    """A private HOME and CODEX_HOME, the key in `KIROD_API_KEY`, nothing else of ours."""
    return runs.private_env(home, {"CODEX_HOME": str(home / ".codex"), KEY_ENV: key})


def command(prompt: str, extra: Iterable[str] = (), *, resume: bool = False) -> list[str]:
    """`codex exec …`: `resume` continues the newest session (`exec resume --last`)."""
    tail = ["resume", "--last", prompt] if resume else [prompt]
    return ["codex", "exec", "--skip-git-repo-check", *extra, *tail]


# -- one run ------------------------------------------------------------------------------------


class Run(runs.Finished):
    """One finished `codex exec --json` process."""

    def items(self, kind: str) -> list[dict[str, Any]]:
        """The completed items of one type (`agent_message`, `command_execution`, `error`)."""
        return [
            event["item"]
            for event in self.events
            if event.get("type") == "item.completed" and event["item"].get("type") == kind
        ]

    @property
    def errors(self) -> list[str]:
        """Every error Codex reported: error items (warnings, WebSocket fallbacks), error events
        and a failed turn's message."""
        messages = [str(item.get("message")) for item in self.items("error")]
        for event in self.events:
            if event.get("type") == "error":
                messages.append(str(event.get("message")))
            if event.get("type") == "turn.failed":
                messages.append(str(event.get("error", {}).get("message")))
        return messages

    @property
    def answer(self) -> str | None:
        """The text of the last agent message."""
        messages = self.items("agent_message")
        return str(messages[-1]["text"]) if messages else None

    def succeeded(self) -> Run:
        """The run must have worked: exit 0, a completed turn, no failed one."""
        kinds = [event.get("type") for event in self.events]
        assert self.exit_code == 0, self.describe()
        assert "turn.completed" in kinds, self.describe()
        assert "turn.failed" not in kinds, self.describe()
        return self


class Codex(runs.Client):
    """Codex in a private HOME / CODEX_HOME and working directory, with one config.toml."""

    def __init__(
        self,
        binary: Binary,
        root: Path,
        key: str,
        config: str,
        extra_args: tuple[str, ...] = SANDBOX_ARGS,
    ) -> None:
        super().__init__(binary, root)
        self.extra_args = extra_args
        (self.home / ".codex").mkdir(parents=True, exist_ok=True)
        (self.home / ".codex" / "config.toml").write_text(config)
        self.env = client_env(self.home, key)

    def run(
        self, prompt: str, *args: str, resume: bool = False, timeout_s: float = RUN_TIMEOUT_S
    ) -> Run:
        """One `codex exec --json`, stdin closed, in its own process group (Codex starts
        `codex-code-mode-host` and shells; a timeout kills them all)."""
        extra = ["--json", *self.extra_args, *args]
        return self.launch(Run, command(prompt, extra, resume=resume), timeout_s)

    def rollout(self, kind: str = "response_item") -> list[dict[str, Any]]:
        """The payloads of one kind of entry of every session's rollout file
        (`sessions/**/rollout-*.jsonl`, oldest first). `response_item`: the items as Codex took
        them from kirod's output (`custom_tool_call`, `function_call`, …) and its own inputs;
        `compacted`: a compaction, with the `replacement_history` Codex continues from."""
        files = sorted((self.home / ".codex" / "sessions").glob("**/rollout-*.jsonl"))
        payloads = []
        for path in files:
            for line in path.read_text().splitlines():
                entry = json.loads(line) if line.strip() else {}
                if entry.get("type") == kind and isinstance(entry.get("payload"), dict):
                    payloads.append(entry["payload"])
        return payloads
