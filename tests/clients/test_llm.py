"""The real `llm` CLI with the llm-anthropic plugin (from PyPI) → the real kirod daemon → the
fake Kiro service.

`make test` installs the pinned llm and plugin (`tests/clients/versions.json`) in a venv of
their own and runs these; they skip, saying why, when that could not be installed.
`KIROD_TEST_LLM_BIN=/path` drives any other llm.

Each test runs `llm -m anthropic/<id> …` in a private HOME and llm user directory
(`LLM_USER_PATH`) with the guide's settings: `ANTHROPIC_BASE_URL` without `/v1` and
`ANTHROPIC_API_KEY`. What 0.36 + llm-anthropic 0.30 send is in
`captures/llm-0.36-default.json` (`capture.py --client llm`): one streamed
`POST /v1/messages` per model turn from the `anthropic` Python SDK (`x-api-key`,
`temperature: 1.0`, `max_tokens` 128000 for Sonnet 4.6, which kirod clamps to the model's), no
session or conversation id anywhere. llm's tools are the Python functions given to
`--functions`; the tests give it a `read_file`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ToolCall
from tests.clients import llm_env, runs
from tests.clients.guide_snippets import GUIDE_PORT, guide_block, paste
from tests.clients.kiro_bodies import KIRO_MODEL, chats, context, current, new_access_lines, routes
from tests.clients.llm_env import LLM
from tests.clients.note_round_trip import CANARY, FINAL, call_first, write_the_note

WRONG_KEY = "sk-kirod-" + "x" * 43


@pytest.fixture
def llm(llm_binary: llm_env.Binary, daemon: DaemonProcess, api_key: str, short_tmp: Path) -> LLM:
    return LLM(llm_binary, daemon.base_url, api_key, short_tmp)


def test_hello_with_the_readme_settings(
    llm: LLM, service: FakeKiro, daemon: DaemonProcess, api_key: str
) -> None:
    """The guide's lines, run by a shell: llm prints what the fake said, from one
    `POST /v1/messages` that reached Kiro for the model the guide names."""
    answer = "Hello from the fake Kiro, llm edition."
    service.default_script = Script(reply=Reply(text=answer))
    script = guide_block("llm", "sh").replace(GUIDE_PORT, daemon.base_url)
    mark = len(daemon.log())
    run = paste(
        runs.Finished,
        llm,
        script,
        api_key,
        set_by_script=(llm_env.BASE_ENV, llm_env.KEY_ENV),
        timeout_s=llm_env.RUN_TIMEOUT_S,
    )
    assert run.exit_code == 0, run.describe()
    assert run.stdout.strip() == answer, run.describe()
    (body,) = chats(service)
    assert current(body)["modelId"] == KIRO_MODEL
    assert current(body)["content"] == "hello"
    (line,) = new_access_lines(daemon, mark)
    assert (line["path"], line["status"], line["upstream_model"]) == (
        "/v1/messages",
        "200",
        KIRO_MODEL,
    )
    assert line["max_tokens_clamped"] == "128000>64000"  # llm-anthropic's, over the model's


def test_read_tool_round_trip(llm: LLM, service: FakeKiro, daemon: DaemonProcess) -> None:
    """The model asks for the `read_file` of `--functions`; llm runs it and sends the file's
    content back as a tool result; the model's answer after it is what llm prints."""
    note = write_the_note(llm.workdir)
    call_first(service, ToolCall(llm_env.READ_TOOL, {"path": str(note)}))
    mark = len(daemon.log())
    run = llm.run("What does notes.txt say?", "--functions", str(llm.tools), "--td")
    assert run.exit_code == 0, run.describe()
    assert run.stdout.strip() == FINAL, run.describe()
    assert f"Tool call: {llm_env.READ_TOOL}(" in run.stderr  # `--td`: the call and its result
    assert CANARY in run.stderr
    first, second = chats(service)
    assert [tool["toolSpecification"]["name"] for tool in context(first)["tools"]] == [
        llm_env.READ_TOOL
    ]
    (result,) = context(second)["toolResults"]
    assert result["status"] == "success"
    assert CANARY in json.dumps(result["content"])
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/messages", "200")] * 2


def test_a_wrong_key_is_refused_once_and_clearly(
    llm_binary: llm_env.Binary, daemon: DaemonProcess, service: FakeKiro, short_tmp: Path
) -> None:
    """A key kirod never issued: llm exits 1 showing kirod's 401 in Anthropic's envelope and
    retries nothing; the key is nowhere in kirod's log."""
    client = LLM(llm_binary, daemon.base_url, WRONG_KEY, short_tmp)
    mark = len(daemon.log())
    run = client.run("hello")
    assert run.exit_code == 1, run.describe()
    assert run.stderr.startswith(
        "Error: Error code: 401 - {'type': 'error', 'error': {'type': 'authentication_error',"
        " 'message': 'invalid API key'}"
    ), run.describe()
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/messages", "401")]
    assert service.requests("chat") == []
    assert WRONG_KEY not in daemon.log()


def test_the_responses_api_with_the_read_tool(
    llm: LLM, service: FakeKiro, daemon: DaemonProcess, api_key: str
) -> None:
    """llm's OpenAI-compatible endpoint command with `--responses` at kirod's `/v1`: the same
    round trip over `POST /v1/responses`."""
    note = llm.workdir / "notes.txt"
    canary = "The heron waits at dawn."
    note.write_text(canary + "\n")
    final = "The note is about a heron."
    service.default_script = Script(
        reply=Reply(text=final), call_first=ToolCall(llm_env.READ_TOOL, {"path": str(note)})
    )
    mark = len(daemon.log())
    run = llm.openai_endpoint(
        f"{daemon.base_url}/v1",
        "What does notes.txt say?",
        "-m",
        llm_env.MODEL,
        "--responses",
        "--key",
        api_key,
        "--functions",
        str(llm.tools),
    )
    assert run.exit_code == 0, run.describe()
    assert run.stdout.strip() == final, run.describe()
    first, second = chats(service)
    assert current(first)["modelId"] == KIRO_MODEL
    (result,) = context(second)["toolResults"]
    assert canary in json.dumps(result["content"])
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/responses", "200")] * 2


def test_the_endpoint_lists_kirods_models(llm: LLM, daemon: DaemonProcess, api_key: str) -> None:
    """`llm openai endpoint URL --models` reads kirod's `GET /v1/models`."""
    run = llm.openai_endpoint(f"{daemon.base_url}/v1", "--models", "--key", api_key)
    assert run.exit_code == 0, run.describe()
    listed = run.stdout.split()
    assert {"claude-sonnet-4-6", "claude-sonnet-4-5"} <= set(listed), run.describe()


def test_the_endpoints_chat_completions_while_off_say_how_to_turn_them_on(
    llm: LLM, service: FakeKiro, daemon: DaemonProcess, api_key: str
) -> None:
    """Without `--responses` the endpoint command speaks Chat Completions, off by default:
    llm exits 1 showing kirod's 404, which names the setting; nothing reaches Kiro."""
    mark = len(daemon.log())
    url = f"{daemon.base_url}/v1"
    run = llm.openai_endpoint(url, "hello", "-m", llm_env.MODEL, "--key", api_key)
    assert run.exit_code == 1, run.describe()
    assert run.stderr.startswith("Error: Error code: 404 - "), run.describe()
    assert "enable_chat_completions = true" in run.stderr
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/chat/completions", "404")]
    assert service.requests("chat") == []
