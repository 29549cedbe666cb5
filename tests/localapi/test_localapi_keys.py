"""API keys through the control API, and their scopes enforced on the public API (official SDKs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from kirod.localapi.client import ControlError
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

HELLO: Any = [{"role": "user", "content": "hi"}]


CREATED: list[str] = []  # every key this module made, none of which may reach the log


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake)
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()
        log = proc.log()
        assert CREATED
        for secret in CREATED:
            assert secret not in log


def create(daemon: DaemonProcess, name: str, **scope: Any) -> tuple[dict[str, Any], str]:
    answer = daemon.client.request("POST", "/keys", {"name": name, **scope})
    CREATED.append(answer["secret"])
    return answer["key"], answer["secret"]


def claude(daemon: DaemonProcess, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=daemon.base_url, api_key=key, max_retries=0)


def gpt(daemon: DaemonProcess, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=daemon.base_url + "/v1", api_key=key, max_retries=0)


def test_a_new_key_is_shown_once_and_works(daemon: DaemonProcess) -> None:
    key, secret = create(daemon, "laptop")
    assert secret.startswith("sk-kirod-")
    assert key["name"] == "laptop"
    assert key["models"] == []
    assert key["rpm"] is None
    assert key["cache"] is False  # only asked for: never by default
    assert secret.startswith(key["prefix"])
    listed = daemon.client.request("GET", "/keys")
    assert key["id"] in {item["id"] for item in listed["keys"]}
    assert secret not in str(listed)
    with claude(daemon, secret) as client:
        reply = client.messages.create(model="claude-sonnet-4-6", max_tokens=50, messages=HELLO)
    assert reply.content
    used = next(i for i in daemon.client.request("GET", "/keys")["keys"] if i["id"] == key["id"])
    assert used["last_used_at"] is not None


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"name": ""},
        {"name": "x" * 65},
        {"name": "tab\there"},
        {"name": "ok", "models": "claude-*"},
        {"name": "ok", "models": ["claude sonnet"]},
        {"name": "ok", "models": [3]},
        {"name": "ok", "models": ["a"] * 33},
        {"name": "ok", "rpm": 0},
        {"name": "ok", "rpm": True},
        {"name": "ok", "rpm": 1.5},
        {"name": "ok", "cache": "yes"},
    ],
)
def test_invalid_keys_are_refused(daemon: DaemonProcess, body: dict[str, Any]) -> None:
    with pytest.raises(ControlError) as caught:
        daemon.client.request("POST", "/keys", body)
    assert (caught.value.status, caught.value.code) == (400, "invalid_request")


def test_names_are_unique_and_unknown_keys_are_not_found(daemon: DaemonProcess) -> None:
    create(daemon, "twin")
    with pytest.raises(ControlError) as caught:
        create(daemon, "twin")
    assert (caught.value.status, caught.value.code) == (409, "name_taken")
    with pytest.raises(ControlError) as caught:
        daemon.client.request("DELETE", "/keys/nope")
    assert caught.value.status == 404


def test_a_model_outside_the_patterns_is_refused_in_each_envelope(
    daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    key, secret = create(daemon, "haiku-only", models=["claude-haiku-*"])
    assert key["models"] == ["claude-haiku-*"]
    fake.fake.clear_requests()
    with claude(daemon, secret) as client:
        client.messages.create(model="claude-haiku-4-5", max_tokens=50, messages=HELLO)
        client.messages.create(model="claude-haiku-4.5", max_tokens=50, messages=HELLO)  # Kiro id
        with pytest.raises(anthropic.PermissionDeniedError) as denied:
            client.messages.create(model="claude-sonnet-4-6", max_tokens=50, messages=HELLO)
    assert denied.value.status_code == 403
    error = denied.value.body["error"]  # type: ignore[index]
    assert error["type"] == "permission_error"
    assert "claude-sonnet-4-6" in error["message"]
    assert "claude-haiku-*" in error["message"]
    with gpt(daemon, secret) as client, pytest.raises(openai.PermissionDeniedError) as refused:
        client.responses.create(model="claude-sonnet-4-6", input="hi")
    body: Any = refused.value.body
    assert (body["type"], body["code"], body["param"]) == (
        "permission_error",
        "model_not_allowed",
        "model",
    )
    assert len(fake.fake.requests("chat")) == 2  # the refused requests never reached Kiro
    with gpt(daemon, secret) as client:
        listed = [model.id for model in client.models.list()]
        assert listed
        assert all("haiku" in model for model in listed)
        with pytest.raises(openai.NotFoundError):
            client.models.retrieve("claude-sonnet-4-6")


def test_the_scope_applies_to_the_model_a_name_resolves_to(
    daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    """A pattern matching the dated name a client sends does not admit the model it maps to."""
    _, secret = create(daemon, "dated", models=["claude-sonnet-4-5-2025*"])
    fake.fake.clear_requests()
    with gpt(daemon, secret) as client, pytest.raises(openai.PermissionDeniedError):
        client.responses.create(model="claude-sonnet-4-5-20250929", input="hi")
    assert fake.fake.requests("chat") == []


def test_the_rate_is_limited_per_key_with_retry_after(daemon: DaemonProcess) -> None:
    _, limited = create(daemon, "slow", rpm=2)
    with gpt(daemon, limited) as client:
        client.models.list()
        client.models.list()
        with pytest.raises(openai.RateLimitError) as caught:
            client.models.list()
    assert int(caught.value.response.headers["retry-after"]) >= 1
    body: Any = caught.value.body
    assert (body["type"], body["code"]) == ("rate_limit_error", "rate_limit_exceeded")
    with claude(daemon, limited) as client, pytest.raises(anthropic.RateLimitError) as throttled:
        client.messages.create(model="claude-sonnet-4-6", max_tokens=50, messages=HELLO)
    assert throttled.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    with gpt(daemon, daemon.api_key) as client:
        client.models.list()  # other keys are not affected


def test_revocation_takes_effect_at_once(daemon: DaemonProcess) -> None:
    key, secret = create(daemon, "leaked")
    with gpt(daemon, secret) as client:
        client.models.list()
        assert daemon.client.request("DELETE", f"/keys/{key['id']}") == {"revoked": True}
        with pytest.raises(openai.AuthenticationError):
            client.models.list()
    assert key["id"] not in {item["id"] for item in daemon.client.request("GET", "/keys")["keys"]}


def test_requests_refused_for_their_model_cost_no_rate(daemon: DaemonProcess) -> None:
    _, secret = create(daemon, "sonnet-slow", rpm=2, models=["claude-sonnet-*"])
    with claude(daemon, secret) as client:
        for _ in range(4):  # more than the rate: each is a 403, never a 429
            with pytest.raises(anthropic.PermissionDeniedError):
                client.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=HELLO)
    with gpt(daemon, secret) as client:
        client.models.list()
        client.models.list()  # the two the rate allows are still there
        with pytest.raises(openai.RateLimitError):
            client.models.list()
