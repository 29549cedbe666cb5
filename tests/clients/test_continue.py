"""The real Continue CLI (`cn`, from npm) → the real kirod daemon → the fake Kiro service.

`make test` installs the pinned version (`tests/clients/versions.json`); these skip, saying why,
when it could not be installed. `KIROD_TEST_CONTINUE_BIN=/path/to/cn` drives any other binary.

Each test runs `cn -p --config FILE PROMPT` in a private HOME, with the guide's `config.yaml`
(provider `anthropic`) first, then `provider: openai` (Chat Completions, and Responses for a
`gpt-5…` model name). What 1.5.47 sends is in `captures/continue-1.5.47-default.json`
(`capture.py --client continue`): one streamed `POST /v1/messages` per model turn, with
`x-api-key`, `anthropic-beta: prompt-caching-2024-07-31` and its nine tools, and no session or
conversation id in any header or field, so kirod has nothing to keep its turns on one account.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ToolCall
from tests.clients import continue_env
from tests.clients.continue_env import Continue
from tests.clients.guide_snippets import GUIDE_PORT, guide_block
from tests.clients.kiro_bodies import (
    KIRO_MODEL,
    chats,
    current,
    new_access_lines,
    routes,
    tool_names,
)
from tests.clients.note_round_trip import (
    FINAL,
    assert_the_note_reached_kiro,
    call_first,
    write_the_note,
)


def readme_config(base_url: str) -> str:
    """The guide's Continue `config.yaml`, pointed at `base_url` instead of the default port."""
    block = guide_block("Continue CLI", "yaml")
    assert f"{GUIDE_PORT}/v1/" in block
    text: str = block.replace(GUIDE_PORT, base_url)
    return text


@pytest.fixture
def cn(
    continue_binary: continue_env.Binary, daemon: DaemonProcess, api_key: str, short_tmp: Path
) -> Continue:
    """cn with a fresh HOME, configured as the guide says, at the module's daemon."""
    client = Continue(continue_binary, api_key, short_tmp)
    client.configure(readme_config(daemon.base_url))
    return client


def ask_for_the_note(client: Continue, service: FakeKiro) -> str:
    """Script a `Read` of notes.txt (holding the canary) and the answer after it; the answer."""
    write_the_note(client.workdir)
    call_first(service, ToolCall(continue_env.READ_TOOL, {"filepath": "notes.txt"}))
    return FINAL


def test_hello_with_the_readme_configuration(
    cn: Continue, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """The guide's `config.yaml` as written: `cn -p hello` prints what the fake said, through
    `POST /v1/messages` with cn's own tools, from the model the file names."""
    answer = "Hello from the fake Kiro, Continue edition."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    assert cn.run("hello").succeeded() == answer
    (body,) = chats(service)
    assert current(body)["modelId"] == KIRO_MODEL
    assert "hello" in current(body)["content"]
    assert {continue_env.READ_TOOL, "Bash", "List"} <= tool_names(body)
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/messages", "200")]
    assert lines[0]["upstream_model"] == KIRO_MODEL


def test_read_tool_round_trip(cn: Continue, service: FakeKiro, daemon: DaemonProcess) -> None:
    """The model asks for cn's `Read`; cn reads the file and sends it back as a tool result;
    the model's answer after it is what cn prints."""
    final = ask_for_the_note(cn, service)
    mark = len(daemon.log())
    assert cn.run("What does notes.txt say?").succeeded() == final
    assert_the_note_reached_kiro(service, continue_env.READ_TOOL)
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/messages", "200")] * 2


def test_a_wrong_key_is_refused_once_and_clearly(
    continue_binary: continue_env.Binary, daemon: DaemonProcess, short_tmp: Path
) -> None:
    """A key kirod never issued: cn exits 1 showing kirod's 401 in Anthropic's envelope
    (`authentication_error`, "invalid API key"), and does not retry; the key is nowhere in
    kirod's log."""
    wrong = "sk-kirod-" + "x" * 43
    client = Continue(continue_binary, wrong, short_tmp)
    client.configure(readme_config(daemon.base_url))
    mark = len(daemon.log())
    shown = json.loads(client.run("hello").failed())
    assert shown["error"] == {"type": "authentication_error", "message": "invalid API key"}
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/messages", "401")]
    assert shown["request_id"] == lines[0]["request_id"]
    assert wrong not in daemon.log()


def test_the_openai_provider_while_chat_completions_are_off(
    cn: Continue, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """`provider: openai` speaks Chat Completions, off by default: cn stops at once and shows
    kirod's message, which names the setting. Nothing reaches Kiro."""
    cn.configure(continue_env.config(daemon.base_url, continue_env.OPENAI))
    mark = len(daemon.log())
    message = cn.run("hello").failed()
    assert message.startswith("404 ")
    assert "enable_chat_completions = true" in message
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/chat/completions", "404")]
    assert service.requests("chat") == []


def test_the_openai_provider_over_chat_completions(
    cn: Continue, service: FakeKiro, chat_daemon: DaemonProcess
) -> None:
    """With Chat Completions on, `provider: openai` makes the same tool round trip through
    `POST /v1/chat/completions` (the daemon's generated key, in `Authorization: Bearer`)."""
    client = Continue(cn.binary, chat_daemon.api_key, cn.workdir.parent / "chat")
    client.configure(continue_env.config(chat_daemon.base_url, continue_env.OPENAI))
    final = ask_for_the_note(client, service)
    mark = len(chat_daemon.log())
    assert client.run("What does notes.txt say?").succeeded() == final
    assert_the_note_reached_kiro(service, continue_env.READ_TOOL)
    lines = new_access_lines(chat_daemon, mark)
    assert routes(lines) == [("/v1/chat/completions", "200")] * 2


def test_a_gpt_5_model_name_speaks_responses(
    cn: Continue, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """`provider: openai` with a `gpt-5…` model: cn switches to `POST /v1/responses` by the
    name alone, which kirod serves by default, and the tool round trip works the same."""
    cn.configure(continue_env.config(daemon.base_url, continue_env.OPENAI, "gpt-5.6-sol"))
    final = ask_for_the_note(cn, service)
    mark = len(daemon.log())
    assert cn.run("What does notes.txt say?").succeeded() == final
    assert_the_note_reached_kiro(service, continue_env.READ_TOOL)
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/responses", "200")] * 2
