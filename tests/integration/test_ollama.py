"""The Ollama API end to end: the official `ollama` client, and VS Code Copilot's Ollama provider
replayed from `captures/vscode_copilot_ollama.json`, against the real daemon and the fake Kiro."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import ollama
import pytest
from PIL import Image

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import (
    DEFAULT_MODELS,
    FakeKiro,
    Model,
    Reply,
    Script,
    ThreadedFake,
    ToolCall,
)
from tests.support.kiro_env import import_account, start_daemon
from tests.support.raw_http import Answer, send

MODEL = "claude-sonnet-4-6"
TEXT_ONLY = Model("glm-5", "GLM-5", 128_000, 16_000, 0.5, ("TEXT",), provider="zhipu")
CAPTURE = json.loads(
    (Path(__file__).parent / "captures" / "vscode_copilot_ollama.json").read_text()
)
READ_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}
ON = {"KIROD_ENABLE_OLLAMA_API": "true", "KIROD_ENABLE_CHAT_COMPLETIONS": "true"}


def serve(fake: ThreadedFake, root: Path, extra: Mapping[str, str]) -> DaemonProcess:
    fake.fake.set_model(TEXT_ONLY)
    proc = start_daemon(root, fake, extra)
    import_account(proc, fake.fake.issue_social_account())
    return proc


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = serve(fake, module_tmp / "keyed", ON)
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def keyless(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = serve(fake, module_tmp / "keyless", {**ON, "KIROD_OLLAMA_KEYLESS_LOOPBACK": "true"})
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def client(daemon: DaemonProcess) -> Iterator[ollama.Client]:
    headers = {"Authorization": f"Bearer {daemon.api_key}"}
    with ollama.Client(host=daemon.base_url, headers=headers, timeout=30) as c:
        yield c


def keyed(proc: DaemonProcess) -> dict[str, str]:
    return {"Authorization": f"Bearer {proc.api_key}"}


def version_at_least(version: str, minimum: str) -> bool:
    """VS Code's comparison: the dotted parts as integers, a missing part as 0."""
    have = [int(part) for part in version.split(".")]
    want = [int(part) for part in minimum.split(".")]
    width = max(len(have), len(want))
    return have + [0] * (width - len(have)) >= want + [0] * (width - len(want))


def public_id(kiro_id: str) -> str:
    """The id /v1/models lists for a Kiro id: Claude's Anthropic-style, others as they are."""
    return kiro_id.replace(".", "-") if kiro_id.startswith("claude-") else kiro_id


def fill(value: Any, model: str) -> Any:
    return json.loads(json.dumps(value).replace("{model}", model))


def replay_discovery(proc: DaemonProcess) -> dict[str, Answer]:
    """The provider's discovery, in its order: version, tags, then show for each model."""
    answers: dict[str, Answer] = {}
    for step in CAPTURE["discovery"]:
        headers = {**CAPTURE["headers"], **step.get("headers", {})}
        if not step.get("each_model"):
            answers[step["path"]] = send(proc, step["method"], step["path"], headers)
            continue
        tags = answers["/api/tags"]
        for row in tags.json()["models"] if tags.status == 200 else [{"model": MODEL}]:
            body = json.dumps(fill(step["body"], row["model"])).encode()
            answers[f"{step['path']} {row['model']}"] = send(
                proc, step["method"], step["path"], headers, body
            )
    return answers


def v1_model_ids(proc: DaemonProcess) -> list[str]:
    answer = send(proc, "GET", "/v1/models", keyed(proc))
    return [row["id"] for row in answer.json()["data"]]


def chats(service: FakeKiro) -> list[dict[str, Any]]:
    return [request.json for request in service.requests("chat")]


# -- the official client -------------------------------------------------------------------------


def test_list_names_the_models_v1_models_lists(
    client: ollama.Client, daemon: DaemonProcess
) -> None:
    listed = client.list().models
    assert [row.model for row in listed] == v1_model_ids(daemon)
    by_name = {row.model: row for row in listed}
    sonnet = by_name[MODEL]
    assert sonnet.details is not None
    assert (sonnet.details.family, sonnet.size) == ("claude", 0)
    assert sonnet.digest is not None
    assert len(sonnet.digest) == 64


def test_show_gives_capabilities_and_the_catalogs_context_window(client: ollama.Client) -> None:
    sonnet = client.show(MODEL)
    assert sonnet.capabilities is not None
    assert {"completion", "tools", "vision"} <= set(sonnet.capabilities)
    assert sonnet.modelinfo is not None
    assert sonnet.modelinfo["general.architecture"] == "claude"
    assert sonnet.modelinfo["claude.context_length"] == 1_000_000  # the fake's catalog
    assert sonnet.modelinfo["general.basename"] == "Claude Sonnet 4.6"

    text_only = client.show("glm-5:latest")  # Ollama's default tag is dropped
    assert text_only.capabilities is not None
    assert "vision" not in text_only.capabilities
    assert text_only.modelinfo is not None
    arch = text_only.modelinfo["general.architecture"]
    assert text_only.modelinfo[f"{arch}.context_length"] == 128_000

    with pytest.raises(ollama.ResponseError) as missing:
        client.show("no-such-model")
    assert missing.value.status_code == 404
    assert "model 'no-such-model' is not available" in missing.value.error


def test_streamed_chat_with_a_tool_round_trip(client: ollama.Client, service: FakeKiro) -> None:
    """The model calls a tool; the client runs it and sends the result back by the tool's name
    (the Python client keeps no call ids); Kiro gets it as the result of its call."""
    canary = "The canary sings at 04:51 in room 7."
    service.enqueue(Reply(tool_calls=(ToolCall("read_file", {"path": "notes.txt"}),)))
    service.enqueue(Reply(text="The note is about a canary."))
    messages: list[Any] = [{"role": "user", "content": "What does notes.txt say?"}]

    first = list(client.chat(model=MODEL, messages=messages, tools=[READ_TOOL], stream=True))
    calls = [call for chunk in first for call in chunk.message.tool_calls or ()]
    assert [(call.function.name, dict(call.function.arguments)) for call in calls] == [
        ("read_file", {"path": "notes.txt"})
    ]
    assert [chunk.done for chunk in first] == [False] * (len(first) - 1) + [True]
    last = first[-1]
    assert last.done_reason == "stop"
    assert (last.prompt_eval_count or 0) > 0
    assert (last.eval_count or 0) > 0
    assert (last.total_duration or 0) > 0

    messages.append({"role": "assistant", "content": "", "tool_calls": calls})
    messages.append({"role": "tool", "content": canary, "tool_name": "read_file"})
    second = list(client.chat(model=MODEL, messages=messages, tools=[READ_TOOL], stream=True))
    assert "".join(chunk.message.content or "" for chunk in second) == (
        "The note is about a canary."
    )

    state = chats(service)[-1]["conversationState"]
    (call,) = state["history"][-1]["assistantResponseMessage"]["toolUses"]
    context = state["currentMessage"]["userInputMessage"]["userInputMessageContext"]
    (result,) = context["toolResults"]
    assert result["toolUseId"] == call["toolUseId"]
    assert call["name"] == "read_file"
    assert canary in json.dumps(result["content"])
    assert [tool["toolSpecification"]["name"] for tool in context["tools"]] == ["read_file"]


def test_non_streamed_chat(client: ollama.Client, service: FakeKiro) -> None:
    # Kiro takes 0.2 s between its first output and the end (the answer is read whole before it
    # is handed on): the time to the first output and the rest are told apart all the same.
    service.enqueue(
        Script(reply=Reply(text="Hello from Kiro."), chunk_size=4, delay_between_s=0.05)
    )
    answer = client.chat(
        model=MODEL,
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
        ],
        options={"num_predict": 256, "temperature": 0.2},
    )
    assert answer.message.role == "assistant"
    assert answer.message.content == "Hello from Kiro."
    assert (answer.done, answer.done_reason, answer.model) == (True, "stop", MODEL)
    assert (answer.prompt_eval_count or 0) > 0
    assert (answer.eval_count or 0) > 0
    assert (answer.eval_duration or 0) >= 150_000_000
    assert (answer.prompt_eval_duration or 0) < (answer.eval_duration or 0)
    history = chats(service)[-1]["conversationState"]["history"]
    assert "Be brief." in history[0]["userInputMessage"]["content"]


def test_thinking_and_images(client: ollama.Client, service: FakeKiro) -> None:
    picture = io.BytesIO()
    Image.new("RGB", (2, 2), "red").save(picture, format="PNG")
    service.enqueue(Reply(text="A red square.", thinking="It is red."))
    chunks = list(
        client.chat(
            model=MODEL,
            messages=[{"role": "user", "content": "What is this?", "images": [picture.getvalue()]}],
            think=True,
            stream=True,
        )
    )
    assert "".join(chunk.message.thinking or "" for chunk in chunks) == "It is red."
    assert "".join(chunk.message.content or "" for chunk in chunks) == "A red square."
    current = chats(service)[-1]["conversationState"]["currentMessage"]["userInputMessage"]
    assert [image["format"] for image in current["images"]] == ["png"]


# -- errors in Ollama's envelope -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "found"),
    [
        (b"{not json", "request body is not valid JSON"),
        (b"[]", "must be a JSON object"),
        (json.dumps({"model": MODEL}).encode(), "'messages'"),
        (json.dumps({"model": f"{MODEL}:latest", "messages": []}).encode(), "'messages'"),
        (
            json.dumps({"model": MODEL, "messages": [{"role": "robot", "content": "x"}]}).encode(),
            "'messages[0].role'",
        ),
        (
            json.dumps(
                {"model": MODEL, "messages": [{"role": "user", "content": "x", "images": ["AAAA"]}]}
            ).encode(),
            "'messages[0].images[0]'",
        ),
        (
            json.dumps(
                {"model": MODEL, "messages": [{"role": "tool", "content": "x", "tool_name": "ls"}]}
            ).encode(),
            "'messages[0]'",
        ),
        (
            json.dumps(
                {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "format": "json"}
            ).encode(),
            "'format'",
        ),
        (
            json.dumps(
                {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "options": [1]}
            ).encode(),
            "'options'",
        ),
    ],
)
def test_bad_chat_bodies_are_400s_in_ollamas_envelope(
    daemon: DaemonProcess, service: FakeKiro, body: bytes, found: str
) -> None:
    answer = send(
        daemon, "POST", "/api/chat", {**keyed(daemon), "Content-Type": "application/json"}, body
    )
    assert answer.status == 400
    error = answer.json()
    assert list(error) == ["error"]
    assert found in error["error"]
    assert service.requests("chat") == []


def test_other_failures_are_in_ollamas_envelope(daemon: DaemonProcess) -> None:
    unknown = send(
        daemon,
        "POST",
        "/api/chat",
        keyed(daemon),
        json.dumps({"model": "llama3.2", "messages": [{"role": "user", "content": "x"}]}).encode(),
    )
    assert unknown.status == 404
    assert unknown.json()["error"].startswith("model 'llama3.2' is not available")
    wrong_method = send(daemon, "GET", "/api/chat", keyed(daemon))
    assert (wrong_method.status, list(wrong_method.json())) == (405, ["error"])
    no_route = send(daemon, "GET", "/api/ps", keyed(daemon))
    assert (no_route.status, list(no_route.json())) == (404, ["error"])
    wrong_key = send(daemon, "GET", "/api/tags", {"Authorization": "Bearer sk-wrong"})
    assert (wrong_key.status, wrong_key.json()) == (401, {"error": "invalid API key"})


def test_the_ollama_api_is_off_by_default(fake: ThreadedFake, short_tmp: Path) -> None:
    proc = start_daemon(short_tmp, fake)
    try:
        for headers in (keyed(proc), CAPTURE["headers"]):
            answer = send(proc, "GET", "/api/tags", headers)
            assert answer.status == 404
            assert "enable_ollama_api = true" in answer.json()["error"]
        with (
            ollama.Client(host=proc.base_url, headers=keyed(proc)) as off,
            pytest.raises(ollama.ResponseError) as error,
        ):
            off.list()
        assert error.value.status_code == 404
        assert "enable_ollama_api" in error.value.error
    finally:
        proc.kill()


# -- VS Code Copilot's Ollama provider, replayed -------------------------------------------------


def test_vscode_discovery_without_a_key_is_refused_by_default(daemon: DaemonProcess) -> None:
    answers = replay_discovery(daemon)
    assert {answer.status for answer in answers.values()} == {401}
    for answer in answers.values():
        assert "ollama_keyless_loopback = true" in answer.json()["error"]
    step = CAPTURE["chat"]
    chat = send(
        daemon,
        step["method"],
        step["path"],
        {**CAPTURE["headers"], **step["headers"]},
        json.dumps(fill(step["body"], MODEL)).encode(),
    )
    assert chat.status == 401
    assert chat.json()["error"]["code"] == "missing_api_key"  # OpenAI's envelope on its route


def test_vscode_discovers_and_chats_keyless_from_loopback(
    keyless: DaemonProcess, service: FakeKiro
) -> None:
    answers = replay_discovery(keyless)
    assert {answer.status for answer in answers.values()} == {200}
    assert version_at_least(answers["/api/version"].json()["version"], CAPTURE["minimum_version"])
    models = [row["model"] for row in answers["/api/tags"].json()["models"]]
    assert models == v1_model_ids(keyless)
    catalog = {public_id(model.model_id): model for model in (*DEFAULT_MODELS, TEXT_ONLY)}
    for name in models:
        shown = answers[f"/api/show {name}"].json()
        info = shown["model_info"]
        listed = catalog[name]
        assert info[f"{info['general.architecture']}.context_length"] == listed.max_input_tokens
        assert info["general.basename"] == listed.name
        assert "tools" in shown["capabilities"]
        assert ("vision" in shown["capabilities"]) == ("IMAGE" in listed.input_types)

    service.enqueue(Reply(text="It is main.py."))
    step = CAPTURE["chat"]
    answer = send(
        keyless,
        step["method"],
        step["path"],
        {**CAPTURE["headers"], **step["headers"]},
        json.dumps(fill(step["body"], MODEL)).encode(),
    )
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("text/event-stream")
    events = [line[6:] for line in answer.body.decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    deltas = [choice["delta"] for chunk in chunks for choice in chunk["choices"]]
    assert "".join(delta.get("content") or "" for delta in deltas) == "It is main.py."
    assert chunks[-1]["usage"]["completion_tokens"] > 0  # stream_options.include_usage
    [row] = keyless.client.trace(answer.headers["request-id"]).requests
    assert (row.key_id, row.protocol, row.status) == ("keyless-loopback", "openai_chat", 200)


def test_keyless_ollama_chat_is_logged_under_its_tenant(
    keyless: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="ok"))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": False}
    answer = send(keyless, "POST", "/api/chat", {}, json.dumps(body).encode())
    assert (answer.status, answer.json()["message"]["content"]) == (200, "ok")
    [row] = keyless.client.trace(answer.headers["request-id"]).requests
    assert (row.key_id, row.protocol) == ("keyless-loopback", "ollama_chat")


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer ", "Origin": "http://localhost:3000"},  # a web page's fetch
        {"Host": "rebound.example:11434"},  # a page on a domain rebound to 127.0.0.1
        {"Authorization": "Bearer sk-not-a-key"},  # a key offered is always checked
    ],
)
def test_keyless_is_for_local_programs_only(
    keyless: DaemonProcess, headers: dict[str, str]
) -> None:
    answer = send(keyless, "GET", "/api/tags", headers)
    # A rebound Host is refused before the key gate, by the API's Host check.
    assert answer.status == (403 if "Host" in headers else 401)
    assert list(answer.json()) == ["error"]
    other = send(keyless, "GET", "/v1/models", {})  # keyless reaches only the Ollama routes
    assert other.status == 401
