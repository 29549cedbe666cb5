"""The account registry: removing an account closes its upstream connections, seen from the
server's side of the socket, and leaves other accounts' connections open."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web

from kirod.accounts.account import to_upstream
from kirod.control.registry import AccountRegistry
from kirod.credentials.importers import ImportLimits
from kirod.errors import ControlNotFound
from kirod.upstream.client import ClientOptions, Endpoints, KiroClient
from tests.support.pool_env import Gate, pool_env


class Watch(Gate):
    """Passes every request through, remembering the connection each account's came on."""

    def __init__(self) -> None:
        super().__init__("/-", endpoint="kiro")
        self.connections: dict[str, web.RequestHandler] = {}

    async def handle(self, request: web.Request) -> web.Response:
        assert request.protocol is not None
        self.connections[request.headers["Authorization"]] = request.protocol
        return await super().handle(request)


async def closed(protocol: web.RequestHandler) -> bool:
    for _ in range(100):
        if protocol.transport is None:
            return True
        await asyncio.sleep(0.02)
    return False


async def test_removing_an_account_closes_its_upstream_connections(tmp_path: Path) -> None:
    watch = Watch()
    async with pool_env(tmp_path, gate=watch) as env:
        endpoints = Endpoints(kiro=watch.url, auth=watch.url, oidc=watch.url)
        # Kept alive, so that a connection stays open until its account is forgotten.
        async with KiroClient(endpoints, ClientOptions(keep_alive=True)) as client:
            registry = AccountRegistry(env.pool, env.maintenance, client, ImportLimits())
            removed, kept = await env.add_accounts(2)
            for record in (removed, kept):
                await client.usage_limits(to_upstream(record))
            by_account = dict(zip((removed.id, kept.id), watch.connections.values(), strict=True))
            assert all(connection.transport for connection in by_account.values())
            await registry.remove(removed.id)
            assert await closed(by_account[removed.id])
            assert by_account[kept.id].transport is not None
            assert [account["id"] for account in await registry.all()] == [kept.id]
            with pytest.raises(ControlNotFound):
                await registry.remove(removed.id)
