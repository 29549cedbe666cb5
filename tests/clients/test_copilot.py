"""The real GitHub Copilot CLI (from npm) → the real kirod daemon → the fake Kiro service.

`make test` installs the pinned version (`tests/clients/versions.json`); these skip, saying why,
when it could not be installed. `KIROD_TEST_COPILOT_BIN=/path/to/copilot` drives any other binary.

Each test runs `copilot -p PROMPT` in a private HOME with the guide's variables (bring your own
key, offline, provider type `anthropic`) first, then provider type `openai` over Responses and
Chat Completions. What 1.0.102 sends is in `captures/copilot-1.0.102-default.json`
(`capture.py --client copilot`): one streamed `POST /v1/messages` per model turn from the
Anthropic JS SDK, with `x-api-key`, `x-initiator` and `x-interaction-type`, seventeen tools,
`thinking: adaptive` and `output_config.effort`, and no session id. Over Responses it sends a
`prompt_cache_key` of its session, which kirod already reads for conversation affinity.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ToolCall
from tests.clients import copilot_env
from tests.clients.copilot_env import Copilot
from tests.clients.guide_snippets import GUIDE_PORT, KEY_VARIABLE, guide_block
from tests.clients.kiro_bodies import (
    KIRO_MODEL,
    chats,
    current,
    new_access_lines,
    routes,
    tool_names,
)
from tests.clients.note_round_trip import (
    CANARY,
    FINAL,
    assert_the_note_reached_kiro,
    call_first,
    write_the_note,
)

KEY_REFERENCE = f"${KEY_VARIABLE}"


def readme_variables(base_url: str, token: str) -> dict[str, str]:
    """The guide's `export` lines for Copilot, pointed at `base_url` with `token`."""
    found = {}
    for line in guide_block("Copilot CLI", "sh").splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] == "export":
            name, _, value = words[1].partition("=")
            found[name] = value.replace(GUIDE_PORT, base_url).replace(KEY_REFERENCE, token)
    assert found["COPILOT_PROVIDER_BASE_URL"] == base_url
    assert found["COPILOT_PROVIDER_API_KEY"] == token
    return found


@pytest.fixture(scope="module")
def package_cache(module_tmp: Path) -> Path:
    """Where Copilot unpacks its package: once for the module, not once per test."""
    return module_tmp / "copilot-cache"


@pytest.fixture
def copilot(
    copilot_binary: copilot_env.Binary,
    daemon: DaemonProcess,
    api_key: str,
    short_tmp: Path,
    package_cache: Path,
) -> Copilot:
    """Copilot CLI with a fresh HOME and the guide's variables, at the module's daemon."""
    variables = readme_variables(daemon.base_url, api_key)
    return Copilot(copilot_binary, variables, short_tmp, package_cache)


def variant(base: Copilot, name: str, provider: dict[str, str], cache: Path) -> Copilot:
    """Another Copilot beside `base` (its own HOME and working directory) with `provider`."""
    return Copilot(base.binary, provider, base.workdir.parent / name, cache)


def the_note_round_trip(client: Copilot, service: FakeKiro) -> list[str]:
    """Copilot answers after running its `view` on the note, whose text reached Kiro as the
    tool result of the second model turn; the Kiro conversation id of each turn."""
    note = write_the_note(client.workdir)
    call_first(service, ToolCall(copilot_env.READ_TOOL, {"path": str(note)}))
    run = client.run_json("What does notes.txt say?")
    assert run.succeeded() == FINAL
    (done,) = run.data("tool.execution_complete")
    assert done["success"] is True, done
    assert done["result"]["content"].strip() == CANARY
    bodies = assert_the_note_reached_kiro(service, copilot_env.READ_TOOL)
    return [body["conversationState"]["conversationId"] for body in bodies]


def test_hello_with_the_readme_variables(
    copilot: Copilot, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """The guide's variables as written: `copilot -p hello -s` prints what the fake said,
    through `POST /v1/messages` with Copilot's own tools, from the model they name."""
    answer = "Hello from the fake Kiro, Copilot edition."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    run = copilot.run("hello", "-s")
    assert run.exit_code == 0, run.describe()
    assert run.stdout.strip() == answer
    (body,) = chats(service)
    assert current(body)["modelId"] == KIRO_MODEL
    assert "hello" in current(body)["content"]
    assert {copilot_env.READ_TOOL, "bash", "edit"} <= tool_names(body)
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/messages", "200")]
    assert lines[0]["upstream_model"] == KIRO_MODEL


def test_view_tool_round_trip(copilot: Copilot, service: FakeKiro, daemon: DaemonProcess) -> None:
    """The model asks for Copilot's `view`; Copilot reads the file (no permission flag needed
    in its working directory) and sends it back; the model's answer after it is the last
    message."""
    mark = len(daemon.log())
    the_note_round_trip(copilot, service)
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/messages", "200")] * 2


def test_a_wrong_key_is_refused_clearly(
    copilot: Copilot, service: FakeKiro, daemon: DaemonProcess, package_cache: Path
) -> None:
    """A key kirod never issued: every attempt gets kirod's 401 (Copilot retries an auth error
    twice), whose message and request id Copilot records, and the session ends naming the
    variable to check; nothing reaches Kiro and the key is nowhere in kirod's log."""
    wrong = "sk-kirod-" + "x" * 43
    client = variant(copilot, "wrong", readme_variables(daemon.base_url, wrong), package_cache)
    mark = len(daemon.log())
    run = client.run_json("hello")
    error = run.failed()
    assert error["errorType"] == "authentication"
    assert error["statusCode"] == 401
    assert "COPILOT_PROVIDER_API_KEY" in error["message"]
    lines = new_access_lines(daemon, mark)
    assert 1 <= len(lines) <= 3, lines
    assert set(routes(lines)) == {("/v1/messages", "401")}
    failures = run.data("model.call_failure")
    assert [failure["statusCode"] for failure in failures] == [401] * len(lines)
    for failure, line in zip(failures, lines, strict=True):
        assert json.loads(failure["errorMessage"])["message"] == "invalid API key"
        assert failure["providerCallId"] == line["request_id"]
    assert error["providerCallId"] == lines[-1]["request_id"]
    assert service.requests("chat") == []
    assert wrong not in daemon.log()


def test_the_responses_wire_keeps_a_session_on_one_conversation(
    copilot: Copilot, service: FakeKiro, daemon: DaemonProcess, api_key: str, package_cache: Path
) -> None:
    """Provider type `openai` with `COPILOT_PROVIDER_WIRE_API=responses`: the round trip goes
    through `POST /v1/responses`, and the session's `prompt_cache_key` keeps both turns on one
    Kiro conversation (kirod's affinity binding)."""
    provider = copilot_env.provider_env(
        daemon.base_url, api_key, copilot_env.OPENAI, copilot_env.RESPONSES
    )
    client = variant(copilot, "responses", provider, package_cache)
    mark = len(daemon.log())
    conversations = the_note_round_trip(client, service)
    assert len(set(conversations)) == 1, conversations
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/responses", "200")] * 2


def test_chat_completions_while_off(
    copilot: Copilot, service: FakeKiro, daemon: DaemonProcess, api_key: str, package_cache: Path
) -> None:
    """Provider type `openai` speaks Chat Completions by default, off in kirod by default:
    Copilot shows its own "not found on provider" for the 404, once, and keeps kirod's
    message (which names the setting) only in its JSON events. Nothing reaches Kiro."""
    provider = copilot_env.provider_env(daemon.base_url, api_key, copilot_env.OPENAI)
    client = variant(copilot, "off", provider, package_cache)
    mark = len(daemon.log())
    run = client.run_json("hello")
    error = run.failed()
    assert error["statusCode"] == 404
    assert "not found on provider" in error["message"]
    (failure,) = run.data("model.call_failure")
    assert "enable_chat_completions = true" in failure["errorMessage"]
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/chat/completions", "404")]
    assert service.requests("chat") == []


def test_chat_completions_when_on(
    copilot: Copilot, service: FakeKiro, chat_daemon: DaemonProcess, package_cache: Path
) -> None:
    """With Chat Completions on, provider type `openai` makes the same round trip through
    `POST /v1/chat/completions`."""
    provider = copilot_env.provider_env(
        chat_daemon.base_url, chat_daemon.api_key, copilot_env.OPENAI, copilot_env.COMPLETIONS
    )
    client = variant(copilot, "chat", provider, package_cache)
    mark = len(chat_daemon.log())
    the_note_round_trip(client, service)
    lines = new_access_lines(chat_daemon, mark)
    assert routes(lines) == [("/v1/chat/completions", "200")] * 2
