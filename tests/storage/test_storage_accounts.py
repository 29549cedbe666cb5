from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kirod.errors import GenerationConflict
from kirod.storage.accounts import AccountRecord, AccountState, AccountStore
from kirod.storage.db import Database

ACCESS = "aoaAAAAAccessTokenSecretValue"
REFRESH = "aorAAAAARefreshTokenSecretValue"
SECRET = "client-secret-value-123"


def credentials(suffix: str = "") -> dict[str, Any]:
    return {
        "access_token": ACCESS + suffix,
        "refresh_token": REFRESH + suffix,
        "expires_at": 1_900_000_000.0,
        "client_id": "client-id",
        "client_secret": SECRET,
    }


def on_disk(db_path: Path) -> bytes:
    """The database file and its -wal/-shm siblings, as one blob."""
    return b"".join(
        path.read_bytes() for path in db_path.parent.iterdir() if path.name.startswith("kirod.db")
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "kirod" / "kirod.db"


@pytest.fixture
async def db(db_path: Path) -> AsyncIterator[Database]:
    async with Database(db_path) as database:
        yield database


@pytest.fixture
def store(db: Database) -> AccountStore:
    return AccountStore(db)


async def add(store: AccountStore, label: str = "work", suffix: str = "") -> AccountRecord:
    return await store.insert(
        label=label,
        auth_kind="idc",
        region="us-east-1",
        auth_region="eu-west-1",
        credentials=credentials(suffix),
        profile_arn="arn:aws:codewhisperer:us-east-1:123:profile/X",
    )


async def test_insert_get_and_list(store: AccountStore) -> None:
    first = await add(store, "first")
    second = await add(store, "second")
    assert len(first.id) == 32
    assert first.status == "active"
    assert first.generation == 1
    assert first.credentials == credentials()
    assert first.auth_region == "eu-west-1"
    assert await store.get(first.id) == first
    assert await store.get("missing") is None
    assert [a.id for a in await store.list()] == [first.id, second.id]


async def test_reopen_keeps_accounts(db_path: Path) -> None:
    async with Database(db_path) as db:
        record = await add(AccountStore(db))
    async with Database(db_path) as db:
        assert await AccountStore(db).get(record.id) == record


async def test_records_never_show_secrets(store: AccountStore) -> None:
    record = await add(store)
    redacted = record.redacted()
    for text in (repr(record), str(record), f"{record}", json.dumps(redacted)):
        assert ACCESS not in text
        assert REFRESH not in text
        assert SECRET not in text
    assert "credentials" not in redacted
    assert redacted["expires_at"] == 1_900_000_000.0
    assert redacted["id"] == record.id
    assert redacted["generation"] == 1


async def test_update_credentials_is_compare_and_swap(store: AccountStore) -> None:
    record = await add(store)
    updated = await store.update_credentials(record.id, credentials("-2"), record.generation)
    assert updated.generation == record.generation + 1
    assert updated.credentials["access_token"] == ACCESS + "-2"
    with pytest.raises(GenerationConflict):
        await store.update_credentials(record.id, credentials("-stale"), record.generation)
    current = await store.get(record.id)
    assert current is not None
    assert current.credentials["access_token"] == ACCESS + "-2"
    with pytest.raises(GenerationConflict):
        await store.update_credentials("missing", credentials(), 1)


async def test_concurrent_refreshes_have_one_winner(store: AccountStore) -> None:
    record = await add(store)
    results = await asyncio.gather(
        *(
            store.update_credentials(record.id, credentials(f"-{n}"), record.generation)
            for n in range(5)
        ),
        return_exceptions=True,
    )
    winners = [r for r in results if isinstance(r, AccountRecord)]
    assert len(winners) == 1
    assert sum(isinstance(r, GenerationConflict) for r in results) == 4
    assert await store.get(record.id) == winners[0]


async def test_update_state_keeps_since_until_the_status_changes(store: AccountStore) -> None:
    record = await add(store)
    cooling = await store.update_state(
        record.id,
        lambda r: AccountState("cooling_down", "rate limited", until=123.0, failures=1),
    )
    assert cooling is not None
    assert (cooling.status, cooling.status_reason, cooling.status_until, cooling.failures) == (
        "cooling_down",
        "rate limited",
        123.0,
        1,
    )
    assert cooling.status_since is not None
    again = await store.update_state(
        record.id, lambda r: dataclasses.replace(r.state, reason="still limited", until=456.0)
    )
    assert again is not None
    assert again.status_since == cooling.status_since
    assert again.status_until == 456.0
    active = await store.update_state(record.id, lambda r: AccountState())
    assert active is not None
    assert active.status_since is not None
    assert active.status_since >= cooling.status_since
    assert active.status_until is None
    assert active.generation == record.generation  # state is not credentials
    assert await store.update_state("missing", lambda r: AccountState("disabled")) is None
    with pytest.raises(ValueError, match="unknown account status"):
        await store.update_state(record.id, lambda r: AccountState("bogus"))  # type: ignore[arg-type]


async def test_update_state_decides_on_the_row_as_stored(store: AccountStore) -> None:
    record = await add(store)
    seen: list[int] = []

    def decide(latest: AccountRecord) -> AccountState | None:
        seen.append(latest.generation)
        return None

    await store.update_credentials(record.id, credentials("-2"), record.generation)
    revision = store.revision
    unchanged = await store.update_state(record.id, decide)
    assert seen == [record.generation + 1]
    assert unchanged is not None
    assert unchanged.status == "active"
    assert store.revision == revision  # nothing written: the pool need not re-read
    await store.update_state(record.id, lambda r: AccountState("disabled"))
    assert store.revision == revision + 1
    await store.remove(record.id)
    assert await store.update_state(record.id, lambda r: AccountState("active")) is None


async def test_set_usage(store: AccountStore) -> None:
    record = await add(store)
    usage = {"used": 12, "limit": 50, "resets_at": 1_900_000_000}
    updated = await store.set_usage(record.id, usage)
    assert updated is not None
    assert updated.usage == usage
    assert updated.usage_at is not None
    assert updated.redacted()["usage"] == usage
    assert await store.set_usage("missing", usage) is None


async def test_count_active(store: AccountStore) -> None:
    first = await add(store)
    second = await add(store)
    await add(store)
    await store.update_state(first.id, lambda r: AccountState("exhausted", "monthly limit"))
    await store.remove(second.id)
    assert await store.count_active() == 1


async def test_remove_tombstones_and_wipes_credentials(
    store: AccountStore, db: Database, db_path: Path
) -> None:
    record = await add(store, "gone", "-gone")
    keep = await add(store, "keep", "-kept")
    assert await store.remove(record.id) is True
    assert await store.get(record.id) is None
    assert [a.id for a in await store.list()] == [keep.id]
    row = await db.read_one(
        "SELECT credentials, removed_at FROM accounts WHERE id = ?", (record.id,)
    )
    assert row is not None
    assert row["credentials"] == "{}"
    assert row["removed_at"] is not None
    assert await store.remove(record.id) is False
    with pytest.raises(GenerationConflict):
        await store.update_credentials(record.id, credentials(), record.generation)

    data = on_disk(db_path)
    assert (ACCESS + "-gone").encode() not in data
    assert (REFRESH + "-gone").encode() not in data
    assert (ACCESS + "-kept").encode() in data


@pytest.mark.parametrize(
    ("label", "stored"),
    [
        ("me@example.com (Builder ID)", "me@example.com (Builder ID)"),
        ("evil\x1b]0;pwned\x07\r\nlabel", "evil ]0;pwned label"),
        ("x" * 5000, "x" * 128),
        ("\x00\x01", "account"),
    ],
)
async def test_labels_are_stored_printable_and_bounded(
    store: AccountStore, label: str, stored: str
) -> None:
    record = await store.insert(
        label=label,
        auth_kind="social",
        region="us-east-1",
        auth_region="us-east-1",
        credentials=credentials(),
    )
    assert record.label == stored


async def test_the_transient_mark_of_a_cool_down_is_stored(store: AccountStore) -> None:
    record = await store.insert(
        label="a",
        auth_kind="social",
        region="us-east-1",
        auth_region="us-east-1",
        credentials=credentials(),
    )
    updated = await store.update_state(
        record.id, lambda r: AccountState("cooling_down", "glitches", 1.0, 3, transient=True)
    )
    assert updated is not None
    assert (updated.status, updated.status_transient) == ("cooling_down", True)
    again = await store.get(record.id)
    assert again is not None
    assert again.state.transient
