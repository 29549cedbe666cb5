"""Responses over WebSocket as the tests drive it (test_responses_websocket.py, and prompt
caching over a WebSocket): aiohttp's WebSocket client, every frame checked as an event the openai
SDK knows and every turn through the SDK's own stream accumulator."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pydantic
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses.responses_server_event import ResponsesServerEvent

from kirod.testing.daemon import DaemonProcess

BETA = {"OpenAI-Beta": "responses_websockets=2026-02-06"}
TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
SERVER_EVENT: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponsesServerEvent)


@contextlib.asynccontextmanager
async def connect(
    proc: DaemonProcess, key: str | None = None, **options: Any
) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """A WebSocket to /v1/responses, offering permessage-deflate as Codex does."""
    headers = {"Authorization": f"Bearer {key or proc.api_key}", **BETA}
    options.setdefault("compress", 15)
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session,
        session.ws_connect(proc.base_url + "/v1/responses", headers=headers, **options) as ws,
    ):
        yield ws


async def send(ws: aiohttp.ClientWebSocketResponse, **body: Any) -> None:
    await ws.send_str(json.dumps({"type": "response.create", **body}))


async def receive(ws: aiohttp.ClientWebSocketResponse, timeout_s: float = 20.0) -> dict[str, Any]:
    message = await ws.receive(timeout=timeout_s)
    assert message.type is aiohttp.WSMsgType.TEXT, message
    event: dict[str, Any] = json.loads(message.data)
    SERVER_EVENT.validate_python(event)  # every frame is an event the openai SDK knows
    return event


async def events_of_turn(ws: aiohttp.ClientWebSocketResponse) -> list[dict[str, Any]]:
    """Frames up to the turn's terminal event, or its one error frame."""
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(30):
        while True:
            event = await receive(ws)
            events.append(event)
            if event["type"] in TERMINAL or (event["type"] == "error" and "status" in event):
                return events


async def turn(ws: aiohttp.ClientWebSocketResponse, **body: Any) -> list[dict[str, Any]]:
    await send(ws, **body)
    return await events_of_turn(ws)


def final(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The last event's response, after the openai SDK's accumulator accepted every event."""
    state: ResponseStreamState[Any] = ResponseStreamState(
        input_tools=openai.omit, text_format=openai.omit
    )
    for event in events:
        state.handle_event(SERVER_EVENT.validate_python(event))
    numbers = [event["sequence_number"] for event in events]
    assert numbers == list(range(len(events)))
    assert events[0]["type"] == "response.created"
    assert events[-1]["type"] in TERMINAL
    response: dict[str, Any] = events[-1]["response"]
    return response
