from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kirod.errors import StoreError
from kirod.storage.db import Database
from kirod.storage.keys import UNRESTRICTED, KeyScope, KeyStore, UsableKey, hash_key

KEY = "kirod-sk-0123456789abcdefghijklmnopqrstuv"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "kirod" / "kirod.db"


@pytest.fixture
async def db(db_path: Path) -> AsyncIterator[Database]:
    async with Database(db_path) as database:
        yield database


@pytest.fixture
def keys(db: Database) -> KeyStore:
    return KeyStore(db)


def test_hash_key_is_sha256_hex() -> None:
    assert hash_key(KEY) == hashlib.sha256(KEY.encode()).hexdigest()


async def test_insert_list_and_hashes(keys: KeyStore) -> None:
    record = await keys.insert("laptop", KEY)
    assert record.name == "laptop"
    assert record.prefix == KEY[:12]
    assert record.last_used_at is None
    assert await keys.list() == [record]
    assert await keys.usable() == [UsableKey(record.id, hash_key(KEY), UNRESTRICTED)]
    assert await keys.count() == 1


async def test_record_never_shows_key_or_hash(keys: KeyStore) -> None:
    record = await keys.insert("laptop", KEY)
    for text in (repr(record), str(record)):
        assert KEY not in text
        assert hash_key(KEY) not in text


async def test_short_key_prefix_is_at_most_half(keys: KeyStore) -> None:
    record = await keys.insert("short", "abcdefgh")
    assert record.prefix == "abcd"


async def test_duplicate_key_is_a_store_error(keys: KeyStore) -> None:
    await keys.insert("one", KEY)
    with pytest.raises(StoreError):
        await keys.insert("two", KEY)
    assert await keys.count() == 1


async def test_touch_records_use_at_most_once_per_interval(keys: KeyStore) -> None:
    record = await keys.insert("laptop", KEY)
    await keys.touch(record.id)
    [touched] = await keys.list()
    assert touched.last_used_at is not None
    await keys.touch(record.id)
    [again] = await keys.list()
    assert again.last_used_at == touched.last_used_at


async def test_revoke_hides_the_key(keys: KeyStore) -> None:
    revoked = await keys.insert("old", KEY)
    kept = await keys.insert("new", KEY + "-2")
    assert await keys.revoke(revoked.id) is True
    assert await keys.revoke(revoked.id) is False
    assert await keys.revoke("missing") is False
    assert await keys.list() == [kept]
    assert await keys.usable() == [UsableKey(kept.id, hash_key(KEY + "-2"), UNRESTRICTED)]
    assert await keys.count() == 1


async def test_scope_round_trips(keys: KeyStore) -> None:
    scope = KeyScope(models=("claude-haiku-*", "claude-sonnet-4-6"), rpm=30)
    record = await keys.insert("ci", KEY, scope)
    assert record.scope == scope
    assert await keys.list() == [record]
    assert await keys.usable() == [UsableKey(record.id, hash_key(KEY), scope)]
