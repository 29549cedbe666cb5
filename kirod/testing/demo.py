"""`kirod demo` (and `make demo`): the whole path, with no Kiro account, in one command.

Starts the bundled fake Kiro service and a kirod on temporary paths, adds a demo account (a Kiro
API key the fake issued) and a demo API key through the control API, and prints a curl command,
SDK one-liners, ready configs for Claude Code, Codex and opencode, the fake's URL, and how to
stop. Ctrl-C (or SIGTERM) stops both and removes the temporary directory. The fake answers every
prompt by echoing it back.

Chat Completions, the API of OpenAI-compatible IDE providers, is off unless `--chat-completions`
or the user's own `enable_chat_completions` setting (a `KIROD_*` variable or the config file) turns
it on, as in a real kirod; the demo then prints the base URL, key and model an IDE needs. The
Gemini API is the same with `--gemini` (`enable_gemini_api`): the demo then writes Gemini CLI's
`settings.json` (the guide's, its compression threshold fitted to the served model's window) in
a folder of its own and prints the command that uses it.

`--check` starts the same pair, sends one request through the real daemon (through the Gemini
API when that is on, else /v1/chat/completions when that is, else /v1/messages), stops, and
exits 0 when the answer came back (1 otherwise): the smoke test of an install.

Only the runtime dependencies are needed (the fake is aiohttp); the SDK lines say how to install
an SDK this Python lacks.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from kirod.config import CONFIG_ENV, OPTIONS_BY_NAME, default_config_file, load_option
from kirod.errors import ConfigError, KirodError
from kirod.protocols.gemini import compression_threshold
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake

MODEL = "claude-sonnet-4-6"
CODE_MODE_MODEL = "gpt-5.6-sol"
KEY_ENV = "KIROD_API_KEY"
CHECK_TIMEOUT_S = 30.0
CHAT_COMPLETIONS = OPTIONS_BY_NAME["enable_chat_completions"]
GEMINI = OPTIONS_BY_NAME["enable_gemini_api"]
EXIT_USAGE = 2


@dataclass(frozen=True)
class Demo:
    """A running demo: where kirod serves, its key, and the files made for the clients."""

    root: Path
    base_url: str
    fake_url: str
    key: str
    socket: Path
    chat_completions: bool = False
    gemini: bool = False
    compression_threshold: float = 0.5
    """Gemini CLI's `model.compressionThreshold` for MODEL's window, as served."""

    @property
    def codex_home(self) -> Path:
        return self.root / "codex"

    @property
    def opencode_config(self) -> Path:
        return self.root / "opencode.json"

    @property
    def gemini_home(self) -> Path:
        """`GEMINI_CLI_HOME`: Gemini CLI reads `.gemini/settings.json` under it."""
        return self.root / "gemini"


def codex_config(base_url: str, model: str = CODE_MODE_MODEL) -> str:
    """docs/guide/client-settings.md, "Codex CLI": a provider `kirod` (not "OpenAI"), plain HTTP."""
    return "\n".join(
        (
            f'model = "{model}"                # or a Claude id: "{MODEL}"',
            'model_provider = "kirod"',
            "",
            "[model_providers.kirod]",
            'name = "kirod"',
            f'base_url = "{base_url}/v1"',
            f'env_key = "{KEY_ENV}"',
            'wire_api = "responses"',
            "supports_websockets = false",
            "",
        )
    )


def opencode_config(base_url: str) -> str:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "kirod": {
                "npm": "@ai-sdk/anthropic",
                "name": "kirod",
                "options": {"baseURL": f"{base_url}/v1", "apiKey": f"{{env:{KEY_ENV}}}"},
                "models": {MODEL: {"name": "Claude Sonnet 4.6 (Kiro)"}},
            }
        },
        "model": f"kirod/{MODEL}",
    }
    return json.dumps(config, indent=2) + "\n"


def gemini_settings(threshold: float) -> dict[str, Any]:
    """docs/guide/client-settings.md, "Gemini CLI": the API-key login, the model, a compression
    threshold for its window, no usage statistics."""
    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": MODEL, "compressionThreshold": threshold},
        "privacy": {"usageStatisticsEnabled": False},
    }


def _python_for(module: str, package: str) -> tuple[str, str | None]:
    """The Python to run an SDK line with, and how to install the SDK when this one lacks it."""
    if importlib.util.find_spec(module) is not None:
        return sys.executable, None
    return (
        "python3",
        f"  (needs the SDK: `python3 -m pip install {package}`, or any Python with it)",
    )


def instructions(demo: Demo) -> str:
    base_url, key = demo.base_url, demo.key
    body = json.dumps(
        {"model": MODEL, "max_tokens": 200, "messages": [{"role": "user", "content": "Hello!"}]}
    )
    messages = '[{"role": "user", "content": "Hello, Kiro!"}]'
    anthropic = (
        f"import anthropic; print(anthropic.Anthropic(base_url={json.dumps(base_url)}, "
        f"api_key={json.dumps(key)}).messages.create(model={json.dumps(MODEL)}, max_tokens=200, "
        f"messages={messages}).content[0].text)"
    )
    openai = (
        f"import openai; print(openai.OpenAI(base_url={json.dumps(base_url + '/v1')}, "
        f"api_key={json.dumps(key)}).responses.create(model={json.dumps(MODEL)}, "
        'input="Hello, Kiro!").output_text)'
    )
    anthropic_python, anthropic_missing = _python_for("anthropic", "anthropic")
    openai_python, openai_missing = _python_for("openai", "openai")
    codex_env = f"CODEX_HOME={demo.codex_home} {KEY_ENV}={key}"
    kiroctl = Path(sys.executable).parent / "kiroctl"
    lines = [
        f"kirod serves the fake Kiro service on {base_url} (API key {key}).",
        "",
        "curl:",
        f"  curl -s {base_url}/v1/messages -H 'x-api-key: {key}' "
        f"-H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' "
        f"-d {shlex.quote(body)}",
        "Anthropic SDK:",
        f"  {anthropic_python} -c {shlex.quote(anthropic)}",
        *([anthropic_missing] if anthropic_missing else []),
        "OpenAI SDK:",
        f"  {openai_python} -c {shlex.quote(openai)}",
        *([openai_missing] if openai_missing else []),
        "Claude Code (its default model is served by the newest Opus; pin one with --model):",
        f"  ANTHROPIC_BASE_URL={base_url} ANTHROPIC_AUTH_TOKEN={key} claude -p hello",
        f"Codex with {CODE_MODE_MODEL} (code mode):",
        f"  {codex_env} codex exec --skip-git-repo-check hello",
        f"Codex with a Claude model ({MODEL}):",
        f"  {codex_env} codex exec --skip-git-repo-check -m {MODEL} hello",
        f"Codex config ({demo.codex_home / 'config.toml'}; for ~/.codex/config.toml):",
        *(f"  {line}".rstrip() for line in codex_config(base_url).splitlines()),
        f"opencode (config in {demo.opencode_config}):",
        f"  OPENCODE_CONFIG={demo.opencode_config} {KEY_ENV}={key} opencode run hello",
        *chat_completions_lines(demo),
        *gemini_lines(demo),
        "kiroctl:",
        f"  KIROD_SOCKET_PATH={demo.socket} {kiroctl} status",
        "The fake Kiro service (every answer echoes the prompt):",
        f"  {demo.fake_url}",
        "",
        f"Press Ctrl-C (or `kill {os.getpid()}`) to stop both and remove {demo.root}.",
    ]
    return "\n".join(lines)


def chat_completions_lines(demo: Demo) -> list[str]:
    """What an OpenAI-compatible IDE provider needs, or how to turn Chat Completions on."""
    if not demo.chat_completions:
        config = os.environ.get(CONFIG_ENV) or default_config_file()
        return [
            "Chat Completions (/v1/chat/completions, the API of OpenAI-compatible IDE providers) "
            "is off, as in a real kirod; to try it:",
            f"  kirod demo --chat-completions   (or {CHAT_COMPLETIONS.env}=1, or "
            f"{CHAT_COMPLETIONS.name} = true in {config})",
        ]
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Hello!"}]})
    return [
        "OpenAI-compatible IDE provider (Chat Completions: JetBrains AI Assistant, Zed, "
        "Continue, Cline, ...):",
        f"  base URL  {demo.base_url}/v1",
        f"  API key   {demo.key}",
        f"  model     {MODEL}",
        "curl (Chat Completions):",
        f"  curl -s {demo.base_url}/v1/chat/completions -H 'authorization: Bearer {demo.key}' "
        f"-H 'content-type: application/json' -d {shlex.quote(body)}",
    ]


def gemini_lines(demo: Demo) -> list[str]:
    """Gemini CLI's command and settings, or how to turn the Gemini API on."""
    if not demo.gemini:
        config = os.environ.get(CONFIG_ENV) or default_config_file()
        return [
            "The Gemini API (/v1beta/models, for Gemini CLI) is off, as in a real kirod; to try "
            "it:",
            f"  kirod demo --gemini   (or {GEMINI.env}=1, or {GEMINI.name} = true in {config})",
        ]
    settings = demo.gemini_home / ".gemini" / "settings.json"
    return [
        f"Gemini CLI (settings in {settings}; for ~/.gemini/settings.json):",
        f"  GEMINI_CLI_HOME={demo.gemini_home} GOOGLE_GEMINI_BASE_URL={demo.base_url} "
        f"GEMINI_API_KEY={demo.key} gemini -p hello --skip-trust",
        *(
            f"  {line}"
            for line in json.dumps(gemini_settings(demo.compression_threshold), indent=2).split(
                "\n"
            )
        ),
    ]


def _window(base_url: str, key: str) -> int:
    """MODEL's input window, as kirod's Gemini API describes it."""
    request = urllib.request.Request(  # noqa: S310 (a loopback http URL we built)
        f"{base_url}/v1beta/models/{MODEL}", headers={"x-goog-api-key": key}
    )
    with urllib.request.urlopen(request, timeout=CHECK_TIMEOUT_S) as response:  # noqa: S310
        window: int = json.load(response)["inputTokenLimit"]
    return window


@contextlib.contextmanager
def running_demo(*, chat_completions: bool = False, gemini: bool = False) -> Iterator[Demo]:
    """The fake and a kirod on a temporary root, with a demo account and key; removed after."""
    root = Path(tempfile.mkdtemp(prefix="kirod-demo-"))
    try:
        with ThreadedFake() as fake:
            daemon = DaemonProcess(
                root / "kirod",
                env={
                    "KIROD_KIRO_ENDPOINT": fake.base_url,
                    "KIROD_KIRO_AUTH_ENDPOINT": fake.base_url,
                    "KIROD_OIDC_ENDPOINT": fake.base_url,
                    # A real kirod's default: `kiroctl logs` shows each request's access line.
                    # The log goes to a file in the demo's directory, never to the terminal.
                    "KIROD_LOG_LEVEL": "info",
                    CHAT_COMPLETIONS.env: "1" if chat_completions else "0",
                    GEMINI.env: "1" if gemini else "0",
                },
            )
            try:
                daemon.wait_ready()
                account = fake.fake.issue_api_key_account()
                daemon.client.request("POST", "/accounts/import", {"api_key": account.access_token})
                key = daemon.client.request("POST", "/keys", {"name": "demo"})["secret"]
                threshold = compression_threshold(_window(daemon.base_url, key)) if gemini else 0.5
                demo = Demo(
                    root,
                    daemon.base_url,
                    fake.base_url,
                    key,
                    daemon.socket_path,
                    chat_completions,
                    gemini,
                    threshold,
                )
                demo.codex_home.mkdir(mode=0o700)
                if gemini:
                    folder = demo.gemini_home / ".gemini"
                    folder.mkdir(parents=True, mode=0o700)
                    text = json.dumps(gemini_settings(threshold), indent=2) + "\n"
                    (folder / "settings.json").write_text(text)
                (demo.codex_home / "config.toml").write_text(codex_config(demo.base_url))
                demo.opencode_config.write_text(opencode_config(demo.base_url))
                yield demo
            finally:
                daemon.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _post(url: str, body: dict[str, object], headers: dict[str, str]) -> Any:
    request = urllib.request.Request(  # noqa: S310 (a loopback http URL we built)
        url,
        data=json.dumps(body).encode(),
        headers={**headers, "content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=CHECK_TIMEOUT_S) as response:  # noqa: S310
        return json.load(response)


def ask(demo: Demo, prompt: str = "Hello, Kiro!") -> str:
    """One Anthropic Messages request through kirod; the answer's text."""
    answer = _post(
        f"{demo.base_url}/v1/messages",
        {"model": MODEL, "max_tokens": 200, "messages": [{"role": "user", "content": prompt}]},
        {"x-api-key": demo.key, "anthropic-version": "2023-06-01"},
    )
    return "".join(block.get("text", "") for block in answer.get("content", []))


def ask_chat(demo: Demo, prompt: str = "Hello, Kiro!") -> str:
    """One Chat Completions request through kirod, as an IDE's provider sends it; its text."""
    answer = _post(
        f"{demo.base_url}/v1/chat/completions",
        {"model": MODEL, "messages": [{"role": "user", "content": prompt}]},
        {"authorization": f"Bearer {demo.key}"},
    )
    return "".join(choice["message"].get("content") or "" for choice in answer["choices"])


def ask_gemini(demo: Demo, prompt: str = "Hello, Kiro!") -> str:
    """One Gemini API request through kirod, as Gemini CLI's key header sends it; its text."""
    answer = _post(
        f"{demo.base_url}/v1beta/models/{MODEL}:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": prompt}]}]},
        {"x-goog-api-key": demo.key},
    )
    parts = answer["candidates"][0]["content"]["parts"]
    return "".join(part.get("text", "") for part in parts if not part.get("thought"))


def check(*, chat_completions: bool = False, gemini: bool = False) -> int:
    started = time.monotonic()
    if gemini:
        route, asking = f"/v1beta/models/{MODEL}:generateContent", ask_gemini
    elif chat_completions:
        route, asking = "/v1/chat/completions", ask_chat
    else:
        route, asking = "/v1/messages", ask
    try:
        with running_demo(chat_completions=chat_completions, gemini=gemini) as demo:
            text = asking(demo)
    # LookupError, TypeError: an answer of another shape
    except (KirodError, OSError, RuntimeError, ValueError, LookupError, TypeError) as exc:
        print(f"kirod demo --check: failed through {route}: {exc}", file=sys.stderr, flush=True)
        return 1
    if "Hello, Kiro!" not in text:
        print(f"kirod demo --check: unexpected answer {text!r}", file=sys.stderr, flush=True)
        return 1
    elapsed = time.monotonic() - started
    print(f"kirod demo --check: ok through {route} ({text!r}, {elapsed:.1f} s)", flush=True)
    return 0


def serve(*, chat_completions: bool = False, gemini: bool = False) -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    with running_demo(chat_completions=chat_completions, gemini=gemini) as demo:
        print(instructions(demo), flush=True)
        stop.wait()
    print("Stopped; the demo's files are removed.", flush=True)
    return 0


def main(
    argv: list[str] | None = None,
    flags: Mapping[str, object] | None = None,
    config_path: Path | None = None,
) -> int:
    """`flags` and `config_path`: what `kirod` was given before `demo` (its own flags)."""
    parser = argparse.ArgumentParser(
        prog="kirod demo",
        description="Run the fake Kiro service and a kirod on temporary paths, and print how to "
        "point curl, the SDKs, Claude Code, Codex, opencode, OpenAI-compatible IDEs and Gemini "
        "CLI at it.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="start both, answer one request through kirod (through the Gemini API or "
        "/v1/chat/completions when it is on), stop; exit 0 if it worked, else 1",
    )
    parser.add_argument(
        "--chat-completions",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"serve /v1/chat/completions, off by default as in a real kirod [default: "
        f"{CHAT_COMPLETIONS.env}, or {CHAT_COMPLETIONS.name} in the config file]",
    )
    parser.add_argument(
        "--gemini",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"serve the Gemini API and print Gemini CLI's settings, off by default as in a real "
        f"kirod [default: {GEMINI.env}, or {GEMINI.name} in the config file]",
    )
    args = parser.parse_args(argv)
    given = dict(flags or {})
    if args.chat_completions is not None:
        given[CHAT_COMPLETIONS.name] = args.chat_completions
    if args.gemini is not None:
        given[GEMINI.name] = args.gemini
    try:
        chat_completions = bool(load_option(CHAT_COMPLETIONS.name, given, config_path=config_path))
        gemini = bool(load_option(GEMINI.name, given, config_path=config_path))
    except ConfigError as exc:
        print(f"kirod demo: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.check:
        return check(chat_completions=chat_completions, gemini=gemini)
    return serve(chat_completions=chat_completions, gemini=gemini)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
