"""Record what Kilo Code and Cline send, as `capture.py` does for the first three clients.

    python tests/clients/agent_capture.py --client kilo-code     # the pinned kilo, one prompt
    python tests/clients/agent_capture.py --client cline --compare tests/clients/captures/X.json
    python tests/clients/agent_capture.py --client cline --bin PATH --out FILE

Each client runs once, with the README's configuration (the Anthropic provider) pointed at
`capture.py`'s loopback server, which records every request and refuses it with a 400 Anthropic
error (`x-should-retry: false`); both clients then stop at once. The capture
(`captures/<client>-<version>-default.json`) keeps method, path, headers minus credentials, and
the JSON body, with `capture.sanitize`'s placeholders: the working directory, the home directory,
session ids (Kilo's `ses_…`, the same shape as opencode's); the dates in their prompts become
`<date>`. `--compare` lists what changed since an earlier capture, as `capture.py --compare`
does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture
import cline_env
import install
import kilo_env

CLIENTS = (kilo_env.CLIENT, cline_env.CLIENT)
PROMPTS = {kilo_env.CLIENT: "hello", cline_env.CLIENT: "say hello"}
"""What each client is asked (Cline takes a lone word for a command name)."""
BASE_URL_PLACEHOLDER = "http://127.0.0.1:<port>"
DATE_PLACEHOLDER = "<date>"
ANSWER = {"status": 400, "headers": {"x-should-retry": "false"}, "body": capture.REFUSAL}
_DATES = (
    re.compile(r"(Today's date: )\w{3} \w{3} \d{2} \d{4}"),  # Kilo's system prompt
    re.compile(r"(Message time: )\d{4}-\d{2}-\d{2}T[\d:]+Z"),  # Kilo's turn
    re.compile(r"(\d\. Date: )\d{1,2}/\d{1,2}/\d{4}"),  # Cline's system prompt
)


def pinned(client: str) -> dict[str, Any]:
    """The committed capture of the pinned version of `client`."""
    path = capture.client_output(client, install.pin(client).version)
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def undated(value: Any) -> Any:
    """`value` with the dates and times the clients put in their prompts replaced by a
    placeholder, in every string, so that two captures differ only where the clients do."""
    if isinstance(value, str):
        for pattern in _DATES:
            value = pattern.sub(rf"\g<1>{DATE_PLACEHOLDER}", value)
        return value
    if isinstance(value, list):
        return [undated(item) for item in value]
    if isinstance(value, dict):
        return {key: undated(item) for key, item in value.items()}
    return value


Runner = Callable[[Path, Path, str], Awaitable[tuple[int, dict[str, Any]]]]


async def _kilo(binary: Path, root: Path, base_url: str) -> tuple[int, dict[str, Any]]:
    client = kilo_env.KiloCode(install.Binary(binary, ""), capture.TOKEN, root)
    client.configure(kilo_env.config(base_url))
    argv = kilo_env.command(PROMPTS[kilo_env.CLIENT])
    code, _ = await capture._run_client([str(binary), *argv[1:]], client.workdir, client.env)
    return code, {
        "command": argv,
        "kilo_json": kilo_env.config(BASE_URL_PLACEHOLDER),
        "environment": {
            "HOME": capture.HOME_PLACEHOLDER,
            kilo_env.KEY_ENV: "<token>",
            **kilo_env.OFFLINE,
        },
    }


async def _cline(binary: Path, root: Path, base_url: str) -> tuple[int, dict[str, Any]]:
    client = cline_env.Cline(install.Binary(binary, ""), root)
    client.configure(cline_env.providers(base_url, capture.TOKEN))
    argv = cline_env.command(PROMPTS[cline_env.CLIENT], client.home)
    code, _ = await capture._run_client([str(binary), *argv[1:]], client.workdir, client.env)
    return code, {
        "command": argv,
        "providers_json": cline_env.providers(BASE_URL_PLACEHOLDER, "<token>"),
        "global_settings_json": cline_env.GLOBAL_SETTINGS,
        "environment": {"HOME": capture.HOME_PLACEHOLDER, **cline_env.OFFLINE},
    }


RUNNERS: dict[str, Runner] = {kilo_env.CLIENT: _kilo, cline_env.CLIENT: _cline}


async def _capture(client: str, binary: Path, root: Path) -> dict[str, Any]:
    records: list[dict[str, Any]] = []

    async def run(base_url: str) -> tuple[int, dict[str, Any]]:
        return await RUNNERS[client](binary, root, base_url)

    code, settings = await capture._record_all(records, run)
    document = {
        "client": client,
        "version": install.binary_version(binary),
        **settings,
        "server_answer": ANSWER,
        "exit_code": code,
        "requests": records,
    }
    sanitized: dict[str, Any] = capture.sanitize(
        undated(document), workdir=root / "work", home=root / "home", token=capture.TOKEN
    )
    return sanitized


def capture_client(client: str, binary: Path) -> dict[str, Any]:
    """Run `client` once against the refusing server; the sanitized capture."""
    root = Path(tempfile.mkdtemp(prefix="kd-capture-"))
    try:
        return asyncio.run(_capture(client, binary, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--bin", type=Path, help="the client binary (default: the installed pin)")
    parser.add_argument("--version", help="an installed version in .cache/clients")
    parser.add_argument("--out", type=Path, help="default: captures/<client>-<version>-default")
    parser.add_argument("--compare", type=Path, help="an earlier capture to diff against")
    args = parser.parse_args(argv)
    version = args.version or install.pin(args.client).version
    binary = args.bin or install.installed(args.client, version)
    if binary is None:
        print(f"{args.client} {version} is not installed (run `make clients`)", file=sys.stderr)
        return 2
    result = capture_client(args.client, binary)
    out = args.out or capture.client_output(args.client, result["version"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"{result['version']}: {len(result['requests'])} requests captured in {out}")
    if not capture._messages_requests(result):
        print("no POST /v1/messages was captured", file=sys.stderr)
        return 1
    if args.compare:
        old = json.loads(args.compare.read_text())
        lines = capture.differences(old, result)
        print(f"compared with {args.compare} ({old['version']}):")
        print("\n".join(f"  {line}" for line in lines) if lines else "  no differences")
    return 0


if __name__ == "__main__":
    sys.exit(main())
