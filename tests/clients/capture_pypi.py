"""Record what the clients from PyPI, aider and llm (with llm-anthropic), send: capture.py's
loopback server, which logs every request and refuses it, run once per client.

    python tests/clients/capture_pypi.py --client aider     # the pinned aider, `--message hello`
    python tests/clients/capture_pypi.py --client llm --compare tests/clients/captures/X.json
    python tests/clients/capture_pypi.py --client llm --bin PATH --out FILE

Each client runs as its tests run it (`aider_env`, `llm_env`: the README's settings, a private
HOME), prompt `hello`. The server answers a 400 in Anthropic's envelope with
`x-should-retry: false`, and neither client retries it, so a run sends one request. The capture,
`captures/<client>-<version>-default.json`, is sanitised as capture.py does (no credentials,
placeholders for the home and working directories); aider's system prompt also names this
machine's platform and the date, which become placeholders too. `--compare` prints how the
requests differ from an earlier capture (`capture.differences`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aider_env
import capture
import install
import llm_env
import runs

CLIENTS = (aider_env.CLIENT, llm_env.CLIENT)
PROMPT = capture.PROMPT
PLATFORM_PLACEHOLDER = "<platform>"
DATE_PLACEHOLDER = "<date>"
_MACHINE = (
    (re.compile(r"(- Platform: )\S+"), rf"\g<1>{PLATFORM_PLACEHOLDER}"),
    (re.compile(r"(- Current date: )\d{4}-\d{2}-\d{2}"), rf"\g<1>{DATE_PLACEHOLDER}"),
)
"""aider's "system info" lines."""


def output(client: str, version: str) -> Path:
    return capture.CAPTURES / f"{client}-{version}-default.json"


def reported_version(binary: Path) -> str:
    """`aider 0.86.2` → 0.86.2; `llm, version 0.36` → 0.36."""
    return install.binary_version(binary).split()[-1]


def machine_free(value: Any) -> Any:
    """`value` with aider's platform and date replaced by placeholders, in every string."""
    if isinstance(value, str):
        for pattern, placeholder in _MACHINE:
            value = pattern.sub(placeholder, value)
        return value
    if isinstance(value, list):
        return [machine_free(item) for item in value]
    if isinstance(value, dict):
        return {key: machine_free(item) for key, item in value.items()}
    return value


def _client(client: str, binary: Path, base_url: str, root: Path) -> aider_env.Aider | llm_env.LLM:
    found = install.Binary(binary, "")
    if client == aider_env.CLIENT:
        return aider_env.Aider(found, base_url, capture.TOKEN, root)
    return llm_env.LLM(found, base_url, capture.TOKEN, root)


def _command(driver: aider_env.Aider | llm_env.LLM) -> list[str]:
    if isinstance(driver, aider_env.Aider):
        return aider_env.command(PROMPT)
    return llm_env.command(PROMPT)


def _files(driver: aider_env.Aider | llm_env.LLM) -> dict[str, Any]:
    """What the driver wrote into HOME for the run: aider's model metadata."""
    if isinstance(driver, aider_env.Aider):
        name = aider_env.METADATA_FILE
        return {f"~/{name}": json.loads((driver.home / name).read_text())}
    return {}


async def _stdout(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    code, stdout = await capture._run_client(argv, cwd, env)
    if code:
        raise RuntimeError(f"`{' '.join(argv)}` exited {code}")
    return stdout


async def _capture(client: str, binary: Path, root: Path) -> dict[str, Any]:
    records: list[dict[str, Any]] = []
    seen: dict[str, Any] = {}

    async def run(base_url: str) -> int:
        driver = _client(client, binary, base_url, root)
        seen.update(driver=driver, base_url=base_url)
        if isinstance(driver, llm_env.LLM):
            listed = await _stdout([str(binary), "plugins"], driver.workdir, driver.env)
            seen["plugins"] = {plugin["name"]: plugin["version"] for plugin in json.loads(listed)}
        argv = [str(binary), *_command(driver)[1:]]
        code, _ = await capture._run_client(argv, driver.workdir, driver.env)
        return code

    exit_code = await capture._record_all(records, run)
    driver, base_url = seen["driver"], seen["base_url"]
    machine = set(runs.private_env(driver.home)) - {"HOME"}  # PATH, locale, XDG folders
    environment = {
        name: value.replace(base_url, "http://127.0.0.1:<port>")
        for name, value in driver.env.items()
        if name not in machine
    }
    document: dict[str, Any] = {
        "client": client,
        "version": reported_version(binary),
        **({"plugins": seen["plugins"]} if "plugins" in seen else {}),
        "command": _command(driver),
        "environment": environment,
        **({"files": files} if (files := _files(driver)) else {}),
        "server_answer": {
            "status": 400,
            "headers": {"x-should-retry": "false"},
            "body": capture.REFUSAL,
        },
        "exit_code": exit_code,
        "requests": records,
    }
    sanitized = capture.sanitize(
        document, workdir=driver.workdir, home=driver.home, token=capture.TOKEN
    )
    result: dict[str, Any] = machine_free(sanitized)
    return result


def capture_client(client: str, binary: Path) -> dict[str, Any]:
    """Run `client` once with `hello` against the refusing server; the sanitised capture."""
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
    out = args.out or output(args.client, result["version"])
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
