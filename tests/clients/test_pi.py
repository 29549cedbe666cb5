"""The real pi coding agent (`pi`, from npm) → the real kirod daemon → the fake Kiro service.

`make test` installs the pinned package (`tests/clients/versions.json`) and runs these; they
skip, saying why, when it could not be installed. `KIROD_TEST_PI_BIN=/path/to/pi` drives any
other binary.

Each test runs `pi -p --mode json --model <provider>/claude-sonnet-4-6 …` in a private HOME
whose `~/.pi/agent/models.json` is the guide's, as written (or with the one model field the
guide adds for thinking or images): provider `kirod` over Anthropic Messages, `kirod-responses`
over OpenAI Responses. What 0.73.1 sends is in
`captures/pi-0.73.1-anthropic-messages.json` and `…-openai-responses.json` (`capture.py
--client pi`): one streamed request per model turn with its four tools (`read`, `bash`, `edit`,
`write`). Over Messages: `x-api-key`, `eager_input_streaming` on each tool, `cache_control` on
the system prompt and the last user block, no thinking, no session id. Over Responses: the
system prompt as a `role: system` input item, `store: false`, and pi's session id three times,
as `prompt_cache_key`, the `session_id` header and `x-client-request-id`.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Fault, Reply, Script, ToolCall
from tests.clients import pi_env
from tests.clients.guide_snippets import guide_json
from tests.clients.kiro_bodies import (
    KIRO_MODEL,
    chats,
    current,
    new_access_lines,
    routes,
    tool_names,
    tool_results,
)
from tests.clients.note_round_trip import (
    CANARY,
    FINAL,
    assert_the_note_reached_kiro,
    call_first,
    write_the_note,
)
from tests.clients.pi_env import MESSAGES, RESPONSES, Pi

pytestmark = pytest.mark.timeout(90)

PATHS = {MESSAGES: "/v1/messages", RESPONSES: "/v1/responses"}
BOTH = pytest.mark.parametrize("provider", [MESSAGES, RESPONSES])
SYSTEM_PROMPT = "operating inside pi, a coding agent harness"
"""A phrase of pi's own system prompt."""


@pytest.fixture
def pi(pi_binary: pi_env.Binary, daemon: DaemonProcess, api_key: str, short_tmp: Path) -> Pi:
    """pi with a fresh HOME whose models.json is the guide's, at the module's daemon."""
    client = Pi(pi_binary, api_key, short_tmp)
    client.configure(guide_json("pi", daemon.base_url))
    return client


def everything_sent(body: dict[str, Any]) -> str:
    return json.dumps(body["conversationState"], ensure_ascii=False)


@BOTH
def test_hello_with_the_guides_models_json(
    pi: Pi, service: FakeKiro, daemon: DaemonProcess, provider: str
) -> None:
    """`pi -p hello` with the guide's provider answers what the fake said, through the API the
    provider names, one request, with pi's system prompt and its four tools reaching Kiro."""
    answer = f"Hello from the fake Kiro, pi over {provider}."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    assert pi.run("hello", provider).succeeded() == answer
    (body,) = chats(service)
    assert current(body)["modelId"] == KIRO_MODEL
    assert "hello" in current(body)["content"]
    assert SYSTEM_PROMPT in everything_sent(body)
    assert {"read", "bash", "edit", "write"} <= tool_names(body)
    lines = new_access_lines(daemon, mark)
    assert [(line["path"], line["status"]) for line in lines] == [(PATHS[provider], "200")]
    assert lines[0]["upstream_model"] == KIRO_MODEL


@BOTH
def test_read_tool_round_trip(
    pi: Pi, service: FakeKiro, daemon: DaemonProcess, provider: str
) -> None:
    """The model asks for pi's `read`; pi reads the note and sends it back as the tool's result;
    the answer after it is the run's last message."""
    write_the_note(pi.workdir)
    call_first(service, ToolCall(pi_env.READ_TOOL, {"path": "notes.txt"}))
    mark = len(daemon.log())
    run = pi.run("What does notes.txt say?", provider)
    assert run.succeeded() == FINAL
    (result,) = run.tool_results(pi_env.READ_TOOL)
    assert not result["isError"], result
    assert CANARY in json.dumps(result["content"])
    assert_the_note_reached_kiro(service, pi_env.READ_TOOL)
    lines = new_access_lines(daemon, mark)
    assert [(line["path"], line["status"]) for line in lines] == [(PATHS[provider], "200")] * 2


PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
"""A one-pixel PNG."""


def test_an_image_read_over_responses_reaches_kiro_as_an_image(
    pi: Pi, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """With `"input": ["text", "image"]` on the model, pi's `read` of a PNG answers over
    Responses with a `function_call_output` whose `output` is a list (`input_text` and an
    `input_image` data URL); kirod takes it, and Kiro gets the tool's text as the result and
    the picture as an image of the message."""
    document = guide_json("pi", daemon.base_url)
    document["providers"][RESPONSES]["models"][0]["input"] = ["text", "image"]
    pi.configure(document)
    (pi.workdir / "dot.png").write_bytes(PNG)
    call_first(service, ToolCall(pi_env.READ_TOOL, {"path": "dot.png"}))
    mark = len(daemon.log())
    assert pi.run("What is in dot.png?", RESPONSES).succeeded() == FINAL
    assert routes(new_access_lines(daemon, mark)) == [("/v1/responses", "200")] * 2
    first, second = chats(service)
    assert not current(first).get("images")
    (result,) = tool_results(second)
    assert result["status"] == "success"
    assert "image/png" in json.dumps(result["content"])
    (image,) = current(second)["images"]
    assert base64.b64decode(image["source"]["bytes"]) == PNG


def conversation_id(body: dict[str, Any]) -> str:
    found: str = body["conversationState"]["conversationId"]
    return found


def assistant_history(body: dict[str, Any]) -> str:
    history = body["conversationState"].get("history", [])
    return json.dumps(
        [turn["assistantResponseMessage"] for turn in history if "assistantResponseMessage" in turn]
    )


def reasoning_models(base_url: str) -> dict[str, Any]:
    """The guide's models.json with `"reasoning": true` on its model: pi then asks for thinking
    at its thinking level (`--thinking`, `medium` by default)."""
    document = guide_json("pi", base_url)
    for provider in document["providers"].values():
        for model in provider["models"]:
            model["reasoning"] = True
    return document


@BOTH
def test_thinking_is_shown_and_taken_back_on_the_next_turn(
    pi: Pi, service: FakeKiro, daemon: DaemonProcess, provider: str
) -> None:
    """With `"reasoning": true` and `--thinking high`, pi asks for thinking (Messages: adaptive
    with `output_config.effort`; Responses: `reasoning.effort` with encrypted reasoning
    included); the model's thinking comes out as pi's thinking block. `pi -p --continue` sends
    the session back (its thinking, and over Responses `message` items with `output_text`),
    which kirod accepts, and Kiro sees the first answer in the history. Over Responses pi's
    session id (`prompt_cache_key`) keeps both turns on one Kiro conversation; over Messages
    pi sends no session id, so each turn is a conversation of its own."""
    pi.configure(reasoning_models(daemon.base_url))
    service.default_script = Script(reply=Reply(text="Answer one.", thinking="Pondering it."))
    first = pi.run("hello", provider, "--thinking", "high")
    assert first.succeeded() == "Answer one."
    (message,) = first.assistant()
    thoughts = [part for part in message["content"] if part.get("type") == "thinking"]
    assert [part["thinking"] for part in thoughts] == ["Pondering it."], message
    (body,) = chats(service)  # where Kiro reads the effort (docs/KIRO-PROTOCOL.md §2.6)
    fields = body["additionalModelRequestFields"]
    assert (fields["output_config"], fields["thinking"]) == (
        {"effort": "high"},
        {"type": "adaptive"},
    )
    service.default_script = Script(reply=Reply(text="Answer two."))
    mark = len(daemon.log())
    second = pi.run("and again", provider, "--continue", "--thinking", "high")
    assert second.succeeded() == "Answer two."
    assert [line["status"] for line in new_access_lines(daemon, mark)] == ["200"]
    first_body, second_body = chats(service)
    assert "and again" in current(second_body)["content"]
    assert "Answer one." in assistant_history(second_body)
    same = conversation_id(first_body) == conversation_id(second_body)
    assert same is (provider == RESPONSES)


SUMMARY_PROMPT = "The messages above are a conversation to summarize."
"""What pi asks the model when it compacts (its compaction prompt)."""


@BOTH
def test_a_full_window_makes_pi_compact_and_send_the_turn_again(
    pi: Pi, service: FakeKiro, daemon: DaemonProcess, provider: str
) -> None:
    """Kiro says the window is full (MODEL_CONTEXT_WINDOW_EXCEEDED): kirod's 400 ("prompt is
    too long", on both APIs) is what pi takes for an overflow. It compacts at once (a summary
    request), and sends the turn again, instead of retrying the 400 or failing the run."""
    service.default_script = Script(reply=Reply(text="Answer one."))
    assert pi.run("hello", provider).succeeded() == "Answer one."
    service.clear_requests()
    service.enqueue(
        Script(fault=Fault.CONTEXT_WINDOW_EXCEEDED), Reply(text="A summary."), Reply(text="Two.")
    )
    mark = len(daemon.log())
    run = pi.run("and again", provider, "--continue")
    assert run.exit_code == 0, run.describe()
    kinds = [event.get("type") for event in run.events]
    assert "auto_retry_start" not in kinds, run.describe()
    compactions = [event for event in run.events if event.get("type") == "compaction_start"]
    assert [event["reason"] for event in compactions] == ["overflow"], run.describe()
    (failed,) = [m for m in run.assistant() if m.get("stopReason") == "error"]
    assert "prompt is too long" in failed["errorMessage"]
    path = PATHS[provider]
    assert routes(new_access_lines(daemon, mark)) == [(path, "400"), (path, "200"), (path, "200")]
    refused, summary, again = chats(service)
    assert SUMMARY_PROMPT in current(summary)["content"]
    assert "and again" in current(refused)["content"] == current(again)["content"]


@BOTH
def test_a_cut_answer(pi: Pi, service: FakeKiro, daemon: DaemonProcess, provider: str) -> None:
    """Kiro ends the answer mid-way (a clean end with no stop: docs/KIRO-PROTOCOL.md §3.4).
    Over Messages kirod says `max_tokens` and pi shows the turn stopped for `length`. Over
    Responses kirod ends with `response.incomplete` (`max_output_tokens`), which pi 0.73.1 does
    not read (it takes its stop and usage only from `response.completed`): it shows the cut text
    as a finished answer. The guide says so."""
    service.default_script = Script(
        reply=Reply(text="x" * 300), fault=Fault.CUT_GENERATION, fault_at=3
    )
    run = pi.run("hello", provider)
    assert run.exit_code == 0, run.describe()
    (message,) = run.assistant()
    assert 0 < len(run.answer) < 300
    expected = "length" if provider == MESSAGES else "stop"
    assert message["stopReason"] == expected, run.describe()
