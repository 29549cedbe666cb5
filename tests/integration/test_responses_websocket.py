"""Responses over WebSocket end to end: aiohttp's WebSocket client → the real daemon → the fake.

Every frame kirod sends must parse as the openai SDK's `ResponsesServerEvent`, and every turn's
events must pass the SDK's own stream accumulator (`ResponseStreamState`), as SSE streams do.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import signal
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Fault, Reply, Script, ThreadedFake, ToolCall
from tests.integration.responses_ws import (
    BETA,
    connect,
    events_of_turn,
    final,
    receive,
    send,
    turn,
)
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
MAX_BODY = 256 * 1024
LIMIT_CODE = "websocket_connection_limit_reached"
SHELL_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a shell command",
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}},
        "required": ["cmd"],
    },
}


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    env = {"KIROD_MAX_REQUEST_BODY_BYTES": str(MAX_BODY), "KIROD_WEBSOCKET_COMPRESSION": "true"}
    proc = start_daemon(module_tmp, fake, env)
    import_account(proc, fake.fake.issue_social_account(subscription="KIRO POWER"))
    try:
        yield proc
        log = proc.log()
        assert "unhandled_error" not in log
        assert "Traceback" not in log
    finally:
        proc.kill()


def output_text(response: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


async def closed(ws: aiohttp.ClientWebSocketResponse) -> tuple[int | None, str]:
    """The close code and reason the server sent (every other frame before it is skipped)."""
    async with asyncio.timeout(10):
        while True:
            message = await ws.receive()
            if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                return ws.close_code, str(message.extra or "")


def last_state(service: FakeKiro) -> dict[str, Any]:
    body = service.requests("chat")[-1].json
    assert isinstance(body, dict)
    state: dict[str, Any] = body["conversationState"]
    return state


def turn_lines(proc: DaemonProcess) -> list[str]:
    return [line for line in proc.log().splitlines() if " request method=WS " in line]


def field(line: str, name: str) -> str:
    return line.split(f" {name}=", 1)[1].split(" ", 1)[0]


def wait_until(condition: Any, timeout_s: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {condition}"
        time.sleep(0.02)
    return value


def oplog_row(proc: DaemonProcess, request_id: str) -> dict[str, Any]:
    uri = f"file:{proc.state_dir / 'kirod.db'}?mode=ro"

    def read() -> dict[str, Any] | None:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as db:
            db.row_factory = sqlite3.Row
            row = db.execute("SELECT * FROM oplog WHERE request_id = ?", (request_id,)).fetchone()
        return None if row is None else dict(row)

    row: dict[str, Any] = wait_until(read)
    return row


def pool_idle(proc: DaemonProcess) -> bool:
    pool = proc.client.request("GET", "/pool")
    return not pool["queued"] and not any(account["in_flight"] for account in pool["accounts"])


# -- turns ----------------------------------------------------------------------------------------


async def test_a_text_turn_streams_sdk_events_one_per_frame(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(Script(reply=Reply(text="Hello over a socket."), chunk_size=4))
    async with connect(daemon) as ws:
        assert ws.compress == 15  # permessage-deflate was accepted
        events = await turn(ws, model=MODEL, input="hi", instructions="Be brief.", store=False)
    kinds = [event["type"] for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds.count("response.output_text.delta") > 1
    assert kinds[-1] == "response.completed"
    response = final(events)
    assert response["status"] == "completed"
    assert output_text(response) == "Hello over a socket."
    assert response["usage"]["output_tokens"] > 0
    assert "Be brief." in json.dumps(last_state(service)["history"])


async def test_previous_response_id_with_store_is_stored_as_over_http(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="My name is Kiro."), Reply(text="I said Kiro."))
    async with connect(daemon) as ws:
        first = final(await turn(ws, model=MODEL, input="What is your name?"))
        second = final(
            await turn(ws, model=MODEL, input="What did you say?", previous_response_id=first["id"])
        )
    assert output_text(second) == "I said Kiro."
    state = last_state(service)
    assert "My name is Kiro." in json.dumps(state["history"])
    assert state["currentMessage"]["userInputMessage"]["content"] == "What did you say?"
    with openai.OpenAI(
        base_url=daemon.base_url + "/v1", api_key=daemon.api_key, max_retries=0
    ) as gpt:
        stored = gpt.responses.retrieve(second["id"])
        assert stored.output_text == "I said Kiro."
        assert stored.previous_response_id == first["id"]
        items = gpt.responses.input_items.list(second["id"])
        assert [item.type for item in items.data] == ["message"]
        # and an HTTP request continues what the socket stored
        service.enqueue(Reply(text="Third."))
        third = gpt.responses.create(model=MODEL, input="again", previous_response_id=second["id"])
        assert third.output_text == "Third."
    assert "I said Kiro." in json.dumps(last_state(service)["history"])


async def test_store_false_full_history_and_continuation_on_the_connection(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    async with connect(daemon) as ws:
        first = final(await turn(ws, model=MODEL, input="first", store=False))
        history = [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": output_text(first)},
            {"role": "user", "content": "second"},
        ]
        second = final(await turn(ws, model=MODEL, input=history, store=False))
        assert output_text(second) == "Two."
        assert "One." in json.dumps(last_state(service)["history"])
        # Codex's delta mode: only the new items, after the previous response, store false
        third = final(
            await turn(
                ws,
                model=MODEL,
                input=[{"role": "user", "content": "third"}],
                previous_response_id=second["id"],
                store=False,
            )
        )
        assert output_text(third) == "Three."
        flat = json.dumps(last_state(service)["history"])
        assert "first" in flat
        assert "One." in flat
        assert "Two." in flat
        # the connection remembers its last response only
        refused = await turn(ws, model=MODEL, input="x", previous_response_id=first["id"])
        assert refused[0]["error"]["code"] == "previous_response_not_found"
    async with connect(daemon) as ws:  # nor does it outlive the connection
        refused = await turn(ws, model=MODEL, input="x", previous_response_id=third["id"])
    assert refused == [
        {
            "type": "error",
            "status": 400,
            "error": {
                "message": f"no stored response with id {third['id']!r}",
                "type": "invalid_request_error",
                "param": "previous_response_id",
                "code": "previous_response_not_found",
            },
            "request_id": refused[0]["request_id"],
        }
    ]
    with (
        openai.OpenAI(
            base_url=daemon.base_url + "/v1", api_key=daemon.api_key, max_retries=0
        ) as gpt,
        pytest.raises(openai.NotFoundError),
    ):
        gpt.responses.retrieve(third["id"])  # store false keeps nothing


async def test_function_call_round_trip(daemon: DaemonProcess, service: FakeKiro) -> None:
    service.enqueue(Reply(tool_calls=(ToolCall("exec_command", {"cmd": "ls"}),)))
    service.enqueue(Reply(text="Two files."))
    async with connect(daemon) as ws:
        events = await turn(ws, model=MODEL, input="list files", tools=[SHELL_TOOL], store=False)
        assert "response.function_call_arguments.delta" in [event["type"] for event in events]
        first = final(events)
        calls = [item for item in first["output"] if item["type"] == "function_call"]
        assert len(calls) == 1
        assert calls[0]["name"] == "exec_command"
        assert json.loads(calls[0]["arguments"]) == {"cmd": "ls"}
        output = {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "a b"}
        second = final(
            await turn(
                ws,
                model=MODEL,
                tools=[SHELL_TOOL],
                input=[output],
                previous_response_id=first["id"],
                store=False,
            )
        )
    assert output_text(second) == "Two files."
    context = last_state(service)["currentMessage"]["userInputMessage"]["userInputMessageContext"]
    assert context["toolResults"][0]["toolUseId"] == calls[0]["call_id"]
    assert context["toolResults"][0]["content"] == [{"text": "a b"}]


async def test_warm_up_calls_no_model_and_can_be_continued(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="Warm answer."))
    async with connect(daemon) as ws:
        warm = final(
            await turn(
                ws,
                model=MODEL,
                instructions="Be warm.",
                input="prepare this",
                generate=False,
                store=False,
            )
        )
        assert warm["status"] == "completed"
        assert warm["output"] == []
        assert warm["usage"]["output_tokens"] == 0
        assert service.requests("chat") == []
        await ws.send_str(json.dumps({"type": "response.processed", "response_id": warm["id"]}))
        answer = final(
            await turn(
                ws,
                model=MODEL,
                instructions="Be warm.",
                input=[{"role": "user", "content": "now answer"}],
                previous_response_id=warm["id"],
                store=False,
            )
        )
    assert output_text(answer) == "Warm answer."
    assert len(service.requests("chat")) == 1
    current = last_state(service)["currentMessage"]["userInputMessage"]["content"]
    assert "prepare this" in current  # the warm-up's input, merged with this turn's
    assert "now answer" in current


async def test_failure_after_start_is_response_failed_and_the_socket_stays(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    # A transient failure: the module's only account stays in service (a mid-stream
    # ThrottlingException would rest it, as before the first event).
    service.enqueue(Script(reply=Reply(text="partial " * 10), fault=Fault.ERROR_FRAME, fault_at=3))
    service.enqueue(Reply(text="Recovered."))
    async with connect(daemon) as ws:
        events = await turn(ws, model=MODEL, input="x", store=False)
        assert events[-1]["type"] == "response.failed"
        error = next(event for event in events if event["type"] == "error")
        assert error["error"]["message"] == error["message"]  # nested for WebSocket clients
        final(events)
        assert output_text(final(await turn(ws, model=MODEL, input="y", store=False))) == (
            "Recovered."
        )


async def test_a_create_sent_while_one_runs_waits_for_it(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(
        Script(reply=Reply(text="slow one"), chunk_size=2, delay_between_s=0.03),
        Reply(text="second one"),
    )
    async with connect(daemon) as ws:
        await send(ws, model=MODEL, input="one", store=False)
        await send(ws, model=MODEL, input="two", store=False)
        first = final(await events_of_turn(ws))
        second = final(await events_of_turn(ws))
    assert (output_text(first), output_text(second)) == ("slow one", "second one")


async def test_a_third_create_while_one_runs_and_one_waits_is_refused(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(Script(reply=Reply(text="z" * 400), chunk_size=2, delay_between_s=0.02))
    async with connect(daemon) as ws:
        await send(ws, model=MODEL, input="one", store=False)
        assert (await receive(ws))["type"] == "response.created"  # Kiro is answering it
        for prompt in ("two", "three"):
            await send(ws, model=MODEL, input=prompt, store=False)
        async with asyncio.timeout(10):
            while (event := await receive(ws))["type"] != "error":
                assert event["type"].startswith("response.")  # the first turn, until refused
        assert (event["status"], event["error"]["code"]) == (400, "too_many_pending_responses")
        assert await closed(ws) == (1008, "too_many_pending_responses")
    ended = await asyncio.to_thread(
        wait_until, lambda: [r for r in service.requests("chat") if r.status is not None]
    )
    assert [r.status for r in ended] == [499]  # the running turn was aborted, no other ran


# -- errors ---------------------------------------------------------------------------------------


async def test_a_refused_request_is_one_error_frame_and_the_socket_stays_open(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="fine"))
    async with connect(daemon) as ws:
        refused = await turn(ws, model=MODEL, input="x", tools=[SHELL_TOOL], tool_choice="required")
        assert len(refused) == 1
        error = refused[0]
        assert (error["type"], error["status"]) == ("error", 400)
        assert error["error"]["type"] == "invalid_request_error"
        assert error["error"]["code"] == "unsupported_capability"
        assert error["request_id"].startswith("req_")
        unknown = await turn(ws, model="no-such-model", input="x")
        assert unknown[0]["status"] == 404
        assert unknown[0]["error"]["code"] == "model_not_found"
        bad = await turn(ws, model=MODEL, input="x", generate="no")
        assert bad[0]["error"]["param"] == "generate"
        assert output_text(final(await turn(ws, model=MODEL, input="y", store=False))) == "fine"
    assert len(service.requests("chat")) == 1


async def test_a_key_limited_to_other_models_gets_a_403_frame(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    answer = daemon.client.request("POST", "/keys", {"name": "haiku", "models": ["*haiku*"]})
    async with connect(daemon, key=answer["secret"]) as ws:
        refused = await turn(ws, model=MODEL, input="x")
    assert refused[0]["status"] == 403
    assert refused[0]["error"]["code"] == "model_not_allowed"
    assert refused[0]["headers"] == {"x-should-retry": "false"}
    assert refused[0]["error"]["headers"] == {"x-should-retry": "false"}
    assert service.requests("chat") == []


@pytest.mark.parametrize(
    ("frame", "code", "close_code"),
    [
        ("not json", "invalid_event", 1008),
        ("[1, 2]", "invalid_event", 1008),
        ('{"no": "type"}', "invalid_event", 1008),
        ('{"type": "response.append", "input": []}', "unknown_event_type", 1008),
        (b"\x00binary", "unsupported_frame", 1003),
        (b'{"type": "\xff"}', "invalid_event", 1007),
    ],
    ids=["text", "array", "untyped", "unknown-type", "binary", "not-utf8"],
)
async def test_garbage_gets_an_error_frame_and_a_clean_close(
    daemon: DaemonProcess, service: FakeKiro, frame: str | bytes, code: str, close_code: int
) -> None:
    async with connect(daemon) as ws:
        if isinstance(frame, str):
            await ws.send_str(frame)
        elif close_code == 1003:
            await ws.send_bytes(frame)
        else:  # a text frame whose bytes are not UTF-8
            await ws.send_frame(frame, aiohttp.WSMsgType.TEXT)
        error = await receive(ws)
        assert (error["type"], error["status"], error["error"]["code"]) == ("error", 400, code)
        assert await closed(ws) == (close_code, code)
    assert service.requests("chat") == []


async def test_a_frame_above_the_body_limit_is_closed_1009(daemon: DaemonProcess) -> None:
    async with connect(daemon) as ws:
        await send(ws, model=MODEL, input="x" * (MAX_BODY + 1))
        code, _ = await closed(ws)
    assert code == 1009


async def test_bad_key_is_a_401_and_no_upgrade(daemon: DaemonProcess) -> None:
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        async with connect(daemon, key="sk-kirod-not-a-key"):
            pass
    assert refused.value.status == 401


async def test_without_a_key_is_a_401(daemon: DaemonProcess) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(daemon.base_url + "/v1/responses", headers=BETA)
    assert refused.value.status == 401


async def test_plain_get_is_still_405(daemon: DaemonProcess) -> None:
    headers = {"Authorization": f"Bearer {daemon.api_key}"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(daemon.base_url + "/v1/responses", headers=headers) as answer,
    ):
        body = await answer.json()
    assert answer.status == 405
    assert answer.headers["Allow"] == "POST"
    assert body["error"]["code"] == "method_not_allowed"


# -- disconnects, logs, limits, shutdown ----------------------------------------------------------


@pytest.mark.parametrize("how", ["close-frame", "connection-drop"])
async def test_a_client_leaving_mid_turn_aborts_kiro_and_frees_the_slot(
    daemon: DaemonProcess, service: FakeKiro, how: str
) -> None:
    service.enqueue(Script(reply=Reply(text="z" * 400), chunk_size=2, delay_between_s=0.02))
    completed = service.counters().get("streams_completed", 0)
    async with connect(daemon) as ws:
        await send(ws, model=MODEL, input="long", store=False)
        while (await receive(ws))["type"] != "response.output_text.delta":
            pass
        left = time.monotonic()
        if how == "close-frame":
            await ws.close()
        else:
            ws.get_extra_info("socket").shutdown(socket.SHUT_RDWR)  # no close frame: a drop
    ended = await asyncio.to_thread(
        wait_until, lambda: [r for r in service.requests("chat") if r.status is not None]
    )
    assert len(ended) == 1
    assert time.monotonic() - left < 2.0  # aborted, not played out
    assert service.counters().get("streams_completed", 0) == completed
    await asyncio.to_thread(wait_until, lambda: pool_idle(daemon))
    line = await asyncio.to_thread(
        wait_until, lambda: [x for x in turn_lines(daemon) if " status=499 " in x][-1:]
    )
    row = oplog_row(daemon, field(line[0], "request_id"))
    assert (row["status"], row["error"]) == (499, "client_closed")


async def test_each_turn_has_its_own_request_id_log_line_and_oplog_row(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="a"), Reply(text="b"))
    before = len(turn_lines(daemon))
    async with connect(daemon) as ws:
        await turn(ws, model=MODEL, input="a", store=False)
        await turn(ws, model=MODEL, input="b", store=False)
    lines = await asyncio.to_thread(wait_until, lambda: turn_lines(daemon)[before:][:2])
    assert len(lines) == 2
    ids = [field(line, "request_id") for line in lines]
    assert len(set(ids)) == 2
    (connection,) = {field(line, "connection") for line in lines}
    assert all(" status=200 " in line for line in lines)
    assert all(" account=" in line for line in lines)
    for request_id in ids:
        assert oplog_row(daemon, request_id)["status"] == 200
    (upgrade,) = await asyncio.to_thread(
        wait_until,
        lambda: [
            line
            for line in daemon.log().splitlines()
            if line.endswith(f" request_id={connection}") and " request method=GET " in line
        ],
    )
    assert " status=101 " in upgrade
    assert " turns=2 " in upgrade


def test_sigterm_closes_an_idle_socket_1001_and_exits_promptly(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    proc = start_daemon(short_tmp, fake)

    async def scenario() -> tuple[int | None, float]:
        async with connect(proc) as ws:
            started = time.monotonic()
            proc.proc.send_signal(signal.SIGTERM)
            code, reason = await closed(ws)
            assert reason == "server shutting down"
            return code, time.monotonic() - started

    try:
        code, elapsed = asyncio.run(scenario())
        assert code == 1001
        assert elapsed < 2.0
        assert proc.wait(10) == 0
        assert "stopped exit_code=0" in proc.log()
    finally:
        proc.kill()


def test_sigterm_lets_the_running_turn_finish_then_closes_1001(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    proc = start_daemon(short_tmp, fake)
    import_account(proc, fake.fake.issue_social_account())
    fake.fake.clear_scripts()
    fake.fake.enqueue(Script(reply=Reply(text="drained " * 10), chunk_size=4, delay_between_s=0.05))

    async def scenario() -> tuple[list[dict[str, Any]], int | None]:
        async with connect(proc) as ws:
            await send(ws, model=MODEL, input="long", store=False)
            assert (await receive(ws))["type"] == "response.created"
            proc.proc.send_signal(signal.SIGTERM)
            events = [{"type": "response.created", "sequence_number": 0, "response": {}}]
            events += await events_of_turn(ws)
            code, _ = await closed(ws)
            return events, code

    try:
        events, code = asyncio.run(scenario())
        assert events[-1]["type"] == "response.completed"
        assert output_text(events[-1]["response"]) == "drained " * 10
        assert code == 1001
        assert proc.wait(10) == 0
    finally:
        proc.kill()


def test_idle_sockets_close_and_old_ones_are_told_to_reconnect(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    proc = start_daemon(
        short_tmp,
        fake,
        {"KIROD_WEBSOCKET_IDLE_TIMEOUT_S": "1", "KIROD_WEBSOCKET_MAX_AGE_S": "1.5"},
    )
    import_account(proc, fake.fake.issue_social_account())
    slow = Script(reply=Reply(text="slow" * 10), chunk_size=4)

    async def idle() -> tuple[tuple[int | None, str], float]:
        async with connect(proc) as ws:
            assert ws.compress == 0  # permessage-deflate is declined by default
            started = time.monotonic()
            return await closed(ws), time.monotonic() - started

    async def aged_while_idle() -> tuple[str, dict[str, Any], tuple[int | None, str]]:
        fake.fake.enqueue(dataclasses.replace(slow, delay_between_s=0.12))  # ~1.2 s
        async with connect(proc) as ws:
            events = await turn(ws, model=MODEL, input="slow", store=False)
            return events[-1]["type"], await receive(ws), await closed(ws)

    async def aged_while_busy() -> tuple[str, dict[str, Any], tuple[int | None, str]]:
        fake.fake.enqueue(dataclasses.replace(slow, delay_between_s=0.2))  # ~2 s
        async with connect(proc) as ws:
            await send(ws, model=MODEL, input="slow", store=False)
            await send(ws, model=MODEL, input="next", store=False)
            events = await events_of_turn(ws)
            return events[-1]["type"], await receive(ws), await closed(ws)

    try:
        fake.fake.clear_scripts()
        fake.fake.clear_requests()
        (code, reason), elapsed = asyncio.run(idle())
        assert (code, reason) == (1000, "idle timeout")
        assert 0.8 < elapsed < 3.0
        for scenario in (aged_while_idle, aged_while_busy):
            last, told, (code, reason) = asyncio.run(scenario())
            assert last == "response.completed"  # the turn running at the limit finishes
            assert (told["type"], told["error"]["code"]) == ("error", LIMIT_CODE)
            assert (code, reason) == (1000, LIMIT_CODE)
        assert len(fake.fake.requests("chat")) == 2  # the waiting turn was never run
    finally:
        proc.kill()
