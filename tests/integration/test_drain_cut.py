"""A stream the drain cannot wait for ends with its protocol's error event, not a silent cut."""

from __future__ import annotations

import http.client
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kirod.testing.fake_kiro import Fault, Script, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon


@pytest.fixture
def fake() -> Iterator[ThreadedFake]:
    with ThreadedFake() as server:
        yield server


@pytest.mark.parametrize(
    ("path", "body", "terminal"),
    [
        (
            "/v1/messages",
            b'{"model":"claude-sonnet-4-6","max_tokens":50,"stream":true,'
            b'"messages":[{"role":"user","content":"long answer"}]}',
            b"event: error",
        ),
        (
            "/v1/responses",
            b'{"model":"claude-sonnet-4-6","stream":true,"input":"long answer"}',
            b"event: response.failed",
        ),
    ],
)
def test_a_stream_cut_at_the_drain_deadline_ends_with_an_error_event(
    fake: ThreadedFake, short_tmp: Path, path: str, body: bytes, terminal: bytes
) -> None:
    proc = start_daemon(short_tmp, fake, {"KIROD_SHUTDOWN_DRAIN_S": "1"})
    import_account(proc, fake.fake.issue_social_account())
    fake.fake.enqueue(Script(fault=Fault.STALL, fault_at=3, stall_s=20))
    received: list[bytes] = []
    request = urllib.request.Request(  # noqa: S310 - the daemon on loopback
        proc.base_url + path,
        data=body,
        headers={"authorization": f"Bearer {proc.api_key}", "content-type": "application/json"},
    )

    def read() -> None:
        """Every byte that arrives; the daemon ends the connection without a final chunk."""
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
            for _ in range(10_000):  # bounded; each read1 returns what has arrived
                try:
                    chunk = answer.read1(65536)
                except (http.client.IncompleteRead, ConnectionError, ValueError):
                    break
                if not chunk:
                    break
                received.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    try:
        reader.start()
        time.sleep(1.0)  # the stream is under way, stalled upstream
        assert proc.stop(signal.SIGTERM, timeout_s=15) == 0
        reader.join(10)
    finally:
        proc.kill()
    streamed = b"".join(received)
    assert streamed, "nothing was streamed"
    assert terminal in streamed
    assert b"shutting down" in streamed
