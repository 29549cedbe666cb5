"""The real Cline CLI (`cline`, from npm) → the real kirod daemon → the fake Kiro service.

`make test` installs the pinned binary (`tests/clients/versions.json`: the Linux x64 package)
and runs these; they skip, saying why, when it could not be installed.
`KIROD_TEST_CLINE_BIN=/path/to/cline` drives any other binary.

Each test runs `cline --json --data-dir ~/.cline/data "…"` in a private HOME whose
`~/.cline/data/settings/providers.json` is the guide's (Anthropic at kirod's base URL), or what
`cline auth` writes for its OpenAI modes. What 3.0.65 sends is in
`captures/cline-3.0.65-default.json` (`capture.py --client cline`): one streamed
`POST /v1/messages` per model turn with `x-api-key`, and no session, conversation or thread id in
a header or the body, so kirod has nothing to keep a task on one account with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ToolCall
from tests.clients import cline_env
from tests.clients.cline_env import Cline
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
    CANARY,
    FINAL,
    assert_the_note_reached_kiro,
    call_first,
    write_the_note,
)

GUIDE_KEY = "sk-kirod-…"


@pytest.fixture
def cline(
    cline_binary: cline_env.Binary, daemon: DaemonProcess, api_key: str, short_tmp: Path
) -> Iterator[Cline]:
    """Cline with a fresh HOME, configured as the guide says, at the module's daemon; no hub
    daemon of its own outlives the test."""
    client = Cline(cline_binary, short_tmp)
    client.configure(readme_providers(daemon.base_url, api_key))
    try:
        yield client
    finally:
        cline_env.stop_hubs(client.workdir)


def readme_providers(base_url: str, token: str) -> dict[str, Any]:
    """The guide's `providers.json`, with `base_url` and `token` for the port and the key."""
    block = guide_block("Cline CLI", "json")
    assert GUIDE_KEY in block
    document: dict[str, Any] = json.loads(
        block.replace(GUIDE_PORT, base_url).replace(GUIDE_KEY, token)
    )
    return document


def test_hello_with_the_readme_configuration(
    cline: Cline, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """The guide's `providers.json` as written: the run's result is what the fake said,
    through `POST /v1/messages`, from the model the file names, with Cline's tools declared."""
    answer = "Hello from the fake Kiro, Cline edition."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    run = cline.run("say hello")
    assert run.succeeded() == answer
    (body,) = chats(service)
    assert current(body)["modelId"] == KIRO_MODEL
    assert "say hello" in current(body)["content"]
    assert {"read_files", "run_commands", "editor"} <= tool_names(body)
    assert cline_env.hubs(cline.workdir) == []  # `--data-dir`: the run was served in process
    (line,) = new_access_lines(daemon, mark)
    assert (line["path"], line["status"], line["upstream_model"]) == (
        "/v1/messages",
        "200",
        KIRO_MODEL,
    )


def test_read_files_round_trip(cline: Cline, service: FakeKiro, daemon: DaemonProcess) -> None:
    """The model asks for Cline's `read_files`; Cline reads the file and sends its content back
    as a tool result; the model's answer after it is the run's result."""
    note = write_the_note(cline.workdir)
    call_first(service, ToolCall("read_files", {"files": [{"path": str(note)}]}))
    mark = len(daemon.log())
    run = cline.run("What does notes.txt say?")
    assert run.succeeded() == FINAL
    (output,) = run.tool_outputs("read_files")
    assert [item["success"] for item in output] == [True]
    assert CANARY in output[0]["result"]
    assert_the_note_reached_kiro(service, "read_files")
    assert [line["status"] for line in new_access_lines(daemon, mark)] == ["200", "200"]


def test_the_responses_provider_set_by_cline_auth(
    cline: Cline, service: FakeKiro, daemon: DaemonProcess, api_key: str
) -> None:
    """`cline auth --provider openai-native --baseurl …` as its help says: Cline speaks the
    Responses API, and it works the same."""
    cline.auth(cline_env.OPENAI_NATIVE, api_key, daemon.base_url)
    answer = "Hello over Responses."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    assert cline.run("say hello").succeeded() == answer
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/responses", "200")]
    assert {current(body)["modelId"] for body in chats(service)} == {KIRO_MODEL}


def test_chat_completions_while_off_say_how_to_turn_them_on(
    cline: Cline, service: FakeKiro, daemon: DaemonProcess, api_key: str
) -> None:
    """`cline auth --provider openai` (OpenAI-compatible) needs Chat Completions, off by
    default: Cline stops and shows kirod's message, which names the setting. Nothing reaches
    Kiro."""
    cline.auth(cline_env.OPENAI_COMPATIBLE, api_key, daemon.base_url)
    mark = len(daemon.log())
    error = cline.run("say hello").failed()
    assert "enable_chat_completions = true" in error["error"]["message"]
    assert error["recoverable"] is False
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/chat/completions", "404")]
    assert service.requests("chat") == []


def test_a_wrong_key_is_refused_once_and_clearly(
    cline_binary: cline_env.Binary, service: FakeKiro, daemon: DaemonProcess, short_tmp: Path
) -> None:
    """A key kirod never issued: kirod's 401 message, which Cline shows as an `auth` error
    and does not retry; nothing reaches Kiro and the key is nowhere in kirod's log."""
    wrong = "sk-kirod-" + "x" * 43
    client = Cline(cline_binary, short_tmp)
    client.configure(cline_env.providers(daemon.base_url, wrong))
    mark = len(daemon.log())
    run = client.run("say hello")
    error = run.failed()
    assert (error["errorClass"], error["recoverable"]) == ("auth", False)
    assert error["error"]["message"] == "invalid API key"
    assert run.result()["text"] == "invalid API key"
    assert [line["status"] for line in new_access_lines(daemon, mark)] == ["401"]
    assert service.requests("chat") == []
    assert wrong not in daemon.log()
