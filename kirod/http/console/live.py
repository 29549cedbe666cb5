"""Live updates: one server-sent-event stream per open overview, carrying what changed.

Every stream reads the shared snapshot (`Snapshots`), so ten open tabs cost the services what
one does. A stream's first message carries every field (something may have changed between the
page's rendering and the stream's start); after that it sends the fields that changed since its
last message, `reload` when accounts came or went, and a comment as a heartbeat. It ends after
`MAX_STREAM_S` (the browser's EventSource reconnects on its own) or when the daemon stops.
"""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web

from kirod.errors import ControlError
from kirod.http.console.guard import SESSION
from kirod.http.console.overview import Snapshots
from kirod.http.console.sessions import MAX_STREAMS_PER_SESSION

UPDATE_EVERY_S = 2.0
HEARTBEAT_S = 15.0
MAX_STREAM_S = 600.0
STOPPING = web.AppKey("console_stopping", asyncio.Event)
SNAPSHOTS = web.AppKey("console_snapshots", Snapshots)


def _message(event: str, data: object) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def _wait(stopping: asyncio.Event, seconds: float) -> bool:
    """Sleep `seconds`; True when the daemon began to stop meanwhile."""
    try:
        await asyncio.wait_for(stopping.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def stream(request: web.Request) -> web.StreamResponse:
    session = request[SESSION]
    if session.streams >= MAX_STREAMS_PER_SESSION:
        raise ControlError(429, "too_many_streams", "close another console tab first")
    snapshots, stopping = request.app[SNAPSHOTS], request.app[STOPPING]
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    session.streams += 1
    try:
        await response.prepare(request)
        # First everything: the page was rendered a moment before this stream began, and a
        # change in between would otherwise never reach it.
        first = await snapshots.get()
        sent, accounts = first.fields(), first.account_ids
        await response.write(_message("fields", sent))
        ends = time.monotonic() + MAX_STREAM_S
        quiet_since = time.monotonic()
        while time.monotonic() < ends and not await _wait(stopping, UPDATE_EVERY_S):
            overview = await snapshots.get()
            if overview.account_ids != accounts:
                await response.write(_message("reload", {}))
                break
            fields = overview.fields()
            changed = {key: value for key, value in fields.items() if sent.get(key) != value}
            if changed:
                await response.write(_message("fields", changed))
                sent, quiet_since = fields, time.monotonic()
            elif time.monotonic() - quiet_since >= HEARTBEAT_S:
                await response.write(b": heartbeat\n\n")
                quiet_since = time.monotonic()
    except ConnectionResetError:
        return response  # the tab closed; EventSource's reconnect, if any, opens a new stream
    finally:
        session.streams -= 1
    return response
