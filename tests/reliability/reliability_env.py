"""Shared set-up of the reliability suite (imported by its modules, not a test module itself).

Daemons on the fake Kiro service, raw HTTP against the public API, the account pool and the
operation log as the daemon reports them, process counters from /proc, and the transcript: every
body the suite receives from kirod goes into it, and each module scans it for every secret the
fakes issued and every API key the daemons hold.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, ThreadedFake
from tests.support.kiro_env import daemon_env, import_account, kiro_ide_token_file

__all__ = [
    "FULL",
    "MODEL",
    "Answer",
    "Transcript",
    "closed_port",
    "daemon_env",
    "fd_count",
    "import_account",
    "kiro_ide_token_file",
    "oplog_row",
    "post",
    "request_body",
    "rss_kib",
    "secrets_of",
    "start",
    "wait_idle",
    "wait_until",
]

FULL = os.environ.get("KIROD_RELIABILITY_FULL") == "1"
"""`KIROD_RELIABILITY_FULL=1` runs the larger variants (more crash trials, more connections)."""

MODEL = "claude-sonnet-4-6"
_RUN = re.compile(r"[A-Za-z0-9_-]+")  # URL-safe base64, the alphabet of every issued secret
PATHS = {"messages": "/v1/messages", "responses": "/v1/responses", "chat": "/v1/chat/completions"}


def wait_until(condition: Callable[[], Any], timeout_s: float = 5.0, what: str = "") -> Any:
    """Poll `condition` every 20 ms until it returns something truthy; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or condition}")
        time.sleep(0.02)


class Transcript:
    """Every body received from kirod (public answers, SSE streams, control answers)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: list[tuple[str, str]] = []

    def add(self, where: str, content: bytes | str | Any) -> None:
        if isinstance(content, bytes):
            text = content.decode("utf-8", "replace")
        elif isinstance(content, str):
            text = content
        else:
            text = json.dumps(content)
        with self._lock:
            self._texts.append((where, text))

    def __len__(self) -> int:
        with self._lock:
            return len(self._texts)

    def leaks(self, secrets: Iterable[str]) -> list[tuple[str, str]]:
        """(where, first characters of the secret) for every secret found in a body.

        Tokens, keys and client secrets are URL-safe base64 with a prefix, so each occurrence lies
        inside one maximal run of those characters: the runs are collected once and searched with
        set lookups, which keeps thousands of secrets against megabytes of answers fast.
        """
        wanted = {secret for secret in secrets if secret}
        with self._lock:
            texts = list(self._texts)
        tokenlike = {secret for secret in wanted if _RUN.fullmatch(secret)}
        lengths = sorted({len(secret) for secret in tokenlike})
        runs: set[str] = set()
        for _, text in texts:
            runs.update(_RUN.findall(text))
        found = set()
        for run in runs:
            for length in lengths:
                if length > len(run):
                    break
                found.update(
                    run[i : i + length]
                    for i in range(len(run) - length + 1)
                    if run[i : i + length] in tokenlike
                )
        others = wanted - tokenlike
        if others:
            blob = "\n".join(text for _, text in texts)
            found.update(secret for secret in others if secret in blob)
        return [(where, s[:8] + "…") for s in sorted(found) for where, text in texts if s in text]

    def control(self, proc: DaemonProcess, method: str, path: str, body: Any = None) -> Any:
        """A control API call whose answer joins the transcript."""
        answer = proc.client.request(method, path, body, timeout=30)
        self.add(f"control {method} {path}", answer)
        return answer


def secrets_of(daemons: Iterable[DaemonProcess] = ()) -> set[str]:
    """Every secret any fake of this process issued, and the API keys of `daemons`."""
    found = {secret for fake in FakeKiro.created for secret in fake.issued_secrets()}
    found |= {key for daemon in daemons if (key := daemon.known_api_key)}
    return found


def start(root: Path, fake: ThreadedFake, extra: Mapping[str, str] | None = None) -> DaemonProcess:
    proc = DaemonProcess(root, env=daemon_env(fake, extra))
    try:
        proc.wait_ready()
    except BaseException:
        proc.kill()
        raise
    return proc


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- the public API, raw ------------------------------------------------------------------------


def request_body(protocol: str, stream: bool, prompt: str = "fault test") -> dict[str, Any]:
    messages = [{"role": "user", "content": prompt}]
    if protocol == "messages":
        return {"model": MODEL, "max_tokens": 256, "messages": messages, "stream": stream}
    if protocol == "responses":
        return {"model": MODEL, "input": prompt, "store": False, "stream": stream}
    return {"model": MODEL, "messages": messages, "stream": stream}


@dataclass
class Answer:
    """One public-API answer as a client sees it."""

    status: int
    headers: dict[str, str]
    raw: bytes
    elapsed_s: float
    events: list[tuple[str | None, Any]] = field(default_factory=list)  # SSE (event, data)
    document: Any = None  # the JSON body of a non-streamed answer

    @property
    def request_id(self) -> str:
        return self.headers["x-request-id"]


def _sse(raw: bytes) -> list[tuple[str | None, Any]]:
    events: list[tuple[str | None, Any]] = []
    for block in raw.decode("utf-8").split("\n\n"):
        name: str | None = None
        data: list[str] = []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if data:
            text = "\n".join(data)
            events.append((name, text if text == "[DONE]" else json.loads(text)))
    return events


def post(
    proc: DaemonProcess,
    path: str,
    body: Any,
    transcript: Transcript,
    *,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> Answer:
    """POST JSON with the daemon's key; read the whole answer (streams end with their terminal
    event), record it in the transcript."""
    host, port = proc.address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout_s)
    sent = {"Authorization": f"Bearer {proc.api_key}", "Content-Type": "application/json"}
    sent.update(headers or {})
    started = time.monotonic()
    try:
        connection.request("POST", path, body=json.dumps(body).encode(), headers=sent)
        response = connection.getresponse()
        raw = response.read()
    finally:
        connection.close()
    answer = Answer(
        status=response.status,
        headers={name.lower(): value for name, value in response.getheaders()},
        raw=raw,
        elapsed_s=time.monotonic() - started,
    )
    transcript.add(f"POST {path} → {response.status}", raw)
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        answer.events = _sse(raw)
    elif raw:
        answer.document = json.loads(raw)
    return answer


# -- what the daemon reports --------------------------------------------------------------------


def wait_idle(
    proc: DaemonProcess, transcript: Transcript, timeout_s: float = 5.0
) -> dict[str, Any]:
    """The pool once no account has a request in flight and nothing is queued."""

    def idle() -> dict[str, Any] | None:
        pool: dict[str, Any] = transcript.control(proc, "GET", "/pool")
        busy = pool["queued"] or any(account["in_flight"] for account in pool["accounts"])
        return None if busy else pool

    result: dict[str, Any] = wait_until(idle, timeout_s, "every account slot to be released")
    return result


def oplog_row(proc: DaemonProcess, request_id: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """The operation-log row of one request, read from the daemon's database (read-only)."""
    uri = f"file:{proc.state_dir / 'kirod.db'}?mode=ro"

    def read() -> dict[str, Any] | None:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as db:
            db.row_factory = sqlite3.Row
            row = db.execute("SELECT * FROM oplog WHERE request_id = ?", (request_id,)).fetchone()
        if row is None:
            return None
        entry = dict(row)
        entry["attempts"] = [(a["account"], a["outcome"]) for a in json.loads(entry["attempts"])]
        return entry

    found: dict[str, Any] = wait_until(read, timeout_s, f"the oplog row of {request_id}")
    return found


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")
