"""Property-based fuzzing of every public route and the control API on the real daemon.

Whatever arrives, the answer is a 4xx in the route's own envelope (or a success for a body that
happens to be valid), never a 5xx, never a dropped connection, and the daemon keeps serving.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

EXAMPLES = 400
ANTHROPIC_ROUTES = ("/v1/messages", "/v1/messages/count_tokens")
OPENAI_ROUTES = ("/v1/responses", "/v1/chat/completions")
OLLAMA_ROUTES = ("/api/chat", "/api/show")
GEMINI_GENERATE = "/v1beta/models/gemini-3.1-pro-preview:generateContent"
GEMINI_ROUTES = (
    GEMINI_GENERATE,
    "/v1beta/models/gemini-3.5-flash-lite:countTokens",
    "/v1/models/claude-sonnet-4-6:generateContent",
)
ROUTES = (*ANTHROPIC_ROUTES, *OPENAI_ROUTES, *OLLAMA_ROUTES, *GEMINI_ROUTES)
GEMINI_HI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}

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
    "/api/chat": {
        "model": "claude-sonnet-4-6",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": False,
    },
    "/api/show": {"model": "claude-sonnet-4-6"},
    **{route: GEMINI_HI for route in GEMINI_ROUTES},
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


OTHER_STEPS: list[Any] = ["messages", 0, "content", "role", "input"]


@st.composite
def mutated(draw: st.DrawFn, route: str) -> Any:
    """A valid body with one field (possibly nested) replaced, removed or added."""
    body: Any = json.loads(json.dumps(VALID[route]))
    target = body
    steps = ["contents", 0, "parts", "role"] if route in GEMINI_ROUTES else OTHER_STEPS
    path = draw(st.lists(st.sampled_from(steps), max_size=3))
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
            {
                "KIROD_ENABLE_CHAT_COMPLETIONS": "true",
                "KIROD_ENABLE_OLLAMA_API": "true",
                "KIROD_ENABLE_GEMINI_API": "true",
                "KIROD_MAX_REQUEST_BODY_BYTES": "65536",
            },
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
            streamed = ("text/event-stream", "application/x-ndjson")
            if response.getheader("Content-Type", "").startswith(streamed):
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
    if route in OLLAMA_ROUTES:
        assert set(body) == {"error"}
        assert isinstance(body["error"], str)
        return
    if route in GEMINI_ROUTES:
        assert set(body) == {"error"}
        assert set(body["error"]) == {"code", "message", "status", "details"}
        assert body["error"]["code"] == status
        assert body["error"]["details"][0]["requestId"].startswith("req_")
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


@pytest.mark.parametrize("route", ROUTES)
@FUZZ
@given(data=st.data())
def test_random_and_mutated_json(client: Client, route: str, data: st.DataObject) -> None:
    body = data.draw(st.one_of(json_values, mutated(route)))
    status, answer = client.post(route, json.dumps(body).encode())
    check(route, status, answer)


@FUZZ
@given(
    route=st.sampled_from(ROUTES),
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


# -- every field of every route (issue 15) ---------------------------------------------------------
#
# Each route has a rich valid body that reaches every field its decoder reads (every block, item
# and part type, every tool kind, every option). A case takes one field of it, anywhere in the
# tree, and replaces it with a hostile value, deletes it, or adds a known field name beside it
# holding one; in a list it may append one. Hostile values: every JSON type where another is
# expected, unhashable containers where a string is compared with a set, deep nesting (arrays,
# objects, schema-shaped objects and JSON-in-a-string, 50 to 2,000 levels), and huge values
# (long strings, long arrays, wide objects, numbers past 64 bits and past float range).

FIELD_EXAMPLES = 2_000 if os.environ.get("KIROD_RELIABILITY_FULL") == "1" else 300
FIELD_LIMIT = 1024 * 1024
PNG = (  # a 1 x 1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
    "60e6kgAAAABJRU5ErkJggg=="
)
SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": ["integer", "null"], "description": "n"},
        "b": {"type": "array", "items": {"type": "string"}},
        "c": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {}}]},
    },
    "required": ["a"],
    "additionalProperties": False,
    "$defs": {"d": {"type": "string"}},
}
RICH: dict[str, dict[str, Any]] = {
    "/v1/messages": {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "stream": False,
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1, "b": ["x"]}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": False,
                        "content": [
                            {"type": "text", "text": "result"},
                            {"type": "tool_reference", "tool_name": "f"},
                        ],
                    }
                ],
            },
            {"role": "system", "content": [{"type": "text", "text": "a note"}]},
            {"role": "user", "content": "go on"},
        ],
        "tools": [
            {"name": "f", "description": "a tool", "input_schema": SCHEMA},
            {"type": "custom", "name": "g", "input_schema": {"type": "object"}, "strict": True},
        ],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
        "thinking": {"type": "enabled", "budget_tokens": 2048, "display": "summarized"},
        "output_config": {"effort": "high"},
        "stop_sequences": ["STOP"],
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 5,
        "metadata": {"user_id": "u1"},
        "context_management": {
            "edits": [
                {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}},
                {"type": "clear_tool_uses_20250919"},
            ]
        },
    },
    "/v1/responses": {
        "model": "claude-sonnet-4-6",
        "stream": False,
        "store": False,
        "instructions": "be brief",
        "input": [
            {"type": "message", "role": "developer", "content": "a note"},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "hi"},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
                ],
            },
            {"type": "reasoning", "encrypted_content": "not sealed here", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "patch", "input": "raw"},
            {
                "type": "custom_tool_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "done"}],
            },
            {
                "type": "function_call",
                "call_id": "c3",
                "namespace": "ns",
                "name": "g",
                "arguments": "",
            },
            {"type": "function_call_output", "call_id": "c3", "output": "ok"},
            {
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "so"},
                    {"type": "refusal", "refusal": "no"},
                ],
            },
            {
                "type": "additional_tools",
                "role": "developer",
                "tools": [{"type": "function", "name": "h", "parameters": {"type": "object"}}],
            },
            {"role": "user", "content": "continue"},
        ],
        "tools": [
            {
                "type": "function",
                "name": "f",
                "description": "d",
                "parameters": SCHEMA,
                "strict": False,
            },
            {
                "type": "custom",
                "name": "patch",
                "description": "p",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
            },
            {
                "type": "namespace",
                "name": "ns",
                "description": "n",
                "tools": [{"type": "function", "name": "g", "parameters": {"type": "object"}}],
            },
            {"type": "web_search"},
        ],
        "tool_choice": "auto",
        "reasoning": {"effort": "medium", "summary": "auto"},
        "text": {"format": {"type": "text"}},
        "metadata": {"kiro_session_id": "s1"},
        "prompt_cache_key": "k1",
        "client_metadata": {"session_id": "s2"},
        "max_output_tokens": 64,
        "temperature": 0.5,
        "top_p": 0.9,
        "parallel_tool_calls": True,
        "truncation": "disabled",
        "user": "u1",
        "include": ["reasoning.encrypted_content"],
    },
    "/v1/chat/completions": {
        "model": "claude-sonnet-4-6",
        "stream": False,
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "developer", "content": [{"type": "text", "text": "a note"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "x"}, {"type": "refusal", "refusal": "r"}],
                "reasoning_content": "hmm",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a":1}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "user", "content": "go on"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "description": "d",
                    "parameters": SCHEMA,
                    "strict": False,
                },
            }
        ],
        "tool_choice": "auto",
        "reasoning_effort": "low",
        "stop": ["STOP"],
        "n": 1,
        "logprobs": False,
        "modalities": ["text"],
        "response_format": {"type": "text"},
        "stream_options": {"include_usage": True},
        "max_tokens": 64,
        "max_completion_tokens": 64,
        "metadata": {"kiro_session_id": "s1"},
        "prompt_cache_key": "k1",
        "temperature": 0.5,
        "top_p": 0.9,
        "user": "u1",
    },
}
RICH["/api/chat"] = {
    "model": "claude-sonnet-4-6:latest",
    "stream": False,
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi", "images": [PNG, f"data:image/png;base64,{PNG}"]},
        {
            "role": "assistant",
            "content": "calling",
            "thinking": "hmm",
            "tool_calls": [
                {"id": "c1", "function": {"index": 0, "name": "f", "arguments": {"a": 1}}},
                {"function": {"name": "g", "arguments": '{"b": ["x"]}'}},
            ],
        },
        {"role": "tool", "content": "ok", "tool_call_id": "c1"},
        {"role": "tool", "content": "done", "tool_name": "g", "images": [PNG]},
        {"role": "user", "content": "go on"},
    ],
    "tools": [
        {"type": "function", "function": {"name": "f", "description": "d", "parameters": SCHEMA}},
        {"function": {"name": "g", "parameters": {"type": "object"}}},
    ],
    "think": "high",
    "format": "",
    "logprobs": False,
    "keep_alive": "5m",
    "options": {
        "num_predict": 64,
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 5,
        "stop": ["STOP"],
        "num_ctx": 8192,
    },
}
RICH["/api/show"] = {"model": "claude-sonnet-4-6", "verbose": False}
RICH["/v1/messages/count_tokens"] = {
    key: value for key, value in RICH["/v1/messages"].items() if key not in ("max_tokens", "stream")
}
RICH["/v1/responses/compact"] = dict(RICH["/v1/responses"])
RICH[GEMINI_GENERATE] = {
    "systemInstruction": {"parts": [{"text": "be brief"}]},
    "contents": [
        {
            "role": "user",
            "parts": [
                {"text": "hi"},
                {"inlineData": {"mimeType": "image/png", "data": PNG}},
            ],
        },
        {
            "role": "model",
            "parts": [
                {"text": "hmm", "thought": True, "thoughtSignature": "c2ln"},
                {"text": "calling"},
                {"functionCall": {"id": "c1", "name": "f", "args": {"a": 1, "b": ["x"]}}},
                {"functionCall": {"name": "g", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "c1", "name": "f", "response": {"output": "ok"}}},
                {
                    "functionResponse": {
                        "name": "g",
                        "response": {"n": 1},
                        "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG}}],
                    }
                },
            ],
        },
        {"parts": [{"text": "go on"}]},
    ],
    "tools": [
        {
            "functionDeclarations": [
                {
                    "name": "f",
                    "description": "d",
                    "parameters": {
                        "type": "OBJECT",
                        "properties": {"a": {"type": "INTEGER", "nullable": True}},
                    },
                },
                {"name": "g", "parametersJsonSchema": SCHEMA},
            ]
        },
        {"googleSearch": {}},
    ],
    "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
    "generationConfig": {
        "maxOutputTokens": 64,
        "temperature": 0.5,
        "topP": 0.9,
        "topK": 5,
        "stopSequences": ["STOP"],
        "candidateCount": 1,
        "responseMimeType": "text/plain",
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024},
    },
    "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
}
FIELD_ROUTES = tuple(RICH)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every field and element of `node`, outermost first."""
    children = node.items() if isinstance(node, dict) else enumerate(node)
    for key, child in children:
        yield (*prefix, key)
        if isinstance(child, dict | list):
            yield from _paths(child, (*prefix, key))


def _names(node: Any) -> set[str]:
    """Every key and every string value of `node` (field names, enum values, type tags)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, child in node.items():
            found.add(key)
            found |= _names(child)
    elif isinstance(node, list):
        for child in node:
            found |= _names(child)
    elif isinstance(node, str) and len(node) < 40:
        found.add(node)
    return found


PATHS_OF = {route: tuple(_paths(body)) for route, body in RICH.items()}
NAMES = sorted(
    set().union(*(_names(body) for body in RICH.values()))
    | {
        "mcp_servers",
        "output_format",
        "format",
        "background",
        "conversation",
        "prompt",
        "compaction",
        "compaction_trigger",
        "compaction_summary",
        "item_reference",
        "encrypted_content",
        "input_file",
        "file_id",
        "url",
        "file",
        "document",
        "search_result",
        "server_tool_use",
        "any",
        "tool",
        "none",
        "required",
        "adaptive",
        "disabled",
        "omitted",
        "json_object",
        "json_schema",
        "grammar",
        "functions",
        "function_call",
        "audio",
        "web_search_options",
        "top_logprobs",
        "input_audio",
        "function",
        "minimal",
        "xhigh",
        "max",
        "low",
        "keep",
        "all",
        "value",
        "thinking_turns",
        "generate_summary",
        "json",
        "tool_name",
        "tool_call_id",
    }
)
SENTINEL = "\x00hostile\x00"


def _deep(kind: str, depth: int) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    if kind == "object":
        return '{"a":' * depth + "1" + "}" * depth
    if kind == "schema":
        return '{"type":"object","properties":{"a":' * depth + "{}" + "}}" * depth
    return json.dumps('{"a":' * depth + "1" + "}" * depth)  # JSON inside a string


hostile_raw = st.one_of(
    # every JSON type
    json_values.map(json.dumps),
    st.sampled_from(NAMES).map(json.dumps),
    # unhashable containers, which a membership test in a set or a dict key lookup refuses
    st.sampled_from(["[]", "{}", "[[]]", "[{}]", '{"a":[]}', '["text"]', '[["auto"]]']),
    # deep nesting
    st.builds(
        _deep,
        st.sampled_from(["array", "object", "schema", "string"]),
        st.integers(50, 2_000),
    ),
    # huge values
    st.integers(100_000, 900_000).map(lambda n: json.dumps("x" * n)),
    st.integers(10_000, 100_000).map(lambda n: "[" + ",".join(["0"] * n) + "]"),
    st.integers(1_000, 20_000).map(
        lambda n: "{" + ",".join(f'"k{i}":{{}}' for i in range(n)) + "}"
    ),
    st.sampled_from(["1e308", "-1e308", "2e400", str(2**200), str(-(2**70)), "-0.0", "0"]),
)


def _mutate(body: Any, path: tuple[Any, ...], operation: str, key: str) -> None:
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    target = parent[last]
    if operation == "delete":
        del parent[last]
    elif operation == "add" and isinstance(target, dict):
        target[key] = SENTINEL
    elif operation == "append" and isinstance(target, list):
        target.append(SENTINEL)
    else:
        parent[last] = SENTINEL


@pytest.fixture(scope="module")
def field_client(module_tmp: Path) -> Iterator[Client]:
    with ThreadedFake() as fake:
        proc = start_daemon(
            module_tmp / "fields",
            fake,
            {
                "KIROD_ENABLE_CHAT_COMPLETIONS": "true",
                "KIROD_ENABLE_OLLAMA_API": "true",
                "KIROD_ENABLE_GEMINI_API": "true",
                "KIROD_MAX_REQUEST_BODY_BYTES": str(FIELD_LIMIT),
            },
        )
        import_account(proc, fake.fake.issue_social_account())
        fuzz_client = Client(proc.address, proc.api_key)
        try:
            yield fuzz_client
        finally:
            fuzz_client.close()
            proc.kill()
            assert "unhandled_error" not in proc.log()


@pytest.mark.parametrize("route", FIELD_ROUTES)
def test_the_rich_bodies_are_valid(field_client: Client, route: str) -> None:
    """Each mutation starts from a body that is served, so every field is reached."""
    status, answer = field_client.post(route, json.dumps(RICH[route]).encode())
    assert status == 200, answer


@pytest.mark.parametrize("route", FIELD_ROUTES)
@settings(
    max_examples=FIELD_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(data=st.data())
def test_every_field_with_hostile_values(
    field_client: Client, route: str, data: st.DataObject
) -> None:
    body = json.loads(json.dumps(RICH[route]))
    path = data.draw(st.sampled_from(PATHS_OF[route]), label="path")
    operation = data.draw(st.sampled_from(["replace", "replace", "delete", "add", "append"]))
    key = data.draw(st.sampled_from(NAMES), label="key")
    _mutate(body, path, operation, key)
    raw = json.dumps(body)
    if json.dumps(SENTINEL) in raw:
        raw = raw.replace(json.dumps(SENTINEL), data.draw(hostile_raw, label="value"))
    status, answer = field_client.post(route, raw.encode())
    check(route, status, answer)
