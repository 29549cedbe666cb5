"""The real Kilo Code CLI (`kilo`, from npm) → the real kirod daemon → the fake Kiro service.

`make test` installs the pinned binary (`tests/clients/versions.json`: the Linux x64 package)
and runs these; they skip, saying why, when it could not be installed.
`KIROD_TEST_KILO_CODE_BIN=/path/to/kilo` drives any other binary.

Each test runs `kilo run --format json …` in a private HOME whose `~/.config/kilo/kilo.json` is
the guide's (the `@ai-sdk/anthropic` provider), or the Responses variant. What 7.7.7 sends is in
`captures/kilo-code-7.7.7-default.json` (`capture.py --client kilo-code`): one streamed
`POST /v1/messages` per model turn, with `x-api-key` and Kilo's session id as
`x-session-affinity` (the header kirod reads for affinity) and `x-session-id`, and no title
request while only kirod is enabled.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ToolCall
from tests.clients import kilo_env
from tests.clients.guide_snippets import guide_json
from tests.clients.kilo_env import KiloCode
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

pytestmark = pytest.mark.timeout(90)  # a run takes 8 to 20 s on two busy cores


@pytest.fixture
def kilo(
    kilo_binary: kilo_env.Binary, daemon: DaemonProcess, api_key: str, short_tmp: Path
) -> KiloCode:
    """Kilo Code with a fresh HOME, configured as the guide says, at the module's daemon."""
    client = KiloCode(kilo_binary, api_key, short_tmp)
    client.configure(guide_json("Kilo Code CLI", daemon.base_url))
    return client


def test_hello_with_the_readme_configuration(
    kilo: KiloCode, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """The guide's `kilo.json` as written: `kilo run` answers what the fake said, through
    `POST /v1/messages`, from the model the file names, with Kilo's own tools declared."""
    answer = "Hello from the fake Kiro, Kilo Code edition."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    run = kilo.run("hello there")
    assert run.succeeded() == answer
    (body,) = chats(service)
    assert current(body)["modelId"] == KIRO_MODEL
    assert "hello there" in current(body)["content"]
    assert {"bash", "read", "edit", "write"} <= tool_names(body)
    (line,) = new_access_lines(daemon, mark)
    assert (line["path"], line["status"], line["upstream_model"]) == (
        "/v1/messages",
        "200",
        KIRO_MODEL,
    )


def test_read_tool_round_trip_on_one_conversation(
    kilo: KiloCode, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """The model asks for Kilo's `read`; Kilo reads the file and sends its content back as a
    tool result; the model's answer after it is the run's last text. Both turns carry Kilo's
    session id in `x-session-affinity`, so kirod keeps them in one Kiro conversation."""
    note = write_the_note(kilo.workdir)
    call_first(service, ToolCall("read", {"filePath": str(note)}))
    mark = len(daemon.log())
    run = kilo.run("What does notes.txt say?")
    assert run.succeeded().endswith(FINAL)
    assert CANARY in run.tool_output("read")
    bodies = assert_the_note_reached_kiro(service, "read")
    assert len({body["conversationState"]["conversationId"] for body in bodies}) == 1
    assert [line["status"] for line in new_access_lines(daemon, mark)] == ["200", "200"]


def test_the_responses_provider(kilo: KiloCode, service: FakeKiro, daemon: DaemonProcess) -> None:
    """`@ai-sdk/openai` instead: Kilo speaks the Responses API, and it works the same."""
    kilo.configure(kilo_env.config(daemon.base_url, kilo_env.OPENAI))
    answer = "Hello over Responses."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    assert kilo.run("hello there").succeeded() == answer
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/responses", "200")]
    assert {current(body)["modelId"] for body in chats(service)} == {KIRO_MODEL}


def test_a_wrong_key_is_refused_once_and_clearly(
    kilo_binary: kilo_env.Binary, service: FakeKiro, daemon: DaemonProcess, short_tmp: Path
) -> None:
    """A key kirod never issued: a 401 in Anthropic's envelope, which Kilo shows and does not
    retry; nothing reaches Kiro and the key is nowhere in kirod's log."""
    wrong = "sk-kirod-" + "x" * 43
    client = KiloCode(kilo_binary, wrong, short_tmp)
    client.configure(kilo_env.config(daemon.base_url))
    mark = len(daemon.log())
    error = client.run("hello there").failed()
    assert error["name"] == "APIError"
    data = error["data"]
    assert (data["statusCode"], data["isRetryable"]) == (401, False)
    assert data["message"] == "invalid API key"
    assert json.loads(data["responseBody"])["error"]["type"] == "authentication_error"
    assert [line["status"] for line in new_access_lines(daemon, mark)] == ["401"]
    assert service.requests("chat") == []
    assert wrong not in daemon.log()
