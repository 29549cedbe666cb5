"""What Claude Code sends with its own defaults, and the model resolution that serves it.

The request bodies come from a capture of the real Claude Code (the version is in the capture's
file name); the daemon is the real one, the upstream the fake Kiro, whose catalog lists
`claude-opus-5.5` (Claude Code 2.1.332's `claude-opus-5-5`) as today's Kiro does, so the default
is served as asked; names Kiro does not list (`claude-opus-6`) fall back to their family.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from click.testing import CliRunner

from kirod.cli import main
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, ThreadedFake
from tests.support import captures
from tests.support.kiro_env import import_account, start_daemon


def captured_request() -> tuple[dict[str, str], dict[str, Any]]:
    """The pinned Claude Code's first `/v1/messages` request with default settings."""
    recorded = captures.pinned_request()
    headers = {k: v for k, v in recorded.headers.items() if k.lower() in _KEPT_HEADERS}
    return headers, recorded.body


_KEPT_HEADERS = {
    "anthropic-version",
    "anthropic-beta",
    "x-app",
    "user-agent",
    "x-claude-code-session-id",
    "content-type",
    "accept",
}


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(
        module_tmp, fake, {"KIROD_MODEL_ALIASES": "my-fast=claude-haiku-4.5,opus-pinned=opus"}
    )
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


@dataclass
class Answer:
    status_code: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def call(
    daemon: DaemonProcess,
    method: str,
    path: str,
    body: object = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """One plain HTTP exchange with the daemon's public listener (no SDK in between)."""
    request = urllib.request.Request(  # noqa: S310 (the daemon's http URL)
        daemon.base_url + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={
            "authorization": f"Bearer {daemon.api_key}",
            "content-type": "application/json",
            "anthropic-version": "2023-06-01",
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            status, got, text = response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        status, got, text = error.code, error.headers, error.read().decode()
    return Answer(status, {k.lower(): v for k, v in got.items()}, text)


def post(daemon: DaemonProcess, body: object, headers: dict[str, str] | None = None) -> Answer:
    return call(daemon, "POST", "/v1/messages?beta=true", body, headers)


def sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_claude_codes_default_request_is_served_by_the_newest_opus(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    headers, body = captured_request()
    assert body["model"] == "claude-opus-5-5"
    assert [m["role"] for m in body["messages"]] == ["user", "system"]
    service.enqueue(Reply(text="Hi there."))
    answer = post(daemon, body, headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["request-id"] == answer.headers["x-request-id"]
    events = sse_events(answer.text)
    assert events[0]["message"]["model"] == "claude-opus-5-5"  # names what served
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert text == "Hi there."
    sent = service.requests("chat")[-1].json["conversationState"]
    current = sent["currentMessage"]["userInputMessage"]
    assert current["modelId"] == "claude-opus-5.5"
    substituted = [line for line in daemon.log().splitlines() if "model_substituted" in line]
    assert not [line for line in substituted if "requested=claude-opus-5-5 " in line + " "]
    environment = body["messages"][1]["content"][0]["text"]
    prompt = body["messages"][0]["content"][-1]["text"]
    # The inline system note stays in the conversation after the prompt, not in the system text.
    assert current["content"].index(prompt) < current["content"].index(environment)
    history = json.dumps(sent.get("history", []))
    assert environment[:40] not in history


def test_a_substitution_is_logged_once_and_listed_by_kiroctl_models(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    for _ in range(2):
        service.enqueue(Reply(text="ok"))
        body = {
            "model": "claude-opus-6",  # an Opus Kiro does not list yet
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "x"}],
        }
        assert post(daemon, body).status_code == 200
    lines = [
        line
        for line in daemon.log().splitlines()
        if "model_substituted" in line and "requested=claude-opus-6 " in line + " "
    ]
    assert len(lines) == 1, lines
    assert "served=claude-opus-5.5" in lines[0]
    assert "via=family" in lines[0]
    listing = daemon.client.request("GET", "/models")
    assert isinstance(listing, dict)
    assert listing["fallback"] == "family"
    assert listing["aliases"] == {"my-fast": "claude-haiku-4.5", "opus-pinned": "opus"}
    assert listing["families"]["opus"] == "claude-opus-5.5"
    assert {"requested": "claude-opus-6", "served": "claude-opus-5.5", "via": "family"} in (
        listing["substitutions"]
    )


def test_a_model_lookup_records_no_substitution(daemon: DaemonProcess, service: FakeKiro) -> None:
    """`GET /v1/models/opus` serves nothing, so only the request that is served logs it."""

    def logged() -> list[str]:
        return [
            line
            for line in daemon.log().splitlines()
            if "model_substituted" in line and "requested=opus " in line + " "
        ]

    assert logged() == []
    looked_up = call(daemon, "GET", "/v1/models/opus")
    assert looked_up.status_code == 200
    assert json.loads(looked_up.text)["kiro_id"] == "claude-opus-5.5"
    assert logged() == []
    service.enqueue(Reply(text="ok"))
    body = {"model": "opus", "max_tokens": 50, "messages": [{"role": "user", "content": "x"}]}
    assert post(daemon, body).status_code == 200
    assert len(logged()) == 1, logged()


@pytest.mark.parametrize(
    ("model", "served"),
    [
        ("sonnet", "claude-sonnet-5.5"),
        ("haiku", "claude-haiku-4.5"),
        ("claude-sonnet-6", "claude-sonnet-5.5"),
        ("my-fast", "claude-haiku-4.5"),  # alias
        ("opus-pinned", "claude-opus-5.5"),  # alias to a family word
        ("claude-sonnet-4-6", "claude-sonnet-4.6"),  # exact
    ],
)
def test_names_resolve_by_alias_exact_or_family(
    daemon: DaemonProcess, service: FakeKiro, model: str, served: str
) -> None:
    service.enqueue(Reply(text="ok"))
    with anthropic.Anthropic(base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0) as c:
        message = c.messages.create(
            model=model, max_tokens=50, messages=[{"role": "user", "content": "x"}]
        )
    sent = service.requests("chat")[-1].json["conversationState"]["currentMessage"]
    assert sent["userInputMessage"]["modelId"] == served
    assert message.model == (model if model == "claude-sonnet-4-6" else served.replace(".", "-"))


@pytest.mark.parametrize(
    ("model", "via"),
    [
        ("gpt-6.2-sol", "tier"),  # Codex 0.171's default: the fake's newest sol
        ("gpt-6-luna", "newest"),  # no luna offered: the newest GPT
        ("gpt-5.5", "newest"),
    ],
)
def test_a_gpt_id_no_account_offers_is_served_by_its_tier_and_says_so(
    daemon: DaemonProcess, service: FakeKiro, model: str, via: str
) -> None:
    service.enqueue(Reply(text="ok"))
    with openai.OpenAI(
        base_url=f"{daemon.base_url}/v1", api_key=daemon.api_key, max_retries=0
    ) as o:
        response = o.responses.create(model=model, input="x")
    assert response.model == "gpt-5.6-sol"  # the client sees what served it
    sent = service.requests("chat")[-1].json["conversationState"]["currentMessage"]
    assert sent["userInputMessage"]["modelId"] == "gpt-5.6-sol"
    logged = [line for line in daemon.log().splitlines() if f"requested={model} " in line]
    assert any("served=gpt-5.6-sol" in line and f"via={via}" in line for line in logged), logged
    traced = CliRunner().invoke(
        main.cli, ["--socket", str(daemon.socket_path), "trace", "--last", "1"]
    )
    assert traced.exit_code == 0, traced.output
    head, attempt = traced.output.splitlines()[:2]
    assert f" {model} " in head  # the operation log keeps the name asked for
    assert " gpt-5.6-sol " in attempt  # and the model that served it


def test_unknown_model_is_404_in_both_envelopes_and_not_retried(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    with (
        anthropic.Anthropic(base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0) as c,
        pytest.raises(anthropic.NotFoundError) as caught,
    ):
        c.messages.create(
            model="llama-9-ultra", max_tokens=50, messages=[{"role": "user", "content": "x"}]
        )
    error = caught.value
    assert error.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    message = error.body["error"]["message"]  # type: ignore[index]
    assert "'llama-9-ultra'" in message
    assert "claude-sonnet-4-6" in message
    assert "…" in message
    assert error.response.headers["x-should-retry"] == "false"
    assert error.request_id == error.response.headers["x-request-id"]
    with (
        openai.OpenAI(base_url=f"{daemon.base_url}/v1", api_key=daemon.api_key, max_retries=0) as o,
        pytest.raises(openai.NotFoundError) as missing,
    ):
        o.responses.create(model="llama-9-ultra", input="x")
    assert missing.value.code == "model_not_found"
    assert service.requests("chat") == []


def test_a_bad_model_is_reported_before_bad_messages(daemon: DaemonProcess) -> None:
    body = {"model": "llama-9-ultra", "max_tokens": 5, "messages": [{"role": "tool", "content": 1}]}
    answer = post(daemon, body)
    assert answer.status_code == 404
    assert "llama-9-ultra" in answer.json()["error"]["message"]
    body["model"] = "claude-sonnet-4-6"
    answer = post(daemon, body)
    assert (answer.status_code, answer.json()["error"]["message"][:15]) == (400, "messages.0.role")


def test_every_field_claude_code_sends_is_accepted(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    headers, body = captured_request()
    body = copy.deepcopy(body)
    body["stream"] = False
    body["thinking"] = {"type": "adaptive", "display": "omitted"}
    body["output_config"] = {"effort": "xhigh"}
    body["messages"].append(
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "ToolSearch",
                    "input": {"query": "select:WebFetch"},
                }
            ],
        }
    )
    body["messages"].append(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "tool_reference", "tool_name": "WebFetch"}],
                }
            ],
        }
    )
    headers["anthropic-beta"] += ",some-future-beta-2027-01-01"
    service.enqueue(Reply(text="done"))
    answer = post(daemon, body, headers)
    assert answer.status_code == 200, answer.text
    sent = service.requests("chat")[-1].json
    # Opus 5.5 reads its effort in the root field only (docs/KIRO-PROTOCOL.md §2.6).
    fields = sent["additionalModelRequestFields"]
    assert (fields["output_config"], fields["thinking"]) == (
        {"effort": "xhigh"},
        {"type": "adaptive"},
    )
    assert fields["max_tokens"] == min(body["max_tokens"], 128_000)
    assert "reasoning" not in sent["conversationState"]["currentMessage"]["userInputMessage"]


def test_count_tokens_counts_the_whole_default_request(daemon: DaemonProcess) -> None:
    headers, body = captured_request()
    body = {k: v for k, v in body.items() if k not in ("max_tokens", "stream")}

    def count(doc: dict[str, Any]) -> int:
        answer = call(daemon, "POST", "/v1/messages/count_tokens?beta=true", doc, headers)
        assert answer.status_code == 200, answer.text
        tokens: int = answer.json()["input_tokens"]
        return tokens

    whole = count(body)
    without_system_message = count({**body, "messages": body["messages"][:1]})
    without_tools = count({**body, "tools": []})
    tiny = count({"model": "claude-opus-5-5", "messages": [{"role": "user", "content": "."}]})
    assert whole > without_system_message > 0
    assert whole > without_tools + 1000  # twelve tool schemas are thousands of tokens
    assert tiny > 0


def test_context_overflow_reads_as_claude_codes_compaction_trigger(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    original = next(model for model in service.models() if model.model_id == "claude-sonnet-4")
    service.set_model(dataclasses.replace(original, max_input_tokens=2_000))
    try:
        body = {
            "model": "claude-sonnet-4",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "lorem ipsum dolor " * 1_000}],
        }
        answer = post(daemon, body)
    finally:
        service.set_model(original)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    match = re.fullmatch(r"prompt is too long: (\d+) tokens > (\d+) maximum", error["message"])
    assert match is not None, error["message"]
    assert int(match[1]) > int(match[2]) == 200_000


def test_models_list_one_entry_per_model_and_resolve_any_name(daemon: DaemonProcess) -> None:
    listing = call(daemon, "GET", "/v1/models").json()
    ids = [row["id"] for row in listing["data"]]
    assert len(ids) == len(set(ids))
    assert "claude-sonnet-4-5" in ids
    assert "claude-sonnet-4.5" not in ids
    assert (listing["first_id"], listing["last_id"], listing["has_more"]) == (
        ids[0],
        ids[-1],
        False,
    )
    page = call(daemon, "GET", "/v1/models?limit=2").json()
    assert ([r["id"] for r in page["data"]], page["has_more"]) == (ids[:2], True)
    after = call(daemon, "GET", f"/v1/models?limit=2&after_id={page['last_id']}").json()
    assert [r["id"] for r in after["data"]] == ids[2:4]
    control = daemon.client.request("GET", "/models")
    assert isinstance(control, dict)
    assert [row["id"] for row in control["models"]] == ids
    for name, public in (
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("opus", "claude-opus-5-5"),
    ):
        got = call(daemon, "GET", f"/v1/models/{name}")
        assert (got.status_code, got.json()["id"]) == (200, public)
    missing = call(daemon, "GET", "/v1/models/llama-9")
    assert (missing.status_code, missing.json()["error"]["type"]) == (404, "not_found_error")


def test_no_account_is_final_and_says_what_to_do(module_tmp: Path, fake: ThreadedFake) -> None:
    proc = start_daemon(module_tmp / "empty", fake)
    try:
        with (
            anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key) as client,
            pytest.raises(anthropic.APIStatusError) as caught,
        ):
            client.messages.create(
                model="claude-opus-5-5",
                max_tokens=5,
                messages=[{"role": "user", "content": "x"}],
            )
        response = caught.value.response
        assert response.headers["x-should-retry"] == "false"
        assert "kiroctl accounts login" in caught.value.message
        assert caught.value.request_id == response.headers["request-id"]
        served = [line for line in proc.log().splitlines() if " path=/v1/messages " in line]
        assert len(served) == 1, served  # the SDK took x-should-retry: false at its word
    finally:
        proc.kill()


def test_without_accounts_v1_models_lists_what_kiroctl_models_lists(
    module_tmp: Path, fake: ThreadedFake
) -> None:
    """No account yet: both SDKs and `kiroctl models` show kirod's built-in list, the same ids
    in the same order, so a user sees what will work before logging in."""
    proc = start_daemon(module_tmp / "no-accounts", fake)
    try:
        cli = CliRunner().invoke(main.cli, ["--socket", str(proc.socket_path), "models", "--json"])
        assert cli.exit_code == 0, cli.output
        listing = json.loads(cli.stdout)
        assert listing["source"] == "static"
        ids = [row["id"] for row in listing["models"]]
        assert ids
        with anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key) as claude:
            assert [model.id for model in claude.models.list(limit=1000)] == ids
            assert claude.models.retrieve(ids[0]).id == ids[0]
        with openai.OpenAI(base_url=f"{proc.base_url}/v1", api_key=proc.api_key) as gpt:
            assert [model.id for model in gpt.models.list()] == ids
        text = CliRunner().invoke(main.cli, ["--socket", str(proc.socket_path), "models"]).stdout
        assert "built-in list" in text
        assert all(name in text for name in ids)
    finally:
        proc.kill()


def test_a_keys_model_scope_applies_to_the_model_that_serves(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    answer = daemon.client.request(
        "POST", "/keys", {"name": "sonnet-only", "models": ["claude-sonnet-*"]}
    )
    assert isinstance(answer, dict)
    secret = answer["secret"]
    body = {"model": "opus", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    refused = post(daemon, body, {"authorization": f"Bearer {secret}"})
    assert refused.status_code == 403
    assert "claude-opus-5-5" in refused.json()["error"]["message"]  # the model that would serve
    assert refused.headers["x-should-retry"] == "false"
    service.enqueue(Reply(text="ok"))
    allowed = post(daemon, {**body, "model": "sonnet"}, {"authorization": f"Bearer {secret}"})
    assert allowed.status_code == 200, allowed.text


def test_count_tokens_judges_the_model_and_the_keys_scope(daemon: DaemonProcess) -> None:
    answer = daemon.client.request("POST", "/keys", {"name": "haiku-only", "models": ["*haiku*"]})
    assert isinstance(answer, dict)
    auth = {"authorization": f"Bearer {answer['secret']}"}
    body = {"model": "haiku", "messages": [{"role": "user", "content": "count me"}]}
    path = "/v1/messages/count_tokens"
    assert call(daemon, "POST", path, body, auth).status_code == 200
    refused = call(daemon, "POST", path, {**body, "model": "opus"}, auth)
    assert refused.status_code == 403
    unknown = call(daemon, "POST", path, {**body, "model": "llama-9-ultra"})
    assert (unknown.status_code, unknown.json()["error"]["type"]) == (404, "not_found_error")


def test_v1_models_in_the_anthropic_sdks_shape_and_the_openais(daemon: DaemonProcess) -> None:
    with anthropic.Anthropic(base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0) as c:
        listed = {model.id: model for model in c.models.list()}
        one = c.models.retrieve("opus")
    sonnet = listed["claude-sonnet-4-6"]
    assert (sonnet.max_input_tokens, sonnet.max_tokens) == (1_000_000, 64_000)  # the fake's
    assert (sonnet.line, sonnet.lifecycle, sonnet.display_name) == (
        "sonnet",
        "active",
        "Claude Sonnet 4.6",
    )
    assert listed["gpt-5.6-sol"].line is None
    assert (one.id, one.max_input_tokens, one.line) == ("claude-opus-5-5", 1_000_000, "opus")
    with openai.OpenAI(
        base_url=f"{daemon.base_url}/v1", api_key=daemon.api_key, max_retries=0
    ) as o:
        rows = {model.id: model.model_dump() for model in o.models.list()}
    assert rows["claude-sonnet-4-6"]["owned_by"] == "anthropic"
    assert "max_input_tokens" not in rows["claude-sonnet-4-6"]  # the OpenAI shape as before
