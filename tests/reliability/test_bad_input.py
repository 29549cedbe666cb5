"""Bad input that tests/integration/test_fuzz.py does not generate: header values that are not
UTF-8, lone surrogate escapes inside otherwise valid JSON, duplicate keys, undecodable path
parameters, and oversized or undecodable bodies on the control API.

Whatever arrives, the answer is a 4xx in the route's own envelope (or a success, for what is
valid), never a 5xx, and the daemon keeps serving.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import shutil
import socket
import tempfile
import time
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.reliability.figures import FIGURES
from tests.reliability.reliability_env import (
    FULL,
    PATHS,
    Transcript,
    import_account,
    request_body,
    secrets_of,
    start,
)

LIMIT = 64 * 1024
ROUTES = {**PATHS, "count_tokens": "/v1/messages/count_tokens"}
HEADERS = (
    "x-api-key",
    "authorization",
    "x-request-id",
    "x-claude-code-session-id",
    "x-claude-code-agent-id",
    "x-session-affinity",
    "x-session-id",
    "session-id",
    "anthropic-version",
    "anthropic-beta",
    "content-type",
    "openai-organization",
)
SURROGATES = ("\\ud800", "\\udfff", "\\udc00\\ud800", "x\\udbff", "\\ud83d")
SETTINGS = settings(
    max_examples=600 if FULL else 60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)


@pytest.fixture(scope="module")
def daemon(transcript: Transcript) -> Iterator[DaemonProcess]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    with ThreadedFake() as fake:
        proc = start(
            root,
            fake,
            {"KIROD_ENABLE_CHAT_COMPLETIONS": "true", "KIROD_MAX_REQUEST_BODY_BYTES": str(LIMIT)},
        )
        try:
            import_account(proc, fake.fake.issue_social_account())
            yield proc
            assert "unhandled_error" not in proc.log()
            assert "localapi_error" not in proc.log()
            assert not transcript.leaks(secrets_of([proc]))
        finally:
            assert proc.stop() == 0
            shutil.rmtree(root, ignore_errors=True)


def send(
    daemon: DaemonProcess,
    method: str,
    path: str,
    body: bytes | None,
    headers: Mapping[str, str | bytes],
    transcript: Transcript,
) -> tuple[int, Any]:
    host, port = daemon.address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        raw = response.read()
    finally:
        connection.close()
    transcript.add(f"{method} {path}", raw)
    if response.getheader("Content-Type", "").startswith("text/event-stream"):
        return response.status, None
    return response.status, json.loads(raw) if raw else None


def keyed(daemon: DaemonProcess) -> dict[str, str | bytes]:
    return {"Authorization": f"Bearer {daemon.api_key}", "Content-Type": "application/json"}


def check(route: str, status: int, body: Any) -> None:
    FIGURES.count("fuzz", "test_bad_input.py", cases=1, **{"5xx": int(status >= 500)})
    assert status < 500, (route, status, body)
    if status < 400:
        return
    if route.startswith("/v1/messages"):
        assert body["type"] == "error"
        assert set(body["error"]) == {"type", "message"}
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["request_id"].startswith("req_")


# -- the public API -----------------------------------------------------------------------------

# Field values as HTTP allows them (visible ASCII, space, obs-text), with at least one byte that
# is not ASCII: as a rule not UTF-8 either.
header_values = st.binary(min_size=1, max_size=40).map(
    lambda raw: (
        bytes(b if b == 0x20 or 0x21 <= b <= 0x7E or b >= 0x80 else 0xFF for b in raw) + b"\xff"
    )
)


@SETTINGS
@given(
    route=st.sampled_from(list(ROUTES.values())),
    name=st.sampled_from(HEADERS),
    value=header_values,
    stream=st.booleans(),
)
def test_header_values_that_are_not_utf8(
    daemon: DaemonProcess,
    transcript: Transcript,
    route: str,
    name: str,
    value: bytes,
    stream: bool,
) -> None:
    protocol = next((key for key, path in PATHS.items() if path == route), "messages")
    body = request_body(protocol, stream and route in PATHS.values())
    if route.endswith("count_tokens"):
        body.pop("max_tokens")
        body.pop("stream")
    headers = keyed(daemon)
    headers = {key: v for key, v in headers.items() if key.lower() != name} | {name: value}
    status, answer = send(daemon, "POST", route, json.dumps(body).encode(), headers, transcript)
    check(route, status, answer)
    if name in ("x-api-key", "authorization"):
        assert status == 401 or name == "x-api-key"  # the Bearer key still counts with x-api-key


def _with_placeholder(route: str, field: str) -> dict[str, Any]:
    protocol = next((key for key, path in PATHS.items() if path == route), "messages")
    body = request_body(protocol, False, prompt="@@S@@" if field == "prompt" else "hi")
    if route.endswith("count_tokens"):
        body.pop("max_tokens")
        body.pop("stream")
    if field == "model":
        body["model"] = "@@S@@"
    elif field == "key":
        body["metadata" if route.startswith("/v1/messages") else "extra"] = {"@@S@@": "x"}
    elif field == "session":
        if route.startswith("/v1/messages"):
            body["metadata"] = {"user_id": "@@S@@"}
        elif route == PATHS["responses"]:
            body["prompt_cache_key"] = "@@S@@"
        else:
            body["user"] = "@@S@@"
    return body


@SETTINGS
@given(
    route=st.sampled_from(list(ROUTES.values())),
    field=st.sampled_from(["prompt", "model", "key", "session"]),
    escape=st.sampled_from(SURROGATES),
)
def test_lone_surrogate_escapes_are_400(
    daemon: DaemonProcess, transcript: Transcript, route: str, field: str, escape: str
) -> None:
    text = json.dumps(_with_placeholder(route, field)).replace("@@S@@", f"a{escape}b")
    status, answer = send(daemon, "POST", route, text.encode(), keyed(daemon), transcript)
    check(route, status, answer)
    assert status == 400
    if not route.startswith("/v1/messages"):
        assert answer["error"]["code"] == "malformed_request_body"


@pytest.mark.parametrize("route", list(ROUTES.values()))
def test_a_surrogate_pair_is_text_not_an_error(
    daemon: DaemonProcess, transcript: Transcript, route: str
) -> None:
    text = json.dumps(_with_placeholder(route, "prompt")).replace("@@S@@", "smile \\ud83d\\ude00")
    status, answer = send(daemon, "POST", route, text.encode(), keyed(daemon), transcript)
    assert status == 200, answer


@pytest.mark.parametrize("route", list(ROUTES.values()))
def test_duplicate_keys_last_one_wins(
    daemon: DaemonProcess, transcript: Transcript, route: str
) -> None:
    """As in Python, JavaScript and Go decoders: the last duplicate wins, nothing is a 5xx."""
    valid = _with_placeholder(route, "none")
    text = json.dumps(valid)
    twice = '{"model": "no-such-model", "model": ' + json.dumps(valid["model"]) + ", " + text[1:]
    status, answer = send(daemon, "POST", route, twice.encode(), keyed(daemon), transcript)
    assert status == 200, answer
    broken = text[:-1] + ', "model": "no-such-model"}'
    status, answer = send(daemon, "POST", route, broken.encode(), keyed(daemon), transcript)
    check(route, status, answer)
    if not route.endswith("count_tokens"):  # counting tokens does not look the model up
        assert 400 <= status < 500


@pytest.mark.parametrize(
    "path",
    [
        "/v1/responses/%FF%FE",
        "/v1/responses/%ED%A0%80",
        "/v1/responses/resp_%00/input_items",
        "/v1/models/%C3%28",
        "/v1/models/%ED%A0%80",
    ],
)
def test_undecodable_path_parameters(
    daemon: DaemonProcess, transcript: Transcript, path: str
) -> None:
    status, answer = send(daemon, "GET", path, None, keyed(daemon), transcript)
    check(path, status, answer)
    assert status in (400, 404)


# -- the control API ----------------------------------------------------------------------------


def control(
    daemon: DaemonProcess, method: str, path: str, body: bytes, transcript: Transcript
) -> tuple[int, Any]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    try:
        sock.connect(str(daemon.socket_path))
        head = (
            f"{method} /localapi/v1{path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode())
        # Refused before the whole body was read, the answer is waiting all the same.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(body)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    finally:
        sock.close()
    transcript.add(f"control {method} {path}", raw)
    status_line, _, rest = raw.partition(b"\r\n")
    payload = rest.partition(b"\r\n\r\n")[2]
    return int(status_line.split()[1]), json.loads(payload) if payload else None


CONTROL_BODIES = {
    "/keys": {"name": "@@S@@", "models": ["claude-*"]},
    "/accounts/import": {"api_key": "ksk_" + "a" * 40, "label": "@@S@@"},
    "/logins": {"start_url": "https://@@S@@.example/start"},
}


@SETTINGS
@given(path=st.sampled_from(list(CONTROL_BODIES)), escape=st.sampled_from(SURROGATES))
def test_control_api_refuses_lone_surrogates(
    daemon: DaemonProcess, transcript: Transcript, path: str, escape: str
) -> None:
    text = json.dumps(CONTROL_BODIES[path]).replace("@@S@@", f"a{escape}b")
    status, answer = control(daemon, "POST", path, text.encode(), transcript)
    assert status == 400, answer
    assert set(answer["error"]) == {"code", "message"}


@pytest.mark.parametrize("path", list(CONTROL_BODIES))
def test_control_api_refuses_invalid_utf8(
    daemon: DaemonProcess, transcript: Transcript, path: str
) -> None:
    text = json.dumps(CONTROL_BODIES[path]).encode().replace(b"@@S@@", b"a\xff\xfeb")
    status, answer = control(daemon, "POST", path, text, transcript)
    assert status == 400, answer
    assert answer["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("path", list(CONTROL_BODIES))
def test_control_api_oversized_bodies_are_413(
    daemon: DaemonProcess, transcript: Transcript, path: str
) -> None:
    body = b'{"name": "' + b"x" * (65 * 1024 * 1024) + b'"}'
    status, answer = control(daemon, "POST", path, body, transcript)
    assert status == 413, answer
    assert answer["error"]["code"] == "too_large"
    # and the daemon still answers, with its account intact
    status, accounts = control(daemon, "GET", "/accounts", b"", transcript)
    assert status == 200
    assert [account["status"] for account in accounts["accounts"]] == ["active"]


# -- inputs that answered 500 (issue 15) --------------------------------------------------------


def _nested_object(depth: int) -> dict[str, Any]:
    """`{"a": {"a": … {"a": 1}}}`, `depth` objects deep, built without recursion."""
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    result: dict[str, Any] = value
    return result


def _nested_schema(depth: int) -> dict[str, Any]:
    """An object schema `depth` JSON levels deep (two per nested property)."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth // 2):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _messages_with(**fields: Any) -> dict[str, Any]:
    return {**request_body("messages", False), **fields}


def _tool_history(protocol: str, arguments: Any) -> dict[str, Any]:
    """A conversation whose earlier tool call carries `arguments` (Chat and Responses: a string;
    Messages: the input object)."""
    if protocol == "messages":
        return _messages_with(
            messages=[
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": arguments}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                },
            ],
            tools=[{"name": "f", "input_schema": {"type": "object"}}],
        )
    if protocol == "responses":
        return {
            **request_body("responses", False),
            "input": [
                {"role": "user", "content": "go"},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": arguments},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            ],
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        }
    return {
        **request_body("chat", False),
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        ],
    }


def _with_schema(protocol: str, schema: dict[str, Any]) -> dict[str, Any]:
    if protocol == "messages":
        return _messages_with(tools=[{"name": "f", "input_schema": schema}])
    if protocol == "responses":
        tool = {"type": "function", "name": "f", "parameters": schema}
        return {**request_body("responses", False), "tools": [tool]}
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    return {**request_body("chat", False), "tools": [tool]}


UNHASHABLE_AND_DEEP: dict[str, tuple[str, Any]] = {
    "effort-list": ("messages", _messages_with(output_config={"effort": []})),
    "display-list": (
        "messages",
        _messages_with(thinking={"type": "adaptive", "display": []}),
    ),
    "part-type-list": (
        "responses",
        {
            **request_body("responses", False),
            "input": [{"role": "user", "content": [{"type": ["input_text"], "text": "hi"}]}],
        },
    ),
    **{
        f"schema-500-{protocol}": (protocol, _with_schema(protocol, _nested_schema(500)))
        for protocol in PATHS
    },
    "tool-input-500-messages": ("messages", _tool_history("messages", _nested_object(500))),
    **{
        f"arguments-1000-{protocol}": (
            protocol,
            _tool_history(protocol, '{"a":' * 1000 + "1" + "}" * 1000),
        )
        for protocol in ("responses", "chat")
    },
}


@pytest.mark.parametrize("case", list(UNHASHABLE_AND_DEEP))
def test_unhashable_and_deeply_nested_values_are_400(
    daemon: DaemonProcess, transcript: Transcript, case: str
) -> None:
    protocol, body = UNHASHABLE_AND_DEEP[case]
    route = PATHS[protocol]
    raw = json.dumps(body).encode()
    assert len(raw) < LIMIT
    status, answer = send(daemon, "POST", route, raw, keyed(daemon), transcript)
    check(route, status, answer)
    assert status == 400, answer


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("route", list(ROUTES.values()))
def test_corrupt_compressed_bodies_are_400(
    daemon: DaemonProcess, transcript: Transcript, route: str, encoding: str
) -> None:
    headers = {**keyed(daemon), "Content-Encoding": encoding}
    body = b"\x1f\x8b\x08\x00 this is not " + encoding.encode() + b" data" * 20
    status, answer = send(daemon, "POST", route, body, headers, transcript)
    check(route, status, answer)
    assert status == 400, answer


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("route", list(PATHS.values()))
def test_compressed_bodies_are_inflated(
    daemon: DaemonProcess, transcript: Transcript, route: str, encoding: str
) -> None:
    """A well-formed compressed body is served; the size limit counts inflated bytes."""
    protocol = next(key for key, path in PATHS.items() if path == route)
    raw = json.dumps(request_body(protocol, False, prompt="hi")).encode()
    packed = gzip.compress(raw) if encoding == "gzip" else zlib.compress(raw)
    headers = {**keyed(daemon), "Content-Encoding": encoding}
    status, answer = send(daemon, "POST", route, packed, headers, transcript)
    assert status == 200, answer
    bomb = json.dumps(request_body(protocol, False, prompt="x" * (2 * LIMIT))).encode()
    packed = gzip.compress(bomb) if encoding == "gzip" else zlib.compress(bomb)
    assert len(packed) < LIMIT
    status, answer = send(daemon, "POST", route, packed, headers, transcript)
    check(route, status, answer)
    assert status == 413, answer


def test_a_corrupt_body_is_not_logged_as_a_server_error(
    daemon: DaemonProcess, transcript: Transcript
) -> None:
    """aiohttp reads what the handler left of a corrupt body after the 400 has gone out; what
    it finds there is a malformed request, a throttled warning, never an error anyone can
    repeat to fill the log."""
    mark = len(daemon.log())
    headers = {**keyed(daemon), "Content-Encoding": "gzip"}
    body = b"\x1f\x8b\x08\x00 this is not gzip data" * 20
    for _ in range(3):
        status, answer = send(daemon, "POST", ROUTES["messages"], body, headers, transcript)
        assert status == 400, answer
    deadline = time.monotonic() + 5
    while "malformed_request" not in daemon.log()[mark:] and time.monotonic() < deadline:
        time.sleep(0.05)
    written = daemon.log()[mark:]
    assert "Unhandled exception" not in written
    assert " error aiohttp" not in written
