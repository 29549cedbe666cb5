"""Record what a client sends: a loopback server that logs every request and refuses it.

    python tests/clients/capture.py                         # the pinned claude-code, `-p hello`
    python tests/clients/capture.py --version 2.1.400 --compare tests/clients/captures/X.json
    python tests/clients/capture.py --bin PATH --out FILE   # any claude binary

The server (127.0.0.1 only) answers every request with a 400 Anthropic error and
`x-should-retry: false`, so the client gives up at once. The capture keeps each request's method,
path and query, headers (minus credentials and cookies) and JSON body; session and device ids,
the working directory and the home directory are replaced by fixed placeholders. `--compare`
prints how the request differs from an earlier capture: body fields, `anthropic-beta` values,
message roles, content block types, tools, the model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
import install

CLIENT = "claude-code"
PROMPT = "hello"
RUN_TIMEOUT_S = 60.0
CAPTURES = install.HERE / "captures"
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "cookie", "set-cookie"})
# Headers whose values change per run or per machine and say nothing about the protocol.
VARIABLE_HEADERS = frozenset({"host", "content-length"})
TOKEN = "capture-token-not-a-secret"
WORKDIR_PLACEHOLDER = "/placeholder/workdir"
HOME_PLACEHOLDER = "/placeholder/home"
SESSION_PLACEHOLDER = "00000000-0000-4000-8000-000000000001"
DEVICE_PLACEHOLDER = "0" * 64
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
REFUSAL = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "capture server: request recorded"},
}


def client_env(home: Path, base_url: str, token: str) -> dict[str, str]:
    """The environment Claude Code runs in for tests and captures: a private HOME, kirod's (or
    the capture server's) URL and key, and no traffic beyond the gateway."""
    keep = {"PATH", "LANG", "LC_ALL", "TERM", "TZ", "SYSTEMROOT"}
    env = {name: value for name, value in os.environ.items() if name in keep}
    tmp = home / "tmp"  # Claude Code leaves `claude-<uid>/fswatch-probe-*` folders in TMPDIR
    tmp.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_AUTH_TOKEN=token,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
    )
    return env


def command(prompt: str = PROMPT, extra: Iterable[str] = ()) -> list[str]:
    return ["claude", "-p", prompt, "--output-format", "json", *extra]


async def _record_all(records: list[dict[str, Any]], run: Any) -> Any:
    async def handler(request: web.Request) -> web.Response:
        body = await request.read()
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        records.append(
            {
                "method": request.method,
                "path": request.path_qs,
                "headers": {name.lower(): value for name, value in request.headers.items()},
                "body": parsed,
            }
        )
        headers = {"x-should-retry": "false", "request-id": f"req_capture_{len(records)}"}
        return web.json_response(REFUSAL, status=400, headers=headers)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{path:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        return await run(f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()


async def _capture(binary: Path, prompt: str, extra: list[str], root: Path) -> dict[str, Any]:
    home, workdir = root / "home", root / "work"
    home.mkdir()
    workdir.mkdir()
    records: list[dict[str, Any]] = []

    async def run(base_url: str) -> dict[str, Any]:
        process = await asyncio.create_subprocess_exec(
            str(binary),
            *command(prompt, extra)[1:],
            cwd=workdir,
            env=client_env(home, base_url, TOKEN),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            stdout, _ = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise RuntimeError(f"{binary} did not finish in {RUN_TIMEOUT_S} s") from None
        return {"exit_code": process.returncode, "stdout": stdout.decode(errors="replace")}

    outcome = await _record_all(records, run)
    version = install.binary_version(binary).split()[0]
    capture = {
        "client": CLIENT,
        "version": version,
        "command": command(prompt, extra),
        "environment": {
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:<port>",
            "ANTHROPIC_AUTH_TOKEN": "<token>",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "HOME": HOME_PLACEHOLDER,
        },
        "server_answer": {"status": 400, "headers": {"x-should-retry": "false"}, "body": REFUSAL},
        "exit_code": outcome["exit_code"],
        "requests": records,
    }
    return sanitize(capture, workdir=workdir, home=home, token=TOKEN)


def capture(binary: Path, prompt: str = PROMPT, extra: Iterable[str] = ()) -> dict[str, Any]:
    """Run `claude -p PROMPT` once against the refusing server; the sanitized capture."""
    root = Path(tempfile.mkdtemp(prefix="kd-capture-"))
    try:
        return asyncio.run(_capture(binary, prompt, list(extra), root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _dashed(path: str) -> str:
    """How Claude Code names a project's folder under ~/.claude/projects."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def sanitize(value: Any, *, workdir: Path, home: Path, token: str) -> Any:
    """Drop credentials; replace ids and local paths by placeholders, in every string."""
    paths = sorted({str(workdir), str(workdir.resolve()), str(home), str(home.resolve())}, key=len)

    def text(item: str) -> str:
        item = item.replace(token, "<token>")
        for path in reversed(paths):  # longest first
            placeholder = WORKDIR_PLACEHOLDER if "work" in Path(path).name else HOME_PLACEHOLDER
            item = item.replace(path, placeholder)
            # Claude Code names its per-project folders after the path, `/` → `-`.
            item = item.replace(_dashed(path), _dashed(placeholder))
        item = re.sub(_UUID, SESSION_PLACEHOLDER, item)
        return re.sub(r"\b[0-9a-f]{64}\b", DEVICE_PLACEHOLDER, item)

    def walk(item: Any, key: str | None = None) -> Any:
        if isinstance(item, str):
            return text(item)
        if isinstance(item, list):
            return [walk(element) for element in item]
        if isinstance(item, dict):
            if key == "headers":
                return {
                    name: walk(header)
                    for name, header in item.items()
                    if name not in SECRET_HEADERS and name not in VARIABLE_HEADERS
                }
            return {name: walk(element, name) for name, element in item.items()}
        return item

    return walk(value)


# -- comparing two captures ---------------------------------------------------------------------


def _messages_requests(capture: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        request
        for request in capture["requests"]
        if request["path"].split("?")[0] == "/v1/messages" and isinstance(request["body"], dict)
    ]


def features(capture: Mapping[str, Any]) -> dict[str, set[str]]:
    """What a decoder must understand, as sets of names, over every request of a capture."""
    found: dict[str, set[str]] = {
        key: set()
        for key in (
            "paths",
            "body fields",
            "anthropic-beta values",
            "headers",
            "message roles",
            "content block types",
            "system block types",
            "tool names",
            "tool fields",
            "thinking types",
            "models",
        )
    }
    for request in capture["requests"]:
        found["paths"].add(f"{request['method']} {request['path']}")
        found["headers"].update(request["headers"])
    for request in _messages_requests(capture):
        body, headers = request["body"], request["headers"]
        found["body fields"].update(body)
        beta = headers.get("anthropic-beta", "")
        found["anthropic-beta values"].update(v.strip() for v in beta.split(",") if v.strip())
        found["models"].add(str(body.get("model")))
        thinking = body.get("thinking")
        if isinstance(thinking, dict):
            found["thinking types"].add(str(thinking.get("type")))
        system = body.get("system")
        if isinstance(system, list):
            found["system block types"].update(str(block.get("type")) for block in system)
        for message in body.get("messages", []):
            found["message roles"].add(str(message.get("role")))
            content = message.get("content")
            if isinstance(content, list):
                found["content block types"].update(str(b.get("type")) for b in content)
            else:
                found["content block types"].add("(string content)")
        for tool in body.get("tools", []):
            found["tool names"].add(str(tool.get("name", tool.get("type"))))
            found["tool fields"].update(tool)
    return found


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line per name that appeared or disappeared between two captures."""
    before, after = features(old), features(new)
    lines = []
    if len(old["requests"]) != len(new["requests"]):
        lines.append(f"requests per run: {len(old['requests'])} → {len(new['requests'])}")
    for key in before:
        added, removed = sorted(after[key] - before[key]), sorted(before[key] - after[key])
        if added:
            lines.append(f"new {key}: {', '.join(added)}")
        if removed:
            lines.append(f"removed {key}: {', '.join(removed)}")
    return lines


def default_output(version: str) -> Path:
    return CAPTURES / f"{CLIENT}-{version}-default.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, help="the claude binary (default: the installed pin)")
    parser.add_argument("--version", help="an installed version in .cache/clients")
    parser.add_argument("--out", type=Path, help="default: captures/claude-code-<version>-default")
    parser.add_argument("--compare", type=Path, help="an earlier capture to diff against")
    args = parser.parse_args(argv)
    version = args.version or install.pin(CLIENT).version
    binary = args.bin or install.installed(CLIENT, version)
    if binary is None:
        print(f"{CLIENT} {version} is not installed (run `make clients`)", file=sys.stderr)
        return 2
    result = capture(binary)
    out = args.out or default_output(result["version"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"{result['version']}: {len(result['requests'])} requests captured in {out}")
    if not _messages_requests(result):
        print("no POST /v1/messages was captured", file=sys.stderr)
        return 1
    if args.compare:
        old = json.loads(args.compare.read_text())
        lines = differences(old, result)
        print(f"compared with {args.compare} ({old['version']}):")
        print("\n".join(f"  {line}" for line in lines) if lines else "  no differences")
    return 0


if __name__ == "__main__":
    sys.exit(main())
