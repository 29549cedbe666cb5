"""The opt-in response cache end to end: the official SDKs → the real daemon → the fake Kiro."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from click.testing import CliRunner

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
USE = {"x-kirod-cache": "use"}


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake, {"KIROD_ENABLE_CHAT_COMPLETIONS": "true"})
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


def new_key(daemon: DaemonProcess, *, cache: bool = True, rpm: int | None = None) -> str:
    created = daemon.client.create_key(f"k-{uuid.uuid4().hex[:8]}", rpm=rpm, cache=cache)
    return created.secret


def claude_with(daemon: DaemonProcess, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=daemon.base_url, api_key=key, max_retries=0)


def gpt_with(daemon: DaemonProcess, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=daemon.base_url + "/v1", api_key=key, max_retries=0)


def ask(client: anthropic.Anthropic, prompt: str, **extra: Any) -> Any:
    return client.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=100,
        messages=[{"role": "user", "content": prompt}],
        extra_headers=USE,
        **extra,
    )


def kiroctl(daemon: DaemonProcess, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--socket", str(daemon.socket_path), *args])
    assert result.exit_code == 0, result.output
    return result


def test_a_repeated_request_is_answered_from_the_cache(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    prompt = f"capital of France? {uuid.uuid4().hex}"
    service.enqueue(Reply(text="Paris."))
    with claude_with(daemon, new_key(daemon)) as claude:
        first = ask(claude, prompt)
        assert first.headers["x-kirod-cache"] == "miss"
        assert len(service.requests("chat")) == 1
        second = ask(claude, prompt)
    assert second.headers["x-kirod-cache"] == "hit"
    assert len(service.requests("chat")) == 1  # the fake saw no new chat
    one, two = first.parse(), second.parse()
    assert [b.text for b in two.content] == [b.text for b in one.content] == ["Paris."]
    assert two.id != one.id
    assert (two.stop_reason, two.usage.output_tokens) == (one.stop_reason, one.usage.output_tokens)
    hit = daemon.client.trace(second.headers["request-id"]).requests[0]
    assert (hit.cache, hit.account_id, hit.credits, hit.attempts) == ("hit", None, None, ())
    miss = daemon.client.trace(first.headers["request-id"]).requests[0]
    assert (miss.cache, miss.account_id is not None) == ("miss", True)
    assert "answered from the response cache" in kiroctl(daemon, "trace", hit.request_id).output


def test_hits_count_toward_no_rate_limit(daemon: DaemonProcess, service: FakeKiro) -> None:
    prompt = f"rate {uuid.uuid4().hex}"
    with claude_with(daemon, new_key(daemon, rpm=2)) as claude:
        assert ask(claude, prompt).headers["x-kirod-cache"] == "miss"
        for _ in range(5):
            assert ask(claude, prompt).headers["x-kirod-cache"] == "hit"
        assert ask(claude, prompt + " other").headers["x-kirod-cache"] == "miss"  # the 2nd
        with pytest.raises(anthropic.RateLimitError):
            ask(claude, prompt + " third")
    assert len(service.requests("chat")) == 2


def test_one_answer_serves_every_protocol(daemon: DaemonProcess, service: FakeKiro) -> None:
    prompt = f"protocols {uuid.uuid4().hex}"
    service.enqueue(Reply(text="Same answer."))
    key = new_key(daemon)
    with gpt_with(daemon, key) as gpt:
        miss = gpt.responses.with_raw_response.create(
            model=MODEL, input=prompt, store=False, extra_headers=USE
        )
        assert miss.headers["x-kirod-cache"] == "miss"
        hit = gpt.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": prompt}], extra_headers=USE
        )
    assert hit.headers["x-kirod-cache"] == "hit"
    assert hit.parse().choices[0].message.content == "Same answer."
    assert miss.parse().output_text == "Same answer."
    assert len(service.requests("chat")) == 1


def test_streams_tools_and_continuations_are_never_cached(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    prompt = f"never {uuid.uuid4().hex}"
    key = new_key(daemon)
    tool = {"name": "lookup", "description": "Look up.", "input_schema": {"type": "object"}}
    with claude_with(daemon, key) as claude:
        for _ in range(2):
            with claude.messages.with_streaming_response.create(
                model=MODEL,
                max_tokens=100,
                messages=[{"role": "user", "content": prompt}],
                stream=True,
                extra_headers=USE,
            ) as streamed:
                assert "x-kirod-cache" not in streamed.headers
                assert any("message_stop" in line for line in streamed.iter_lines())
            tooled = ask(claude, prompt, tools=[tool])
            assert "x-kirod-cache" not in tooled.headers
    with gpt_with(daemon, key) as gpt:
        first = gpt.responses.create(model=MODEL, input=prompt, extra_headers=USE)
        for _ in range(2):
            followed = gpt.responses.with_raw_response.create(
                model=MODEL, input="again", previous_response_id=first.id, extra_headers=USE
            )
            assert "x-kirod-cache" not in followed.headers
    assert len(service.requests("chat")) == 2 * 2 + 1 + 2


def test_a_key_without_the_permission_is_never_cached(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    prompt = f"no permission {uuid.uuid4().hex}"
    for key in (new_key(daemon, cache=False), daemon.api_key):  # a created one, the default
        with claude_with(daemon, key) as claude:
            for _ in range(2):
                assert "x-kirod-cache" not in ask(claude, prompt).headers
    assert len(service.requests("chat")) == 4
    assert daemon.client.keys()[-1].cache is False


def test_kiroctl_cache_stats_counts_and_clear_empties(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    prompt = f"stats {uuid.uuid4().hex}"
    before = json.loads(kiroctl(daemon, "cache", "stats", "--json").output)
    with claude_with(daemon, new_key(daemon)) as claude:
        ask(claude, prompt)
        ask(claude, prompt)
        stats = json.loads(kiroctl(daemon, "cache", "stats", "--json").output)
        assert stats["entries"] == before["entries"] + 1
        assert stats["bytes"] > before["bytes"]
        assert (stats["hits"], stats["misses"]) == (before["hits"] + 1, before["misses"] + 1)
        assert stats["ttl_s"] == 3600.0
        assert "ENTRIES" in kiroctl(daemon, "cache", "stats").output
        assert "Dropped" in kiroctl(daemon, "cache", "clear").output
        assert daemon.client.cache_stats().entries == 0
        assert ask(claude, prompt).headers["x-kirod-cache"] == "miss"
    assert len(service.requests("chat")) == 2
