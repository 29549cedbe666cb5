"""Model ids with control characters, or too long, against the real daemon through each API's
official client: a 400 in that API's envelope naming the first bad character's position, on
Messages, count_tokens, Responses (HTTP and a WebSocket turn), Chat Completions and Ollama's chat
and show; ids real clients send are still served; and nothing of the refused names reaches the
operation log, `kiroctl stats` or `kiroctl trace` (the console reads the same rows)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import ollama
import openai
import pytest
from click.testing import CliRunner

from kirod.canonical.model_ids import model_id_problem
from kirod.cli import main
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

USER = [{"role": "user", "content": "hi"}]
# (the id, what its refusal says: the position and code point of its first bad character, or
# its length)
BAD = {
    "escape": ("claude-sonnet-\u001b[31mRED\u001b]0;TITLE\u0007", "character 15 (U+001B)"),
    "newline": ("claude-opus-9-\n\rFORGED", "character 15 (U+000A)"),
    "nul": ("claude-sonnet-4-6\u0000", "character 18 (U+0000)"),
    "long": ("claude-sonnet-4-6-" + "x" * 200, "at most 128 characters (218 sent)"),
}
REAL = ("claude-sonnet-4-6", "claude-sonnet-4-5[1m]", "anthropic/claude-sonnet-4-6", "opus")


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    env = {"KIROD_ENABLE_CHAT_COMPLETIONS": "true", "KIROD_ENABLE_OLLAMA_API": "true"}
    proc = start_daemon(module_tmp, fake, env)  # model_fallback = family, the default
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
        assert "unhandled_error" not in proc.log()
    finally:
        proc.kill()


def _ollama(daemon: DaemonProcess) -> ollama.Client:
    headers = {"Authorization": f"Bearer {daemon.api_key}"}
    return ollama.Client(host=daemon.base_url, headers=headers, timeout=30)


def _named(message: str, bad: tuple[str, str]) -> None:
    model, where = bad
    assert where in message
    assert model not in message
    assert message.isprintable()


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_anthropic_messages_and_count_tokens(
    claude: anthropic.Anthropic, service: FakeKiro, bad: tuple[str, str]
) -> None:
    with pytest.raises(anthropic.BadRequestError) as created:
        claude.messages.create(model=bad[0], max_tokens=20, messages=USER)  # type: ignore[arg-type]
    with pytest.raises(anthropic.BadRequestError) as counted:
        claude.messages.count_tokens(model=bad[0], messages=USER)  # type: ignore[arg-type]
    for caught in (created, counted):
        body: Any = caught.value.body
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
        assert body["error"]["message"].startswith("model: ")
        _named(body["error"]["message"], bad)
        assert body["request_id"] == caught.value.request_id
    assert service.requests("chat") == []


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_openai_responses_and_chat(
    gpt: openai.OpenAI, service: FakeKiro, bad: tuple[str, str]
) -> None:
    with pytest.raises(openai.BadRequestError) as responded:
        gpt.responses.create(model=bad[0], input="hi")
    with pytest.raises(openai.BadRequestError) as chatted:
        gpt.chat.completions.create(model=bad[0], messages=USER)  # type: ignore[arg-type]
    for caught in (responded, chatted):
        error: Any = caught.value.body
        code = "string_too_long" if bad is BAD["long"] else "invalid_value"
        assert (error["type"], error["param"], error["code"]) == (
            "invalid_request_error",
            "model",
            code,
        )
        _named(error["message"], bad)
    assert service.requests("chat") == []


async def test_a_websocket_turn_is_refused_and_the_socket_serves_the_next(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="after"))
    headers = {
        "Authorization": f"Bearer {daemon.api_key}",
        "OpenAI-Beta": "responses_websockets=2026-02-06",
    }
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(daemon.base_url + "/v1/responses", headers=headers) as ws,
    ):
        for bad in BAD.values():
            await ws.send_str(
                json.dumps({"type": "response.create", "model": bad[0], "input": "x"})
            )
            frame = json.loads((await ws.receive(timeout=10)).data)
            assert (frame["type"], frame["status"]) == ("error", 400)
            assert frame["error"]["param"] == "model"
            _named(frame["error"]["message"], bad)
        await ws.send_str(
            json.dumps({"type": "response.create", "model": "claude-sonnet-4-6", "input": "x"})
        )
        while (event := json.loads((await ws.receive(timeout=10)).data))["type"] not in (
            "response.completed",
            "error",
        ):
            pass
        assert event["type"] == "response.completed"
    assert len(service.requests("chat")) == 1


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_ollama_chat_and_show(
    daemon: DaemonProcess, service: FakeKiro, bad: tuple[str, str]
) -> None:
    with _ollama(daemon) as client:
        with pytest.raises(ollama.ResponseError) as chatted:
            client.chat(model=bad[0], messages=USER)
        with pytest.raises(ollama.ResponseError) as shown:
            client.show(bad[0])
    for caught in (chatted, shown):
        assert caught.value.status_code == 400
        assert caught.value.error.startswith("'model': ")  # Ollama's {"error": "…"}
        _named(caught.value.error, bad)
    assert service.requests("chat") == []


@pytest.mark.parametrize("model", REAL)
def test_ids_real_clients_send_are_served_on_every_api(
    daemon: DaemonProcess,
    claude: anthropic.Anthropic,
    gpt: openai.OpenAI,
    service: FakeKiro,
    model: str,
) -> None:
    service.enqueue(*[Reply(text="ok")] * 3)
    message = claude.messages.create(model=model, max_tokens=20, messages=USER)  # type: ignore[arg-type]
    assert message.content[0].text == "ok"  # type: ignore[union-attr]
    assert gpt.responses.create(model=model, input="hi").output_text == "ok"
    with _ollama(daemon) as client:
        assert client.chat(model=model, messages=USER).message.content == "ok"
        assert client.show(model).capabilities


def test_no_refused_name_reaches_the_log_stats_or_trace(
    daemon: DaemonProcess, claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    for bad in BAD.values():
        with pytest.raises(anthropic.BadRequestError):
            claude.messages.create(model=bad[0], max_tokens=20, messages=USER)  # type: ignore[arg-type]
    service.enqueue(Reply(text="ok"))
    claude.messages.create(model="claude-sonnet-4-6", max_tokens=20, messages=USER)
    uri = f"file:{daemon.state_dir / 'kirod.db'}?mode=ro"
    daemon.client.stats()  # flushes the operation log first
    with sqlite3.connect(uri, uri=True) as db:
        models = {row[0] for row in db.execute("SELECT DISTINCT model FROM oplog")}
    assert "claude-sonnet-4-6" in models
    assert {name: model_id_problem(name) for name in models} == dict.fromkeys(models)
    assert {group.key for group in daemon.client.stats().models} <= models
    for command in (["stats"], ["trace", "--last", "50"]):
        shown = CliRunner().invoke(main.cli, ["--socket", str(daemon.socket_path), *command])
        assert shown.exit_code == 0, shown.output
        assert not {"\x1b", "\x00", "\r", "\x07"} & set(shown.output)
        assert "FORGED" not in shown.output
        assert "31mRED" not in shown.output
