"""Extensions end to end: the shipped examples (contrib/extensions) and a failing one, found by
the real daemon through entry points without installing anything into the venv, driven with
the official SDKs over /v1/messages, /v1/responses (HTTP and WebSocket) and
/v1/chat/completions against the fake Kiro, and listed by `kiroctl extensions`."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from click.testing import CliRunner, Result

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ThreadedFake
from tests.support.distributions import dist_info
from tests.support.kiro_env import import_account, start_daemon

CONTRIB = Path(__file__).parents[2] / "contrib" / "extensions"
MODEL = "claude-sonnet-4-6"
MARK = " [via kirod]"
FAILS_ON = "please fail"
SECRET_DETAIL = "the failing hook's own words"

# A test extension beside the shipped ones: it fails the requests that ask for it.
FAILING = f"""
from kirod.extension import Extension, OptionSpec


class Failing(Extension):
    priority = 50
    schema = {{"token": OptionSpec(str, "", secret=True)}}

    async def on_request(self, request):
        if {FAILS_ON!r} in repr(request.messages):
            raise RuntimeError({SECRET_DETAIL!r})
        return request
"""


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    site = module_tmp / "site"
    project = tomllib.loads((CONTRIB / "pyproject.toml").read_text())["project"]
    dist_info(
        site, project["name"], project["version"], project["entry-points"]["kirod.extensions"]
    )
    dist_info(site, "kirod-test-failing", "9.9", {"failing": "kirod_test_failing:Failing"})
    (site / "kirod_test_failing.py").write_text(FAILING)
    config = module_tmp / "kirod.toml"
    config.write_text(
        "[extensions.redactor]\n"
        "[extensions.watermark]\n"
        f"text = {json.dumps(MARK)}\n"
        "[extensions.failing]\n"
        'token = "tok-secret-value"\n'
        "timeout_s = 2\n"
    )
    path = os.pathsep.join(filter(None, [str(site), str(CONTRIB), os.environ.get("PYTHONPATH")]))
    proc = start_daemon(
        module_tmp,
        fake,
        {
            "PYTHONPATH": path,
            "KIROD_CONFIG": str(config),
            "KIROD_ENABLE_CHAT_COMPLETIONS": "true",
        },
    )
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


def sent_content(service: FakeKiro) -> str:
    body = service.requests("chat")[-1].json
    assert isinstance(body, dict)
    content: str = body["conversationState"]["currentMessage"]["userInputMessage"]["content"]
    return content


def kiroctl(daemon: DaemonProcess, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--socket", str(daemon.socket_path), *args])


def test_the_redactor_masks_the_prompt_before_it_goes_upstream(
    claude: anthropic.Anthropic, service: FakeKiro, daemon: DaemonProcess
) -> None:
    prompt = "mail alice.b@example.com with sk-proj-abcdefghijklmnop1234 and AKIAABCDEFGHIJKLMNOP"
    message = claude.messages.create(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": prompt}]
    )
    sent = sent_content(service)
    assert sent == "mail [redacted] with [redacted] and [redacted]"
    assert message.content
    [row] = daemon.client.trace(last=1).requests
    assert row.extensions == ("redactor",)
    shown = kiroctl(daemon, "trace", "--last", "1")
    assert "changed by extensions: redactor" in shown.stdout


def test_a_prompt_with_nothing_to_mask_is_not_counted_as_changed(
    claude: anthropic.Anthropic, service: FakeKiro, daemon: DaemonProcess
) -> None:
    claude.messages.create(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert sent_content(service) == "hi"
    [row] = daemon.client.trace(last=1).requests
    assert row.extensions == ()


def test_the_watermark_ends_the_text_on_messages(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="Hello from Kiro."))
    message = claude.messages.create(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert message.content[0].text == "Hello from Kiro." + MARK  # type: ignore[union-attr]
    service.enqueue(Script(reply=Reply(text="one two three"), chunk_size=3))
    with claude.messages.stream(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "count"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "one two three" + MARK
    assert final.content[0].text == text  # type: ignore[union-attr]


def test_the_watermark_ends_the_text_on_responses(gpt: openai.OpenAI, service: FakeKiro) -> None:
    service.enqueue(Reply(text="Hello from Kiro."))
    response = gpt.responses.create(model=MODEL, input="hi")
    assert response.output_text == "Hello from Kiro." + MARK
    service.enqueue(Script(reply=Reply(text="one two three"), chunk_size=3))
    with gpt.responses.stream(model=MODEL, input="count") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        streamed = stream.get_final_response()
    assert "".join(deltas) == "one two three" + MARK
    assert streamed.output_text == "one two three" + MARK


def test_the_watermark_ends_the_text_on_chat_completions(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="Hello from Kiro."))
    completion = gpt.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.choices[0].message.content == "Hello from Kiro." + MARK


async def test_the_watermark_ends_the_text_over_the_responses_websocket(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    service.enqueue(Script(reply=Reply(text="Hello over a socket."), chunk_size=4))
    headers = {
        "Authorization": f"Bearer {daemon.api_key}",
        "OpenAI-Beta": "responses_websockets=2026-02-06",
    }
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
        session.ws_connect(daemon.base_url + "/v1/responses", headers=headers) as ws,
    ):
        body = {"type": "response.create", "model": MODEL, "input": "hi", "store": False}
        await ws.send_str(json.dumps(body))
        deltas: list[str] = []
        for _ in range(200):  # a turn is a few dozen frames
            event: dict[str, Any] = json.loads((await ws.receive(timeout=20)).data)
            if event["type"] == "response.output_text.delta":
                deltas.append(event["delta"])
            if event["type"] in ("response.completed", "response.failed", "error"):
                break
    assert event["type"] == "response.completed"
    assert "".join(deltas) == "Hello over a socket." + MARK


def test_a_failing_extension_is_a_500_envelope_without_its_text(
    claude: anthropic.Anthropic, gpt: openai.OpenAI, service: FakeKiro, daemon: DaemonProcess
) -> None:
    with pytest.raises(anthropic.InternalServerError) as anthropic_error:
        claude.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": FAILS_ON}]
        )
    assert anthropic_error.value.status_code == 500
    body: Any = anthropic_error.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "api_error"
    assert "'failing'" in body["error"]["message"]
    with pytest.raises(openai.InternalServerError) as openai_error:
        gpt.responses.create(model=MODEL, input=FAILS_ON)
    envelope: Any = openai_error.value.body
    assert envelope["code"] == "extension_failed"
    assert service.requests("chat") == []  # nothing went upstream
    for text in (json.dumps(body), json.dumps(envelope), daemon.log()):
        assert SECRET_DETAIL not in text
        assert "Traceback" not in text
    assert "RuntimeError" in daemon.log()  # the type is logged, with the extension's name


def test_kiroctl_extensions_lists_them_with_secrets_redacted(daemon: DaemonProcess) -> None:
    shown = kiroctl(daemon, "extensions")
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["redactor", "failing", "watermark"]
    assert "tok-secret-value" not in shown.stdout
    listing = json.loads(kiroctl(daemon, "extensions", "--json").stdout)["extensions"]
    by_name = {item["name"]: item for item in listing}
    assert by_name["redactor"]["version"] == "0.1.0"
    assert by_name["redactor"]["hooks"] == ["on_request"]
    assert by_name["watermark"]["options"] == {"text": MARK}
    assert by_name["watermark"]["on_failure"] == "skip"
    assert by_name["failing"]["options"] == {"token": "<redacted>"}
    assert (by_name["failing"]["version"], by_name["failing"]["timeout_s"]) == ("9.9", 2.0)
    config = json.loads(kiroctl(daemon, "config", "--json").stdout)
    assert "tok-secret-value" not in json.dumps(config)
