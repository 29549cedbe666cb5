"""The real pi coding agent (`pi`, from npm) → the real kirod daemon → the fake Kiro service.

`make test` installs the pinned package (`tests/clients/versions.json`) and runs these; they
skip, saying why, when it could not be installed. `KIROD_TEST_PI_BIN=/path/to/pi` drives any
other binary.

Each test runs `pi -p --mode json --model <provider>/claude-sonnet-4-6 …` in a private HOME
whose `~/.pi/agent/models.json` is the guide's, as written: provider `kirod` over Anthropic
Messages, `kirod-responses` over OpenAI Responses. What 0.73.1 sends is in
`captures/pi-0.73.1-anthropic-messages.json` and `…-openai-responses.json` (`capture.py
--client pi`): one streamed request per model turn with its four tools (`read`, `bash`, `edit`,
`write`). Over Messages: `x-api-key`, `eager_input_streaming` on each tool, `cache_control` on
the system prompt and the last user block, no thinking, no session id. Over Responses: the
system prompt as a `role: system` input item, `store: false`, and pi's session id three times,
as `prompt_cache_key`, the `session_id` header and `x-client-request-id`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ToolCall
from tests.clients import pi_env
from tests.clients.guide_snippets import guide_json
from tests.clients.kiro_bodies import KIRO_MODEL, chats, current, new_access_lines, tool_names
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


def conversation_id(body: dict[str, Any]) -> str:
    found: str = body["conversationState"]["conversationId"]
    return found


def assistant_history(body: dict[str, Any]) -> str:
    history = body["conversationState"].get("history", [])
    return json.dumps(
        [turn["assistantResponseMessage"] for turn in history if "assistantResponseMessage" in turn]
    )


@BOTH
def test_continue_sends_the_history_back(
    pi: Pi, service: FakeKiro, daemon: DaemonProcess, provider: str
) -> None:
    """`pi -p --continue` resumes the last session: kirod takes pi's history (over Responses
    its `message` items with `output_text`), and Kiro sees the first answer there. Over
    Responses pi's session id (`prompt_cache_key`) keeps both turns on one Kiro conversation;
    over Messages pi sends no session id, so each turn is a conversation of its own."""
    service.default_script = Script(reply=Reply(text="Answer one."))
    assert pi.run("hello", provider).succeeded() == "Answer one."
    service.default_script = Script(reply=Reply(text="Answer two."))
    mark = len(daemon.log())
    assert pi.run("and again", provider, "--continue").succeeded() == "Answer two."
    assert [line["status"] for line in new_access_lines(daemon, mark)] == ["200"]
    first, second = chats(service)
    assert "and again" in current(second)["content"]
    assert "Answer one." in assistant_history(second)
    same = conversation_id(first) == conversation_id(second)
    assert same is (provider == RESPONSES)


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
    included); the model's thinking comes out as pi's thinking block, and `--continue` sends it
    back, which kirod accepts."""
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
    service.clear_requests()
    service.default_script = Script(reply=Reply(text="Answer two."))
    mark = len(daemon.log())
    second = pi.run("and again", provider, "--continue", "--thinking", "high")
    assert second.succeeded() == "Answer two."
    assert [line["status"] for line in new_access_lines(daemon, mark)] == ["200"]
    assert "Answer one." in assistant_history(chats(service)[-1])
