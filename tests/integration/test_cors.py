"""CORS over HTTP against the real daemon (`cors_origins`): preflights answered without a key for
listed origins only, CORS headers on every answer to a listed origin (errors and streams too),
none for any other origin or path, and nothing new when CORS is off. tests/console/
test_cors_browser.py checks the same in a real browser."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path

import aiohttp
import anthropic
import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

LISTED = "http://localhost:3210"
ALSO_LISTED = "https://chat.example.com"
OTHER = "http://evil.example"
MODEL = "claude-sonnet-4-6"
EXPOSED = {"request-id", "x-request-id", "retry-after", "x-should-retry"}
# What the Anthropic JS SDK (1.17) asks for in a browser with dangerouslyAllowBrowser, as
# Chromium lists it: lower case, sorted.
ANTHROPIC_ASKS = (
    "anthropic-dangerous-direct-browser-access,anthropic-version,content-type,x-api-key,"
    "x-stainless-arch,x-stainless-lang,x-stainless-os,x-stainless-package-version,"
    "x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout"
)
OPENAI_ASKS = (
    "authorization,content-type,openai-organization,openai-project,x-stainless-arch,"
    "x-stainless-lang,x-stainless-os,x-stainless-package-version,x-stainless-retry-count,"
    "x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout"
)


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    # Written as a user would: a trailing slash and a default port, which kirod drops.
    origins = f"{LISTED}/, {ALSO_LISTED}:443"
    proc = start_daemon(
        module_tmp,
        fake,
        {"KIROD_CORS_ORIGINS": origins, "KIROD_ENABLE_CHAT_COMPLETIONS": "1"},
    )
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def preflight(
    http: aiohttp.ClientSession,
    daemon: DaemonProcess,
    path: str,
    origin: str,
    asks: str,
    method: str = "POST",
    **extra: str,
) -> tuple[int, Mapping[str, str], bytes]:
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": asks,
        **extra,
    }
    async with http.options(daemon.base_url + path, headers=headers) as answer:
        return answer.status, answer.headers.copy(), await answer.read()


def cors_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith("access-control-")}


def assert_allowed(headers: Mapping[str, str], origin: str) -> None:
    assert headers["Access-Control-Allow-Origin"] == origin
    assert "Origin" in headers["Vary"]
    exposed = {name.strip() for name in headers["Access-Control-Expose-Headers"].split(",")}
    assert exposed >= EXPOSED
    assert "Access-Control-Allow-Credentials" not in headers


@pytest.mark.parametrize(
    ("path", "origin", "asks"),
    [
        ("/v1/messages", LISTED, ANTHROPIC_ASKS),
        ("/v1/chat/completions", ALSO_LISTED, OPENAI_ASKS),
        ("/v1/responses", LISTED, OPENAI_ASKS),
        ("/v1/models", LISTED, "authorization"),
        ("/api/tags", LISTED, "authorization"),  # the Ollama routes, when served
        # the Gemini API's, when served: what @google/genai sends from a page
        (
            "/v1beta/models/gemini-3-flash-preview:streamGenerateContent",
            LISTED,
            "content-type,x-goog-api-client,x-goog-api-key",
        ),
    ],
)
async def test_a_listed_origins_preflight_is_answered_without_a_key(
    http: aiohttp.ClientSession, daemon: DaemonProcess, path: str, origin: str, asks: str
) -> None:
    status, headers, body = await preflight(http, daemon, path, origin, asks)
    assert (status, body) == (204, b"")
    assert headers["Access-Control-Allow-Origin"] == origin
    assert "Origin" in headers["Vary"]
    methods = {m.strip() for m in headers["Access-Control-Allow-Methods"].split(",")}
    assert methods == {"GET", "POST", "DELETE", "OPTIONS"}
    assert headers["Access-Control-Allow-Headers"].split(", ") == asks.split(",")
    assert int(headers["Access-Control-Max-Age"]) > 0
    assert "Access-Control-Allow-Credentials" not in headers
    assert "Access-Control-Allow-Private-Network" not in headers


async def test_a_private_network_preflight_is_allowed_for_a_listed_origin(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    asked = {"Access-Control-Request-Private-Network": "true"}
    status, headers, _ = await preflight(http, daemon, "/v1/messages", ALSO_LISTED, "", **asked)
    assert status == 204
    assert headers["Access-Control-Allow-Private-Network"] == "true"
    assert "Access-Control-Allow-Headers" not in headers  # nothing asked, nothing allowed
    status, headers, _ = await preflight(http, daemon, "/v1/messages", OTHER, "", **asked)
    assert status == 403
    assert not cors_headers(headers)


@pytest.mark.parametrize(
    "origin", [OTHER, "null", "http://localhost:3211", "HTTP://LOCALHOST:3210"]
)
async def test_another_origins_preflight_is_403_without_cors_headers(
    http: aiohttp.ClientSession, daemon: DaemonProcess, origin: str
) -> None:
    status, headers, body = await preflight(http, daemon, "/v1/messages", origin, ANTHROPIC_ASKS)
    assert status == 403
    assert not cors_headers(headers)
    assert b"cors_origins" in body
    assert origin.encode() not in body


async def test_a_malformed_header_list_is_400_without_cors_headers(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    for asks in ("x-api-key,bad header", ",".join(f"x-h{n}" for n in range(65))):
        status, headers, body = await preflight(http, daemon, "/v1/responses", LISTED, asks)
        assert status == 400, body
        assert not cors_headers(headers)
        assert b"invalid_preflight" in body


SdkClients = Callable[..., tuple[anthropic.Anthropic, openai.OpenAI]]


@pytest.fixture
def sdk_clients() -> Iterator[SdkClients]:
    """`sdk_clients(daemon, origin, key=None)`: the official SDKs, sending `Origin` as a page's
    fetch would; closed after the test."""
    made: list[anthropic.Anthropic | openai.OpenAI] = []

    def make(
        daemon: DaemonProcess, origin: str, key: str | None = None
    ) -> tuple[anthropic.Anthropic, openai.OpenAI]:
        headers = {"Origin": origin}
        key = key or daemon.api_key
        claude = anthropic.Anthropic(
            base_url=daemon.base_url, api_key=key, max_retries=0, default_headers=headers
        )
        gpt = openai.OpenAI(
            base_url=daemon.base_url + "/v1", api_key=key, max_retries=0, default_headers=headers
        )
        made.extend((claude, gpt))
        return claude, gpt

    try:
        yield make
    finally:
        for client in made:
            client.close()


def test_answers_to_a_listed_origin_carry_cors_headers(
    daemon: DaemonProcess, service: FakeKiro, sdk_clients: SdkClients
) -> None:
    claude, gpt = sdk_clients(daemon, LISTED)
    service.enqueue(Reply(text="from the page"))
    raw = claude.messages.with_raw_response.create(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert_allowed(raw.headers, LISTED)
    assert raw.parse().content[0].text == "from the page"  # type: ignore[union-attr]
    service.enqueue(Reply(text="chat from the page"))
    chat = gpt.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}]
    )
    assert_allowed(chat.headers, LISTED)
    assert chat.parse().choices[0].message.content == "chat from the page"
    models = gpt.models.with_raw_response.list()
    assert_allowed(models.headers, LISTED)


def test_streamed_answers_carry_cors_headers(
    daemon: DaemonProcess, service: FakeKiro, sdk_clients: SdkClients
) -> None:
    claude, gpt = sdk_clients(daemon, ALSO_LISTED)
    service.enqueue(Script(reply=Reply(text="one two three"), chunk_size=4))
    with claude.messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "count"}]
    ) as stream:
        assert "".join(stream.text_stream) == "one two three"
        assert stream.response.headers["content-type"].startswith("text/event-stream")
        assert_allowed(stream.response.headers, ALSO_LISTED)
    service.enqueue(Script(reply=Reply(text="four five six"), chunk_size=4))
    with gpt.responses.with_streaming_response.create(
        model=MODEL, input="count", stream=True
    ) as streamed:
        assert_allowed(streamed.headers, ALSO_LISTED)
        text = "".join(
            event.delta for event in streamed.parse() if event.type == "response.output_text.delta"
        )
    assert text == "four five six"


def test_errors_to_a_listed_origin_carry_cors_headers(
    daemon: DaemonProcess, sdk_clients: SdkClients
) -> None:
    claude, gpt = sdk_clients(daemon, LISTED, key="sk-not-a-kirod-key-0123456789")
    with pytest.raises(anthropic.AuthenticationError) as refused:
        claude.messages.create(
            model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}]
        )
    assert_allowed(refused.value.response.headers, LISTED)
    claude, gpt = sdk_clients(daemon, LISTED)
    with pytest.raises(openai.NotFoundError) as missing:
        gpt.models.retrieve("no-such-model-anywhere")
    assert_allowed(missing.value.response.headers, LISTED)
    with pytest.raises(anthropic.BadRequestError) as bad:
        claude.messages.create(model=MODEL, max_tokens=8, messages=[])
    assert_allowed(bad.value.response.headers, LISTED)
    # A key limited to one request a minute: its second gets 429 with a Retry-After the page
    # may read.
    limited = daemon.client.create_key("cors-rpm", rpm=1).secret
    claude, _ = sdk_clients(daemon, LISTED, key=limited)
    claude.models.list()
    with pytest.raises(anthropic.RateLimitError) as slowed:
        claude.models.list()
    assert_allowed(slowed.value.response.headers, LISTED)
    assert int(slowed.value.response.headers["retry-after"]) >= 1


async def test_answers_to_another_origin_carry_none(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    # Served as without CORS (a non-browser client may send any Origin); a browser keeps the
    # answer from the page since no header allows it.
    auth = {"Authorization": f"Bearer {daemon.api_key}", "Origin": OTHER}
    async with http.get(daemon.base_url + "/v1/models", headers=auth) as answer:
        assert answer.status == 200
        assert not cors_headers(answer.headers)
        assert "Origin" in answer.headers["Vary"]


async def test_other_paths_carry_none(http: aiohttp.ClientSession, daemon: DaemonProcess) -> None:
    for path in ("/health", "/console/", "/v1x/models"):
        async with http.get(daemon.base_url + path, headers={"Origin": LISTED}) as answer:
            assert not cors_headers(answer.headers), path
        status, headers, _ = await preflight(http, daemon, path, LISTED, "x-api-key")
        assert status != 204, path
        assert not cors_headers(headers), path


async def test_cors_off_answers_a_preflight_as_before(
    http: aiohttp.ClientSession, fake: ThreadedFake, short_tmp: Path
) -> None:
    plain = start_daemon(short_tmp, fake)
    try:
        status, headers, body = await preflight(http, plain, "/v1/messages", LISTED, ANTHROPIC_ASKS)
        assert status == 401  # the key gate, as for any request without a key
        assert b"missing API key" in body
        assert not cors_headers(headers)
        auth = {"Authorization": f"Bearer {plain.api_key}", "Origin": LISTED}
        async with http.get(plain.base_url + "/v1/models", headers=auth) as answer:
            assert answer.status == 200
            assert not cors_headers(answer.headers)
            assert "Vary" not in answer.headers
    finally:
        plain.kill()
