"""Capacity slots end to end: clients that disconnect mid-stream give their slots back, and the
eleventh concurrent request on a ten-slot account waits for a slot, then proceeds. And a daemon
killed mid-stream leaves a database that opens and is consistent."""

from __future__ import annotations

import concurrent.futures
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anthropic
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import Reply, Script, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
SLOTS = 10


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake) -> Iterator[DaemonProcess]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    proc = start_daemon(root, fake, {"KIROD_QUEUE_TIMEOUT_S": "10"})
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        assert proc.stop() == 0
        shutil.rmtree(root, ignore_errors=True)


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def test_disconnects_give_slots_back_and_the_eleventh_request_waits(
    daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    service = fake.fake
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as claude:
        # Ten clients read the first text of a long, slow answer and hang up.
        slow = Script(reply=Reply(text="y" * 600), chunk_size=2, delay_between_s=0.05)
        service.enqueue(*[slow] * SLOTS)

        def hang_up(_: int) -> str:
            with claude.messages.stream(
                model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "x"}]
            ) as stream:
                return next(iter(stream.text_stream))

        with concurrent.futures.ThreadPoolExecutor(SLOTS) as pool:
            assert list(pool.map(hang_up, range(SLOTS))) == ["yy"] * SLOTS
        # kirod aborted every upstream stream (and released its slot with it)
        wait_until(lambda: all(r.status is not None for r in service.requests("chat")))
        assert service.counters().get("streams_completed", 0) == 0

        service.clear_requests()
        held = Script(reply=Reply(text="done"), delay_first_s=1.5)
        service.enqueue(*[held] * (SLOTS + 1))

        def ask(_: int) -> str:
            message = claude.messages.create(
                model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "x"}]
            )
            return message.content[0].text  # type: ignore[union-attr]

        with concurrent.futures.ThreadPoolExecutor(SLOTS + 1) as pool:
            answers = pool.map(ask, range(SLOTS + 1))
            wait_until(lambda: len(service.requests("chat")) == SLOTS)
            time.sleep(0.3)
            assert len(service.requests("chat")) == SLOTS  # the eleventh waits for a slot
            assert list(answers) == ["done"] * (SLOTS + 1)
        assert len(service.requests("chat")) == SLOTS + 1


def test_kill_9_mid_stream_leaves_a_consistent_database(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    root = short_tmp
    proc = start_daemon(root, fake)
    account = import_account(proc, fake.fake.issue_social_account())
    fake.fake.enqueue(Script(reply=Reply(text="z" * 600), chunk_size=2, delay_between_s=0.05))
    with anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key, max_retries=0) as claude:
        with claude.messages.stream(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "x"}]
        ) as stream:
            next(iter(stream.text_stream))
            proc.kill()  # SIGKILL while streaming
        restarted = start_daemon(root, fake)
        try:
            [after] = restarted.client.request("GET", "/accounts")["accounts"]
            assert (after["id"], after["status"]) == (account["id"], "active")
            with sqlite3.connect(restarted.state_dir / "kirod.db") as db:
                assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            with anthropic.Anthropic(
                base_url=restarted.base_url, api_key=restarted.api_key, max_retries=0
            ) as again:
                again.messages.create(
                    model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "x"}]
                )
        finally:
            assert restarted.stop() == 0
