"""Kept-alive upstream connections under the server's faults, through the real daemon and the
official Anthropic SDK, with one account and with three (round-robin, so each has its own).

The fake closes, resets or half-closes a kept-alive connection as the next chat crosses it, or
while it is idle: the SDK's request succeeds with one attempt in the operation log (kirod's
client sent the request again on a new connection; no failover hid it). A connection that fails
once an answer has begun is never sent again: the SDK sees the stream's error and the fake
recorded one chat for that request, on the kept-alive connection.

Every answer and event the SDK received is scanned for secrets at the end, as in every module.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import (
    ConnectionFault,
    FakeKiro,
    Fault,
    Reply,
    Script,
    ThreadedFake,
)
from tests.reliability.reliability_env import (
    MODEL,
    Transcript,
    import_account,
    oplog_row,
    secrets_of,
    start,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)

FAULTS = list(ConnectionFault)
TEXT = "answered on a kept-alive connection"
LONG = Reply(text="".join(f"part {n:02d} of an answer that is cut; " for n in range(6)))


@dataclass(frozen=True)
class Daemon:
    proc: DaemonProcess
    accounts: int


TRANSCRIPT = Transcript()  # what the SDK received, of both daemons


@pytest.fixture(scope="module", params=[1, 3], ids=["one-account", "three-accounts"])
def daemon(request: pytest.FixtureRequest, fake: ThreadedFake) -> Iterator[Daemon]:
    count: int = request.param
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    proc = start(root, fake, {"KIROD_ACCOUNT_SELECTION_STRATEGY": "round-robin"})
    try:
        for _ in range(count):
            import_account(proc, fake.fake.issue_social_account())
        yield Daemon(proc, count)
        assert "unhandled_error" not in proc.log()
        assert len(TRANSCRIPT) > 0
        assert not TRANSCRIPT.leaks(secrets_of([proc]))
    finally:
        assert proc.stop() == 0
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def service(fake: ThreadedFake) -> Iterator[FakeKiro]:
    fake.fake.clear_scripts()
    fake.fake.connections.disarm()
    fake.fake.default_script = Script(reply=Reply(text=TEXT))
    yield fake.fake
    fake.fake.connections.disarm()


def sdk(proc: DaemonProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key, max_retries=0)


def ask(proc: DaemonProcess) -> tuple[str, str]:
    """One non-streamed Messages request: its text and its request id."""
    with sdk(proc) as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
    message = raw.parse()
    TRANSCRIPT.add("messages", message.model_dump_json())
    text = "".join(block.text for block in message.content if block.type == "text")
    return text, raw.headers["x-request-id"]


def connections(service: FakeKiro) -> list[int]:
    return [record.connection for record in service.requests("chat")]


def warm(daemon: Daemon, service: FakeKiro) -> set[int]:
    """One chat per account, so each holds a kept-alive connection; their serials."""
    before = len(connections(service))
    for _ in range(daemon.accounts):
        assert ask(daemon.proc)[0] == TEXT
    records = service.requests("chat")[before:]
    assert len({record.account_id for record in records}) == daemon.accounts
    return {record.connection for record in records}


def struck(service: FakeKiro, fault: ConnectionFault) -> int:
    return service.counters().get(f"connection_fault:{fault.name}", 0)


def one_ok_attempt(proc: DaemonProcess, request_id: str) -> None:
    [(_, outcome)] = oplog_row(proc, request_id)["attempts"]
    assert outcome == "ok"


@pytest.mark.parametrize("fault", FAULTS, ids=lambda fault: fault.name.lower())
def test_a_chat_crossing_the_close_of_its_connection_is_answered(
    daemon: Daemon, service: FakeKiro, fault: ConnectionFault
) -> None:
    kept = warm(daemon, service)
    before, hits = len(connections(service)), struck(service, fault)
    service.connections.fail_next(fault, count=daemon.accounts)
    answers = [ask(daemon.proc) for _ in range(daemon.accounts)]
    assert [text for text, _ in answers] == [TEXT] * daemon.accounts
    assert struck(service, fault) - hits == daemon.accounts
    for _, request_id in answers:
        one_ok_attempt(daemon.proc, request_id)
    answered = connections(service)[before:]
    assert len(answered) == daemon.accounts  # the requests the faults met were never taken
    assert not set(answered) & kept
    assert "upstream_connection_stale" in daemon.proc.log()


@pytest.mark.parametrize("fault", FAULTS, ids=lambda fault: fault.name.lower())
def test_a_close_while_idle_is_invisible(
    daemon: Daemon, service: FakeKiro, fault: ConnectionFault
) -> None:
    kept = warm(daemon, service)
    before = len(connections(service))
    assert service.connections.fail_now(fault) >= 1
    wait_until(lambda: not kept & service.connections.open_serials(), what="the closes")
    answers = [ask(daemon.proc) for _ in range(daemon.accounts)]
    assert [text for text, _ in answers] == [TEXT] * daemon.accounts
    for _, request_id in answers:
        one_ok_attempt(daemon.proc, request_id)
    assert not set(connections(service)[before:]) & kept


def stream_until_error(proc: DaemonProcess, on_first_text: Callable[[], object]) -> tuple[str, str]:
    """A streamed Messages request that must end in the stream's error: the text before it and
    the request id."""
    text = ""
    with sdk(proc) as client:
        events = client.messages.create(
            model=MODEL,
            max_tokens=256,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        request_id = events.response.headers["x-request-id"]
        try:
            for event in events:
                TRANSCRIPT.add("messages stream", event.model_dump_json())
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    began = bool(text)
                    text += event.delta.text
                    if not began:
                        on_first_text()
        except anthropic.APIError as exc:
            TRANSCRIPT.add("messages stream error", str(exc.body))
            return text, request_id
    raise AssertionError("the stream ended without its error")


def failure_after_output(
    daemon: Daemon, service: FakeKiro, script: Script, act: Callable[[], object]
) -> None:
    kept = warm(daemon, service)
    before = len(connections(service))
    service.enqueue(script)
    text, request_id = stream_until_error(daemon.proc, act)
    assert text
    [attempt] = connections(service)[before:]  # one chat for the request: never sent again
    assert attempt in kept  # on a kept-alive connection
    row = oplog_row(daemon.proc, request_id)
    assert len(row["attempts"]) == 1  # committed at the first event: no failover either
    assert row["error"] is not None
    assert ask(daemon.proc)[0] == TEXT


def test_a_cut_after_the_first_event_is_not_sent_again(daemon: Daemon, service: FakeKiro) -> None:
    script = Script(reply=LONG, fault=Fault.CONNECTION_CUT, fault_at=3, delay_between_s=0.1)
    failure_after_output(daemon, service, script, lambda: None)


@pytest.mark.parametrize("fault", FAULTS, ids=lambda fault: fault.name.lower())
def test_a_connection_failing_mid_answer_is_not_sent_again(
    daemon: Daemon, service: FakeKiro, fault: ConnectionFault
) -> None:
    script = Script(reply=LONG, fault=Fault.STALL, fault_at=2, stall_s=5.0, delay_between_s=0.05)
    hits = struck(service, fault)
    failure_after_output(
        daemon, service, script, lambda: service.connections.fail_now(fault, busy=True)
    )
    assert struck(service, fault) - hits == 1
