"""What the exchange and truncation tests share: the model route they ask through, a request, the
batches an exchange yields, and an opener of one exchange per part of a turn (the `kiro` fixture,
in conftest.py, is the fake and a client of it with that route)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from kirod.canonical.catalog import catalog_from_list_available_models
from kirod.canonical.events import CanonicalEvent
from kirod.canonical.request import (
    CanonicalRequest,
    ClientProtocol,
    Message,
    Role,
    TextBlock,
    ToolSpec,
)
from kirod.canonical.resolution import resolve_model
from kirod.testing.fake_kiro import DEFAULT_MODELS
from kirod.upstream.client import KiroClient
from kirod.upstream.exchange import Route, open_exchange
from kirod.upstream.turn import OpenPart

CATALOG = catalog_from_list_available_models([{"models": [m.to_json() for m in DEFAULT_MODELS]}])
SONNET = resolve_model("claude-sonnet-4-5", CATALOG)
CONVERSATION = "c0ffee00-0000-4000-8000-000000000001"


def request(*messages: Message, tools: tuple[ToolSpec, ...] = ()) -> CanonicalRequest:
    return CanonicalRequest(
        request_id="req_test",
        protocol=ClientProtocol.ANTHROPIC_MESSAGES,
        model="claude-sonnet-4-5",
        messages=messages or (Message(Role.USER, (TextBlock("hello"),)),),
        tools=tools,
    )


async def read(batches: AsyncIterator[list[CanonicalEvent]]) -> list[list[CanonicalEvent]]:
    return [batch async for batch in batches]


def opener(client: KiroClient, route: Route) -> OpenPart:
    return lambda following: open_exchange(client, following, route)
