"""Record what a client sends: a loopback server that logs every request and refuses it, and
the sanitising that makes the record fit to commit.

Imported by capture.py and the capture tests (not a test module itself).

The server (127.0.0.1 only) answers every request with a 400 and `x-should-retry: false`, in
Anthropic's error envelope or OpenAI's, so the client gives up at once. A record keeps each
request's method, path and query, headers and JSON body. `sanitize` drops credentials, cookies
and the headers that change per run, and puts fixed placeholders for session and device ids,
the working directory and the home directory; `scrub` replaces what else a client writes of the
machine or the day (aider's platform, the dates in Kilo's and Cline's prompts).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T")

RUN_TIMEOUT_S = 60.0
TOKEN = "capture-token-not-a-secret"
"""The key a client sends the recording server; no capture holds it."""
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "cookie", "set-cookie"})
VARIABLE_HEADERS = frozenset({"host", "content-length"})
"""Headers whose values change per run or per machine and say nothing about the protocol."""
BASE_URL_PLACEHOLDER = "http://127.0.0.1:<port>"
WORKDIR_PLACEHOLDER = "/placeholder/workdir"
HOME_PLACEHOLDER = "/placeholder/home"
SESSION_PLACEHOLDER = "00000000-0000-4000-8000-000000000001"
DEVICE_PLACEHOLDER = "0" * 64
OPENCODE_SESSION_PLACEHOLDER = "ses_" + "0" * 26
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_OPENCODE_SESSION = re.compile(r"\bses_[0-9A-Za-z]{26}\b")
_MILLISECONDS = re.compile(r'("(?:turn_started_at_unix_ms|started_at_ms)":)\d+')

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
ANSWER = {"status": 400, "headers": {"x-should-retry": "false"}, "body": REFUSAL}
"""The server's answer, as a capture shows it."""
OPENAI_ANSWER = {"status": 400, "body": OPENAI_REFUSAL}
"""The answer to Codex, as its captures show it."""
GEMINI_REFUSAL = {
    "error": {
        "code": 400,
        "message": "capture server: request recorded",
        "status": "INVALID_ARGUMENT",
    }
}
GEMINI_ANSWER = {"status": 400, "body": GEMINI_REFUSAL}
"""The answer to Gemini CLI, in Google's envelope: a 400 it does not retry."""

Scrubs = tuple[tuple[re.Pattern[str], str], ...]
"""Patterns and their replacements (`re.sub` templates)."""


async def run_client(argv: list[str], cwd: Path, env: Mapping[str, str]) -> tuple[int, str]:
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


async def record(
    run: Callable[[str], Awaitable[T]], refusal: Mapping[str, Any] = REFUSAL
) -> tuple[T, list[dict[str, Any]]]:
    """`run(base_url)` with the recording server at `base_url`: what it returned, and every
    request the server got, in order, each refused with `refusal`."""
    records: list[dict[str, Any]] = []

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
        outcome = await run(f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()
    return outcome, records


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
            item = re.sub(UUID, SESSION_PLACEHOLDER, item)
        else:
            item = _MILLISECONDS.sub(r"\g<1>0", re.sub(UUID, number, item))
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


def scrub(value: Any, scrubs: Scrubs) -> Any:
    """`value` with every pattern of `scrubs` replaced, in every string."""
    if isinstance(value, str):
        for pattern, replacement in scrubs:
            value = pattern.sub(replacement, value)
        return value
    if isinstance(value, list):
        return [scrub(item, scrubs) for item in value]
    if isinstance(value, dict):
        return {key: scrub(item, scrubs) for key, item in value.items()}
    return value
