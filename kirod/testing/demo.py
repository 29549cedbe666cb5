"""`make demo`: the whole path, with no Kiro account, in one command.

Starts the bundled fake Kiro service and a kirod on temporary paths, adds a demo account (a Kiro
API key the fake issued) and a demo API key through the control API, and prints a curl command, SDK
one-liners and the Claude Code settings that work against it. Ctrl-C (or SIGTERM) stops both and
removes the temporary directory. The fake answers every prompt by echoing it back.
"""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake

MODEL = "claude-sonnet-4-6"


def instructions(base_url: str, key: str, socket: Path) -> str:
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
    return "\n".join(
        (
            f"kirod serves the fake Kiro service on {base_url} (API key {key}).",
            "",
            "curl:",
            f"  curl -s {base_url}/v1/messages -H 'x-api-key: {key}' "
            f"-H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' "
            f"-d {shlex.quote(body)}",
            "Anthropic SDK:",
            f"  {sys.executable} -c {shlex.quote(anthropic)}",
            "OpenAI SDK:",
            f"  {sys.executable} -c {shlex.quote(openai)}",
            "Claude Code (its default model is served by the newest Opus; pin one with --model):",
            f"  ANTHROPIC_BASE_URL={base_url} ANTHROPIC_AUTH_TOKEN={key} claude -p hello",
            "kiroctl:",
            f"  KIROD_SOCKET_PATH={socket} {Path(sys.executable).parent / 'kiroctl'} status",
            "",
            "Press Ctrl-C to stop and clean up.",
        )
    )


def main() -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    root = Path(tempfile.mkdtemp(prefix="kirod-demo-"))
    try:
        with ThreadedFake() as fake:
            daemon = DaemonProcess(
                root,
                env={
                    "KIROD_KIRO_ENDPOINT": fake.base_url,
                    "KIROD_KIRO_AUTH_ENDPOINT": fake.base_url,
                    "KIROD_OIDC_ENDPOINT": fake.base_url,
                    "KIROD_LOG_LEVEL": "warning",
                },
            )
            try:
                daemon.wait_ready()
                account = fake.fake.issue_api_key_account()
                daemon.client.request("POST", "/accounts/import", {"api_key": account.access_token})
                key = daemon.client.request("POST", "/keys", {"name": "demo"})["secret"]
                print(instructions(daemon.base_url, key, daemon.socket_path), flush=True)
                stop.wait()
            finally:
                daemon.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("Stopped; the demo's files are removed.", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
