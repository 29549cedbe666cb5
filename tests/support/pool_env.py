"""The account layer in-process for tests: real SQLite, real KiroClient, the fake Kiro on loopback.

Everything is wired as the daemon wires it, except that the clock is a `Clock` the test moves, so
cool-downs and usage windows pass without sleeping. Imported by the tests of accounts/, dispatch/
and control/.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from kirod.accounts.affinity import AffinityMap
from kirod.accounts.maintenance import Maintenance, RetentionPolicy
from kirod.accounts.model_directory import CatalogCache, ModelDirectory
from kirod.accounts.pool import AccountPool
from kirod.accounts.probes import UsageProbes
from kirod.accounts.profiles import ProfileFinder
from kirod.accounts.strategy import Strategy
from kirod.accounts.tokens import TokenKeeper
from kirod.canonical.catalog import ModelInfo
from kirod.canonical.events import CanonicalEvent
from kirod.canonical.request import (
    CanonicalRequest,
    ClientProtocol,
    Message,
    Role,
    Sampling,
    TextBlock,
)
from kirod.canonical.resolution import STRICT, ModelPolicy
from kirod.dispatch.cache import ResponseCache
from kirod.dispatch.extensions import NONE, Extensions
from kirod.dispatch.pipeline import Dispatch, Dispatcher, DispatchPolicy
from kirod.storage.accounts import AccountRecord, AccountStore
from kirod.storage.affinity import AffinityStore
from kirod.storage.db import Database
from kirod.storage.oplog import OpLog
from kirod.tasks import TaskOwner
from kirod.testing.fake_kiro import FakeKiro, TokenSet, running_fake
from kirod.upstream.client import ClientOptions, Endpoints, KiroClient
from kirod.upstream.secrets import Credentials

MODEL = "claude-sonnet-4-6"
TENANT = "key-1"
SECRET = b"s" * 32


class Clock:
    """Wall time that the test can move forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def request(
    text: str = "hi",
    *,
    key: str | None = None,
    stream: bool = True,
    model: str = MODEL,
    temperature: float | None = None,
) -> CanonicalRequest:
    return CanonicalRequest(
        request_id=f"req_{uuid.uuid4().hex[:12]}",
        protocol=ClientProtocol.ANTHROPIC_MESSAGES,
        model=model,
        messages=(Message(Role.USER, (TextBlock(text),)),),
        sampling=Sampling(temperature=temperature),
        affinity_key=key,
        stream=stream,
    )


@dataclass
class Env:
    fake: FakeKiro
    db: Database
    store: AccountStore
    pool: AccountPool
    keeper: TokenKeeper
    probes: UsageProbes
    affinity: AffinityMap
    oplog: OpLog
    dispatcher: Dispatcher
    maintenance: Maintenance
    models: ModelDirectory
    clock: Clock
    fake_ids: dict[str, str] = field(default_factory=dict)  # kirod account id -> fake account id

    async def add_account(
        self, *, subscription: str = "KIRO PRO", expires_in_s: float | None = None
    ) -> AccountRecord:
        tokens = self.fake.issue_social_account(subscription=subscription)
        record = await self.store.insert(
            label=f"account {len(self.fake_ids) + 1}",
            auth_kind="social",
            region="us-east-1",
            auth_region="us-east-1",
            credentials=credentials(tokens, expires_in_s).to_json(),
            profile_arn=tokens.profile_arn,
        )
        self.fake_ids[record.id] = tokens.account_id
        return record

    async def add_accounts(self, count: int, **kwargs: Any) -> list[AccountRecord]:
        return [await self.add_account(**kwargs) for _ in range(count)]

    def kirod_id(self, fake_id: str | None) -> str:
        return next(k for k, v in self.fake_ids.items() if v == fake_id)

    def chats(self) -> list[str | None]:
        """The kirod account of each chat the fake received, in order (None: token refused)."""
        return [
            self.kirod_id(r.account_id) if r.account_id else None
            for r in self.fake.requests("chat")
        ]

    async def state(self, account_id: str) -> AccountRecord:
        record = await self.store.get(account_id)
        assert record is not None
        return record

    async def complete(self, req: CanonicalRequest | None = None) -> list[CanonicalEvent]:
        async with self.dispatcher.open(req or request(), tenant=TENANT) as dispatch:
            return [event async for batch in dispatch.events for event in batch]

    async def in_flight(self) -> dict[str, int]:
        status = await self.pool.status()
        return {account.id: account.in_flight for account in status.accounts}


def credentials(tokens: TokenSet, expires_in_s: float | None = None) -> Credentials:
    expires_at = tokens.expires_at if expires_in_s is None else time.time() + expires_in_s
    return Credentials(
        access_token=tokens.access_token,
        refresh_token=tokens.refresh_token,
        expires_at=expires_at,
    )


class Gate:
    """A loopback server in front of the fake's `endpoint` ("auth" or "kiro") that holds each
    request to `path` until the test releases it, then forwards it. Other requests pass straight
    through; answers are read as JSON, so a kiro gate serves no chats."""

    def __init__(self, path: str, endpoint: str = "auth") -> None:
        self.path = path
        self.endpoint = endpoint
        self.forward_to = ""
        self.url = ""
        self.arrived = asyncio.Queue[asyncio.Event]()
        self.answers: list[Any] = []

    async def handle(self, request: web.Request) -> web.Response:
        if request.path == self.path:
            release = asyncio.Event()
            await self.arrived.put(release)
            await release.wait()
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                request.method,
                f"{self.forward_to}{request.rel_url}",
                headers={k: v for k, v in request.headers.items() if k.lower() != "host"},
                data=await request.read(),
            ) as answer,
        ):
            body = await answer.json()
            if request.path == self.path:
                self.answers.append(body)
            return web.json_response(body, status=answer.status)

    async def next(self) -> asyncio.Event:
        return await asyncio.wait_for(self.arrived.get(), 5)


@contextlib.asynccontextmanager
async def serving(gate: Gate) -> AsyncIterator[Gate]:
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", gate.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        gate.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        yield gate
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def pool_env(
    tmp_path: Path,
    *,
    strategy: Strategy = Strategy.STICKY,
    concurrency: int = 10,
    queue_timeout_s: float = 5.0,
    max_attempts: int = 3,
    affinity_ttl_s: float = 3600.0,
    fake: FakeKiro | None = None,
    gate: Gate | None = None,
    settings: Mapping[str, Any] | None = None,
    extensions: Extensions = NONE,
    authorize: Callable[[str, ModelInfo], None] | None = None,
    cache: Callable[[Database], ResponseCache] | None = None,
    policy: ModelPolicy = STRICT,
) -> AsyncIterator[Env]:
    """The account layer over a fresh database; a `gate` stands in front of the fake."""
    extra = dict(settings or {})
    clock = Clock()
    async with contextlib.AsyncExitStack() as stack:
        service, base_url = await stack.enter_async_context(running_fake(fake))
        kiro = auth = base_url
        if gate is not None:
            await stack.enter_async_context(serving(gate))
            gate.forward_to = base_url
            if gate.endpoint == "kiro":
                kiro = gate.url
            else:
                auth = gate.url
        db = await stack.enter_async_context(Database(tmp_path / "kirod.db"))
        client = await stack.enter_async_context(
            KiroClient(
                Endpoints(kiro=kiro, auth=auth, oidc=base_url),
                ClientOptions(idle_timeout_s=5.0, request_timeout_s=30.0),
            )
        )
        tasks = await stack.enter_async_context(TaskOwner("test"))
        store = AccountStore(db)
        pool = AccountPool(
            store,
            concurrency=concurrency,
            strategy=strategy,
            queue_timeout_s=queue_timeout_s,
            clock=clock,
        )
        keeper = TokenKeeper(store, client, tasks)
        probes = UsageProbes(pool, client, keeper, tasks)
        affinity = AffinityMap(AffinityStore(db), SECRET, ttl_s=affinity_ttl_s, clock=clock)
        stack.push_async_callback(affinity.close)
        oplog = OpLog(db)
        stack.push_async_callback(oplog.close)
        models = ModelDirectory(store, CatalogCache(client, tasks), keeper, policy)
        finder = ProfileFinder(store, client, keeper, clock=clock)
        responses = cache(db) if cache is not None else None
        if responses is not None:
            stack.push_async_callback(responses.close)
        dispatcher = Dispatcher(
            pool,
            client,
            keeper,
            models,
            affinity,
            probes,
            finder,
            oplog,
            policy=DispatchPolicy(max_account_attempts=max_attempts, branch_timeout_s=10.0),
            authorize=authorize,
            extensions=extensions,
            cache=responses,
        )
        maintenance = Maintenance(
            pool,
            keeper,
            probes,
            affinity,
            oplog,
            models,
            finder,
            tasks,
            interval_s=extra.get("interval_s", 60.0),
            usage_refresh_interval_s=extra.get("usage_refresh_interval_s", 600.0),
            refresh_window_s=600.0,
            retention=RetentionPolicy(
                extra.get("oplog_retention_s", 3600.0), extra.get("oplog_max_rows", 1000)
            ),
            pass_deadline_s=extra.get("pass_deadline_s", 10.0),
            clock=clock,
        )
        yield Env(
            fake=service,
            db=db,
            store=store,
            pool=pool,
            keeper=keeper,
            probes=probes,
            affinity=affinity,
            oplog=oplog,
            dispatcher=dispatcher,
            maintenance=maintenance,
            models=models,
            clock=clock,
        )


async def drain(dispatch: Dispatch) -> list[CanonicalEvent]:
    return [event async for batch in dispatch.events for event in batch]
