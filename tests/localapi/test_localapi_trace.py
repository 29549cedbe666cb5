"""The control API's `/trace` and `/logs` routes and their typed client methods, on a daemon."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from kirod.localapi.client import ControlError, logs_path, trace_path
from kirod.report_types import LogLines, Trace
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import import_account, start_daemon


@pytest.fixture(scope="module")
def daemon(module_tmp: Path) -> Iterator[DaemonProcess]:
    with ThreadedFake() as fake:
        proc = start_daemon(module_tmp, fake)
        import_account(proc, fake.fake.issue_social_account())
        try:
            yield proc
        finally:
            proc.kill()


def test_paths() -> None:
    assert trace_path() == "/trace"
    assert trace_path("req 1") == "/trace?request_id=req+1"
    assert trace_path(last=5) == "/trace?last=5"
    assert trace_path(after=7) == "/trace?after=7"
    assert logs_path() == "/logs"
    assert logs_path(3) == "/logs?after=3"
    assert logs_path(lines=20) == "/logs?lines=20"


def test_trace_follows_the_operation_log(daemon: DaemonProcess) -> None:
    client = daemon.client
    before = client.trace(last=10)
    assert isinstance(before, Trace)
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as claude:
        raw = claude.messages.with_raw_response.create(
            model="claude-sonnet-4-6", max_tokens=20, messages=[{"role": "user", "content": "hi"}]
        )
    request_id = raw.headers["x-request-id"]
    after = client.trace(after=before.cursor)
    assert [row.request_id for row in after.requests] == [request_id]
    assert after.cursor > before.cursor
    [row] = client.trace(request_id).requests
    assert row == after.requests[0]
    assert row.attempts[0].outcome == "ok"
    assert client.trace(after=after.cursor).requests == ()


@pytest.mark.parametrize(
    "path",
    [
        "/trace?last=abc",
        "/trace?last=201",
        "/trace?after=-1",
        "/trace?request_id=" + "x" * 201,
        "/logs?after=x",
        "/logs?lines=1001",
        "/logs?max_bytes=100000",
    ],
)
def test_bad_queries_are_refused(daemon: DaemonProcess, path: str) -> None:
    with pytest.raises(ControlError) as refused:
        daemon.client.request("GET", path)
    assert refused.value.status == 400


def test_logs_page_by_number(daemon: DaemonProcess) -> None:
    client = daemon.client
    newest = client.logs(lines=5)
    assert isinstance(newest, LogLines)
    assert 0 < len(newest.lines) <= 5
    assert any("daemon_ready" in line or "ready" in line for line in client.logs(lines=1000).lines)
    assert client.logs(newest.next).lines == client.logs(newest.next).lines
    small = client.request("GET", "/logs?after=0&max_bytes=200")
    assert len(small["lines"]) >= 1
    assert small["more"] is True
