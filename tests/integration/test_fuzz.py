"""Property-based fuzzing of every public route and the control API on the real daemon.

Whatever arrives, the answer is a 4xx in the route's own envelope (or a success for a body that
happens to be valid), never a 5xx, never a dropped connection, and the daemon keeps serving.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake

sys.path.insert(0, str(Path(__file__).parent))
from kiro_env import import_account, start_daemon

EXAMPLES = 400
ANTHROPIC_ROUTES = ("/v1/messages", "/v1/messages/count_tokens")
OPENAI_ROUTES = ("/v1/responses", "/v1/chat/completions")

VALID: dict[str, dict[str, Any]] = {
    "/v1/messages": {
        "model": "claude-sonnet-4-6",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}],
    },
    "/v1/messages/count_tokens": {
        "model": "claude-sonnet-4-6",
        "messages": [{"role": "user", "content": "hi"}],
    },
    "/v1/responses": {"model": "claude-sonnet-4-6", "input": "hi", "store": False},
    "/v1/chat/completions": {
        "model": "claude-sonnet-4-6",
        "messages": [{"role": "user", "content": "hi"}],
    },
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)


@st.composite
def mutated(draw: st.DrawFn, route: str) -> Any:
    """A valid body with one field (possibly nested) replaced, removed or added."""
    body: Any = json.loads(json.dumps(VALID[route]))
    target = body
    path = draw(st.lists(st.sampled_from(["messages", 0, "content", "role", "input"]), max_size=3))
    for step in path:
        if isinstance(target, dict) and step in target and isinstance(target[step], dict | list):
            target = target[step]
        elif isinstance(target, list) and isinstance(step, int) and target:
            target = target[0]
    if isinstance(target, dict):
        key = draw(st.sampled_from([*target.keys(), "extra", "tools", "system", "stream"]))
        if draw(st.booleans()):
            target[key] = draw(json_values)
        else:
            target.pop(key, None)
    elif isinstance(target, list):
        target.append(draw(json_values))
    return body


@pytest.fixture(scope="module")
def daemon(module_tmp: Path) -> Iterator[DaemonProcess]:
    with ThreadedFake() as fake:
        root = module_tmp
        proc = start_daemon(
            root,
            fake,
            {"KIROD_ENABLE_CHAT_COMPLETIONS": "true", "KIROD_MAX_REQUEST_BODY_BYTES": "65536"},
        )
        import_account(proc, fake.fake.issue_social_account())
        try:
            yield proc
        finally:
            proc.kill()
            assert "unhandled_error" not in proc.log()


class Client:
    """One keep-alive connection, reopened if the server closes it."""

    def __init__(self, address: str, key: str) -> None:
        host, port = address.rsplit(":", 1)
        self._host, self._port = host, int(port)
        self._key = key
        self._conn: http.client.HTTPConnection | None = None

    def post(
        self, path: str, body: bytes, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=30)
            try:
                self._conn.request(
                    "POST",
                    path,
                    body=body,
                    headers={
                        "Authorization": f"Bearer {self._key}",
                        "Content-Type": content_type,
                    },
                )
                response = self._conn.getresponse()
                raw = response.read()
            except (ConnectionError, http.client.RemoteDisconnected):
                self._conn.close()
                self._conn = None
                if attempt == 2:
                    raise
                continue
            if response.getheader("Connection", "").lower() == "close":
                self._conn.close()
                self._conn = None
            if response.getheader("Content-Type", "").startswith("text/event-stream"):
                return response.status, None
            return response.status, json.loads(raw) if raw else None
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


@pytest.fixture(scope="module")
def client(daemon: DaemonProcess) -> Iterator[Client]:
    fuzz_client = Client(daemon.address, daemon.api_key)
    yield fuzz_client
    fuzz_client.close()


def check(route: str, status: int, body: Any) -> None:
    assert status < 500, (route, status, body)
    if status < 400:
        return
    if route in ANTHROPIC_ROUTES:
        assert body["type"] == "error"
        assert set(body["error"]) == {"type", "message"}
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["request_id"].startswith("req_")


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)


@pytest.mark.parametrize("route", [*ANTHROPIC_ROUTES, *OPENAI_ROUTES])
@FUZZ
@given(data=st.data())
def test_random_and_mutated_json(client: Client, route: str, data: st.DataObject) -> None:
    body = data.draw(st.one_of(json_values, mutated(route)))
    status, answer = client.post(route, json.dumps(body).encode())
    check(route, status, answer)


@FUZZ
@given(
    route=st.sampled_from([*ANTHROPIC_ROUTES, *OPENAI_ROUTES]),
    raw=st.one_of(
        st.binary(max_size=300),
        st.builds(lambda depth: b"[" * depth + b"]" * depth, st.integers(1, 20_000)),
        st.builds(lambda n: b'{"model":' + b'"x",' * n + b'"model":1}', st.integers(0, 50)),
        st.builds(lambda n: b'{"a":"' + b"x" * n + b'"}', st.integers(60_000, 70_000)),
    ),
    content_type=st.sampled_from(
        ["application/json", "text/plain", "application/x-www-form-urlencoded", ""]
    ),
)
def test_raw_bytes_and_content_types(
    client: Client, route: str, raw: bytes, content_type: str
) -> None:
    status, answer = client.post(route, raw, content_type)
    check(route, status, answer)


def control(daemon: DaemonProcess, path: str, body: bytes) -> tuple[int, Any]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(str(daemon.socket_path))
    head = (
        f"POST /localapi/v1{path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    raw = b""
    while chunk := sock.recv(65536):
        raw += chunk
    sock.close()
    status_line, _, rest = raw.partition(b"\r\n")
    payload = rest.partition(b"\r\n\r\n")[2]
    return int(status_line.split()[1]), json.loads(payload) if payload else None


@settings(
    max_examples=EXAMPLES // 2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(
    body=st.one_of(
        json_values.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=200),
        st.fixed_dictionaries({"content_b64": st.text(max_size=60)}).map(
            lambda v: json.dumps(v).encode()
        ),
        st.fixed_dictionaries({"api_key": json_values}).map(lambda v: json.dumps(v).encode()),
    )
)
def test_control_api_import_rejects_garbage(daemon: DaemonProcess, body: bytes) -> None:
    status, answer = control(daemon, "/accounts/import", body)
    assert 400 <= status < 500, (status, answer)
    assert set(answer["error"]) == {"code", "message"}


def test_the_account_store_is_intact_after_fuzzing(daemon: DaemonProcess) -> None:
    accounts = daemon.client.request("GET", "/accounts")["accounts"]
    assert len(accounts) == 1
    assert accounts[0]["status"] == "active"
