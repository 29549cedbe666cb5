"""Record what each client sends, for the tests to replay and `make clients-latest` to compare:
every client the tests drive, run once against `recorder.py`'s loopback server, which logs every
request and refuses it.

    python -m tests.clients.capture                       # the pinned Claude Code, `-p hello`
    python -m tests.clients.capture --client NAME         # any client versions.json pins
    python -m tests.clients.capture --client codex        # the pinned Codex, once per model
    python -m tests.clients.capture --client codex --model gpt-5.6-sol --compare FILE
    python -m tests.clients.capture --client llm --version 0.37 --compare captures/X.json
    python -m tests.clients.capture --client cline --bin PATH --out FILE
    python -m tests.clients.capture --client openai-agents    # an agent SDK: its venv's python

Each client runs as its tests run it (its `*_env` driver: the guide's settings, a private HOME,
no traffic beyond the gateway), asked `hello` (Cline `say hello`: it takes a lone word for a
command; the agent SDKs run their driver's `hello` script). The server's 400 (`x-should-retry:
false`, in Anthropic's error envelope; OpenAI's for Codex, whose config.toml turns retries off,
and the OpenAI Agents SDK) ends the run at once, but for Claude Code under the Claude Agent SDK,
which sends a refused turn again in other shapes (docs/CLIENTS.md §5.4). The capture,
`captures/<client>-<version>-default.json`, holds the version, the command, the settings and
environment as the guide writes them (base URL and key as placeholders), the server's answer,
the exit code and every request: method, path and query, headers minus credentials, JSON body,
with `recorder.sanitize`'s placeholders.

Gemini CLI runs twice: with the guide's settings (`default`), and without `model.name`
(`no-model`: its router's side call first); the server answers in Google's envelope, and the
date in its first turn and its install path become `<date>` and `<install>`.

Codex runs once per model of `CODEX_MODELS` (gpt-5.6-sol, code mode, and claude-sonnet-4-6, the
classic shape) into `captures/codex-<version>-<model>.json`: every distinct UUID gets a
placeholder of its own, named in the capture's `placeholders` (session = thread id, installation
id, turn id, …), and timestamps in milliseconds become 0. aider's platform and date, and the
dates in Kilo's and Cline's prompts, become `<platform>` and `<date>`.

`--compare` prints how the requests differ from an earlier capture (`capture_diff.differences`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.clients import (
    agents_env,
    aider_env,
    cc_env,
    claude_sdk_env,
    cline_env,
    codex_env,
    continue_env,
    copilot_env,
    gemini_cli_env,
    install,
    kilo_env,
    llm_env,
    opencode_env,
    pi_env,
    recorder,
    runs,
)
from tests.clients.capture_diff import api_requests, differences
from tests.clients.recorder import BASE_URL_PLACEHOLDER, HOME_PLACEHOLDER, TOKEN
from tests.support.captures import DEFAULT, PROMPT, output

CLINE_PROMPT = "say hello"
"""Cline takes a lone word for a command name."""
CODEX_MODELS = (codex_env.CODE_MODE_MODEL, codex_env.CLAUDE_MODEL)
PLATFORM_PLACEHOLDER = "<platform>"
DATE_PLACEHOLDER = "<date>"

PLATFORM_AND_DATE: recorder.Scrubs = (
    (re.compile(r"(- Platform: )\S+"), rf"\g<1>{PLATFORM_PLACEHOLDER}"),
    (re.compile(r"(- Current date: )\d{4}-\d{2}-\d{2}"), rf"\g<1>{DATE_PLACEHOLDER}"),
)
"""aider's "system info" lines."""
PROMPT_DATES: recorder.Scrubs = tuple(
    (re.compile(pattern), rf"\g<1>{DATE_PLACEHOLDER}")
    for pattern in (
        r"(Today's date: )\w{3} \w{3} \d{2} \d{4}",  # Kilo's system prompt
        r"(Message time: )\d{4}-\d{2}-\d{2}T[\d:]+Z",  # Kilo's turn
        r"(\d\. Date: )\d{1,2}/\d{1,2}/\d{4}",  # Cline's system prompt
    )
)
"""The dates Kilo and Cline put in their prompts."""
PI_DATE: recorder.Scrubs = (
    (re.compile(r"(\nCurrent date: )\d{4}-\d{2}-\d{2}"), rf"\g<1>{DATE_PLACEHOLDER}"),
)
"""The day at the end of pi's system prompt."""
PI_PACKAGE: recorder.Scrubs = (
    (re.compile(r"(?:/[^/\s]+)+(/node_modules/@mariozechner/pi-coding-agent/)"), r"<install>\g<1>"),
)
"""Where pi is installed, which its system prompt names (its documentation's paths)."""
PI_PLACEHOLDERS = PI_DATE + PI_PACKAGE
INSTALL_PLACEHOLDER = "<install>"
GEMINI_SCRUBS: recorder.Scrubs = (
    (re.compile(r"(Today's date is )[^.]*\d{4}"), rf"\g<1>{DATE_PLACEHOLDER}"),
    (
        re.compile(r"/[^\s<>\"]*/(node_modules/@google/gemini-cli/)"),
        rf"{INSTALL_PLACEHOLDER}/\g<1>",
    ),
)
"""The date in Gemini CLI's first turn, and where it is installed (its built-in skills' paths)."""
CODEX_ID_ROLES = ("session_id", "thread_id", "installation_id", "turn_id", "context_window_id")
"""UUIDs of `x-codex-turn-metadata` that get a placeholder of their own, in this order (the
session and the thread share one id in `codex exec`)."""
_UUID = re.compile(recorder.UUID)


@dataclass(frozen=True)
class Launch:
    """A client made ready by its driver to run at the recording server, and how its capture
    shows the run: `shown` holds the `command` it runs, its settings and environment, in the
    capture's order."""

    client: runs.Client
    shown: dict[str, Any]


Prepare = Callable[[install.Binary, Path, str, str], Launch]
"""(binary, root, the server's base URL, the variant) → the run."""


@dataclass(frozen=True)
class Recipe:
    """How to capture one client."""

    prepare: Prepare
    version: Callable[[str], str]
    """The version, from the first line `--version` prints."""
    variants: tuple[str, ...] = (DEFAULT,)
    answer: Mapping[str, Any] = field(default_factory=lambda: recorder.ANSWER)
    scrubs: recorder.Scrubs = ()
    id_roles: Callable[[list[dict[str, Any]]], dict[str, str]] | None = None
    """Each UUID's own placeholder, named in the capture (Codex); else one for all."""


def _claude_code(binary: install.Binary, root: Path, base_url: str, _: str) -> Launch:
    client = cc_env.ClaudeCode(binary, base_url, TOKEN, root)
    environment = {
        "ANTHROPIC_BASE_URL": BASE_URL_PLACEHOLDER,
        "ANTHROPIC_AUTH_TOKEN": "<token>",
        **cc_env.OFFLINE,
        "HOME": HOME_PLACEHOLDER,
    }
    return Launch(client, {"command": cc_env.command(PROMPT), "environment": environment})


def _codex(binary: install.Binary, root: Path, base_url: str, model: str) -> Launch:
    config = codex_env.config_toml(model, base_url, websockets=None)
    client = codex_env.Codex(binary, root, TOKEN, config, extra_args=())
    shown = {
        "model": model,
        "command": codex_env.command(PROMPT),
        "config_toml": codex_env.config_toml(model, BASE_URL_PLACEHOLDER, websockets=None),
        "environment": {
            "HOME": HOME_PLACEHOLDER,
            "CODEX_HOME": f"{HOME_PLACEHOLDER}/.codex",
            codex_env.KEY_ENV: "<token>",
        },
    }
    return Launch(client, shown)


def _opencode(binary: install.Binary, root: Path, base_url: str, _: str) -> Launch:
    client = opencode_env.OpenCode(binary, TOKEN, root)
    client.configure(opencode_env.config(base_url))
    shown = {
        "command": opencode_env.command(PROMPT),
        "opencode_json": opencode_env.config("<base_url>"),
        "environment": {
            "HOME": HOME_PLACEHOLDER,
            opencode_env.KEY_ENV: "<token>",
            **opencode_env.OFFLINE,
        },
    }
    return Launch(client, shown)


def _kilo_code(binary: install.Binary, root: Path, base_url: str, _: str) -> Launch:
    client = kilo_env.KiloCode(binary, TOKEN, root)
    client.configure(kilo_env.config(base_url))
    shown = {
        "command": kilo_env.command(PROMPT),
        "kilo_json": kilo_env.config(BASE_URL_PLACEHOLDER),
        "environment": {"HOME": HOME_PLACEHOLDER, kilo_env.KEY_ENV: "<token>", **kilo_env.OFFLINE},
    }
    return Launch(client, shown)


def _cline(binary: install.Binary, root: Path, base_url: str, _: str) -> Launch:
    client = cline_env.Cline(binary, root)
    client.configure(cline_env.providers(base_url, TOKEN))
    shown = {
        "command": cline_env.command(CLINE_PROMPT, client.home),
        "providers_json": cline_env.providers(BASE_URL_PLACEHOLDER, "<token>"),
        "global_settings_json": cline_env.GLOBAL_SETTINGS,
        "environment": {"HOME": HOME_PLACEHOLDER, **cline_env.OFFLINE},
    }
    return Launch(client, shown)


def _continue(binary: install.Binary, root: Path, base_url: str, _: str) -> Launch:
    client = continue_env.Continue(binary, TOKEN, root)
    client.configure(continue_env.config(base_url))
    shown = {
        "command": continue_env.command(PROMPT, str(client.config_file)),
        "config_yaml": continue_env.config("<base_url>"),
        "environment": {
            "HOME": HOME_PLACEHOLDER,
            continue_env.KEY_ENV: "<token>",
            **continue_env.OFFLINE,
        },
    }
    return Launch(client, shown)


def _copilot(binary: install.Binary, root: Path, base_url: str, _: str) -> Launch:
    client = copilot_env.Copilot(binary, copilot_env.provider_env(base_url, TOKEN), root)
    provider = copilot_env.provider_env(BASE_URL_PLACEHOLDER, "<token>")
    environment = {"HOME": HOME_PLACEHOLDER, **copilot_env.OFFLINE, **provider}
    return Launch(client, {"command": copilot_env.command(PROMPT), "environment": environment})


GEMINI_NO_MODEL = "no-model"
"""Gemini CLI's second capture: the guide's settings without `model.name` (its router call)."""
GEMINI_VARIANTS = (DEFAULT, GEMINI_NO_MODEL)


def _gemini_cli(binary: install.Binary, root: Path, base_url: str, variant: str) -> Launch:
    settings = gemini_cli_env.guide_settings()
    if variant == GEMINI_NO_MODEL:
        settings = gemini_cli_env.without_model(settings)
    client = gemini_cli_env.GeminiCli(binary, base_url, TOKEN, root, settings)
    shown = {
        "command": gemini_cli_env.command(PROMPT),
        "settings_json": settings,
        "environment": {
            "HOME": HOME_PLACEHOLDER,
            **gemini_cli_env.TRUST,
            gemini_cli_env.BASE_URL_ENV: BASE_URL_PLACEHOLDER,
            gemini_cli_env.KEY_ENV: "<token>",
        },
    }
    return Launch(client, shown)


def _driver_settings(client: runs.Client, base_url: str) -> dict[str, str]:
    """The variables a driver set (HOME and the client's own), not the machine's (PATH, locale,
    the XDG folders), with the server's base URL as a placeholder."""
    machine = set(runs.private_env(client.home)) - {"HOME"}
    return {
        name: value.replace(base_url, BASE_URL_PLACEHOLDER)
        for name, value in client.env.items()
        if name not in machine
    }


def _aider(binary: install.Binary, root: Path, base_url: str, _: str) -> Launch:
    client = aider_env.Aider(binary, base_url, TOKEN, root)
    metadata = json.loads((client.home / aider_env.METADATA_FILE).read_text())
    shown = {
        "command": aider_env.command(PROMPT),
        "environment": _driver_settings(client, base_url),
        "files": {f"~/{aider_env.METADATA_FILE}": metadata},  # what aider reads of HOME
    }
    return Launch(client, shown)


def _llm(binary: install.Binary, root: Path, base_url: str, _: str) -> Launch:
    client = llm_env.LLM(binary, base_url, TOKEN, root)
    listed = client.launch(runs.Finished, ["llm", "plugins"], recorder.RUN_TIMEOUT_S)
    if listed.exit_code:
        raise RuntimeError(listed.describe())
    shown = {
        "plugins": {plugin["name"]: plugin["version"] for plugin in json.loads(listed.stdout)},
        "command": llm_env.command(PROMPT),
        "environment": _driver_settings(client, base_url),
    }
    return Launch(client, shown)


def _pi(binary: install.Binary, root: Path, base_url: str, api: str) -> Launch:
    client = pi_env.Pi(binary, TOKEN, root)
    client.configure(pi_env.models_json(base_url))
    provider = pi_env.PROVIDERS[api]
    shown = {
        "api": api,
        "command": pi_env.command(PROMPT, provider),
        "models_json": pi_env.models_json(BASE_URL_PLACEHOLDER),
        "environment": {"HOME": HOME_PLACEHOLDER, pi_env.KEY_ENV: "<token>", **pi_env.OFFLINE},
    }
    return Launch(client, shown)


def _openai_agents(binary: install.Binary, root: Path, base_url: str, _: str) -> Launch:
    client = agents_env.Agents(binary, TOKEN, root)
    (client.workdir / agents_env.SCRIPT).write_text(agents_env.script(agents_env.HELLO, base_url))
    shown = {
        "command": agents_env.command(),
        "script": agents_env.script(agents_env.HELLO, BASE_URL_PLACEHOLDER),
        "environment": _driver_settings(client, base_url),
    }
    return Launch(client, shown)


def _claude_agent_sdk(binary: install.Binary, root: Path, base_url: str, _: str) -> Launch:
    cli = cc_env.locate().path
    if cli is None:
        raise RuntimeError("the Claude Agent SDK drives the pinned Claude Code: run `make clients`")
    client = claude_sdk_env.ClaudeSDK(binary, cli, base_url, TOKEN, root)
    client.write(claude_sdk_env.HELLO)
    shown = {
        "command": claude_sdk_env.command(),
        "script": claude_sdk_env.HELLO,
        "cli_path": f"claude-code {install.pin(cc_env.CLIENT).version}",
        "environment": _driver_settings(client, base_url),
    }
    return Launch(client, shown)


def _codex_id_roles(records: list[dict[str, Any]]) -> dict[str, str]:
    """UUID → the names it has in the first `x-codex-turn-metadata` (`session_id = thread_id`)."""
    for record in records:
        raw = record["headers"].get("x-codex-turn-metadata")
        try:
            metadata = json.loads(raw) if raw else None
        except ValueError:
            continue
        if not isinstance(metadata, dict):
            continue
        roles: dict[str, str] = {}
        for key in CODEX_ID_ROLES:
            value = metadata.get(key)
            if isinstance(value, str) and _UUID.fullmatch(value):
                roles[value] = f"{roles[value]} = {key}" if value in roles else key
        return roles
    return {}


def _first_word(printed: str) -> str:
    """`2.1.332 (Claude Code)` → `2.1.332`."""
    return printed.split()[0]


def _last_word(printed: str) -> str:
    """`aider 0.86.2` → `0.86.2`; `llm, version 0.36` → `0.36`."""
    return printed.split()[-1]


def _as_printed(printed: str) -> str:
    return printed


RECIPES: dict[str, Recipe] = {
    cc_env.CLIENT: Recipe(_claude_code, _first_word),
    codex_env.CLIENT: Recipe(
        _codex,
        codex_env.reported_version,
        variants=CODEX_MODELS,
        answer=recorder.OPENAI_ANSWER,
        id_roles=_codex_id_roles,
    ),
    opencode_env.CLIENT: Recipe(_opencode, _as_printed),
    kilo_env.CLIENT: Recipe(_kilo_code, _as_printed, scrubs=PROMPT_DATES),
    cline_env.CLIENT: Recipe(_cline, _as_printed, scrubs=PROMPT_DATES),
    continue_env.CLIENT: Recipe(_continue, _as_printed),
    copilot_env.CLIENT: Recipe(_copilot, copilot_env.reported_version),
    aider_env.CLIENT: Recipe(_aider, _last_word, scrubs=PLATFORM_AND_DATE),
    llm_env.CLIENT: Recipe(_llm, _last_word, scrubs=PLATFORM_AND_DATE),
    gemini_cli_env.CLIENT: Recipe(
        _gemini_cli,
        _as_printed,
        variants=GEMINI_VARIANTS,
        answer=recorder.GEMINI_ANSWER,
        scrubs=GEMINI_SCRUBS,
    ),
    pi_env.CLIENT: Recipe(
        _pi, _as_printed, variants=tuple(pi_env.PROVIDERS), scrubs=PI_PLACEHOLDERS
    ),
    agents_env.CLIENT: Recipe(_openai_agents, _last_word, answer=recorder.OPENAI_ANSWER),
    claude_sdk_env.CLIENT: Recipe(_claude_agent_sdk, _last_word),
}
"""Every client the tests drive, in versions.json's order."""


def every_capture() -> list[tuple[str, str]]:
    """(client, variant) of each capture: one per client, one per model for Codex."""
    return [(client, variant) for client, recipe in RECIPES.items() for variant in recipe.variants]


async def _capture(client: str, binary: install.Binary, variant: str, root: Path) -> dict[str, Any]:
    recipe = RECIPES[client]

    async def run(base_url: str) -> tuple[int, dict[str, Any]]:
        launch = recipe.prepare(binary, root, base_url, variant)
        ready = launch.client
        argv = ready.argv(launch.shown["command"])
        code, _ = await recorder.run_client(argv, ready.workdir, ready.env)
        return code, launch.shown

    (exit_code, shown), records = await recorder.record(run, recipe.answer["body"])
    document = {
        "client": client,
        "version": recipe.version(install.binary_version(binary.path)),
        **shown,
        "server_answer": recipe.answer,
        "exit_code": exit_code,
        **({"placeholders": {}} if recipe.id_roles else {}),
        "requests": records,
    }
    roles = recipe.id_roles(records) if recipe.id_roles else None
    sanitized = recorder.sanitize(
        document, workdir=root / "work", home=root / "home", token=TOKEN, id_roles=roles
    )
    result: dict[str, Any] = recorder.scrub(sanitized, recipe.scrubs)
    return result


def capture(client: str, binary: Path, variant: str = DEFAULT) -> dict[str, Any]:
    """Run `client` once (Codex: with the model `variant`) against the recording server; the
    sanitised capture."""
    root = Path(tempfile.mkdtemp(prefix="kd-capture-"))
    try:
        return asyncio.run(_capture(client, install.Binary(binary, ""), variant, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def pinned_output(client: str, variant: str = DEFAULT) -> Path:
    """The committed capture of the pinned version of `client`."""
    return output(client, install.pin(client).version, variant)


def capture_to(
    client: str,
    binary: Path,
    variant: str = DEFAULT,
    out: Path | None = None,
    compare: Path | None = None,
) -> int:
    """Capture `client` (see `capture`) into `out` (by default its file in captures/) and print
    how it differs from the capture `compare`; 1 when it holds no request to the model's API."""
    result = capture(client, binary, variant)
    out = out or output(client, result["version"], variant)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    named = client if variant == DEFAULT else f"{client} ({variant})"
    print(f"{named} {result['version']}: {len(result['requests'])} requests captured in {out}")
    if not api_requests(result):
        print(f"{named}: no request to the model's API was captured", file=sys.stderr)
        return 1
    if compare:
        old = json.loads(compare.read_text())
        lines = differences(old, result)
        print(f"compared with {compare} ({old['version']}):")
        print("\n".join(f"  {line}" for line in lines) if lines else "  no differences")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--client", choices=tuple(RECIPES), default=cc_env.CLIENT, help="default: claude-code"
    )
    parser.add_argument("--bin", type=Path, help="the client binary (default: the installed pin)")
    parser.add_argument("--version", help="an installed version in .cache/clients")
    parser.add_argument(
        "--model",
        help=f"codex: a model, default each of {', '.join(CODEX_MODELS)}; gemini-cli: "
        f"{' or '.join(GEMINI_VARIANTS)}, default both",
    )
    parser.add_argument(
        "--out", type=Path, help="default: captures/<client>-<version>-default (codex: -<model>)"
    )
    parser.add_argument("--compare", type=Path, help="an earlier capture to diff against")
    args = parser.parse_args(argv)
    variants = RECIPES[args.client].variants
    if args.model and variants == (DEFAULT,):
        parser.error("--model is for --client codex or gemini-cli")
    if args.model:
        variants = (args.model,)
    if len(variants) > 1 and (args.out or args.compare):
        parser.error("--out and --compare need one --model")
    version = args.version or install.pin(args.client).version
    binary = args.bin or install.installed(args.client, version)
    if binary is None:
        print(f"{args.client} {version} is not installed (run `make clients`)", file=sys.stderr)
        return 2
    code = 0
    for variant in variants:
        code = capture_to(args.client, binary, variant, args.out, args.compare) or code
    return code


if __name__ == "__main__":
    sys.exit(main())
