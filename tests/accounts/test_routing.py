"""Routing by catalog through the dispatcher: a request is leased only on accounts whose model
catalog lists its model (accounts not read yet stay eligible unless their plan rules it out), a
model no account offers is the 404 before any lease, and `/ready`'s catalog verdict."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, cast

import pytest

from kirod.accounts.model_directory import (
    CATALOG_TTL_S,
    GATED_CATALOG_TTL_S,
    STATIC_CATALOG_MAX_AGE_S,
    CatalogCache,
    ModelDirectory,
)
from kirod.accounts.tokens import TokenKeeper
from kirod.canonical.catalog import STATIC_CATALOG, STATIC_CATALOG_AS_OF
from kirod.canonical.resolution import STRICT, ModelPolicy
from kirod.drift import Drift
from kirod.errors import ApiError, ErrorKind
from kirod.storage.accounts import AccountRecord, AccountStore
from kirod.tasks import TaskOwner
from kirod.testing.fake_kiro.catalog import Model
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import UpstreamError
from kirod.upstream.secrets import Credentials
from tests.support.pool_env import pool_env, request

OPUS = "claude-opus-4-6"


async def test_a_model_goes_only_to_accounts_whose_catalog_lists_it(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        free = await env.add_account(subscription="KIRO FREE")  # its catalog lists no Opus
        pro = await env.add_account()
        await env.maintenance.run_pass()  # reads each account's catalog and usage
        env.fake.clear_requests()
        await env.complete(request(model=OPUS))
        assert env.chats() == [pro.id]  # no lease, no upstream call on the free account
        [row] = await env.oplog.entries()
        assert [(a.account_id, a.outcome) for a in row.attempts] == [(pro.id, "ok")]
        env.fake.clear_requests()
        await env.complete()  # sonnet: both list it, sticky keeps the first chosen
        assert env.chats() == [pro.id]  # sticky keeps the account chosen last
        assert free.id != pro.id


async def test_a_free_plan_account_not_read_yet_is_skipped_for_opus(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        free = await env.add_account(subscription="KIRO FREE")
        pro = await env.add_account()
        await env.probes.probe(free.id)  # its usage (the plan) is known, its catalog is not
        env.fake.clear_requests()
        await env.complete(request(model=OPUS))
        assert env.chats() == [pro.id]
        [row] = await env.oplog.entries()
        assert [a.account_id for a in row.attempts] == [pro.id]
        assert env.fake.requests("models")  # only the serving account's catalog was read
        assert {env.kirod_id(r.account_id) for r in env.fake.requests("models")} == {pro.id}


async def test_a_cold_start_still_finds_the_account_that_has_the_model(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        free = await env.add_account(subscription="KIRO FREE")  # nothing known about it yet
        pro = await env.add_account()
        await env.complete(request(model=OPUS))
        assert env.chats() == [pro.id]
        [row] = await env.oplog.entries()
        assert [(a.account_id, a.outcome) for a in row.attempts] == [
            (free.id, "model_not_listed"),  # its catalog, read on first use, lacks Opus
            (pro.id, "ok"),
        ]
        env.fake.clear_requests()
        await env.complete(request(model=OPUS))  # from now on routed past it
        assert env.chats() == [pro.id]
        assert [a.account_id for a in (await env.oplog.entries())[0].attempts] == [pro.id]


async def test_a_model_no_account_offers_is_a_404_listing_what_is_available(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path) as env:
        await env.add_accounts(2, subscription="KIRO FREE")
        await env.maintenance.run_pass()
        env.fake.clear_requests()
        with pytest.raises(ApiError) as error:
            await env.complete(request(model=OPUS))
        assert (error.value.kind, error.value.code) == (ErrorKind.NOT_FOUND, "model_not_found")
        assert "claude-sonnet-4-6" in error.value.message
        assert "opus" not in error.value.message.split("include", 1)[1]
        assert env.chats() == []
        [row] = await env.oplog.entries()
        assert row.attempts == ()


class FlakyModels:
    """A `KiroClient` stand-in whose ListAvailableModels fails while `failing` is set."""

    def __init__(self) -> None:
        self.failing = True
        self.drift = Drift()

    async def list_models(self, account: UpstreamAccount) -> list[dict[str, Any]]:
        if self.failing:
            raise UpstreamError("ListAvailableModels answered 500")
        return [{"models": [{"modelId": "claude-sonnet-4.6"}]}]


async def test_the_catalog_is_unavailable_only_when_none_was_read_and_static_is_stale() -> None:
    client = FlakyModels()
    account = UpstreamAccount(
        "acct", "us-east-1", "us-east-1", "social", None, Credentials("a", "r", time.time() + 600)
    )
    async with TaskOwner("test") as tasks:
        catalogs = CatalogCache(cast(KiroClient, client), tasks)
        stale = STATIC_CATALOG_AS_OF + STATIC_CATALOG_MAX_AGE_S + 1
        assert not catalogs.unavailable()  # nothing asked yet
        assert await catalogs.get(account) is STATIC_CATALOG  # the fallback stands in
        assert catalogs.unavailable()
        models = ModelDirectory(cast(AccountStore, None), catalogs, cast(TokenKeeper, None), STRICT)
        assert models.catalog_unavailable(now=stale)
        assert not models.catalog_unavailable(now=STATIC_CATALOG_AS_OF + 86400)
        assert not models.catalog_unavailable()  # the static list is recent enough today
        client.failing = False
        catalog = await catalogs.get(account)
        assert [info.kiro_id for info in catalog] == ["claude-sonnet-4.6"]
        assert not models.catalog_unavailable(now=stale)
        # An INVALID_MODEL_ID drops the model and marks the catalog for a re-read.
        catalogs.refused("acct", "claude-sonnet-4.6")
        cached = catalogs.cached("acct")
        assert cached is not None
        assert cached.get("claude-sonnet-4.6") is None
        assert (await catalogs.get(account)).get("claude-sonnet-4.6") is not None


class GatedModels:
    """A `KiroClient` stand-in whose ListAvailableModels lists Claude only when not `gated`
    (Kiro's egress gate, docs/KIRO-PROTOCOL.md §2.7); `reads` counts the calls."""

    def __init__(self) -> None:
        self.gated = True
        self.reads = 0
        self.drift = Drift()

    async def list_models(self, account: UpstreamAccount) -> list[dict[str, Any]]:
        self.reads += 1
        models = [{"modelId": "gpt-5.6-sol"}]
        if not self.gated:
            models.append({"modelId": "claude-sonnet-4.6"})
        return [{"models": models}]


async def test_a_catalog_without_claude_is_read_again_through_a_new_proxy() -> None:
    client = GatedModels()
    account = UpstreamAccount(
        "acct", "us-east-1", "us-east-1", "social", None, Credentials("a", "r", time.time() + 600)
    )
    async with TaskOwner("test") as tasks:
        catalogs = CatalogCache(cast(KiroClient, client), tasks)
        gated = await catalogs.get(account)
        assert [info.kiro_id for info in gated] == ["gpt-5.6-sol"]
        assert await catalogs.get(account) is gated  # kept while its age lasts
        assert client.reads == 1
        assert not catalogs.due("acct", None)
        assert catalogs.due("acct", "socks5://proxy.example:1080")  # another way out
        client.gated = False
        proxied = dataclasses.replace(account, proxy_url="socks5://proxy.example:1080")
        opened = await catalogs.get(proxied)
        assert client.reads == 2
        assert opened.get("claude-sonnet-4.6") is not None
        assert not catalogs.due("acct", "socks5://proxy.example:1080")


def record(account_id: str) -> AccountRecord:
    return AccountRecord(
        account_id, "", "social", "us-east-1", "us-east-1", None, {}, "active", None, None,
        None, None, None, 1, 0.0, 0.0,
    )  # fmt: skip


async def test_a_catalog_without_claude_is_trusted_minutes_then_read_again() -> None:
    """The region's gate lifts (the network changed, no proxy set): within
    GATED_CATALOG_TTL_S a Claude name routes to the account again, whose attempt reads the
    catalog first (docs/KIRO-PROTOCOL.md §2.7)."""
    client = GatedModels()
    now = [0.0]
    account = UpstreamAccount(
        "acct", "us-east-1", "us-east-1", "social", None, Credentials("a", "r", time.time() + 600)
    )
    records = [record("acct")]
    async with TaskOwner("test") as tasks:
        catalogs = CatalogCache(cast(KiroClient, client), tasks, clock=lambda: now[0])
        models = ModelDirectory(cast(AccountStore, None), catalogs, cast(TokenKeeper, None), STRICT)
        await catalogs.get(account)
        with pytest.raises(ApiError) as gated:
            models.route("claude-sonnet-4-6", records)
        assert "set-proxy" in gated.value.message
        client.gated = False  # the gate lifted; the cached catalog does not know yet
        now[0] = GATED_CATALOG_TTL_S - 1
        with pytest.raises(ApiError):
            models.route("claude-sonnet-4-6", records)
        assert client.reads == 1
        now[0] = GATED_CATALOG_TTL_S + 1
        routing = models.route("claude-sonnet-4-6", records)  # the kept routing is made again
        assert routing.kiro_id == "claude-sonnet-4.6"
        assert routing.offers is None or routing.offers(records[0])
        assert (await catalogs.get(account)).get("claude-sonnet-4.6") is not None
        assert client.reads == 2
        # A catalog that lists Claude is trusted the full hour.
        now[0] += GATED_CATALOG_TTL_S * 2
        assert not catalogs.due("acct", None)
        now[0] += CATALOG_TTL_S
        assert catalogs.due("acct", None)


async def test_a_model_only_kiro_knows_is_found_on_a_cold_start(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        env.fake.set_model(Model("claude-opus-9", "Claude Opus 9", 1_000_000, 64_000, 2.2))
        [account] = await env.add_accounts(1)  # not read yet; the static list lacks the model
        await env.complete(request(model="claude-opus-9"))
        assert env.chats() == [account.id]
        sent = env.fake.requests("chat")[-1].json["conversationState"]["currentMessage"]
        assert sent["userInputMessage"]["modelId"] == "claude-opus-9"
        env.fake.clear_requests()
        await env.complete(request(model="claude-opus-9"))  # now from the cached catalog
        assert env.chats() == [account.id]
        with pytest.raises(ApiError) as error:  # every catalog read: unknown is a 404 at once
            await env.complete(request(model="claude-opus-10"))
        assert error.value.code == "model_not_found"
        assert (await env.oplog.entries())[0].attempts == ()


def sent_models(records: list[Any]) -> list[str]:
    return [
        record.json["conversationState"]["currentMessage"]["userInputMessage"]["modelId"]
        for record in records
    ]


async def test_a_static_model_kiro_refuses_is_left_out_while_no_catalog_can_be_read(
    tmp_path: Path,
) -> None:
    """One account whose ListAvailableModels fails: `opus` goes by the static list to its newest
    Opus, which this account's Kiro refuses; the same request is then served by the next Opus on
    the same account, and later requests go there at once, not to the refused one again."""
    async with pool_env(tmp_path, policy=ModelPolicy(fallback="family")) as env:
        env.fake.oversize("models", 20 * 1024 * 1024)  # past kirod's bound: the read fails
        newest = "claude-opus-5.5"  # the static list's newest Opus, which this account lacks
        assert STATIC_CATALOG.get(newest) is not None
        # Today's Kiro lists it by default; this account's Kiro does not offer it.
        env.fake.set_models(m for m in env.fake.models() if m.model_id != newest)
        assert newest not in {model.model_id for model in env.fake.models()}
        # The static list's next Opus, which this account has.
        env.fake.set_model(Model("claude-opus-5", "Claude Opus 5", 1_000_000, 128_000, 2.2))
        [account] = await env.add_accounts(1)
        await env.complete(request(model="opus"))
        sent = sent_models(env.fake.requests("chat"))
        assert sent == [newest, "claude-opus-5"]
        [row] = await env.oplog.entries()
        assert [(a.account_id, a.outcome) for a in row.attempts] == [
            (account.id, "invalid_model"),
            (account.id, "ok"),
        ]
        env.fake.clear_requests()
        await env.complete(request(model="opus"))
        assert sent_models(env.fake.requests("chat")) == [sent[1]]


async def test_a_routing_is_kept_only_while_the_records_and_catalogs_stay_the_same(
    tmp_path: Path,
) -> None:
    async with pool_env(tmp_path) as env:
        first, second = await env.add_accounts(2)
        await env.maintenance.run_pass()  # both catalogs read: both list Opus
        records = await env.pool.current()
        routing = env.models.route(OPUS, records)
        assert routing.offers is None  # every account offers it
        assert env.models.route(OPUS, await env.pool.current()) is routing
        # A catalog changes: Kiro refused the model on the first account.
        env.models.refused(first.id, routing.kiro_id or "")
        narrowed = env.models.route(OPUS, await env.pool.current())
        assert narrowed.offers is not None
        assert [narrowed.offers(r) for r in records] == [r.id == second.id for r in records]
        # A record changes (a row written, so the pool holds a new object for it).
        await env.store.set_usage(second.id, {"subscription": "KIRO PRO"})
        assert env.models.route(OPUS, await env.pool.current()) is not narrowed
        # Another name has its own routing.
        assert env.models.route("claude-sonnet-4-6", records).kiro_id != routing.kiro_id


async def test_refused_request_fields_are_remembered_per_account_and_model(
    tmp_path: Path,
) -> None:
    """docs/KIRO-PROTOCOL.md §2.6: a refusal of the root fields holds for that account's model
    only; other models there and other accounts still take them."""
    async with pool_env(tmp_path) as env:
        first, second = await env.add_accounts(2)
        assert env.models.takes_request_fields(first.id, "claude-opus-4.8")
        env.models.request_fields_refused(first.id, "claude-opus-4.8")
        env.models.request_fields_refused(first.id, "claude-opus-4.8")  # logged once
        assert not env.models.takes_request_fields(first.id, "claude-opus-4.8")
        assert env.models.takes_request_fields(first.id, "claude-opus-4.7")
        assert env.models.takes_request_fields(second.id, "claude-opus-4.8")
