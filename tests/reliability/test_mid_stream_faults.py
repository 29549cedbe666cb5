"""Streams that break after their first event, through the real daemon and the official SDKs.

One of one, two or four accounts (round-robin) has its connection dropped after two text events
on every chat (the fake's standing script). Each of Messages, Responses and Chat, streamed and
not, meets the fault in turn:

- an answer not streamed had sent its client nothing: with another account it is answered
  there (200, the operation log `[(faulty, protocol), (other, ok)]`); with one account it is the
  error in the protocol's envelope (a transient failure is not retried on the same account);
- a stream had begun: it is never replayed, and it ends with the protocol's own error event
  (Anthropic `event: error`, Responses `error` then `response.failed`, Chat's error chunk)
  after the two events' text;
- either way the break counts against the account: `breaker_consecutive_failures` (3) in a
  row rest it; with others left it then gets no chat, with none left panic mode still tries it
  one request at a time, and once the fault is gone that trial brings it back.

And a streamed Responses answer is stored before the client is sent `response.completed`: the
daemon killed (`kill -9`) the moment the SDK reads that event, the restarted one serves the
response and its `previous_response_id` continuation.

Every body the SDKs received is scanned for secrets at the end, as in every module.
"""

from __future__ import annotations

import contextlib
import queue
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from kirod.localapi.client import trace_path
from kirod.report_types.trace import TraceRequest
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Fault, Reply, Script, ThreadedFake
from tests.reliability.reliability_env import (
    MODEL,
    Transcript,
    import_account,
    secrets_of,
    start,
    wait_idle,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)

THRESHOLD = 3  # breaker_consecutive_failures, the default
HEALTHY = "a whole answer from a healthy account"
TWO_EVENTS = "one,two,"  # what the faulty account sends before its connection drops
DROPPED = Script(
    reply=Reply(text=TWO_EVENTS + "six,ten,and the rest never arrives"),
    chunk_size=4,
    fault=Fault.CONNECTION_CUT,
    fault_at=2,
)
PROTOCOLS = ("messages", "responses", "chat")
TRANSCRIPT = Transcript()


@dataclass(frozen=True)
class Kind:
    protocol: str
    stream: bool

    def __str__(self) -> str:
        return f"{self.protocol} {'stream' if self.stream else 'json'}"


JSON = [Kind(protocol, False) for protocol in PROTOCOLS]
STREAMS = [Kind(protocol, True) for protocol in PROTOCOLS]


@dataclass
class Outcome:
    """One request as its SDK saw it."""

    request_id: str
    status: int  # the HTTP status
    text: str = ""
    error_type: str | None = None  # the error's type: an error status, or the stream's event
    error_code: str | None = None  # OpenAI's code (the Anthropic envelope has none)
    ended: str = ""  # a stream's last event: "message_stop", "error", "response.failed", …


@dataclass(frozen=True)
class Pool:
    proc: DaemonProcess
    fake: FakeKiro
    faulty: str  # kirod's id of the account whose connection drops
    fake_faulty: str  # the fake's id of it
    accounts: int


@pytest.fixture(
    scope="module", params=[1, 2, 4], ids=["one-account", "two-accounts", "four-accounts"]
)
def pool(request: pytest.FixtureRequest, fake: ThreadedFake) -> Iterator[Pool]:
    count: int = request.param
    fake.fake.default_script = Script(reply=Reply(text=HEALTHY))
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    proc = start(
        root,
        fake,
        {
            "KIROD_ACCOUNT_SELECTION_STRATEGY": "round-robin",
            "KIROD_ENABLE_CHAT_COMPLETIONS": "true",
            "KIROD_BREAKER_CONSECUTIVE_FAILURES": str(THRESHOLD),
        },
    )
    issued = [fake.fake.issue_social_account() for _ in range(count)]
    try:
        ids = [import_account(proc, tokens)["id"] for tokens in issued]
        fake.fake.set_account_script(issued[0].account_id, DROPPED)
        yield Pool(proc, fake.fake, ids[0], issued[0].account_id, count)
        assert "unhandled_error" not in proc.log()
        assert len(TRANSCRIPT) > 0
        assert not TRANSCRIPT.leaks(secrets_of([proc]))
    finally:
        fake.fake.set_account_script(issued[0].account_id, None)
        assert proc.stop() == 0
        shutil.rmtree(root, ignore_errors=True)


# -- the official SDKs --------------------------------------------------------------------------


def claude(proc: DaemonProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key, max_retries=0)


def gpt(proc: DaemonProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proc.base_url}/v1", api_key=proc.api_key, max_retries=0)


def send(proc: DaemonProcess, kind: Kind, prompt: str = "hello") -> Outcome:
    try:
        if kind.protocol == "messages":
            return _messages(proc, kind.stream, prompt)
        if kind.protocol == "responses":
            return _responses(proc, kind.stream, prompt)
        return _chat(proc, kind.stream, prompt)
    except (anthropic.APIStatusError, openai.APIStatusError) as error:
        TRANSCRIPT.add(f"{kind} error", error.response.text)
        body = error.body if isinstance(error.body, dict) else {}
        envelope = body.get("error", body)
        return Outcome(
            error.response.headers["x-request-id"],
            error.status_code,
            error_type=envelope.get("type"),
            error_code=envelope.get("code"),
        )


def _messages(proc: DaemonProcess, stream: bool, prompt: str) -> Outcome:
    messages: Any = [{"role": "user", "content": prompt}]
    with claude(proc) as client:
        if not stream:
            raw = client.messages.with_raw_response.create(
                model=MODEL, max_tokens=256, messages=messages
            )
            message = raw.parse()
            TRANSCRIPT.add("messages", message.model_dump_json())
            text = "".join(block.text for block in message.content if block.type == "text")
            return Outcome(raw.headers["x-request-id"], raw.status_code, text)
        events = client.messages.create(model=MODEL, max_tokens=256, messages=messages, stream=True)
        seen = Outcome(events.response.headers["x-request-id"], events.response.status_code)
        try:
            for event in events:
                TRANSCRIPT.add("messages stream", event.model_dump_json())
                seen.ended = event.type
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    seen.text += event.delta.text
        except anthropic.APIStatusError as error:  # the SDK raises `event: error`
            TRANSCRIPT.add("messages stream error", str(error.body))
            body = _mapping(error.body)
            seen.ended, seen.error_type = body["type"], _mapping(body["error"])["type"]
        return seen


def _responses(proc: DaemonProcess, stream: bool, prompt: str) -> Outcome:
    with gpt(proc) as client:
        if not stream:
            raw = client.responses.with_raw_response.create(model=MODEL, input=prompt)
            response = raw.parse()
            TRANSCRIPT.add("responses", response.model_dump_json())
            return Outcome(raw.headers["x-request-id"], raw.status_code, response.output_text)
        events = client.responses.create(model=MODEL, input=prompt, stream=True)
        seen = Outcome(events.response.headers["x-request-id"], events.response.status_code)
        for event in events:
            TRANSCRIPT.add("responses stream", event.model_dump_json())
            seen.ended = event.type
            if event.type == "response.output_text.delta":
                seen.text += event.delta
            elif event.type == "error":
                seen.error_code = event.code
            elif event.type == "response.failed":
                assert event.response.error is not None
                seen.error_type = event.response.error.code
        return seen


def _chat(proc: DaemonProcess, stream: bool, prompt: str) -> Outcome:
    messages: Any = [{"role": "user", "content": prompt}]
    with gpt(proc) as client:
        if not stream:
            raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages)
            completion = raw.parse()
            TRANSCRIPT.add("chat", completion.model_dump_json())
            text = completion.choices[0].message.content or ""
            return Outcome(raw.headers["x-request-id"], raw.status_code, text)
        chunks = client.chat.completions.create(model=MODEL, messages=messages, stream=True)
        seen = Outcome(chunks.response.headers["x-request-id"], chunks.response.status_code)
        try:
            for chunk in chunks:
                TRANSCRIPT.add("chat stream", chunk.model_dump_json())
                seen.ended = "chunk"
                if chunk.choices and chunk.choices[0].delta.content:
                    seen.text += chunk.choices[0].delta.content
        except openai.APIError as error:  # the SDK raises the error chunk
            TRANSCRIPT.add("chat stream error", str(error.body))
            body = _mapping(error.body)
            seen.ended, seen.error_type, seen.error_code = "error", body["type"], body["code"]
        return seen


def _mapping(value: object) -> dict[str, Any]:
    assert isinstance(value, dict)
    return value


# -- what one request must have led to ----------------------------------------------------------


def row(pool: Pool, outcome: Outcome) -> TraceRequest:
    """The request's operation-log row, from the control API (which flushes the log first)."""

    def found() -> TraceRequest | None:
        rows = TRANSCRIPT.control(pool.proc, "GET", trace_path(outcome.request_id))["requests"]
        return TraceRequest.from_json(rows[0]) if rows else None

    written: TraceRequest = wait_until(found, what=f"the row of {outcome.request_id}")
    return written


def attempts(pool: Pool, outcome: Outcome) -> list[tuple[str, str]]:
    return [(attempt.account_id, attempt.outcome) for attempt in row(pool, outcome).attempts]


def check_served(pool: Pool, kind: Kind, outcome: Outcome) -> None:
    """A healthy account answered, whole."""
    assert (outcome.status, outcome.text, outcome.error_type) == (200, HEALTHY, None), kind
    if kind.stream:
        assert outcome.ended in ("message_stop", "response.completed", "chunk"), kind
    [(account, result)] = attempts(pool, outcome)
    assert (result, account != pool.faulty) == ("ok", True), kind


def check_met_the_fault(pool: Pool, kind: Kind, outcome: Outcome) -> None:
    """`outcome` is a request whose first attempt was the faulty account's."""
    logged = row(pool, outcome)
    if kind.stream:
        # Begun: the two events' text, then the protocol's own error event; never replayed.
        assert (outcome.status, outcome.text) == (200, TWO_EVENTS), kind
        assert attempts(pool, outcome) == [(pool.faulty, "ok")], kind
        assert (logged.status, logged.error) == (200, "upstream_protocol"), kind
        if kind.protocol == "messages":
            assert (outcome.ended, outcome.error_type) == ("error", "api_error")
        elif kind.protocol == "responses":
            assert outcome.ended == "response.failed"
            assert (outcome.error_code, outcome.error_type) == ("upstream_protocol", "server_error")
        else:
            assert outcome.ended == "error"
            assert (outcome.error_code, outcome.error_type) == ("upstream_protocol", "server_error")
    elif pool.accounts > 1:
        # Nothing sent yet: answered by the next account, as for a failure before any output.
        assert (outcome.status, outcome.text) == (200, HEALTHY), kind
        [first, (second, result)] = attempts(pool, outcome)
        assert first == (pool.faulty, "protocol"), kind
        assert (result, second != pool.faulty) == ("ok", True), kind
        assert (logged.status, logged.error) == (200, None), kind
    else:
        # No other account, and no second try on the same one: the error, in its envelope.
        assert outcome.status == 502, kind
        if kind.protocol == "messages":
            assert outcome.error_type == "api_error"
        else:
            assert (outcome.error_code, outcome.error_type) == ("upstream_protocol", "server_error")
        assert attempts(pool, outcome) == [(pool.faulty, "protocol")], kind
        assert (logged.status, logged.error) == (502, "upstream_protocol"), kind


def meet_the_fault(pool: Pool, kind: Kind) -> None:
    """Requests of `kind` until one is tried first on the faulty account (round-robin: within
    one turn of the accounts), each checked."""
    for _ in range(pool.accounts + 1):
        outcome = send(pool.proc, kind)
        if attempts(pool, outcome)[0][0] == pool.faulty:
            check_met_the_fault(pool, kind, outcome)
            return
        check_served(pool, kind, outcome)
    raise AssertionError(f"{kind} never met the faulty account")


def account(pool: Pool, account_id: str) -> dict[str, Any]:
    accounts = wait_idle(pool.proc, TRANSCRIPT)["accounts"]
    found: dict[str, Any] = next(a for a in accounts if a["id"] == account_id)
    return found


def faulty_chats(pool: Pool) -> int:
    return sum(record.account_id == pool.fake_faulty for record in pool.fake.requests("chat"))


@pytest.mark.parametrize("kinds", [JSON, STREAMS], ids=["not-streamed", "streamed"])
def test_a_stream_broken_after_two_events(pool: Pool, kinds: list[Kind]) -> None:
    TRANSCRIPT.control(pool.proc, "POST", f"/accounts/{pool.faulty}/enable")  # counters at 0
    before = faulty_chats(pool)
    for count, kind in enumerate(kinds, start=1):
        meet_the_fault(pool, kind)
        state = account(pool, pool.faulty)
        assert state["failures"] == count  # every break counted, none undone by a success
        assert state["status"] == ("active" if count < THRESHOLD else "cooling_down")
    assert faulty_chats(pool) - before == THRESHOLD
    if pool.accounts > 1:
        # Resting: every request now goes to the others and is answered whole.
        for kind in JSON + STREAMS:
            check_served(pool, kind, send(pool.proc, kind))
        assert faulty_chats(pool) - before == THRESHOLD
        assert all(
            (a["status"], a["failures"]) == ("active", 0)
            for a in wait_idle(pool.proc, TRANSCRIPT)["accounts"]
            if a["id"] != pool.faulty
        )
        return
    # The only account rests for transient failures: panic mode still tries it, one request
    # at a time, rather than answering 429; while the fault lasts the trial fails as before...
    for kind in JSON + STREAMS:
        check_met_the_fault(pool, kind, send(pool.proc, kind))
    assert faulty_chats(pool) - before == THRESHOLD + 6
    assert "panic_trial" in pool.proc.log()
    # ...and once it is gone the trial is answered and the account is back in service.
    pool.fake.set_account_script(pool.fake_faulty, None)
    try:
        for kind in JSON + STREAMS:
            outcome = send(pool.proc, kind)
            assert (outcome.status, outcome.text) == (200, HEALTHY), kind
        state = account(pool, pool.faulty)
        assert (state["status"], state["failures"]) == ("active", 0)
    finally:
        pool.fake.set_account_script(pool.fake_faulty, DROPPED)


# -- a streamed Responses answer is stored before it completes ---------------------------------

KILLS = 2
HOLD_S = 0.5  # how long another process holds the database: far under kirod's busy timeout


def read_until_completed(proc: DaemonProcess, prompt: str, seen: queue.Queue[Any]) -> None:
    """Stream one response, putting each event's type on `seen`; kill the daemon the moment
    `response.completed` is read, then put that event's Response."""
    with gpt(proc) as client:
        for event in client.responses.create(model=MODEL, input=prompt, stream=True):
            TRANSCRIPT.add("responses stream", event.model_dump_json())
            if event.type == "response.completed":
                proc.kill()
                seen.put(event.response)
                return
            seen.put(event.type)
    seen.put(None)


def test_a_streamed_response_is_stored_before_its_client_sees_it_completed(
    fake: ThreadedFake,
) -> None:
    """Another process holds kirod's database for a moment (a backup, say): the answer streams
    up to its last item, but `response.completed` waits for its store. The daemon is killed
    (`kill -9`) the moment the SDK reads that event; the restarted one serves the response and
    its `previous_response_id` continuation."""
    fake.fake.default_script = Script(reply=Reply(text=HEALTHY))
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    proc = start(root, fake)
    try:
        import_account(proc, fake.fake.issue_social_account())
        with gpt(proc) as client:  # the writes a daemon's first request makes (the key's use)
            TRANSCRIPT.add("responses", client.responses.create(model=MODEL, input="hi").to_json())
        for kill in range(KILLS):
            prompt = f"question number {kill}"
            seen: queue.Queue[Any] = queue.Queue()
            with contextlib.closing(
                sqlite3.connect(proc.state_dir / "kirod.db", timeout=5, isolation_level=None)
            ) as other:
                other.execute("BEGIN IMMEDIATE")  # the write lock: kirod's writes wait
                reader = threading.Thread(target=read_until_completed, args=(proc, prompt, seen))
                reader.start()
                types = [seen.get(timeout=10)]
                deadline = time.monotonic() + HOLD_S
                while (left := deadline - time.monotonic()) > 0:
                    with contextlib.suppress(queue.Empty):
                        types.append(seen.get(timeout=left))
                other.execute("ROLLBACK")
            # Everything but the terminal event came while the store waited.
            assert "response.output_item.done" in types
            assert all(isinstance(item, str) for item in types), types
            completed = seen.get(timeout=10)
            reader.join(10)
            assert completed is not None, "the stream ended without response.completed"
            assert completed.output_text == HEALTHY
            proc = start(root, fake)
            with gpt(proc) as client:
                stored = client.responses.retrieve(completed.id)
                TRANSCRIPT.add("responses retrieve", stored.model_dump_json())
                assert (stored.status, stored.output_text) == ("completed", HEALTHY)
                follow = client.responses.create(
                    model=MODEL, input="and then?", previous_response_id=completed.id
                )
                TRANSCRIPT.add("responses", follow.model_dump_json())
            assert follow.status == "completed"  # and the next round's first request
            history = str(fake.fake.requests("chat")[-1].json["conversationState"]["history"])
            assert prompt in history
            assert HEALTHY in history  # the stored answer went back to Kiro as the history
        assert "unhandled_error" not in proc.log()
        assert not TRANSCRIPT.leaks(secrets_of([proc]))
    finally:
        proc.kill()
        shutil.rmtree(root, ignore_errors=True)
