"""`LocalClient`'s typed methods on a live daemon: each route's answer reads into its report type,
and the views kiroctl prints with --json give back the document kirod sent, unchanged."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kirod.localapi.client import LocalClient
from kirod.report_types import Account, Config, Imported, Models, Pool, PoolAccount, Usage
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import kiro_ide_token_file


@pytest.fixture(scope="module")
def kirod(daemon: DaemonProcess) -> LocalClient:
    return LocalClient(daemon.socket_path, timeout=30)


@pytest.fixture(scope="module")
def imported(kirod: LocalClient, fake: ThreadedFake) -> Imported:
    content = base64.b64encode(kiro_ide_token_file(fake.fake.issue_social_account())).decode()
    [item] = kirod.import_accounts(content=content, label="typed")
    return item


def test_an_import_reads_as_the_account_it_stored(imported: Imported) -> None:
    assert imported.created
    assert imported.account.label == "typed"
    assert imported.to_json()["created"] is True  # the document as kirod sent it


def test_the_account_routes_answer_accounts(kirod: LocalClient, imported: Imported) -> None:
    account_id = imported.account.id
    listed = kirod.accounts()
    assert [account.id for account in listed] == [account_id]
    assert kirod.account(account_id).label == "typed"
    assert kirod.disable_account(account_id).status == "disabled"
    assert kirod.enable_account(account_id).status == "active"
    probed = kirod.probe_account(account_id)
    assert probed.usage is not None
    assert probed.usage.limit
    assert kirod.refresh_account(account_id).expires_at is not None


def test_the_reports_read_into_their_types(kirod: LocalClient, imported: Imported) -> None:
    assert kirod.status().accounts.total == 1
    pool = kirod.pool()
    assert [account.id for account in pool.accounts] == [imported.account.id]
    assert pool.accounts[0].capacity >= 1
    models = kirod.models()
    assert models.source == "accounts"
    assert models.models
    assert models.to_json() == kirod.request("GET", "/models")
    config = kirod.config()
    assert "api_key_file" in config.settings
    assert config.to_json() == kirod.request("GET", "/config")
    assert kirod.stats(since=0.0).requests >= 0


def test_keys_are_created_listed_and_revoked(kirod: LocalClient) -> None:
    created = kirod.create_key("typed", models=["claude-*"], rpm=5)
    assert created.secret
    assert created.key.models == ("claude-*",)
    assert created.key.rpm == 5
    before = kirod.keys()  # a list of ApiKey, whatever ruff's SIM118 makes of the name
    kirod.revoke_key(created.key.id)
    after = kirod.keys()
    assert created.key.id in {key.id for key in before} - {key.id for key in after}


def test_a_login_is_started_polled_and_cancelled(kirod: LocalClient) -> None:
    pending = kirod.start_login()
    assert not pending.finished
    assert kirod.login(pending.id).state == "pending"
    cancelled = kirod.cancel_login(pending.id)
    assert cancelled.state == "cancelled"
    assert cancelled.added is None
    assert kirod.login(pending.id, wait_s=0.2).state == "cancelled"


def test_removing_an_account(kirod: LocalClient, fake: ThreadedFake) -> None:
    content = base64.b64encode(kiro_ide_token_file(fake.fake.issue_social_account())).decode()
    [item] = kirod.import_accounts(content=content)
    kirod.remove_account(item.account.id)
    assert item.account.id not in {account.id for account in kirod.accounts()}


ACCOUNT: dict[str, Any] = {"id": "a1", "label": "x", "auth_kind": "social", "status": "active"}


def test_the_views_take_what_an_older_daemon_leaves_out_and_a_newer_one_adds() -> None:
    newer = {**ACCOUNT, "usage": {"limit": 500, "remaining": 310, "unknown": 1}, "later": True}
    account = Account.from_json(newer)
    assert account.usage == Usage(remaining=310.0, limit=500.0, resets_at=None, subscription=None)
    assert account.status_until is None
    assert account.to_json() is newer  # --json keeps the fields this kiroctl does not know
    assert Account.from_json({**ACCOUNT, "usage": None}).usage is None
    row = {"id": "a1", "label": "x", "status": "active", "in_flight": 1, "capacity": 4}
    pool = Pool.from_json({"strategy": "round-robin", "queued": 0, "accounts": [row]})
    assert pool.accounts == (PoolAccount("a1", "x", "active", None, None, 1, 4, None, None),)
    models = Models.from_json({"source": "static", "models": [], "fallback": "strict"})
    assert (models.aliases, models.families, models.substitutions) == ({}, {}, ())
    assert Config.from_json({"settings": {}}).config_path is None
