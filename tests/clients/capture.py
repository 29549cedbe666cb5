"""Record what a client sends: a loopback server that logs every request and refuses it.

    python tests/clients/capture.py                         # the pinned claude-code, `-p hello`
    python tests/clients/capture.py --version 2.1.400 --compare tests/clients/captures/X.json
    python tests/clients/capture.py --bin PATH --out FILE   # any claude binary
    python tests/clients/capture.py --client codex          # the pinned codex, once per model
    python tests/clients/capture.py --client codex --model gpt-5.6-sol --compare FILE
    python tests/clients/capture.py --client continue       # or copilot: the pinned one, `-p hello`

The server (127.0.0.1 only) answers every request with a 400 Anthropic error and
`x-should-retry: false`, so the client gives up at once. The capture keeps each request's method,
path and query, headers (minus credentials and cookies) and JSON body; session and device ids,
the working directory and the home directory are replaced by fixed placeholders. `--compare`
prints how the request differs from an earlier capture: body fields, `anthropic-beta` values,
message roles, content block types, tools, the model.

Codex (`--client codex`): `codex exec --skip-git-repo-check hello` with a private CODEX_HOME
whose config.toml names only the model and a provider `kirod` at the server (plus retries off,
so the 400, in OpenAI's error envelope, ends the run at once); one capture per model,
`captures/codex-<version>-<model>.json` (by default gpt-5.6-sol, code mode, and
claude-sonnet-4-6, the classic shape). Every distinct UUID gets its own fixed placeholder, named
in the capture's `placeholders` (session = thread id, installation id, turn id, …); timestamps in
milliseconds become 0. `--compare` then lists top-level fields, input item types, tool types and
names, headers and `x-codex-beta-features` values that appeared or disappeared.

opencode (`--client opencode`): `opencode run --format json hello` in a private HOME whose working
directory holds the README's `opencode.json` (the `@ai-sdk/anthropic` provider) pointed at the
server; `captures/opencode-<version>-default.json`. Session ids (`ses_…`) become
`OPENCODE_SESSION_PLACEHOLDER`; `--compare` reads it as it reads Claude Code's.

Continue (`--client continue`): `cn -p --config ~/kirod.yaml hello`, the README's `config.yaml`
(provider `anthropic`) in a private HOME. Copilot CLI (`--client copilot`): `copilot -p hello`
with the README's variables (`COPILOT_OFFLINE=true`, provider type `anthropic`). Each writes
`captures/<client>-<version>-default.json`; `--compare` reads them as it reads Claude Code's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
import codex_env
import continue_env
import copilot_env
import install
import opencode_env
import runs

CLIENT = "claude-code"
CLIENTS = (CLIENT, codex_env.CLIENT, opencode_env.CLIENT, continue_env.CLIENT, copilot_env.CLIENT)
CODEX_MODELS = (codex_env.CODE_MODE_MODEL, codex_env.CLAUDE_MODEL)
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
OPENCODE_SESSION_PLACEHOLDER = "ses_" + "0" * 26
_OPENCODE_SESSION = re.compile(r"\bses_[0-9A-Za-z]{26}\b")
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
REFUSAL = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "capture server: request recorded"},
}
OPENAI_REFUSAL = {
    "error": {
        "message": "capture server: request recorded",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}
CODEX_ID_ROLES = ("session_id", "thread_id", "installation_id", "turn_id", "context_window_id")
"""UUIDs of `x-codex-turn-metadata` that get a placeholder of their own, in this order (the
session and the thread share one id in `codex exec`)."""
_MILLISECONDS = re.compile(r'("(?:turn_started_at_unix_ms|started_at_ms)":)\d+')


def client_env(home: Path, base_url: str, token: str) -> dict[str, str]:
    """The environment Claude Code runs in for tests and captures: a private HOME, kirod's (or
    the capture server's) URL and key, and no traffic beyond the gateway."""
    env = runs.private_env(home)
    env.update(
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


async def _run_client(argv: list[str], cwd: Path, env: Mapping[str, str]) -> tuple[int, str]:
    """Run a client to its end in its own process group: its exit code and stdout."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, _ = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise RuntimeError(f"{argv[0]} did not finish in {RUN_TIMEOUT_S} s") from None
    assert process.returncode is not None
    return process.returncode, stdout.decode(errors="replace")


async def _record_all(
    records: list[dict[str, Any]], run: Any, refusal: Mapping[str, Any] = REFUSAL
) -> Any:
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
        return web.json_response(dict(refusal), status=400, headers=headers)

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
        argv = [str(binary), *command(prompt, extra)[1:]]
        code, stdout = await _run_client(argv, workdir, client_env(home, base_url, TOKEN))
        return {"exit_code": code, "stdout": stdout}

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


async def _capture_codex(binary: Path, model: str, root: Path) -> dict[str, Any]:
    home, workdir = root / "home", root / "work"
    (home / ".codex").mkdir(parents=True)
    workdir.mkdir()
    records: list[dict[str, Any]] = []
    argv = codex_env.command(PROMPT)

    async def run(base_url: str) -> dict[str, Any]:
        config = codex_env.config_toml(model, base_url, websockets=None)
        (home / ".codex" / "config.toml").write_text(config)
        env = codex_env.client_env(home, TOKEN)
        code, stdout = await _run_client([str(binary), *argv[1:]], workdir, env)
        port = base_url.rsplit(":", 1)[1]
        return {
            "exit_code": code,
            "stdout": stdout,
            "config": config.replace(f":{port}/", ":<port>/"),
        }

    outcome = await _record_all(records, run, OPENAI_REFUSAL)
    version = codex_env.reported_version(install.binary_version(binary))
    capture = {
        "client": codex_env.CLIENT,
        "version": version,
        "model": model,
        "command": argv,
        "config_toml": outcome["config"],
        "environment": {
            "HOME": HOME_PLACEHOLDER,
            "CODEX_HOME": f"{HOME_PLACEHOLDER}/.codex",
            codex_env.KEY_ENV: "<token>",
        },
        "server_answer": {"status": 400, "body": OPENAI_REFUSAL},
        "exit_code": outcome["exit_code"],
        "placeholders": {},
        "requests": records,
    }
    roles = _codex_id_roles(records)
    sanitized: dict[str, Any] = sanitize(
        capture, workdir=workdir, home=home, token=TOKEN, id_roles=roles
    )
    return sanitized


def capture_codex(binary: Path, model: str) -> dict[str, Any]:
    """Run `codex exec hello` once with `model` against the refusing server; the capture."""
    root = Path(tempfile.mkdtemp(prefix="kd-capture-"))
    try:
        return asyncio.run(_capture_codex(binary, model, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _capture_opencode(binary: Path, root: Path) -> dict[str, Any]:
    home, workdir = root / "home", root / "work"
    workdir.mkdir(parents=True)
    records: list[dict[str, Any]] = []
    argv = opencode_env.command(PROMPT)

    async def run(base_url: str) -> dict[str, Any]:
        document = opencode_env.config(base_url)
        (workdir / "opencode.json").write_text(json.dumps(document, indent=2) + "\n")
        env = opencode_env.client_env(home, TOKEN)
        code, _ = await _run_client([str(binary), *argv[1:]], workdir, env)
        return {"exit_code": code, "config": opencode_env.config("<base_url>")}

    outcome = await _record_all(records, run)
    capture = {
        "client": opencode_env.CLIENT,
        "version": install.binary_version(binary),
        "command": argv,
        "opencode_json": outcome["config"],
        "environment": {
            "HOME": HOME_PLACEHOLDER,
            opencode_env.KEY_ENV: "<token>",
            **opencode_env.OFFLINE,
        },
        "server_answer": {"status": 400, "headers": {"x-should-retry": "false"}, "body": REFUSAL},
        "exit_code": outcome["exit_code"],
        "requests": records,
    }
    sanitized: dict[str, Any] = sanitize(capture, workdir=workdir, home=home, token=TOKEN)
    return sanitized


def capture_opencode(binary: Path) -> dict[str, Any]:
    """Run `opencode run hello` once against the refusing server; the sanitized capture."""
    root = Path(tempfile.mkdtemp(prefix="kd-capture-"))
    try:
        return asyncio.run(_capture_opencode(binary, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _capture_continue(binary: Path, root: Path) -> dict[str, Any]:
    home, workdir = root / "home", root / "work"
    home.mkdir(parents=True)
    workdir.mkdir()
    config_file = home / "kirod.yaml"
    argv = continue_env.command(PROMPT, str(config_file))
    records: list[dict[str, Any]] = []

    async def run(base_url: str) -> int:
        config_file.write_text(continue_env.config(base_url))
        env = continue_env.client_env(home, TOKEN)
        code, _ = await _run_client([str(binary), *argv[1:]], workdir, env)
        return code

    exit_code = await _record_all(records, run)
    capture = {
        "client": continue_env.CLIENT,
        "version": install.binary_version(binary),
        "command": argv,
        "config_yaml": continue_env.config("<base_url>"),
        "environment": {
            "HOME": HOME_PLACEHOLDER,
            continue_env.KEY_ENV: "<token>",
            **continue_env.OFFLINE,
        },
        "server_answer": {"status": 400, "headers": {"x-should-retry": "false"}, "body": REFUSAL},
        "exit_code": exit_code,
        "requests": records,
    }
    sanitized: dict[str, Any] = sanitize(capture, workdir=workdir, home=home, token=TOKEN)
    return sanitized


def capture_continue(binary: Path) -> dict[str, Any]:
    """Run `cn -p --config ~/kirod.yaml hello` (the README's configuration) once against the
    refusing server; the sanitized capture."""
    root = Path(tempfile.mkdtemp(prefix="kd-capture-"))
    try:
        return asyncio.run(_capture_continue(binary, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _capture_copilot(binary: Path, root: Path) -> dict[str, Any]:
    home, workdir = root / "home", root / "work"
    home.mkdir(parents=True)
    workdir.mkdir()
    argv = copilot_env.command(PROMPT)
    records: list[dict[str, Any]] = []

    async def run(base_url: str) -> int:
        provider = copilot_env.provider_env(base_url, TOKEN)
        env = copilot_env.client_env(home, provider)
        code, _ = await _run_client([str(binary), *argv[1:]], workdir, env)
        return code

    exit_code = await _record_all(records, run)
    provider = copilot_env.provider_env("http://127.0.0.1:<port>", "<token>")
    capture = {
        "client": copilot_env.CLIENT,
        "version": copilot_env.reported_version(install.binary_version(binary)),
        "command": argv,
        "environment": {"HOME": HOME_PLACEHOLDER, **copilot_env.OFFLINE, **provider},
        "server_answer": {"status": 400, "headers": {"x-should-retry": "false"}, "body": REFUSAL},
        "exit_code": exit_code,
        "requests": records,
    }
    sanitized: dict[str, Any] = sanitize(capture, workdir=workdir, home=home, token=TOKEN)
    return sanitized


def capture_copilot(binary: Path) -> dict[str, Any]:
    """Run `copilot -p hello` with the README's variables (provider type `anthropic`) once
    against the refusing server; the sanitized capture."""
    root = Path(tempfile.mkdtemp(prefix="kd-capture-"))
    try:
        return asyncio.run(_capture_copilot(binary, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


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
            if isinstance(value, str) and re.fullmatch(_UUID, value):
                roles[value] = f"{roles[value]} = {key}" if value in roles else key
        return roles
    return {}


def _dashed(path: str) -> str:
    """How Claude Code names a project's folder under ~/.claude/projects."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def id_placeholder(number: int) -> str:
    return f"00000000-0000-4000-8000-{number:012d}"


def sanitize(
    value: Any, *, workdir: Path, home: Path, token: str, id_roles: Mapping[str, str] | None = None
) -> Any:
    """Drop credentials; replace ids and local paths by placeholders, in every string.

    Without `id_roles` every UUID becomes `SESSION_PLACEHOLDER` (Claude Code). With them (Codex)
    each distinct UUID gets a placeholder of its own: the ones in `id_roles` numbered 1, 2, … in
    that order, any other from 101 in order of appearance; a top-level `placeholders` mapping
    (if present) says which is which.
    """
    paths = sorted({str(workdir), str(workdir.resolve()), str(home), str(home.resolve())}, key=len)
    numbered: dict[str, str] = {}
    legend: dict[str, str] = {}
    for uuid, role in (id_roles or {}).items():
        numbered[uuid] = id_placeholder(len(numbered) + 1)
        legend[numbered[uuid]] = role
    others = iter(range(101, 1_000_000))

    def number(match: re.Match[str]) -> str:
        uuid = match[0]
        if uuid not in numbered:
            numbered[uuid] = id_placeholder(next(others))
            legend[numbered[uuid]] = "other (item or request id)"
        return numbered[uuid]

    def text(item: str) -> str:
        item = item.replace(token, "<token>")
        for path in reversed(paths):  # longest first
            placeholder = WORKDIR_PLACEHOLDER if "work" in Path(path).name else HOME_PLACEHOLDER
            item = item.replace(path, placeholder)
            # Claude Code names its per-project folders after the path, `/` → `-`.
            item = item.replace(_dashed(path), _dashed(placeholder))
        if id_roles is None:
            item = re.sub(_UUID, SESSION_PLACEHOLDER, item)
        else:
            item = _MILLISECONDS.sub(r"\g<1>0", re.sub(_UUID, number, item))
        item = _OPENCODE_SESSION.sub(OPENCODE_SESSION_PLACEHOLDER, item)
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

    result = walk(value)
    if id_roles is not None and isinstance(result, dict) and "placeholders" in result:
        result["placeholders"] = dict(sorted(legend.items()))
    return result


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


def _responses_requests(capture: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        request
        for request in capture["requests"]
        if request["method"] == "POST"
        and request["path"].split("?")[0].startswith("/v1/responses")
        and isinstance(request["body"], dict)
    ]


def _codex_tools(tools: Any, found: dict[str, set[str]], prefix: str = "") -> None:
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        kind = str(tool.get("type"))
        found["tool types"].add(kind)
        name = f"{prefix}{tool.get('name', kind)}"
        if kind == "namespace":
            found["tool names"].add(f"{name} (namespace)")
            _codex_tools(tool.get("tools"), found, f"{name}.")
            continue
        found["tool names"].add(name)
        found["tool fields"].update(tool)
        form = tool.get("format")
        if isinstance(form, dict):
            found["custom tool formats"].add(f"{form.get('type')}/{form.get('syntax')}")


def codex_features(capture: Mapping[str, Any]) -> dict[str, set[str]]:
    """What a Responses decoder must understand in Codex's requests, as sets of names."""
    found: dict[str, set[str]] = {
        key: set()
        for key in (
            "paths",
            "headers",
            "x-codex-beta-features values",
            "body fields",
            "reasoning fields",
            "include values",
            "input item types",
            "message roles",
            "content part types",
            "tool types",
            "tool names",
            "tool fields",
            "custom tool formats",
            "models",
        )
    }
    for request in capture["requests"]:
        found["paths"].add(f"{request['method']} {request['path']}")
        found["headers"].update(request["headers"])
    for request in _responses_requests(capture):
        body, headers = request["body"], request["headers"]
        beta = headers.get("x-codex-beta-features", "")
        found["x-codex-beta-features values"].update(
            value.strip() for value in beta.split(",") if value.strip()
        )
        found["body fields"].update(body)
        found["models"].add(str(body.get("model")))
        if isinstance(body.get("reasoning"), dict):
            found["reasoning fields"].update(body["reasoning"])
        found["include values"].update(str(value) for value in body.get("include") or [])
        _codex_tools(body.get("tools"), found)
        for item in body.get("input") if isinstance(body.get("input"), list) else []:
            if not isinstance(item, dict):
                continue
            found["input item types"].add(str(item.get("type", "(no type)")))
            if item.get("type") == "additional_tools":
                _codex_tools(item.get("tools"), found)
            if "role" in item and item.get("type") in (None, "message"):
                found["message roles"].add(str(item["role"]))
            content = item.get("content")
            if isinstance(content, list):
                found["content part types"].update(
                    str(part.get("type")) for part in content if isinstance(part, dict)
                )
    return found


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line per name that appeared or disappeared between two captures."""
    extract = codex_features if old.get("client") == codex_env.CLIENT else features
    before, after = extract(old), extract(new)
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


def codex_output(version: str, model: str) -> Path:
    return CAPTURES / f"{codex_env.CLIENT}-{version}-{model}.json"


def opencode_output(version: str) -> Path:
    return CAPTURES / f"{opencode_env.CLIENT}-{version}-default.json"


def client_output(client: str, version: str) -> Path:
    """The capture of a client with one default run (opencode, Continue, Copilot CLI)."""
    return CAPTURES / f"{client}-{version}-default.json"


@dataclass(frozen=True)
class Recorded:
    """One API request of the committed capture of a pinned client: what tests replay."""

    client: str
    version: str
    path: str
    headers: dict[str, str]  # as sent, minus credentials (a test adds its own)
    body: dict[str, Any]  # a private copy: a test may change it


def pinned_requests(client: str = CLIENT, model: str | None = None) -> list[Recorded]:
    """The model requests the pinned `client` sends with default settings (Codex: for `model`),
    in order. Raises FileNotFoundError when versions.json names a version nobody captured yet:
    run `python tests/clients/capture.py` for it."""
    version = install.pin(client).version
    if client == CLIENT:
        path = default_output(version)
    elif client == opencode_env.CLIENT:
        path = opencode_output(version)
    else:
        path = codex_output(version, model or codex_env.CLAUDE_MODEL)
    document = json.loads(path.read_text())
    return [
        Recorded(client, version, r["path"], dict(r["headers"]), r["body"])
        for r in document["requests"]
        if r["path"].startswith("/v1/")
    ]


def pinned_request(client: str = CLIENT, model: str | None = None) -> Recorded:
    """The first of `pinned_requests`."""
    return pinned_requests(client, model)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=CLIENTS, default=CLIENT, help=f"default: {CLIENT}")
    parser.add_argument("--bin", type=Path, help="the client binary (default: the installed pin)")
    parser.add_argument("--version", help="an installed version in .cache/clients")
    parser.add_argument("--model", help=f"codex only; default: each of {', '.join(CODEX_MODELS)}")
    parser.add_argument(
        "--out",
        type=Path,
        help="default: captures/<client>-<version>-default (codex: -<model>)",
    )
    parser.add_argument("--compare", type=Path, help="an earlier capture to diff against")
    args = parser.parse_args(argv)
    version = args.version or install.pin(args.client).version
    binary = args.bin or install.installed(args.client, version)
    if binary is None:
        print(f"{args.client} {version} is not installed (run `make clients`)", file=sys.stderr)
        return 2
    if args.client == codex_env.CLIENT:
        return _main_codex(binary, args)
    if args.model:
        parser.error("--model is for --client codex")
    if args.client == opencode_env.CLIENT:
        result = capture_opencode(binary)
        out = args.out or opencode_output(result["version"])
    elif args.client in (continue_env.CLIENT, copilot_env.CLIENT):
        capture_client = capture_continue if args.client == continue_env.CLIENT else capture_copilot
        result = capture_client(binary)
        out = args.out or client_output(args.client, result["version"])
    else:
        result = capture(binary)
        out = args.out or default_output(result["version"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"{result['version']}: {len(result['requests'])} requests captured in {out}")
    if not _messages_requests(result):
        print("no POST /v1/messages was captured", file=sys.stderr)
        return 1
    if args.compare:
        _print_comparison(args.compare, result)
    return 0


def _print_comparison(path: Path, result: Mapping[str, Any]) -> None:
    old = json.loads(path.read_text())
    lines = differences(old, result)
    print(f"compared with {path} ({old['version']}):")
    print("\n".join(f"  {line}" for line in lines) if lines else "  no differences")


def _main_codex(binary: Path, args: argparse.Namespace) -> int:
    models = [args.model] if args.model else list(CODEX_MODELS)
    if len(models) > 1 and (args.out or args.compare):
        print("--out and --compare need one --model", file=sys.stderr)
        return 2
    code = 0
    for model in models:
        result = capture_codex(binary, model)
        out = args.out or codex_output(result["version"], model)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        print(f"{result['version']} {model}: {len(result['requests'])} requests captured in {out}")
        if not _responses_requests(result):
            print("no POST /v1/responses was captured", file=sys.stderr)
            code = 1
            continue
        if args.compare:
            _print_comparison(args.compare, result)
    return code


if __name__ == "__main__":
    sys.exit(main())
