"""A network outage is not an account fault (docs/RELIABILITY.md, "Network outages"), through
the real daemon, the official SDKs and kiroctl, with Kiro really unreachable: the fake stopped
(its port refuses connections), or an account's proxy on a port nobody listens on.

One account: every request fails fast with "cannot reach Kiro", the account does not rest and
its breaker counts nothing, `/ready` and `kiroctl status` name the host; the fake back on its
port, the very next request is served and `/ready` clears. Two accounts, one behind a dead proxy
while the other connects directly: that proxy is the account's own fault, and only it rests.
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import import_account, start_daemon
from tests.support.kiroctl import kiroctl

MODEL = "claude-sonnet-4-6"
FAST_S = 3.0  # a refused connection is answered at once, never after a wait


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def ready(proc: DaemonProcess) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(proc.base_url + "/ready")  # noqa: S310
    request.add_header("Authorization", f"Bearer {proc.api_key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def listed(proc: DaemonProcess) -> dict[str, dict[str, Any]]:
    """The accounts as `kiroctl accounts list --json` shows them, by id."""
    result = kiroctl(proc, "accounts", "list", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rows = doc["accounts"] if isinstance(doc, dict) else doc
    return {row["id"]: row for row in rows}


def pool(proc: DaemonProcess) -> dict[str, Any]:
    """The pool report's rows (with the breaker's failure count), by account id."""
    return {row.id: row for row in proc.client.pool().accounts}


def ask(proc: DaemonProcess) -> anthropic.types.Message:
    with anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key, max_retries=0) as sdk:
        return sdk.messages.create(
            model=MODEL, max_tokens=20, messages=[{"role": "user", "content": "hi"}]
        )


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kd-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_kiro_unreachable_rests_no_account_and_the_first_success_clears_it(root: Path) -> None:
    fake = ThreadedFake().start()
    port = int(fake.base_url.rsplit(":", 1)[1])
    host = f"127.0.0.1:{port}"
    proc = start_daemon(root, fake)
    try:
        [account] = [import_account(proc, fake.fake.issue_social_account())["id"]]
        assert ask(proc).content  # Kiro is reachable: the direct route is known to connect
        fake.stop()  # Kiro's host now refuses every connection

        for _ in range(6):
            started = time.monotonic()
            with pytest.raises(anthropic.APIStatusError) as error:
                ask(proc)
            assert time.monotonic() - started < FAST_S
            assert error.value.status_code == 502
            assert "cannot reach Kiro" in error.value.message
        # The other protocols say it in their own envelope.
        with (
            openai.OpenAI(
                base_url=f"{proc.base_url}/v1", api_key=proc.api_key, max_retries=0
            ) as gpt,
            pytest.raises(openai.APIStatusError) as failed,
        ):
            gpt.responses.create(model=MODEL, input="hi")
        assert failed.value.status_code == 502
        assert "cannot reach Kiro" in failed.value.message
        assert isinstance(failed.value.body, dict)
        assert failed.value.body.get("code") == "upstream_unreachable"

        status, body = ready(proc)
        assert status == 503
        assert (body["reason"], body["reasons"]) == ("kiro_unreachable", ["kiro_unreachable"])
        [outage] = body["unreachable"]
        assert outage["host"] == host
        # Why, in the system's words: no address (a refused connect's own message names one).
        assert outage["detail"] == "ClientConnectorError: Connection refused"
        shown = kiroctl(proc, "status")
        assert shown.exit_code == 4, shown.output  # degraded
        assert f"cannot reach Kiro at {host}" in shown.output
        # Seven requests later, the account has not rested and its breaker counted nothing.
        row = listed(proc)[account]
        assert (row["status"], row["status_until"]) == ("active", None)
        assert "unreachable" in (row["last_error"] or "")
        assert (pool(proc)[account].status, pool(proc)[account].failures) == ("active", 0)

        fake = ThreadedFake(fake.fake, port=port).start()  # Kiro is back
        started = time.monotonic()
        assert ask(proc).content  # the very next request is served, with nothing to wait out
        assert time.monotonic() - started < FAST_S
        assert ready(proc) == (200, {"status": "ready"})
        assert f"cannot reach Kiro at {host}" not in kiroctl(proc, "status").output
        assert "kiro_reachable" in proc.log()
    finally:
        proc.stop()
        fake.stop()


def test_a_dead_proxy_of_one_account_while_the_other_connects_rests_only_it(
    root: Path, fake: ThreadedFake
) -> None:
    proc = start_daemon(root, fake, {"KIROD_ACCOUNT_SELECTION_STRATEGY": "round-robin"})
    try:
        proxied = import_account(proc, fake.fake.issue_social_account())["id"]
        direct = import_account(proc, fake.fake.issue_social_account())["id"]
        dead = f"http://127.0.0.1:{closed_port()}"
        result = kiroctl(proc, "accounts", "set-proxy", proxied, dead)
        assert result.exit_code == 0, result.output
        assert ask(proc).content  # served directly: Kiro is reachable from this machine

        for _ in range(16):  # each one served: the dead proxy fails over to the direct account
            assert ask(proc).content
            if listed(proc)[proxied]["status"] == "cooling_down":
                break
        rows = listed(proc)
        assert rows[proxied]["status"] == "cooling_down"
        assert "could not be reached" in rows[proxied]["status_reason"]
        assert (rows[direct]["status"], rows[direct]["status_until"]) == ("active", None)
        assert pool(proc)[direct].failures == 0
        # Not the machine's condition: Kiro is reachable, `/ready` says so.
        assert ready(proc) == (200, {"status": "ready"})
    finally:
        proc.stop()
