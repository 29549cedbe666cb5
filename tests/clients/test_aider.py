"""The real aider (from PyPI) → the real kirod daemon → the fake Kiro service.

`make test` installs the pinned aider (`tests/clients/versions.json`) in a venv of its own and
runs these; they skip, saying why, when it could not be installed. `KIROD_TEST_AIDER_BIN=/path`
drives any other aider.

Each test runs `aider --message … --yes-always --no-git` in a private HOME with the guide's
settings (`ANTHROPIC_API_BASE` without `/v1`, `ANTHROPIC_API_KEY`, `--model anthropic/<id>`),
kept off the network as `aider_env` says. What 0.86.2 sends is in
`captures/aider-0.86.2-default.json` (`capture.py --client aider`): one streamed
`POST /v1/messages` per message, user agent `litellm/1.81.10`, `x-api-key`, `temperature: 0`
(which kirod drops), no session or conversation id anywhere.

aider makes no tool calls. Its round trip is its own: a file named on the command line (`/add`)
goes into the prompt, the model answers with a SEARCH/REPLACE block, and aider edits the file.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script
from tests.clients import aider_env
from tests.clients.aider_env import Aider
from tests.clients.guide_snippets import GUIDE_PORT, guide_block, paste
from tests.clients.kiro_bodies import chats, current, new_access_lines, routes

KIRO_MODEL = "claude-sonnet-4.5"
"""What Kiro calls `claude-sonnet-4-5`."""
WRONG_KEY = "sk-kirod-" + "x" * 43


@pytest.fixture
def aider(
    aider_binary: aider_env.Binary, daemon: DaemonProcess, api_key: str, short_tmp: Path
) -> Aider:
    return Aider(aider_binary, daemon.base_url, api_key, short_tmp)


def test_hello_with_the_readme_settings(
    aider: Aider, service: FakeKiro, daemon: DaemonProcess, api_key: str
) -> None:
    """The guide's lines, run by a shell with a message added: aider prints what the fake
    said, from one `POST /v1/messages` that reached Kiro for the model the guide names."""
    answer = "Hello from the fake Kiro, aider edition."
    service.default_script = Script(reply=Reply(text=answer))
    lines = guide_block("aider", "sh").replace(GUIDE_PORT, daemon.base_url).rstrip("\n")
    headless = [*aider_env.OFFLINE_ARGS, *aider_env.HEADLESS_ARGS, "--message", "hello"]
    script = f"{lines} {shlex.join(arg for arg in headless if arg not in lines)}\n"
    mark = len(daemon.log())
    run = paste(
        aider_env.Run,
        aider,
        script,
        api_key,
        set_by_script=(aider_env.BASE_ENV, aider_env.KEY_ENV),
        timeout_s=aider_env.RUN_TIMEOUT_S,
    )
    output = run.succeeded()
    assert answer in output, run.describe()
    assert f"Model: anthropic/{aider_env.MODEL} with diff edit format" in output
    (body,) = chats(service)
    assert current(body)["modelId"] == KIRO_MODEL
    assert "hello" in current(body)["content"]
    assert "SEARCH/REPLACE" in json.dumps(body)  # aider's system prompt reached Kiro
    (line,) = new_access_lines(daemon, mark)
    assert (line["path"], line["status"], line["upstream_model"]) == (
        "/v1/messages",
        "200",
        KIRO_MODEL,
    )


def test_an_added_file_reaches_kiro_and_the_answer_edits_it(
    aider: Aider, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """aider's round trip (it has no tools): the file named on the command line goes to Kiro
    in the prompt, and the SEARCH/REPLACE block of the fake's answer is applied to it on disk."""
    note = aider.workdir / "notes.txt"
    canary = "The canary sings at 04:51 in room 7."
    note.write_text(canary + "\n")
    moved = canary.replace("04:51", "05:15")
    edit = (
        "Moving it.\n\nnotes.txt\n```\n"
        f"<<<<<<< SEARCH\n{canary}\n=======\n{moved}\n>>>>>>> REPLACE\n```\n"
    )
    service.default_script = Script(reply=Reply(text=edit))
    mark = len(daemon.log())
    run = aider.run("Move the canary to 05:15.", ["notes.txt"])
    output = run.succeeded()
    assert "Added notes.txt to the chat." in output
    assert "Applied edit to notes.txt" in output, run.describe()
    assert note.read_text() == moved + "\n"
    (body,) = chats(service)
    assert "Move the canary to 05:15." in current(body)["content"]
    sent = json.dumps(body["conversationState"])
    assert canary in sent  # the file's content, which only aider could have read
    assert [line["status"] for line in new_access_lines(daemon, mark)] == ["200"]


def test_a_wrong_key_is_refused_once_and_clearly(
    aider_binary: aider_env.Binary, daemon: DaemonProcess, service: FakeKiro, short_tmp: Path
) -> None:
    """A key kirod never issued: aider shows kirod's 401 (Anthropic's envelope, its message)
    and its own hint, retries nothing, and exits 0 as it does after any failed message."""
    client = Aider(aider_binary, daemon.base_url, WRONG_KEY, short_tmp)
    mark = len(daemon.log())
    run = client.run("hello")
    assert run.exit_code == 0, run.describe()
    assert "litellm.AuthenticationError: AnthropicException" in run.text, run.describe()
    assert '"type": "authentication_error", "message": "invalid API key"' in run.text
    assert "The API provider is not able to authenticate you. Check your API key." in run.text
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/messages", "401")]
    assert service.requests("chat") == []
    assert WRONG_KEY not in daemon.log()


def test_the_responses_api(aider: Aider, service: FakeKiro, daemon: DaemonProcess) -> None:
    """`--model openai/responses/<id>` with `OPENAI_API_BASE` (kirod's `/v1`) and
    `OPENAI_API_KEY`: litellm speaks the Responses API (not streamed); the same answer."""
    answer = "Hello over Responses."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    run = aider.run("hello", model=aider_env.RESPONSES_MODEL)
    assert answer in run.succeeded()
    assert [current(body)["modelId"] for body in chats(service)] == [KIRO_MODEL]
    (line,) = new_access_lines(daemon, mark)
    assert (line["path"], line["status"]) == ("/v1/responses", "200")


def test_chat_completions_while_off_say_how_to_turn_them_on(
    aider: Aider, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """`--model openai/<id>` is Chat Completions, off by default: aider shows the message of
    kirod's 404, which names the setting (litellm calls it a bad request), and exits 0;
    nothing reaches Kiro."""
    mark = len(daemon.log())
    run = aider.run("hello", model=aider_env.CHAT_MODEL)
    assert run.exit_code == 0, run.describe()
    assert (
        "litellm.BadRequestError: OpenAIException - /v1/chat/completions is off;"
        " set enable_chat_completions = true to serve it, or use /v1/responses"
    ) in run.text, run.describe()
    lines = new_access_lines(daemon, mark)
    assert set(routes(lines)) == {("/v1/chat/completions", "404")}
    assert service.requests("chat") == []


def test_chat_completions_when_on(
    aider_binary: aider_env.Binary,
    chat_daemon: DaemonProcess,
    service: FakeKiro,
    short_tmp: Path,
) -> None:
    """The same with `enable_chat_completions`: a streamed `POST /v1/chat/completions`."""
    key = chat_daemon.client.request("POST", "/keys", {"name": "aider"})["secret"]
    client = Aider(aider_binary, chat_daemon.base_url, key, short_tmp)
    answer = "Hello over Chat Completions."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(chat_daemon.log())
    run = client.run("hello", model=aider_env.CHAT_MODEL)
    assert answer in run.succeeded()
    assert [current(body)["modelId"] for body in chats(service)] == [KIRO_MODEL]
    (line,) = new_access_lines(chat_daemon, mark)
    assert (line["path"], line["status"]) == ("/v1/chat/completions", "200")
