"""Every upstream fault the fake can inject, streamed and not, over Messages, Responses and Chat,
against the real daemon with two accounts.

For each fault the client gets the documented status or terminal event (the table is in
docs/RELIABILITY.md and in `VARIANTS` below), failover happens while the client has been sent
nothing (before the first event; for an answer not streamed, until it is whole) and never after,
a break after the first event counts against the account, no request outlives its bound, every
account slot comes back, and the operation log holds every attempt. Each scenario runs twice: the
fault once (the second account answers), and the fault on every account (the client sees the
error).

The six (protocol, streaming) lanes are independent (a fake and a daemon each) and run on threads
of one module fixture, so the idle-timeout faults overlap; each case is then its own test.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import shutil
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from kirod.errors import ApiError, ErrorKind
from kirod.protocols.envelopes import anthropic_error, openai_error
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import Fault, Reply, Script, ThreadedFake
from tests.reliability.figures import FIGURES
from tests.reliability.reliability_env import (
    PATHS,
    Answer,
    Transcript,
    closed_port,
    import_account,
    oplog_row,
    post,
    request_body,
    secrets_of,
    start,
    wait_idle,
)

pytestmark = pytest.mark.timeout(180)  # the module fixture runs every lane once

IDLE_TIMEOUT_S = 1.0
STALL_S = 3.0  # longer than the idle timeout: kirod gives up first
OK_TEXT = "answered by the other account"
PARTIAL = Reply(text="".join(f"part {n:02d} of a long answer; " for n in range(8)))
BOUND_S = 4.0  # any answer, plus one idle timeout per stalled attempt

Phase = Literal["http", "early", "mid", "late", "continued", "repaired", "stated", "final"]


@dataclass(frozen=True)
class Variant:
    """One fault and what it must lead to.

    `http`/`early`: a recoverable failure before the first event (an error status, or a stream
    that fails before producing anything): the next account is tried. `mid`: the account's
    failure after the first event: a stream had begun, so the error ends it (the account counts
    it); an answer not streamed had sent nothing, so the next account is tried. `late`: the
    request's own error after the first event: no failover, the error ends the answer.
    `continued`: Kiro cut a tool call off; kirod continued the turn once on the same account, the
    client sees one normal answer. `repaired`: the translator fixes the stream, the client sees a
    normal answer. `stated`: the answer stands as Kiro ended it, with the stop `stops` names per
    protocol (Messages `stop_reason`, Responses `incomplete_details.reason`, Chat
    `finish_reason`): no failover, not the account's failure. `final`: the request's own error
    before the first event: no failover, the error status.
    """

    name: str
    script: Script
    phase: Phase
    failure: str | None = None  # the failed attempt's outcome in the operation log
    kind: ErrorKind | None = None  # what the client sees when no account can answer / at the end
    code: str | None = None
    retry_after: tuple[int, ...] = ()  # Retry-After values accepted when every account failed
    after: str = "active"  # the failed account's status after one failure
    calls: int = 1  # upstream calls one failing account makes (a bearer rejection: 2)
    stalls: int = 0  # idle timeouts one failing account waits out
    stops: tuple[str, str, str] | None = None  # `stated`: Messages, Responses, Chat

    def scripts(self, scenario: str) -> list[Script]:
        """The fault once (one failed call), or on every call to both accounts."""
        return [self.script] * (1 if scenario == "once" else self.calls * 2)


VARIANTS: tuple[Variant, ...] = (
    Variant(
        "quota_402",
        Script(fault=Fault.QUOTA_402),
        "http",
        "quota",
        ErrorKind.RATE_LIMIT,
        "quota_exhausted",
        after="active",  # the usage probe that confirms a 402 found credits left
    ),
    Variant(
        "overage_400",
        Script(fault=Fault.OVERAGE_400),
        "http",
        "quota",  # a 400, yet the account's allowance, not the request's fault
        ErrorKind.RATE_LIMIT,
        "quota_exhausted",
        after="active",  # the usage probe that confirms it found credits left
    ),
    Variant(
        "suspicious_429",
        Script(fault=Fault.SUSPICIOUS_429, retry_after_s=2),
        "http",
        "suspicious_activity",
        ErrorKind.RATE_LIMIT,
        "account_flagged",
        retry_after=(6 * 3600 - 1, 6 * 3600),  # the account's rest, not Kiro's 2 s
        after="cooling_down",
    ),
    Variant(
        "throttle_429_retry_after",
        Script(fault=Fault.THROTTLE_429, retry_after_s=2),
        "http",
        "throttled",
        ErrorKind.RATE_LIMIT,
        "upstream_rate_limited",
        retry_after=(2,),
        after="cooling_down",
    ),
    Variant(
        "throttle_429_retry_after_header",
        Script(fault=Fault.THROTTLE_429_RETRY_AFTER_HEADER, retry_after_s=2),
        "http",
        "throttled",
        ErrorKind.RATE_LIMIT,
        "upstream_rate_limited",
        retry_after=(2,),
        after="cooling_down",
    ),
    Variant(
        "throttle_429_penalty_window",
        Script(
            fault=Fault.THROTTLE_429, throttle_reason="USER_REQUEST_RATE_EXCEEDED", retry_after_s=0
        ),
        "http",
        "penalty_window",
        ErrorKind.RATE_LIMIT,
        "upstream_penalty_window",
        retry_after=(119, 120),  # no wait given: the measured window
        after="cooling_down",
    ),
    Variant(
        "throttle_429_service_rate",
        Script(
            fault=Fault.THROTTLE_429,
            throttle_reason="SERVICE_REQUEST_RATE_EXCEEDED",
            retry_after_s=2,
        ),
        "http",
        "service_throttled",
        ErrorKind.RATE_LIMIT,
        "upstream_service_throttled",
        retry_after=(2,),  # Kiro's wait, told on
        after="active",  # Kiro's, not the account's
    ),
    Variant(
        "improperly_formed_400",
        Script(fault=Fault.IMPROPERLY_FORMED_400),
        "final",
        "bad_request",
        ErrorKind.INVALID_REQUEST,
        "upstream_rejected_request",
    ),
    Variant(
        "conversation_limit_402",
        Script(fault=Fault.CONVERSATION_LIMIT_402),
        "final",
        "context_too_long",
        ErrorKind.INVALID_REQUEST,
        "context_length_exceeded",
    ),
    Variant(
        "throttle_429_no_retry_after",
        Script(fault=Fault.THROTTLE_429_NO_RETRY_AFTER),
        "http",
        "throttled",
        ErrorKind.RATE_LIMIT,
        "upstream_rate_limited",
        retry_after=(59, 60),  # the breaker's first cool-down
        after="cooling_down",
    ),
    Variant(
        "capacity_429",
        Script(fault=Fault.CAPACITY_429),
        "http",
        "capacity",
        ErrorKind.OVERLOADED,
        "upstream_overloaded",
        after="active",  # one transient failure: still in service
    ),
    Variant(
        "suspended_403",
        Script(fault=Fault.SUSPENDED_403),
        "http",
        "suspended",
        ErrorKind.UPSTREAM,
        "account_suspended",
        after="suspended",
    ),
    Variant(
        "bearer_invalid_403",
        Script(fault=Fault.BEARER_INVALID_403),
        "http",
        "bearer",
        ErrorKind.UPSTREAM,
        "upstream_auth_failed",
        calls=2,  # refreshed once and retried on the same account first
    ),
    Variant(
        "server_500_model_unavailable",
        Script(fault=Fault.SERVER_500),
        "http",
        "capacity",
        ErrorKind.OVERLOADED,
        "upstream_overloaded",
        after="active",  # one transient failure: still in service
    ),
    Variant(
        "internal_500",
        Script(fault=Fault.INTERNAL_500),
        "http",
        "server",
        ErrorKind.UPSTREAM,
        "upstream_error",
        after="active",  # one transient failure: still in service
    ),
    Variant(
        "empty_stream",
        Script(fault=Fault.EMPTY_STREAM),
        "early",
        "server",
        ErrorKind.UPSTREAM,
        "empty_response",
        after="active",  # one transient failure: still in service
    ),
    Variant(
        "exception_frame_first",
        Script(fault=Fault.MIDSTREAM_EXCEPTION, fault_at=0),
        "early",
        "throttled",
        ErrorKind.OVERLOADED,
        "upstream_throttled",
        retry_after=(59, 60),
        after="cooling_down",
    ),
    Variant(
        "error_frame_first",
        Script(fault=Fault.ERROR_FRAME, fault_at=0),
        "early",
        "server",
        ErrorKind.UPSTREAM,
        "upstream_unavailable",
        after="active",  # one transient failure: still in service
    ),
    Variant(
        "corrupt_crc_first",
        Script(fault=Fault.CORRUPT_CRC, fault_at=0),
        "early",
        "protocol",
        ErrorKind.UPSTREAM,
        "upstream_protocol",
        after="active",  # one transient failure: still in service
    ),
    Variant(
        "connection_cut_first",
        Script(fault=Fault.CONNECTION_CUT, fault_at=0),
        "early",
        "protocol",
        ErrorKind.UPSTREAM,
        "upstream_protocol",
        after="active",  # one transient failure: still in service
    ),
    Variant(
        "stall_first",
        Script(fault=Fault.STALL, fault_at=0, stall_s=STALL_S),
        "early",
        "timeout",
        ErrorKind.UPSTREAM,
        "upstream_timeout",
        after="active",  # one transient failure: still in service
        stalls=1,
    ),
    Variant(
        "fatal_exception_first",
        Script(fault=Fault.MIDSTREAM_EXCEPTION, fault_at=0, exception_type="ValidationException"),
        "late",  # not a transient fault: the error is the answer, on the first account
        kind=ErrorKind.UPSTREAM,
        code="upstream_error",
    ),
    Variant(
        "exception_frame_mid",
        Script(reply=PARTIAL, fault=Fault.MIDSTREAM_EXCEPTION, fault_at=3),
        "mid",
        "throttled",
        ErrorKind.OVERLOADED,
        "upstream_throttled",
        after="cooling_down",  # throttled: it rests, as when the throttle comes first
    ),
    Variant(
        "error_frame_mid",
        Script(reply=PARTIAL, fault=Fault.ERROR_FRAME, fault_at=3),
        "mid",
        "server",
        ErrorKind.UPSTREAM,
        "upstream_unavailable",
    ),
    Variant(
        "corrupt_crc_mid",
        Script(reply=PARTIAL, fault=Fault.CORRUPT_CRC, fault_at=3),
        "mid",
        "protocol",
        ErrorKind.UPSTREAM,
        "upstream_protocol",
    ),
    Variant(
        "connection_cut_mid",
        Script(reply=PARTIAL, fault=Fault.CONNECTION_CUT, fault_at=3),
        "mid",
        "protocol",
        ErrorKind.UPSTREAM,
        "upstream_protocol",
    ),
    Variant(
        "stall_mid",
        Script(reply=PARTIAL, fault=Fault.STALL, fault_at=3, stall_s=STALL_S),
        "mid",
        "timeout",
        ErrorKind.UPSTREAM,
        "upstream_timeout",
        stalls=1,
    ),
    Variant(
        "truncated_tool_input",
        Script(reply=PARTIAL, fault=Fault.TRUNCATED_TOOL_INPUT),
        "continued",  # the cut call never reaches the client (with recovery off: late, this code)
        kind=ErrorKind.UPSTREAM,
        code="tool_input_truncated",
    ),
    Variant(
        "duplicated_deltas",
        Script(reply=PARTIAL, fault=Fault.DUPLICATED_DELTAS, fault_at=2, chunk_size=24),
        "repaired",
    ),
    Variant(
        "leaked_tool_call_text",
        Script(reply=Reply(text="Let me look. "), fault=Fault.LEAKED_TOOL_CALL_TEXT),
        "repaired",  # no tool was declared: the text stays text
    ),
    Variant(
        "cut_generation",  # content, then a clean end without the tail frames
        Script(reply=PARTIAL, fault=Fault.CUT_GENERATION, fault_at=3),
        "stated",
        stops=("max_tokens", "max_output_tokens", "length"),
    ),
    Variant(
        "content_filtered",  # never an empty response, never tried on the next account
        Script(fault=Fault.CONTENT_FILTERED),
        "stated",
        stops=("refusal", "content_filter", "content_filter"),
    ),
    Variant(
        "context_window_exceeded",
        Script(fault=Fault.CONTEXT_WINDOW_EXCEEDED),
        "final",
        "context_too_long",
        ErrorKind.INVALID_REQUEST,
        "context_length_exceeded",
    ),
)

PROTOCOLS = ("messages", "responses", "chat")
Scenario = Literal["once", "every"]


@dataclass(frozen=True)
class Case:
    variant: Variant
    protocol: str
    stream: bool
    scenario: Scenario

    @property
    def lane(self) -> tuple[str, bool]:
        return self.protocol, self.stream

    @property
    def id(self) -> str:
        mode = "stream" if self.stream else "json"
        return f"{self.variant.name}-{self.protocol}-{mode}-{self.scenario}"


def _scenarios(variant: Variant) -> tuple[Scenario, ...]:
    return ("once", "every") if variant.phase in ("http", "early") else ("once",)


CASES = [
    Case(variant, protocol, stream, scenario)
    for variant in VARIANTS
    for protocol in PROTOCOLS
    for stream in (False, True)
    for scenario in _scenarios(variant)
]


@dataclass
class Seen:
    """What one case produced: the client's view, the fake's, the daemon's."""

    status: int = 0
    retry_after: str | None = None
    terminal: str = ""  # "ok", or "error" (an error status or a terminal error event)
    error_type: str | None = None
    error_code: str | None = None  # OpenAI family only: Anthropic's envelope has no code
    text: str = ""
    stop: str | None = None  # how the answer says it ended: see `Variant.stops`
    elapsed_s: float = 0.0
    chats: list[str | None] = dataclasses.field(default_factory=list)  # fake account ids
    refreshes: int = 0
    attempts: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    oplog_status: int = 0
    oplog_error: str | None = None
    first_state: str | None = None  # the first account tried, right after the case
    first_failures: int = 0  # and its breaker's count of failures in a row
    pending_scripts: int = 0
    crash: str | None = None  # a traceback if running the case failed


def _texts(protocol: str, answer: Answer) -> str:
    if answer.events:
        parts = []
        for name, data in answer.events:
            if not isinstance(data, dict):
                continue
            if protocol == "messages" and name == "content_block_delta":
                parts.append(data["delta"].get("text", ""))
            elif protocol == "responses" and name == "response.output_text.delta":
                parts.append(data["delta"])
            elif protocol == "chat" and data.get("choices"):
                parts.append(data["choices"][0]["delta"].get("content") or "")
        return "".join(parts)
    doc = answer.document
    if protocol == "messages":
        return "".join(block.get("text", "") for block in doc["content"])
    if protocol == "responses":
        return "".join(
            part["text"]
            for item in doc["output"]
            if item["type"] == "message"
            for part in item["content"]
        )
    return str(doc["choices"][0]["message"]["content"] or "")


def _stop(protocol: str, answer: Answer) -> str | None:
    """Messages `stop_reason`, Responses `incomplete_details.reason`, Chat `finish_reason`."""
    if answer.events:
        datas = [data for _, data in answer.events if isinstance(data, dict)]
        if protocol == "messages":
            deltas = [d["delta"] for d in datas if d.get("type") == "message_delta"]
            return deltas[-1].get("stop_reason") if deltas else None
        if protocol == "responses":
            ends = [d["response"] for d in datas if d.get("type") == "response.incomplete"]
            return ends[-1]["incomplete_details"]["reason"] if ends else None
        reasons = [c.get("finish_reason") for d in datas for c in d.get("choices", ())]
        return next((reason for reason in reversed(reasons) if reason), None)
    doc = answer.document
    if protocol == "messages":
        return doc.get("stop_reason")
    if protocol == "responses":
        return (doc.get("incomplete_details") or {}).get("reason")
    return doc["choices"][0]["finish_reason"]


def _outcome(protocol: str, answer: Answer, seen: Seen) -> None:
    """The terminal outcome: an error status, a terminal error event, or a normal end."""
    seen.status, seen.retry_after = answer.status, answer.headers.get("retry-after")
    if answer.status >= 400:
        error = answer.document["error"]
        seen.terminal, seen.error_type, seen.error_code = "error", error["type"], error.get("code")
        return
    seen.text = _texts(protocol, answer)
    seen.stop = _stop(protocol, answer)
    if not answer.events:
        seen.terminal = "ok"
        return
    names = [name for name, _ in answer.events]
    datas = [data for _, data in answer.events]
    if protocol == "messages":
        if names[-1] == "error":
            seen.terminal, seen.error_type = "error", datas[-1]["error"]["type"]
        elif names[-1] == "message_stop":
            seen.terminal = "ok"
    elif protocol == "responses":
        if names[-1] == "response.failed":
            error = datas[names.index("error")]
            seen.terminal, seen.error_code = "error", error["code"]
        elif names[-1] in ("response.completed", "response.incomplete"):
            seen.terminal = "ok"
    else:
        assert datas[-1] == "[DONE]"
        errors = [d["error"] for d in datas if isinstance(d, dict) and "error" in d]
        if errors:
            seen.terminal, seen.error_type = "error", errors[-1]["type"]
            seen.error_code = errors[-1]["code"]
        else:
            seen.terminal = "ok"


@dataclass
class Lane:
    fake: ThreadedFake
    proc: DaemonProcess
    accounts: list[str]  # kirod account ids
    transcript: Transcript


def _run_case(lane: Lane, case: Case) -> Seen:
    service, proc, transcript = lane.fake.fake, lane.proc, lane.transcript
    service.clear_requests()
    service.clear_scripts()
    service.enqueue(*case.variant.scripts(case.scenario))
    answer = post(proc, PATHS[case.protocol], request_body(case.protocol, case.stream), transcript)
    seen = Seen(elapsed_s=answer.elapsed_s)
    _outcome(case.protocol, answer, seen)
    row = oplog_row(proc, answer.request_id)
    seen.attempts, seen.oplog_status, seen.oplog_error = (
        row["attempts"],
        row["status"],
        row["error"],
    )
    pool = wait_idle(proc, transcript)
    seen.chats = [record.account_id for record in service.requests("chat")]
    seen.refreshes = len(service.requests("social_refresh"))
    seen.pending_scripts = service.pending_scripts()
    states = {
        a["id"]: a["status"] for a in transcript.control(proc, "GET", "/accounts")["accounts"]
    }
    if seen.attempts:
        seen.first_state = states[seen.attempts[0][0]]
        failures = {a["id"]: a["failures"] for a in pool["accounts"]}
        seen.first_failures = failures[seen.attempts[0][0]]
    for account_id in lane.accounts:  # the next case starts with healthy accounts
        transcript.control(proc, "POST", f"/accounts/{account_id}/enable")
    service.clear_scripts()
    return seen


def _run_lane(
    protocol: str, stream: bool, root: Path, transcript: Transcript
) -> tuple[dict[str, Seen], DaemonProcess]:
    cases = [case for case in CASES if case.lane == (protocol, stream)]
    with ThreadedFake() as fake:
        fake.fake.default_script = Script(reply=Reply(text=OK_TEXT))
        proc = start(
            root,
            fake,
            {
                "KIROD_STREAM_IDLE_TIMEOUT_S": str(IDLE_TIMEOUT_S),
                "KIROD_ENABLE_CHAT_COMPLETIONS": "true",
            },
        )
        try:
            accounts = [
                import_account(proc, fake.fake.issue_social_account())["id"] for _ in range(2)
            ]
            lane = Lane(fake, proc, accounts, transcript)
            results: dict[str, Seen] = {}
            for case in cases:
                try:
                    results[case.id] = _run_case(lane, case)
                except Exception:
                    results[case.id] = Seen(crash=traceback.format_exc())
            return results, proc
        finally:
            proc.stop()


@pytest.fixture(scope="module")
def seen(transcript: Transcript) -> Iterator[dict[str, Seen]]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    lanes = [(protocol, stream) for protocol in PROTOCOLS for stream in (False, True)]
    daemons: list[DaemonProcess] = []
    results: dict[str, Seen] = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(len(lanes)) as pool:
            futures = [
                pool.submit(_run_lane, protocol, stream, root / f"l{n}", transcript)
                for n, (protocol, stream) in enumerate(lanes)
            ]
            for future in futures:
                lane_results, proc = future.result()
                results.update(lane_results)
                daemons.append(proc)
        yield results
        for proc in daemons:
            assert "unhandled_error" not in proc.log()
        assert len(transcript) > 0
        assert not transcript.leaks(secrets_of(daemons))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_every_fault_the_fake_can_inject_is_covered() -> None:
    assert {variant.script.fault for variant in VARIANTS} == set(Fault)


def _expect_error(case: Case, seen: Seen) -> None:
    kind, code = case.variant.kind, case.variant.code
    assert kind is not None
    assert code is not None
    rendered = ApiError(kind, "-", code=code)
    if case.protocol == "messages":
        assert seen.error_type == anthropic_error(rendered, "-")["error"]["type"]
    else:
        assert seen.error_code == code
        if case.protocol == "chat" or not case.stream:
            assert seen.error_type == openai_error(rendered, "-")["error"]["type"]


def _cell(seen: Seen) -> str:
    """The client's view of one case for the figures: `200`, `502 upstream_error`, or
    `200, then upstream_protocol` for a stream the error ended."""
    code = seen.error_code or seen.error_type
    if seen.terminal == "ok":
        return str(seen.status)
    return f"{seen.status}, then {code}" if seen.status < 400 else f"{seen.status} {code}"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_fault(case: Case, seen: dict[str, Seen]) -> None:
    got = seen[case.id]
    assert got.crash is None, got.crash
    mode = "stream" if case.stream else "json"
    FIGURES.record(
        "faults", f"{case.variant.name}|{case.protocol}|{mode}|{case.scenario}", _cell(got)
    )
    variant = case.variant
    attempts_per_account = variant.calls
    # Bounded: every answer came within its bound, nothing queued, nothing left scripted.
    failing_accounts = 2 if case.scenario == "every" else 1
    assert got.elapsed_s < BOUND_S + IDLE_TIMEOUT_S * variant.stalls * failing_accounts
    assert got.pending_scripts == 0  # exactly the upstream calls expected were made

    sent_nothing = variant.phase in ("http", "early") or (
        variant.phase == "mid" and not case.stream
    )
    if variant.phase == "mid":
        # The break counts against the account, streamed or not.
        assert (got.first_state, got.first_failures) == (variant.after, 1)
    if sent_nothing and case.scenario == "once":
        # Failover while the client has been sent nothing: it never notices.
        assert (got.status, got.terminal, got.text) == (200, "ok", OK_TEXT)
        assert (got.oplog_status, got.oplog_error) == (200, None)
        first = got.attempts[0][0]
        if variant.failure == "bearer":  # refreshed, retried on the same account
            assert got.attempts == [(first, "bearer"), (first, "ok")]
            assert len(got.chats) == 2
            assert got.chats[0] == got.chats[1]
            assert got.refreshes == 1
        else:
            [(_, failure), (second, outcome)] = got.attempts
            assert (failure, outcome) == (variant.failure, "ok")
            assert second != first
            assert len(got.chats) == 2
            assert got.chats[0] != got.chats[1]
        assert got.first_state == variant.after
    elif variant.phase in ("http", "early"):
        # Every account failed before any output: an error status, even for a stream.
        assert variant.kind is not None
        assert (got.status, got.terminal) == (variant.kind.status, "error")
        _expect_error(case, got)
        if variant.retry_after:
            assert got.retry_after is not None
            assert int(got.retry_after) in variant.retry_after
        else:
            assert got.retry_after is None
        accounts = list(dict.fromkeys(account for account, _ in got.attempts))
        assert len(accounts) == 2
        assert got.attempts == [
            (account, variant.failure) for account in accounts for _ in range(variant.calls)
        ]
        assert len(got.chats) == 2 * attempts_per_account
        assert (got.oplog_status, got.oplog_error) == (variant.kind.status, variant.code)
    elif variant.phase in ("mid", "late"):
        # Committed: no failover after the first event; the error ends the answer.
        assert variant.kind is not None
        assert len(got.chats) == 1
        assert got.attempts == [(got.attempts[0][0], "ok")]
        assert got.terminal == "error"
        _expect_error(case, got)
        if case.stream:
            assert got.status == 200
            assert got.oplog_status == 200
            if variant.name != "fatal_exception_first":
                assert got.text  # what came before the fault was delivered
        else:
            assert got.status == variant.kind.status
            assert got.oplog_status == variant.kind.status
        assert got.oplog_error == variant.code
    elif variant.phase == "stated":
        # The answer stands as Kiro ended it, on the first account: no failover, no failure.
        assert variant.stops is not None
        assert (got.status, got.terminal) == (200, "ok")
        assert got.stop == variant.stops[PROTOCOLS.index(case.protocol)]
        assert len(got.chats) == 1
        assert got.attempts == [(got.attempts[0][0], "ok")]
        assert (got.oplog_status, got.oplog_error) == (200, None)
        assert (got.first_state, got.first_failures) == ("active", 0)
        reply = variant.script.reply
        assert got.text == ("" if reply is None else reply.text[: len(got.text)])
        assert bool(got.text) == (reply is not None)  # what came before the cut is delivered
    elif variant.phase == "final":
        # The request's own error before any output: no failover, the account untouched.
        assert variant.kind is not None
        assert (got.status, got.terminal) == (variant.kind.status, "error")
        _expect_error(case, got)
        assert got.attempts == [(got.attempts[0][0], variant.failure)]
        assert len(got.chats) == 1
        assert (got.oplog_status, got.oplog_error) == (variant.kind.status, variant.code)
        assert (got.first_state, got.first_failures) == ("active", 0)
    elif variant.phase == "continued":
        assert (got.status, got.terminal) == (200, "ok")
        assert got.attempts == [(got.attempts[0][0], "ok")]
        assert len(got.chats) == 2
        assert got.chats[0] == got.chats[1]  # the continuation went to the same account
        assert (got.oplog_status, got.oplog_error) == (200, None)
        assert got.text.endswith(OK_TEXT)
    else:
        assert (got.status, got.terminal) == (200, "ok")
        assert len(got.chats) == 1
        assert got.attempts == [(got.attempts[0][0], "ok")]
        assert (got.oplog_status, got.oplog_error) == (200, None)
        reply = variant.script.reply
        assert reply is not None
        if variant.script.fault is Fault.DUPLICATED_DELTAS:
            assert got.text == reply.text  # the repeated delta was dropped
        else:
            assert got.text.startswith(reply.text)


# -- connection refused --------------------------------------------------------------------------
# kiro_endpoint is one template for every account, so "refused" is a daemon whose Kiro API
# endpoint is a loopback port nobody listens on (its auth endpoints are the live fake). Every
# account is refused; then the same fake starts serving on that port and the daemon recovers.
# Kiro unreachable from the machine is no account's fault: the breaker runs as shipped and no
# account rests (tests/integration/test_network_outage.py: `/ready`, one account, a dead proxy).


@pytest.fixture(scope="module")
def refused(transcript: Transcript) -> Iterator[tuple[ThreadedFake, DaemonProcess, int]]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    port = closed_port()
    with ThreadedFake() as auth:
        proc = start(
            root,
            auth,
            {
                "KIROD_KIRO_ENDPOINT": f"http://127.0.0.1:{port}",
                "KIROD_ENABLE_CHAT_COMPLETIONS": "true",
                "KIROD_STREAM_IDLE_TIMEOUT_S": str(IDLE_TIMEOUT_S),
            },
        )
        try:
            for _ in range(2):
                import_account(proc, auth.fake.issue_social_account())
            yield auth, proc, port
            assert "unhandled_error" not in proc.log()
            assert not transcript.leaks(secrets_of([proc]))
        finally:
            proc.stop()
            shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_connection_refused(
    refused: tuple[ThreadedFake, DaemonProcess, int],
    transcript: Transcript,
    protocol: str,
    stream: bool,
) -> None:
    _, proc, _ = refused
    answer = post(proc, PATHS[protocol], request_body(protocol, stream), transcript)
    assert answer.elapsed_s < BOUND_S
    got = Seen()
    _outcome(protocol, answer, got)
    mode = "stream" if stream else "json"
    FIGURES.record("faults", f"connection_refused|{protocol}|{mode}|every", _cell(got))
    assert (got.status, got.terminal) == (502, "error")
    assert got.retry_after is None
    case = Case(
        Variant(
            "refused", Script(), "http", "unreachable", ErrorKind.UPSTREAM, "upstream_unreachable"
        ),
        protocol,
        stream,
        "every",
    )
    _expect_error(case, got)
    row = oplog_row(proc, answer.request_id)
    # Kiro unreachable from the machine: no account's fault, so none rests however many
    # requests meet it (the breaker's default threshold is 3; the module sends 6 and more).
    assert [outcome for _, outcome in row["attempts"]] == ["unreachable", "unreachable"]
    assert len({account for account, _ in row["attempts"]}) == 2
    assert (row["status"], row["error"]) == (502, "upstream_unreachable")
    pool = wait_idle(proc, transcript)
    assert [account["status"] for account in pool["accounts"]] == ["active", "active"]


def test_refused_then_reachable_serves_at_once(
    refused: tuple[ThreadedFake, DaemonProcess, int], transcript: Transcript
) -> None:
    auth, proc, port = refused
    with ThreadedFake(auth.fake, port=port):
        started = time.monotonic()
        answer = post(proc, PATHS["messages"], request_body("messages", False), transcript)
        assert answer.status == 200
        assert time.monotonic() - started < BOUND_S
    row = oplog_row(proc, answer.request_id)
    assert [outcome for _, outcome in row["attempts"]] == ["ok"]


# -- one account ---------------------------------------------------------------------------------
# The common case: a user with one account. Each fault once, on a non-streamed request, then the
# next request: a transient fault (what leaves the account "active") must not cost that request.
# Between cases the account is put back in service, so a cool-down a case causes by design
# (throttled, suspended) does not spill into the next one.


@pytest.fixture(scope="module")
def alone(transcript: Transcript) -> Iterator[tuple[ThreadedFake, DaemonProcess, str]]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    with ThreadedFake() as served:
        proc = start(
            root,
            served,
            {
                "KIROD_ENABLE_CHAT_COMPLETIONS": "true",
                "KIROD_STREAM_IDLE_TIMEOUT_S": str(IDLE_TIMEOUT_S),
            },
        )
        try:
            account = import_account(proc, served.fake.issue_social_account())
            yield served, proc, account["id"]
            assert "unhandled_error" not in proc.log()
            assert not transcript.leaks(secrets_of([proc]))
        finally:
            proc.stop()
            shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("variant", VARIANTS, ids=[variant.name for variant in VARIANTS])
def test_one_account_serves_the_request_after_a_transient_fault(
    alone: tuple[ThreadedFake, DaemonProcess, str],
    transcript: Transcript,
    variant: Variant,
    protocol: str,
) -> None:
    served, proc, account_id = alone
    served.fake.clear_scripts()
    served.fake.enqueue(variant.script)
    faulted = post(proc, PATHS[protocol], request_body(protocol, False), transcript)
    following = post(proc, PATHS[protocol], request_body(protocol, False), transcript)
    FIGURES.record("alone", f"{variant.name}|{protocol}", f"{faulted.status} → {following.status}")
    proc.client.request("POST", f"/accounts/{account_id}/enable")
    if variant.after == "active":
        assert following.status == 200, following.raw[:300]
