"""`kiroctl accounts overage ACCOUNT on|off` against a live daemon and the fake Kiro: the switch
reaches Kiro, `accounts list` and the console show what Kiro's usage says (a change made in Kiro
IDE too), a Free plan gets a clear refusal, and nothing shown carries a secret."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner, Result

from kirod.cli import exits
from kirod.cli.main import cli
from kirod.errors import ControlError
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiroctl import add_account as add
from tests.support.kiroctl import overage_shown


@pytest.fixture(scope="module")
def pro(daemon: DaemonProcess, fake: ThreadedFake) -> dict[str, Any]:
    return add(daemon, fake, "KIRO PRO", "pro")


@pytest.fixture(scope="module")
def free(daemon: DaemonProcess, fake: ThreadedFake) -> dict[str, Any]:
    return add(daemon, fake, "KIRO FREE", "free")


def kiroctl(daemon: DaemonProcess, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--socket", str(daemon.socket_path), *args])


def listed(daemon: DaemonProcess) -> dict[str, dict[str, Any]]:
    result = kiroctl(daemon, "accounts", "list", "--json")
    assert result.exit_code == 0, result.output
    return {account["label"]: account for account in json.loads(result.stdout)["accounts"]}


def assert_no_secret(fake: ThreadedFake, *shown: str) -> None:
    text = "".join(shown)
    for secret in fake.fake.issued_secrets():
        assert secret not in text


def test_on_then_off_reaches_kiro_and_the_listing(
    daemon: DaemonProcess, fake: ThreadedFake, pro: dict[str, Any]
) -> None:
    assert overage_shown(daemon, "pro") in ("off", "—", "-")  # before or after its first probe

    turned_on = kiroctl(daemon, "accounts", "overage", "pro", "on")
    assert turned_on.exit_code == 0, turned_on.output
    assert turned_on.stdout == f"Overage on for pro ({pro['id'][:8]}).\n"
    assert fake.fake.account(pro["fake_id"]).usage.overage_status == "ENABLED"
    usage = listed(daemon)["pro"]["usage"]
    assert (usage["overage"], usage["overage_capable"]) == ("enabled", True)
    assert overage_shown(daemon, "pro") == "on: guarded"

    turned_off = kiroctl(daemon, "accounts", "overage", pro["id"][:6].upper(), "OFF")
    assert turned_off.exit_code == 0, turned_off.output
    assert "Overage off for pro" in turned_off.stdout
    assert fake.fake.account(pro["fake_id"]).usage.overage_status == "DISABLED"
    assert listed(daemon)["pro"]["usage"]["overage"] == "disabled"
    assert overage_shown(daemon, "pro") == "off"
    sent = [request.json for request in fake.fake.requests("preference")]
    assert [body["overageConfiguration"]["overageStatus"] for body in sent[-2:]] == [
        "ENABLED",
        "DISABLED",
    ]
    assert_no_secret(fake, turned_on.output, turned_off.output, json.dumps(listed(daemon)))


def test_a_change_made_in_kiro_ide_shows_at_the_next_probe(
    daemon: DaemonProcess, fake: ThreadedFake, pro: dict[str, Any]
) -> None:
    fake.fake.set_usage(pro["fake_id"], overage_status="ENABLED")  # as Kiro IDE's settings do
    assert kiroctl(daemon, "accounts", "probe", "pro").exit_code == 0
    assert listed(daemon)["pro"]["usage"]["overage"] == "enabled"
    assert overage_shown(daemon, "pro") == "on: guarded"
    fake.fake.set_usage(pro["fake_id"], overage_status="DISABLED")
    assert kiroctl(daemon, "accounts", "probe", "pro").exit_code == 0
    assert overage_shown(daemon, "pro") == "off"


def test_a_probe_failing_after_the_switch_still_reports_the_switch(
    daemon: DaemonProcess, fake: ThreadedFake, pro: dict[str, Any]
) -> None:
    kiroctl(daemon, "accounts", "overage", "pro", "off")
    fake.fake.oversize("usage", 8 * 1024 * 1024)  # getUsageLimits' answer is refused unread
    try:
        turned_on = kiroctl(daemon, "accounts", "overage", "pro", "on")
    finally:
        fake.fake.oversize("usage", 0)
    assert turned_on.exit_code == 0, turned_on.output
    assert turned_on.stdout == (
        f"Overage on for pro ({pro['id'][:8]}) "
        "(Kiro accepted it; its usage does not show it yet).\n"
    )
    assert fake.fake.account(pro["fake_id"]).usage.overage_status == "ENABLED"
    assert kiroctl(daemon, "accounts", "probe", "pro").exit_code == 0
    assert overage_shown(daemon, "pro") == "on: guarded"
    kiroctl(daemon, "accounts", "overage", "pro", "off")


def test_a_free_plan_is_refused_clearly(
    daemon: DaemonProcess, fake: ThreadedFake, free: dict[str, Any]
) -> None:
    assert kiroctl(daemon, "accounts", "probe", "free").exit_code == 0
    refused = kiroctl(daemon, "accounts", "overage", "free", "on")
    assert refused.exit_code == exits.FAILED
    assert refused.stdout == ""
    assert refused.stderr.splitlines() == [
        "kiroctl: error: this account's plan (KIRO FREE) cannot use overage",
        "hint: overage needs a paid Kiro plan; `kiroctl accounts list` shows n/a under OVERAGE "
        "for the accounts that cannot use it",
    ]
    for internal in ("Traceback", "UpstreamHttpError", "403 (forbidden)", "AccessDenied"):
        assert internal not in refused.output
    assert fake.fake.account(free["fake_id"]).usage.overage_status == "DISABLED"
    assert overage_shown(daemon, "free") == "n/a"
    assert listed(daemon)["free"]["usage"]["overage_capable"] is False
    assert_no_secret(fake, refused.output)


def test_the_control_api_refuses_a_free_plan_with_its_code(
    daemon: DaemonProcess, free: dict[str, Any]
) -> None:
    daemon.client.probe_account(free["id"])  # the plan, named in the refusal
    with pytest.raises(ControlError) as refused:
        daemon.client.set_account_overage(free["id"], True)
    assert (refused.value.status, refused.value.code) == (403, "overage_unavailable")
    assert refused.value.message == "this account's plan (KIRO FREE) cannot use overage"


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (("nobody", "on"), exits.NOT_FOUND, "no account matches 'nobody'"),
        (("pro", "maybe"), exits.USAGE, "'maybe' is not one of 'on', 'off'"),
        (("pro",), exits.USAGE, "Missing argument 'on|off'"),
    ],
)
def test_wrong_arguments_change_nothing(
    daemon: DaemonProcess,
    fake: ThreadedFake,
    pro: dict[str, Any],
    args: tuple[str, ...],
    code: int,
    said: str,
) -> None:
    before = len(fake.fake.requests("preference"))
    result = kiroctl(daemon, "accounts", "overage", *args)
    assert result.exit_code == code, result.output
    assert said in result.stderr
    assert len(fake.fake.requests("preference")) == before


def test_the_control_api_wants_a_boolean(daemon: DaemonProcess, pro: dict[str, Any]) -> None:
    for body in ({}, {"enabled": "yes"}, {"enabled": 1}):
        with pytest.raises(ControlError) as caught:
            daemon.client.request("POST", f"/accounts/{pro['id']}/overage", body)
        assert (caught.value.status, caught.value.code) == (400, "invalid_request")
    with pytest.raises(ControlError) as missing:
        daemon.client.set_account_overage("no-such-account", True)
    assert missing.value.status == 404


async def test_the_console_shows_the_switch(
    daemon: DaemonProcess, fake: ThreadedFake, pro: dict[str, Any], free: dict[str, Any]
) -> None:
    daemon.client.probe_account(free["id"])
    assert kiroctl(daemon, "accounts", "overage", "pro", "on").exit_code == 0
    html = await console_overview(daemon)
    assert _card_value(html, pro["id"], "overage") == "on"
    assert _card_value(html, free["id"], "overage") == "not available on this plan"
    assert_no_secret(fake, html)


async def console_overview(daemon: DaemonProcess) -> str:
    """The console's overview page, signed in with a one-time link as `kiroctl console` is."""
    link = daemon.client.request("POST", "/console")
    base, token = link["url"].split("/console/#t=")
    # The default jar drops cookies of IP hosts; the cookie is carried by hand.
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
        async with http.post(
            f"{base}/console/session", json={"token": token}, headers={"Origin": base}
        ) as answer:
            assert answer.status == 200, await answer.text()
            cookie = answer.headers["Set-Cookie"].split(";", 1)[0]
        async with http.get(f"{base}/console/", headers={"Cookie": cookie}) as page:
            assert page.status == 200
            return await page.text()


def _card_value(html: str, account_id: str, name: str) -> str:
    marker = f'data-k="a.{account_id}.{name}">'
    start = html.index(marker) + len(marker)
    return html[start : html.index("<", start)]
