"""`kiroctl trace`, `kiroctl logs` and `GET /v1/usage` against a live daemon and the fake Kiro.

Two accounts; the first request's first attempt is throttled by the fake, and the trace must
explain the failover end to end. Neither a trace nor the `request_shape` log line may hold the
prompt or a tool's name.
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from click.testing import CliRunner, Result

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import Fault, Reply, Script, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
PROMPT = "Zanzibar-prompt-marker: what is in the vault?"
TOOL = "open_the_vault_tool"
KIROCTL = [sys.executable, "-c", "from kirod.cli.main import main; main()"]


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(
        module_tmp,
        fake,
        {"KIROD_LOG_LEVEL": "debug", "KIROD_ACCOUNT_SELECTION_STRATEGY": "round-robin"},
    )
    for _ in range(2):
        import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def claude(daemon: DaemonProcess) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as client:
        yield client


def kiroctl(daemon: DaemonProcess, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--socket", str(daemon.socket_path), *args])


def ask(claude: anthropic.Anthropic) -> str:
    """One request declaring a tool; returns its request id."""
    raw = claude.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": PROMPT}],
        tools=[
            {
                "name": TOOL,
                "description": "Opens the vault.",
                "input_schema": {"type": "object", "properties": {}},
            }
        ],
    )
    request_id = raw.headers["x-request-id"]
    assert request_id
    return request_id


@pytest.fixture(scope="module")
def failed_over(claude: anthropic.Anthropic, fake: ThreadedFake) -> str:
    """A request whose first account Kiro throttled, answered by the second."""
    fake.fake.clear_scripts()
    fake.fake.enqueue(Script(fault=Fault.THROTTLE_429, retry_after_s=1))
    fake.fake.enqueue(Reply(text="the vault is empty"))
    return ask(claude)


def no_content(text: str) -> None:
    assert PROMPT not in text
    assert "Zanzibar" not in text
    assert TOOL not in text
    assert "the vault is empty" not in text


def test_a_failover_is_explained_by_the_trace(daemon: DaemonProcess, failed_over: str) -> None:
    result = kiroctl(daemon, "trace", failed_over, "--json")
    assert result.exit_code == 0, result.output
    no_content(result.stdout)
    [row] = json.loads(result.stdout)["requests"]
    assert row["request_id"] == failed_over
    assert row["status"] == 200
    assert row["error"] is None
    throttled, answered = row["attempts"]
    assert throttled["outcome"] == "throttled"
    assert throttled["upstream_status"] == 429
    assert throttled["failover_reason"] is None
    assert answered["outcome"] == "ok"
    assert answered["failover_reason"] == "throttled"
    assert answered["account_id"] != throttled["account_id"]
    for attempt in (throttled, answered):
        assert attempt["region"] == "us-east-1"
        assert attempt["model"]  # the Kiro model id routed to
        assert attempt["ended_ms"] is not None
    assert answered["frames"] > 0
    assert answered["bytes_read"] >= 16 * answered["frames"]  # a frame is at least 16 bytes
    assert throttled["bytes_read"] is None
    assert throttled["ended_ms"] <= answered["ended_ms"] <= row["total_ms"]
    assert row["ttfb_ms"] is not None
    assert row["stop_reason"] == "end_turn"
    assert row["credits"] is not None

    text = kiroctl(daemon, "trace", failed_over)
    assert text.exit_code == 0, text.output
    no_content(text.stdout)
    assert text.stdout.isascii(), text.stdout  # piped: "->" for the arrow, "-" for the dots
    lines = text.stdout.splitlines()
    assert failed_over in lines[0]
    assert "200" in lines[0]
    listed = daemon.client.keys()
    name = next(key.name for key in listed if key.id == row["key_id"])
    assert f"key {name} " in lines[0]  # named as `keys list` and `stats` name it
    assert row["key_id"] not in lines[0]
    assert "throttled (HTTP 429" in lines[1]
    assert "ok" in lines[2]
    assert "after throttled" in lines[2]
    assert "frames" in lines[2]
    assert re.search(r"\d+ frames . [\d.]+ (B|KiB) ", lines[2])
    assert "first event" in lines[3]
    assert "stop end_turn" in lines[3]


def test_the_request_shape_line_holds_no_content(daemon: DaemonProcess, failed_over: str) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        shapes = [
            line
            for line in daemon.log().splitlines()
            if " request_shape " in line and failed_over in line
        ]
        if shapes:
            break
        time.sleep(0.05)
    [shape] = shapes
    no_content(shape)
    for field in ("messages=1", "user_messages=1", "tools=1", "tool_calls=0", "tools_hash="):
        assert field in shape, field
    assert f"input_chars={len(PROMPT)}" in shape
    # The same line, read over the control socket.
    tail = kiroctl(daemon, "logs", "--lines", "1000")
    assert tail.exit_code == 0, tail.output
    assert shape in tail.stdout.splitlines()


def test_last_and_unknown_request(daemon: DaemonProcess, failed_over: str) -> None:
    last = kiroctl(daemon, "trace", "--last", "1", "--json")
    assert last.exit_code == 0, last.output
    doc = json.loads(last.stdout)
    assert [row["request_id"] for row in doc["requests"]] == [failed_over]
    assert doc["cursor"] >= doc["requests"][-1]["id"]
    missing = kiroctl(daemon, "trace", "req_not_there")
    assert missing.exit_code == 5
    assert "no request" in missing.stderr
    assert "(oplog_retention_s, oplog_max_rows)" in " ".join(missing.stderr.split())
    both = kiroctl(daemon, "trace", "req_x", "--last", "2")
    assert both.exit_code == 2
    none = kiroctl(daemon, "trace", "--last", "0")  # asked for none: none, and no "yet"
    assert none.exit_code == 0, none.output
    assert none.output == ""
    assert json.loads(kiroctl(daemon, "trace", "--last", "0", "--json").stdout)["requests"] == []


def test_a_trace_of_an_unknown_model_shows_the_model_asked_for(
    daemon: DaemonProcess, claude: anthropic.Anthropic
) -> None:
    asked = "claude-sonnet-9-nonexistent"
    with pytest.raises(anthropic.NotFoundError) as refused:
        claude.messages.create(
            model=asked, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
    request_id = refused.value.response.headers["x-request-id"]
    [row] = json.loads(kiroctl(daemon, "trace", request_id, "--json").stdout)["requests"]
    assert (row["model"], row["status"], row["error"]) == (asked, 404, "model_not_found")
    text = kiroctl(daemon, "trace", request_id)
    assert text.exit_code == 0, text.output
    assert f" - {asked} - " in text.stdout.splitlines()[0]  # piped: ASCII dots
    # The statistics still count invented names as one.
    models = {
        group["key"] for group in json.loads(kiroctl(daemon, "stats", "--json").stdout)["models"]
    }
    assert "(unknown)" in models
    assert asked not in models


@contextlib.contextmanager
def following(daemon: DaemonProcess, *args: str) -> Iterator[subprocess.Popen[str]]:
    """kiroctl ARGS in a process of its own; Ctrl-C (SIGINT) at the end must end it with 0."""
    command = [*KIROCTL, "--socket", str(daemon.socket_path), *args]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            yield proc
        finally:
            proc.send_signal(signal.SIGINT)
            # communicate, not wait: a pipe nobody reads fills, and the last write would block
            _, errors = proc.communicate(timeout=10)
        assert proc.returncode == 0, errors


def read_until(proc: subprocess.Popen[str], needle: str, timeout_s: float = 10.0) -> str:
    """What `proc` printed, up to and including the first line holding `needle`."""
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([proc.stdout], [], [], left)[0]:
            break
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} not printed; got {seen!r}")


def test_follow_prints_new_requests_and_stops_on_ctrl_c(
    daemon: DaemonProcess, claude: anthropic.Anthropic, failed_over: str
) -> None:
    with following(daemon, "trace", "--follow", "--json", "--interval", "0.2") as proc:
        time.sleep(1.0)  # its first poll has taken the cursor
        new = ask(claude)
        line = read_until(proc, new).splitlines()[-1]
        row: dict[str, Any] = json.loads(line)
        assert row["request_id"] == new
        assert row["attempts"][-1]["outcome"] == "ok"
        no_content(line)


def test_logs_follow_tails_new_lines(daemon: DaemonProcess, claude: anthropic.Anthropic) -> None:
    with following(daemon, "logs", "-n", "0", "--follow", "--interval", "0.2") as proc:
        time.sleep(1.0)
        new = ask(claude)
        seen = read_until(proc, f"request_id={new}")
        no_content(seen)


def test_logs_json_prints_the_page_and_with_follow_one_document_a_line(
    daemon: DaemonProcess, claude: anthropic.Anthropic
) -> None:
    done = ask(claude)
    page = json.loads(kiroctl(daemon, "logs", "--lines", "1000", "--json").stdout)
    assert set(page) == {"lines", "next", "missed", "more"}
    access = [line for line in page["lines"] if " request " in line and done in line]
    assert len(access) == 1
    assert "path=/v1/messages status=200" in access[0]
    with following(daemon, "logs", "-n", "0", "--follow", "--json", "--interval", "0.2") as proc:
        first = json.loads(read_until(proc, '"next"'))
        assert first["lines"] == []
        time.sleep(0.5)
        new = ask(claude)
        line = read_until(proc, f"request_id={new}").splitlines()[-1]
        batch = json.loads(line)
        assert batch["next"] > first["next"]
        assert any(f"request_id={new}" in logged for logged in batch["lines"])
        no_content(line)


def usage(daemon: DaemonProcess, key: str | None) -> tuple[int, Any]:
    headers = {"x-api-key": key} if key else {}
    url = f"{daemon.base_url}/v1/usage"
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 (the daemon's http URL)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_usage_tells_the_key_its_credits_and_the_pool_its_quota(
    daemon: DaemonProcess, failed_over: str
) -> None:
    status, doc = usage(daemon, None)
    assert status == 401
    status, doc = usage(daemon, daemon.api_key)
    assert status == 200, doc
    assert doc["object"] == "usage"
    today, month = doc["credits"]["today"], doc["credits"]["month"]
    assert today["requests"] >= 1
    assert today["credits"] > 0
    assert month["requests"] >= today["requests"]
    assert month["credits"] >= today["credits"]
    assert month["since"] <= today["since"] <= doc["at"]
    accounts = doc["pool"]["accounts"]
    assert len(accounts) == 2
    assert {"id", "status", "remaining_credits", "limit", "resets_at", "checked_at"} == set(
        accounts[0]
    )
    text = json.dumps(doc)
    assert "@" not in text
    assert "label" not in text
    assert daemon.api_key not in text
    assert "token" not in text.lower()
