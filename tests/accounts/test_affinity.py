"""Conversation affinity: bound account and Kiro conversation id, rotation on failover, restarts,
expiry and tenant isolation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kirod.accounts.affinity import AffinityMap
from kirod.accounts.strategy import Strategy
from kirod.storage.affinity import AffinityStore
from kirod.testing.fake_kiro import FakeKiro, Fault, Script
from tests.support.pool_env import SECRET, TENANT, Env, pool_env, request


def conversation_ids(fake: FakeKiro) -> list[str]:
    ids = []
    for chat in fake.requests("chat"):
        body: Any = chat.json
        ids.append(body["conversationState"]["conversationId"])
    return ids


async def turn(env: Env, key: str | None, tenant: str = TENANT) -> None:
    async with env.dispatcher.open(request(key=key), tenant=tenant) as dispatch:
        [batch async for batch in dispatch.events]


async def test_a_conversation_stays_on_its_account_and_conversation(tmp_path: Path) -> None:
    async with pool_env(tmp_path, strategy=Strategy.ROUND_ROBIN) as env:
        await env.add_accounts(3)
        for _ in range(3):
            await turn(env, "session-a")
            await turn(env, None)  # unbound requests keep taking turns meanwhile
        accounts = env.chats()
        ids = conversation_ids(env.fake)
        assert len({accounts[i] for i in (0, 2, 4)}) == 1
        assert len({ids[i] for i in (0, 2, 4)}) == 1
        assert len({ids[i] for i in (1, 3, 5)}) == 3  # no key: a fresh conversation each time
        assert len(set(accounts)) == 3


async def test_failover_rotates_account_and_conversation_together(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        first, second = await env.add_accounts(2)
        await turn(env, "session-a")
        env.fake.enqueue(Script(fault=Fault.THROTTLE_429), account_id=env.fake_ids[first.id])
        await turn(env, "session-a")
        await turn(env, "session-a")
        assert env.chats() == [first.id, first.id, second.id, second.id]
        ids = conversation_ids(env.fake)
        assert ids[0] == ids[1]  # the throttled attempt still belonged to the old binding
        assert ids[2] != ids[0]
        assert ids[3] == ids[2]


async def test_bindings_survive_a_restart_and_lapse_when_idle(tmp_path: Path) -> None:
    async with pool_env(tmp_path, strategy=Strategy.ROUND_ROBIN, affinity_ttl_s=600) as env:
        accounts = await env.add_accounts(3)
        await turn(env, None)
        await turn(env, None)
        await turn(env, "session-a")
        bound, fake, fake_ids = env.chats()[2], env.fake, env.fake_ids
        assert bound == accounts[2].id
    fake.clear_requests()
    async with pool_env(
        tmp_path, strategy=Strategy.ROUND_ROBIN, affinity_ttl_s=600, fake=fake
    ) as env:
        env.fake_ids = fake_ids
        await turn(env, None)  # round-robin starts over at the first account...
        await turn(env, "session-a")  # ...and would take the second, but the binding holds
        assert env.chats()[1] == bound
        env.clock.advance(601)
        assert await env.affinity.lookup(env.affinity.key(TENANT, "session-a")) is None
        assert await env.affinity.prune() == 1


async def test_the_hash_isolates_tenants_and_hides_the_key(tmp_path: Path) -> None:
    async with pool_env(tmp_path, strategy=Strategy.ROUND_ROBIN) as env:
        await env.add_accounts(2)
        await turn(env, "shared-session-id", tenant="key-1")
        await turn(env, "shared-session-id", tenant="key-2")
        ids = conversation_ids(env.fake)
        assert ids[0] != ids[1]
        assert env.chats()[0] != env.chats()[1]
        await env.affinity.flush()
        rows = await env.db.read("SELECT key_hash FROM affinity")
        assert len(rows) == 2
        data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("kirod.db"))
        assert b"shared-session-id" not in data
        other_install = AffinityMap(AffinityStore(env.db), b"o" * 32, ttl_s=60)
        assert other_install.key("key-1", "shared-session-id") != env.affinity.key(
            "key-1", "shared-session-id"
        )
        assert SECRET not in data


async def test_the_live_bindings_are_bounded_least_recently_used_out(tmp_path: Path) -> None:
    async with pool_env(tmp_path) as env:
        bounded = AffinityMap(AffinityStore(env.db), SECRET, ttl_s=600, max_live=3)
        assert await bounded.lookup("a") is None  # loads the (empty) live set
        for name in ("a", "b", "c"):
            bounded.bind(name, "account", f"conversation-{name}")
        bounded.bind("a", "account", "conversation-a")  # "a" used again: "b" is now the oldest
        bounded.bind("d", "account", "conversation-d")
        assert await bounded.lookup("b") is None
        for name in ("a", "c", "d"):
            binding = await bounded.lookup(name)
            assert binding is not None
            assert binding.conversation_id == f"conversation-{name}"
        await bounded.close()
