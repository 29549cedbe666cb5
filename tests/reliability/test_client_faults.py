"""Clients that misbehave, against the real daemon: they hang up mid-upload or mid-answer, trickle
their headers or body, open and drop a thousand connections, or never read their stream.

Whatever they do, the upstream exchange is aborted, the account slot comes back, the daemon's file
descriptors and memory stay bounded, and the next client is served.
"""

from __future__ import annotations

import base64
import concurrent.futures
import http.client
import json
import os
import random
import secrets
import shutil
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ThreadedFake
from tests.reliability.reliability_env import (
    FULL,
    PATHS,
    Transcript,
    fd_count,
    import_account,
    oplog_row,
    post,
    request_body,
    rss_kib,
    secrets_of,
    start,
    wait_idle,
    wait_until,
)

HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.0
LINUX = sys.platform.startswith("linux")


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, transcript: Transcript) -> Iterator[DaemonProcess]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    proc = start(
        root,
        fake,
        {
            "KIROD_ENABLE_CHAT_COMPLETIONS": "true",
            "KIROD_ENABLE_OLLAMA_API": "true",
            "KIROD_CLIENT_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
            "KIROD_CLIENT_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
        },
    )
    try:
        import_account(proc, fake.fake.issue_social_account())
        yield proc
        assert "unhandled_error" not in proc.log()
        assert not transcript.leaks(secrets_of([proc]))
    finally:
        assert proc.stop() == 0
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def service(fake: ThreadedFake) -> FakeKiro:
    fake.fake.clear_scripts()
    fake.fake.clear_requests()
    return fake.fake


def connect(daemon: DaemonProcess, *, rcvbuf: int | None = None) -> socket.socket:
    host, port = daemon.address.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # before connecting, so the window is small from the start
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect((host, int(port)))
    return sock


def head(daemon: DaemonProcess, path: str, length: int, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {daemon.address}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {daemon.api_key}\r\nContent-Length: {length}\r\n{extra}\r\n"
    ).encode()


def request_bytes(daemon: DaemonProcess, protocol: str, stream: bool) -> bytes:
    body = json.dumps(request_body(protocol, stream)).encode()
    return head(daemon, PATHS[protocol], len(body)) + body


def reset(sock: socket.socket) -> None:
    """Close with an RST instead of a FIN, as a crashed client or a NAT timeout would."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def logged_statuses(daemon: DaemonProcess, path: str) -> list[str]:
    return [
        line.split(" status=", 1)[1].split()[0]
        for line in daemon.log().splitlines()
        if " request " in line and f"path={path} " in line
    ]


# -- hanging up ---------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", list(PATHS))
def test_disconnect_mid_upload_never_reaches_kiro(
    daemon: DaemonProcess, service: FakeKiro, transcript: Transcript, protocol: str
) -> None:
    before = logged_statuses(daemon, PATHS[protocol]).count("499")
    body = json.dumps(request_body(protocol, False)).encode()
    sock = connect(daemon)
    sock.sendall(head(daemon, PATHS[protocol], len(body)) + body[: len(body) // 2])
    time.sleep(0.1)
    sock.close()
    wait_until(
        lambda: logged_statuses(daemon, PATHS[protocol]).count("499") > before,
        what="the 499 in the access log",
    )
    assert service.requests("chat") == []
    wait_idle(daemon, transcript)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("protocol", list(PATHS))
def test_disconnect_mid_answer_aborts_kiro_and_frees_the_slot(
    daemon: DaemonProcess,
    service: FakeKiro,
    transcript: Transcript,
    protocol: str,
    stream: bool,
) -> None:
    # Four seconds of answer; the client leaves after the first bytes (or while it waits).
    service.enqueue(Script(reply=Reply(text="z" * 400), chunk_size=2, delay_between_s=0.02))
    completed = service.counters().get("streams_completed", 0)
    sock = connect(daemon)
    sock.sendall(request_bytes(daemon, protocol, stream))
    if stream:
        received = b""
        while b"\r\n\r\n" not in received or len(received.partition(b"\r\n\r\n")[2]) < 64:
            chunk = sock.recv(4096)
            assert chunk, "the daemon closed the stream"
            received += chunk
        request_id = next(
            line.split(b":", 1)[1].strip().decode()
            for line in received.split(b"\r\n")
            if line.lower().startswith(b"x-request-id:")
        )
    else:
        wait_until(lambda: service.requests("chat"), what="the upstream call")
    left = time.monotonic()
    sock.close()

    ended = wait_until(
        lambda: [r for r in service.requests("chat") if r.status is not None],
        what="the upstream exchange to end",
    )
    assert len(ended) == 1
    assert time.monotonic() - left < 2.0  # aborted, not played out
    assert service.counters().get("streams_completed", 0) == completed
    wait_idle(daemon, transcript)
    if stream:
        row = oplog_row(daemon, request_id)
        assert (row["status"], row["error"]) == (499, "client_closed")
    else:  # the client never saw a request id: the last row is this request's
        wait_until(lambda: logged_statuses(daemon, PATHS[protocol])[-1:] == ["499"])
    answer = post(daemon, PATHS[protocol], request_body(protocol, stream), transcript)
    assert answer.status == 200


@pytest.mark.parametrize("protocol", list(PATHS))
def test_leaving_right_after_the_last_event_is_not_a_disconnect(
    daemon: DaemonProcess, service: FakeKiro, transcript: Transcript, protocol: str
) -> None:
    """Clients that close the connection as soon as the stream's last event arrived (instead of
    reading the final chunk) got a complete answer: it is logged as one, and stored."""
    body = {**request_body(protocol, True), "store": True} if protocol == "responses" else None
    sent = json.dumps(body or request_body(protocol, True)).encode()
    last = {"messages": b"message_stop", "responses": b"response.completed", "chat": b"[DONE]"}
    for _ in range(5):
        sock = connect(daemon)
        sock.sendall(head(daemon, PATHS[protocol], len(sent)) + sent)
        received = b""
        while (
            last[protocol] not in received or b"\n\n" not in received.rpartition(last[protocol])[2]
        ):
            chunk = sock.recv(65536)
            assert chunk
            received += chunk
        reset(sock)
        transcript.add("left after the last event", received)
        request_id = next(
            line.split(b":", 1)[1].strip().decode()
            for line in received.split(b"\r\n")
            if line.lower().startswith(b"x-request-id:")
        )
        row = oplog_row(daemon, request_id)
        assert (row["status"], row["error"]) == (200, None)
        if protocol == "responses":
            response_id = received.split(b'"id":"', 1)[1].split(b'"', 1)[0].decode()
            host, port = daemon.address.rsplit(":", 1)
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            try:
                connection.request(
                    "GET",
                    f"/v1/responses/{response_id}",
                    headers={"Authorization": f"Bearer {daemon.api_key}"},
                )
                stored = connection.getresponse()
                transcript.add("stored response", stored.read())
            finally:
                connection.close()
            assert stored.status == 200
    wait_idle(daemon, transcript)


DROPS = 40
OLLAMA_CHAT = "/api/chat"


def _websocket_turn(daemon: DaemonProcess, sock: socket.socket, correlation: str) -> None:
    """Upgrade `sock` to a Responses WebSocket and send one streamed turn, by hand."""
    sock.sendall(
        (
            f"GET /v1/responses HTTP/1.1\r\nHost: {daemon.address}\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n"
            f"Authorization: Bearer {daemon.api_key}\r\nx-request-id: {correlation}\r\n\r\n"
        ).encode()
    )
    payload = json.dumps({"type": "response.create", **request_body("responses", True)}).encode()
    mask = os.urandom(4)
    masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
    assert len(payload) < 126
    sock.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + masked)


def _drop_one(daemon: DaemonProcess, n: int, seed: int) -> None:
    """One stream (SSE on each API, or a WebSocket turn) left at a random point, by an RST or a
    plain close: before any byte of the answer, or after some of it."""
    chance = random.Random(seed)
    correlation = f"drop-{n}"
    sock = connect(daemon)
    try:
        protocol = chance.choice([*PATHS, "ollama", "websocket"])
        extra = f"x-request-id: {correlation}\r\n"
        if protocol == "websocket":
            _websocket_turn(daemon, sock, correlation)
        elif protocol == "ollama":  # NDJSON, written like SSE
            body = json.dumps(request_body("chat", True)).encode()
            sock.sendall(head(daemon, OLLAMA_CHAT, len(body), extra) + body)
        else:
            body = json.dumps(request_body(protocol, True)).encode()
            sock.sendall(head(daemon, PATHS[protocol], len(body), extra) + body)
        if chance.random() < 0.25:
            time.sleep(chance.uniform(0, 0.2))  # gone before reading anything
        else:
            wanted, received = chance.randint(1, 4000), 0
            while received < wanted and (chunk := sock.recv(wanted - received)):
                received += len(chunk)
    finally:
        if chance.random() < 0.5:
            reset(sock)
        else:
            sock.close()


def _access_lines(log: str) -> list[dict[str, str]]:
    return [
        dict(field.split("=", 1) for field in line.split()[4:] if "=" in field)
        for line in log.splitlines()
        if " info kirod.access request " in line
    ]


def test_streams_dropped_anywhere_are_client_closed_in_both_logs(
    daemon: DaemonProcess, service: FakeKiro, transcript: Transcript
) -> None:
    """Streams the client resets or closes at random points, on every API (Ollama's NDJSON too)
    and over WebSocket, are 499 `client_closed` in the access log and the operation log alike,
    and never an error line (a write into a connection just reset used to escape as
    `unhandled_error`, with a 500 in the access log)."""
    before = len(daemon.log().splitlines())
    # Each answer lasts over a second, written two characters an event: many writes to hit.
    service.enqueue(
        *[Script(reply=Reply(text="z" * 400), chunk_size=2, delay_between_s=0.005)] * DROPS
    )
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(_drop_one, [daemon] * DROPS, range(DROPS), range(41, 41 + DROPS)))

    def settled() -> tuple[list[str], list[dict[str, str]]] | None:
        lines = daemon.log().splitlines()[before:]
        access = _access_lines("\n".join(lines))
        ids = {line.get("client_request_id") for line in access}
        return (lines, access) if ids >= {f"drop-{n}" for n in range(DROPS)} else None

    lines, access = wait_until(settled, 10.0, "an access line for every dropped stream")
    assert [line for line in lines if " error " in line or " warning " in line] == []
    dropped = {
        line["request_id"]: line
        for line in access
        if line.get("client_request_id", "").startswith("drop-")
    }
    upgrades = {key for key, line in dropped.items() if line["method"] == "GET"}
    assert upgrades  # WebSocket turns were among the drops, and Ollama's streams
    assert any(line["path"] == OLLAMA_CHAT for line in dropped.values())
    # A WebSocket's own line is its upgrade's (101), unless the drop cut the handshake's handler.
    assert {dropped[key]["status"] for key in upgrades} <= {"101", "499"}
    turns = [line for line in access if line.get("connection") in upgrades]
    answers = [line for key, line in dropped.items() if key not in upgrades] + turns
    assert len(answers) >= DROPS - len(upgrades)
    assert {(line["status"], line.get("error")) for line in answers} == {("499", "client_closed")}
    rows = [row for line in answers for row in daemon.client.trace(line["request_id"]).requests]
    assert len(rows) >= DROPS // 2  # most left once their dispatch had begun
    assert {(row.status, row.error) for row in rows} == {(499, "client_closed")}
    wait_idle(daemon, transcript, timeout_s=10)
    answer = post(daemon, PATHS["messages"], request_body("messages", False), transcript)
    assert answer.status == 200


# -- slow clients -------------------------------------------------------------------------------


def test_trickled_headers_are_cut_off_at_the_header_deadline(daemon: DaemonProcess) -> None:
    sock = connect(daemon)
    opened = time.monotonic()
    sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    closed_after: float | None = None
    for n in range(50):  # a header line every 0.1 s: at most 5 s
        try:
            sock.sendall(f"X-Trickle-{n}: {n}\r\n".encode())
            sock.settimeout(0.1)
            if sock.recv(4096) == b"":
                closed_after = time.monotonic() - opened
                break
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            closed_after = time.monotonic() - opened
            break
    sock.close()
    assert closed_after is not None, "the daemon let a client trickle headers for 5 s"
    assert HEADER_TIMEOUT_S - 0.1 < closed_after < HEADER_TIMEOUT_S + 1.0


def test_an_idle_connection_is_closed_at_the_header_deadline(daemon: DaemonProcess) -> None:
    sock = connect(daemon)
    opened = time.monotonic()
    assert sock.recv(4096) == b""  # nothing was ever sent: closed, not answered
    assert time.monotonic() - opened < HEADER_TIMEOUT_S + 1.0
    sock.close()


@pytest.mark.parametrize("protocol", list(PATHS))
def test_trickled_body_is_answered_400_at_the_body_deadline(
    daemon: DaemonProcess, service: FakeKiro, transcript: Transcript, protocol: str
) -> None:
    sock = connect(daemon)
    sent = time.monotonic()
    sock.sendall(head(daemon, PATHS[protocol], 1000))
    received = b""
    for _ in range(50):  # a byte every 0.1 s: at most 5 s
        try:
            sock.sendall(b" ")
        except (ConnectionResetError, BrokenPipeError):
            break
        sock.settimeout(0.1)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        received += chunk
        if not chunk or b"\r\n\r\n" in received:
            break
    answered_after = time.monotonic() - sent
    sock.settimeout(5)
    while b"}" not in received.partition(b"\r\n\r\n")[2] and (chunk := sock.recv(65536)):
        received += chunk
    sock.close()
    transcript.add("trickled body", received)
    status_line, _, rest = received.partition(b"\r\n")
    assert status_line.split()[1] == b"400", received[:300]
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    if protocol == "messages":
        assert body["error"]["type"] == "invalid_request_error"
    else:
        assert body["error"]["code"] == "request_timeout"
    assert BODY_TIMEOUT_S - 0.1 < answered_after < BODY_TIMEOUT_S + 1.0
    assert service.requests("chat") == []


# -- many connections ---------------------------------------------------------------------------


@pytest.mark.skipif(not LINUX, reason="counts descriptors in /proc")
def test_a_thousand_dropped_connections_leave_no_descriptor_behind(
    daemon: DaemonProcess, transcript: Transcript
) -> None:
    pid = daemon.proc.pid
    assert post(daemon, PATHS["messages"], request_body("messages", False), transcript).status
    baseline = fd_count(pid)
    total = 10_000 if FULL else 1_000
    batch = 100
    partial = b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n"
    whole = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    for start_at in range(0, total, batch):
        socks = [connect(daemon) for _ in range(batch)]
        for n, sock in enumerate(socks, start_at):
            match n % 4:
                case 0:  # connect, say nothing, leave
                    sock.close()
                case 1:  # half a request, leave
                    sock.sendall(partial)
                    sock.close()
                case 2:  # half a request, then an RST
                    sock.sendall(partial)
                    reset(sock)
                case _:  # a whole request, never read the answer, RST
                    sock.sendall(whole)
                    reset(sock)
    assert post(daemon, "/v1/messages", request_body("messages", False), transcript).status == 200
    wait_until(lambda: fd_count(pid) <= baseline + 2, 10.0, "descriptors back to the baseline")


# -- back-pressure ------------------------------------------------------------------------------


@pytest.mark.skipif(not LINUX, reason="reads the daemon's RSS in /proc")
def test_a_client_that_never_reads_holds_back_kiro_not_memory(
    daemon: DaemonProcess, service: FakeKiro, transcript: Transcript
) -> None:
    pid = daemon.proc.pid
    size = 32 * 1024 * 1024
    assert post(daemon, PATHS["messages"], request_body("messages", True), transcript).status
    baseline = rss_kib(pid)
    service.clear_requests()
    # Distinct chunks: identical consecutive deltas would be dropped as upstream duplicates.
    text = secrets.token_hex(size // 2)
    service.enqueue(Script(reply=Reply(text=text), chunk_size=64 * 1024))
    completed = service.counters().get("streams_completed", 0)
    sock = connect(daemon, rcvbuf=4096)
    sock.sendall(request_bytes(daemon, "messages", True))
    wait_until(lambda: service.requests("chat"), what="the upstream call")
    peak = baseline
    for _ in range(20):  # 2 s of a client that reads nothing
        time.sleep(0.1)
        peak = max(peak, rss_kib(pid))
    [chat] = service.requests("chat")
    assert chat.status is None  # Kiro is held back: its answer is still being written
    assert service.counters().get("streams_completed", 0) == completed
    grown_mib = (peak - baseline) / 1024
    assert grown_mib < 16, f"RSS grew {grown_mib:.1f} MiB for a {size >> 20} MiB answer"
    reset(sock)
    wait_until(lambda: service.requests("chat")[0].status is not None, what="the abort")
    assert service.counters().get("streams_completed", 0) == completed
    wait_idle(daemon, transcript)
