"""Device-code logins driven by the daemon, through the fake's SSO OIDC endpoints."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kirod.localapi.client import ControlError
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import DeviceFlow, DeviceOutcome, ThreadedFake

FAST = 0.05  # the fake's poll interval; `slow_down` then adds the standard 5 s


def start(
    daemon: DaemonProcess, fake: ThreadedFake, flow: DeviceFlow, **body: str
) -> dict[str, Any]:
    fake.fake.set_device_flow(flow)
    login: dict[str, Any] = daemon.client.request("POST", "/logins", body)
    assert login["state"] == "pending"
    return login


def finish(daemon: DaemonProcess, login_id: str, limit_s: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        login: dict[str, Any] = daemon.client.request(
            "GET", f"/logins/{login_id}?wait=2", timeout=10
        )
        if login["state"] != "pending":
            return login
    raise AssertionError(f"login {login_id} did not end within {limit_s} s")


def test_each_way_a_login_can_end(daemon: DaemonProcess, fake: ThreadedFake) -> None:
    flows = {
        "approved": DeviceFlow(pending_polls=1, interval_s=FAST),
        "denied": DeviceFlow(
            pending_polls=1,
            outcome=DeviceOutcome.ACCESS_DENIED,
            interval_s=FAST,
        ),
        "expired": DeviceFlow(
            outcome=DeviceOutcome.EXPIRED_TOKEN,
            interval_s=FAST,
        ),
        "slow_down": DeviceFlow(
            pending_polls=0,
            slow_down_polls=1,
            interval_s=FAST,
        ),
    }
    started = {name: start(daemon, fake, flow) for name, flow in flows.items()}
    ended = {name: finish(daemon, login["id"]) for name, login in started.items()}

    pending = started["approved"]
    assert pending["auth_kind"] == "builder_id"
    assert pending["region"] == "us-east-1"
    assert pending["verification_uri_complete"].endswith(pending["user_code"])
    approved = ended["approved"]
    assert approved["state"] == "approved"
    assert approved["error"] is None
    account = approved["account"]
    assert account["label"].endswith("@example.com (Builder ID)")
    assert account["auth_kind"] == "builder_id"
    assert account["usage"]["limit"] > 0
    listed = daemon.client.request("GET", "/accounts")["accounts"]
    assert account["id"] in {item["id"] for item in listed}

    assert ended["denied"]["state"] == "denied"
    assert ended["denied"]["error"]["code"] == "access_denied"
    assert ended["denied"]["account"] is None
    assert ended["expired"]["state"] == "expired"
    assert "expired" in ended["expired"]["error"]["message"]
    assert ended["slow_down"]["state"] == "approved"
    assert ended["slow_down"]["interval_s"] == pytest.approx(FAST + 5)

    shown = json.dumps([started, ended, listed])
    for secret in fake.fake.issued_secrets():
        assert secret not in shown
    assert "device_code" not in shown
    assert "client_secret" not in shown


def test_a_cancelled_login_stays_cancelled(daemon: DaemonProcess, fake: ThreadedFake) -> None:
    login = start(daemon, fake, DeviceFlow(pending_polls=10_000, interval_s=FAST))
    cancelled = daemon.client.request("DELETE", f"/logins/{login['id']}")
    assert cancelled["state"] == "cancelled"
    assert cancelled["error"]["code"] == "cancelled"
    assert daemon.client.request("GET", f"/logins/{login['id']}?wait=0.2")["state"] == "cancelled"
    assert daemon.client.request("DELETE", f"/logins/{login['id']}")["state"] == "cancelled"


def test_an_identity_center_login_names_its_start_url(
    daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    login = start(
        daemon,
        fake,
        DeviceFlow(pending_polls=10_000, interval_s=FAST),
        start_url="https://d-9067c3a1b2.awsapps.com/start",
        region="eu-west-1",
    )
    assert (login["auth_kind"], login["region"]) == ("idc", "eu-west-1")
    daemon.client.request("DELETE", f"/logins/{login['id']}")


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("GET", "/logins/login_unknown", None, 404),
        ("DELETE", "/logins/login_unknown", None, 404),
        ("GET", "/logins/login_unknown?wait=abc", None, 400),
        ("GET", "/logins/login_unknown?wait=-1", None, 400),
        ("GET", "/logins/login_unknown?wait=31", None, 400),
        ("POST", "/logins", {"start_url": "http://d-1.awsapps.com/start"}, 400),
        ("POST", "/logins", {"start_url": "not a url"}, 400),
        ("POST", "/logins", {"region": "mars"}, 400),
        ("POST", "/logins", {"region": 7}, 400),
    ],
)
def test_bad_login_requests(
    daemon: DaemonProcess, method: str, path: str, body: Any, status: int
) -> None:
    with pytest.raises(ControlError) as caught:
        daemon.client.request(method, path, body)
    assert caught.value.status == status
