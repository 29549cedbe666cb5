"""Prompt caching, honestly, end to end: the official SDKs → the real daemon → the fake Kiro.

One Kiro conversationId per client session (Claude Code, Codex over HTTP, code mode and
WebSocket, opencode), a payload prefix that stays byte-identical across turns, Kiro's own cache
counts in each protocol's usage (zeros when it reports none), the opt-in `x-kirod-credits`
header, per-day credits in `/stats`, and the `prompt_cache_points` experiment.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, ThreadedFake, TokenUsage
from tests.integration.code_mode import captured_body
from tests.integration.responses_ws import connect, final, turn
from tests.support import captures
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"  # claude-sonnet-4.6: promptCaching, 4 checkpoints in the fake
CACHED = TokenUsage(uncached=120, output=9, cache_read=8000, cache_write=880)
SESSION = "00000000-0000-4000-8000-0000000000aa"


def _daemon(fake: ThreadedFake, root: Path, env: dict[str, str]) -> Iterator[DaemonProcess]:
    proc = start_daemon(root, fake, {"KIROD_ENABLE_CHAT_COMPLETIONS": "true", **env})
    import_account(proc, fake.fake.issue_social_account(subscription="KIRO POWER"))
    try:
        yield proc
        assert "Traceback" not in proc.log()
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    yield from _daemon(fake, module_tmp / "default", {})


@pytest.fixture(scope="module")
def pointed(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    """A daemon with the `prompt_cache_points` experiment on."""
    yield from _daemon(fake, module_tmp / "points", {"KIROD_PROMPT_CACHE_POINTS": "true"})


def conversation_ids(service: FakeKiro) -> list[str]:
    return [r.json["conversationState"]["conversationId"] for r in service.requests("chat")]


def claude_code_body(version: str, *more: dict[str, Any]) -> dict[str, Any]:
    """The pinned Claude Code's captured first request (for MODEL, not streamed), its billing
    header naming client `version` (it changes with every release), `more` messages after it."""
    body = captures.pinned_request().body
    billing = body["system"][0]
    billing["text"], found = re.subn(r"cc_version=[^;]*", f"cc_version={version}", billing["text"])
    assert found == 1
    body.update(model=MODEL, stream=False)
    body["messages"] += more
    return body


def claude_code_system(version: str) -> list[dict[str, Any]]:
    system: list[dict[str, Any]] = claude_code_body(version)["system"]
    return system


def two_turns(claude: anthropic.Anthropic, **options: Any) -> None:
    """A first turn and its follow-up, each with the whole history, as clients send them."""
    first: list[Any] = [{"role": "user", "content": "Hi"}]
    claude.messages.create(model=MODEL, max_tokens=64, messages=first, **options)
    then = [*first, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "More"}]
    claude.messages.create(model=MODEL, max_tokens=64, messages=then, **options)


# -- one conversationId per session

OPENCODE_SESSION = {
    name: value
    for name, value in captures.pinned_request("opencode").headers.items()
    if name in ("x-session-affinity", "x-session-id")
}
"""The session headers the pinned opencode sends (its capture; the id is a placeholder)."""


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"extra_headers": {"x-claude-code-session-id": SESSION}}, id="claude-code"),
        pytest.param(
            {"metadata": {"user_id": json.dumps({"device_id": "d", "session_id": SESSION})}},
            id="claude-code-user-id",
        ),
        pytest.param({"extra_headers": OPENCODE_SESSION}, id="opencode"),
    ],
)
def test_an_anthropic_session_keeps_one_conversation_id(
    claude: anthropic.Anthropic, service: FakeKiro, options: dict[str, Any]
) -> None:
    two_turns(claude, **options)
    first, second = conversation_ids(service)
    assert first == second


def test_requests_without_a_session_are_one_shot(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    two_turns(claude)
    first, second = conversation_ids(service)
    assert first != second


def test_codex_prompt_cache_key_keeps_one_conversation_id(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    for text in ("Hi", "More"):
        gpt.responses.create(model=MODEL, input=text, prompt_cache_key=SESSION, store=False)
    first, second = conversation_ids(service)
    assert first == second


def test_codex_code_mode_keeps_one_conversation_id(gpt: openai.OpenAI, service: FakeKiro) -> None:
    body = captured_body()  # additional_tools, prompt_cache_key = the session id
    later = copy.deepcopy(body)
    later["input"] += [
        {"role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]},
        {"role": "user", "content": [{"type": "input_text", "text": "More"}]},
    ]
    for sent in (body, later):
        gpt.post(
            "/responses", body=sent, cast_to=openai._legacy_response.HttpxBinaryResponseContent
        )
    first, second = conversation_ids(service)
    assert first == second


def test_responses_websocket_keeps_one_conversation_id(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    async def run() -> None:
        async with connect(daemon) as ws:
            for text in ("Hi", "More"):
                events = await turn(
                    ws, model=MODEL, input=text, prompt_cache_key=SESSION, store=False
                )
                assert final(events)["status"] == "completed"

    asyncio.run(run())
    first, second = conversation_ids(service)
    assert first == second


# -- a byte-stable prefix


def test_consecutive_turns_share_the_payload_prefix(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    """Two turns of the pinned Claude Code's captured request, the second from the next release
    (its billing header differs): the upstream bytes of the first turn's history must not."""
    headers = {
        "x-claude-code-session-id": SESSION,
        "anthropic-beta": captures.pinned_request().headers["anthropic-beta"],
    }
    replied = {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]}
    asked = {"role": "user", "content": [{"type": "text", "text": "Now?"}]}
    for body in (claude_code_body("2.1.332.9a2"), claude_code_body("2.1.333.1b7", replied, asked)):
        claude.post(
            "/v1/messages?beta=true", body=body, options={"headers": headers}, cast_to=object
        )
    before, after = (r.body for r in service.requests("chat"))
    cut = before.index(b'],"currentMessage":')
    assert after[:cut] == before[:cut]
    assert after[cut : cut + 1] == b","
    assert b"x-anthropic-billing-header" not in before + after
    assert b"cache_control" not in before + after  # accepted from the client, never forwarded
    assert b"cachePoint" not in before + after  # the experiment is off by default


# -- usage: Kiro's counts, or zeros


def test_anthropic_usage_reports_kiros_cache_counts(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="Hi.", token_usage=CACHED), Reply(text="Hi.", token_usage=CACHED))
    answer = claude.messages.create(model=MODEL, max_tokens=64, messages=[_ask()])
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (120, 9)
    assert answer.usage.cache_read_input_tokens == 8000
    assert answer.usage.cache_creation_input_tokens == 880
    with claude.messages.stream(model=MODEL, max_tokens=64, messages=[_ask()]) as stream:
        streamed = stream.get_final_message()
    assert streamed.usage == answer.usage


def test_without_token_usage_the_cache_fields_are_zero(
    claude: anthropic.Anthropic, gpt: openai.OpenAI, service: FakeKiro
) -> None:
    answer = claude.messages.create(model=MODEL, max_tokens=64, messages=[_ask()])
    assert answer.usage.input_tokens > 0
    assert answer.usage.cache_read_input_tokens == answer.usage.cache_creation_input_tokens == 0
    response = gpt.responses.create(model=MODEL, input="Hi", store=False)
    assert response.usage is not None
    assert response.usage.input_tokens_details.cached_tokens == 0
    chat = gpt.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}])
    assert chat.usage is not None
    assert chat.usage.prompt_tokens_details is not None
    assert chat.usage.prompt_tokens_details.cached_tokens == 0


def test_openai_usage_counts_the_cached_part_inside_the_input(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    service.enqueue(*[Reply(text="Hi.", token_usage=CACHED)] * 4)
    whole = CACHED.uncached + CACHED.cache_read + CACHED.cache_write
    response = gpt.responses.create(model=MODEL, input="Hi", store=False)
    with gpt.responses.stream(model=MODEL, input="Hi", store=False) as stream:
        streamed = stream.get_final_response()
    for usage in (response.usage, streamed.usage):
        assert usage is not None
        assert (usage.input_tokens, usage.input_tokens_details.cached_tokens) == (whole, 8000)
    ask: list[Any] = [{"role": "user", "content": "Hi"}]
    chat = gpt.chat.completions.create(model=MODEL, messages=ask)
    chunks = list(
        gpt.chat.completions.create(
            model=MODEL, messages=ask, stream=True, stream_options={"include_usage": True}
        )
    )
    for usage in (chat.usage, chunks[-1].usage):
        assert usage is not None
        assert usage.prompt_tokens == whole
        assert usage.prompt_tokens_details is not None
        assert usage.prompt_tokens_details.cached_tokens == 8000


def _ask() -> Any:
    return {"role": "user", "content": "Hi"}


# -- credits


def test_credits_header_is_opt_in_and_on_non_streaming_answers(
    claude: anthropic.Anthropic, gpt: openai.OpenAI, service: FakeKiro
) -> None:
    service.enqueue(*[Reply(text="Hi.", credits=0.0421)] * 4)
    opt_in = {"x-kirod-credits": "1"}
    raw = claude.messages.with_raw_response.create(
        model=MODEL, max_tokens=64, messages=[_ask()], extra_headers=opt_in
    )
    assert raw.headers["x-kirod-credits"] == "0.0421"
    assert "credit" not in json.dumps(raw.parse().usage.model_dump())
    plain = claude.messages.with_raw_response.create(model=MODEL, max_tokens=64, messages=[_ask()])
    assert "x-kirod-credits" not in plain.headers
    responses = gpt.responses.with_raw_response.create(
        model=MODEL, input="Hi", store=False, extra_headers=opt_in
    )
    assert responses.headers["x-kirod-credits"] == "0.0421"
    with claude.messages.with_streaming_response.create(
        model=MODEL, max_tokens=64, messages=[_ask()], stream=True, extra_headers=opt_in
    ) as streamed:
        assert "x-kirod-credits" not in streamed.headers  # metered after the headers went
        streamed.read()


def test_stats_group_credits_per_day(
    claude: anthropic.Anthropic, daemon: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="Hi.", credits=0.5))
    claude.messages.create(model=MODEL, max_tokens=64, messages=[_ask()])
    stats = daemon.client.request("GET", "/stats")
    assert isinstance(stats, dict)
    days = stats["days"]
    assert days
    assert sum(day["credits"] for day in days) == pytest.approx(stats["credits"])
    assert sum(day["requests"] for day in days) == stats["requests"]


# -- cache points: the prompt_cache_points experiment


def test_cache_points_where_the_catalog_allows_them(
    pointed: DaemonProcess, service: FakeKiro
) -> None:
    with anthropic.Anthropic(
        base_url=pointed.base_url, api_key=pointed.api_key, max_retries=0
    ) as client:
        messages: list[Any] = [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "More"},
        ]
        system = claude_code_system("2.1.332")
        for model in (MODEL, "claude-haiku-4-5"):  # haiku's catalog entry lists no promptCaching
            client.messages.create(model=model, max_tokens=64, system=system, messages=messages)
    sonnet = service.requests("chat")[0].json["conversationState"]["history"]
    marked = [i for i, entry in enumerate(sonnet) if "cachePoint" in next(iter(entry.values()))]
    assert marked == [0, len(sonnet) - 1]
    assert b"cachePoint" not in service.requests("chat")[1].body
    assert all(r.status == 200 for r in service.answered("chat"))
