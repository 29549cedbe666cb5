"""The real opencode CLI (from npm) → the real kirod daemon → the fake Kiro service.

`make test` installs the pinned binary (`tests/clients/versions.json`: the Linux x64 build, see
`install.py`) and runs these; they skip, saying why, when it could not be installed.
`KIROD_TEST_OPENCODE_BIN=/path/to/opencode` drives any other binary.

Each test runs `opencode run --format json …` in a private HOME, with the guide's
`opencode.json` (the `@ai-sdk/anthropic` provider) first, then the variants a user may pick
(`@ai-sdk/openai` for Responses, `@ai-sdk/openai-compatible` for Chat Completions, thinking
turned on, `--continue`, Ctrl-C). What 1.18.34 sends by default is in
`captures/opencode-1.18.34-default.json` (`capture.py --client opencode`): per prompt a title
request without tools and the agent request with ten, both streamed `POST /v1/messages` with
`x-api-key` and the session id three times, as `x-session-affinity` (the one kirod reads),
`x-session-id` and, new in 1.18.34, `x-opencode-session-id`.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ToolCall
from tests.clients import demo_env, opencode_env, runs
from tests.clients.cc_env import wait_until
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
    assert_the_note_in,
    call_first,
    write_the_note,
)
from tests.clients.opencode_env import OpenCode


def test_hello_with_the_readme_configuration(
    opencode: OpenCode, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """The guide's `opencode.json` as written: `opencode run hello` answers what the fake said,
    through `POST /v1/messages`, from the model the file names. Its title request and its agent
    request (with opencode's own tools) both reach Kiro."""
    opencode.configure(guide_json("opencode", daemon.base_url))
    answer = "Hello from the fake Kiro, opencode edition."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    run = opencode.run("hello")
    assert run.succeeded() == answer
    bodies = chats(service)
    assert [current(body)["modelId"] for body in bodies] == [KIRO_MODEL] * len(bodies)
    assert all("hello" in current(body)["content"] for body in bodies)
    agent = [body for body in bodies if tool_names(body)]
    assert len(agent) == 1, [sorted(tool_names(body)) for body in bodies]
    assert {"bash", "read", "edit", "write"} <= tool_names(agent[0])
    lines = new_access_lines(daemon, mark)
    assert {line["path"] for line in lines} == {"/v1/messages"}
    assert [line["status"] for line in lines] == ["200"] * len(bodies)
    assert {line["upstream_model"] for line in lines} == {KIRO_MODEL}
    finish = run.parts("step_finish")[-1]
    assert finish["reason"] == "stop"
    assert finish["tokens"]["input"] > 0  # kirod's estimate, in message_start


def test_read_tool_round_trip(opencode: OpenCode, service: FakeKiro, daemon: DaemonProcess) -> None:
    """The model asks for opencode's `read`; opencode reads the file and sends its content back
    as a tool result; the model's answer after it is the run's last text."""
    note = write_the_note(opencode.workdir)
    call_first(service, ToolCall("read", {"filePath": str(note)}))
    mark = len(daemon.log())
    run = opencode.run("What does notes.txt say?")
    assert run.succeeded().endswith(FINAL)
    assert CANARY in run.tool_output("read")
    answered = [body for body in chats(service) if tool_results(body)]
    assert len(answered) == 1
    assert_the_note_in(answered[0], "read")
    statuses = {line["status"] for line in new_access_lines(daemon, mark)}
    assert statuses == {"200"}


def test_ctrl_c_aborts_the_upstream_calls(
    opencode: OpenCode, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """Ctrl-C (SIGINT to the foreground process group) while the answers still stream (20 s of
    each): opencode ends, kirod aborts its calls to Kiro instead of playing them out, the
    account's slots are free and the next run is served at once."""
    service.default_script = Script(reply=Reply(text="z" * 400), chunk_size=1, delay_between_s=0.05)
    completed = service.counters().get("streams_completed", 0)
    mark = len(daemon.log())
    process = opencode.start("stream a long answer")
    try:
        wait_until(lambda: service.requests("chat"), 20.0, "the upstream call")
        time.sleep(1.0)  # a second of the answer streams to opencode
        assert process.poll() is None, process.communicate()
        os.killpg(process.pid, signal.SIGINT)
        interrupted = time.monotonic()
        process.communicate(timeout=15.0)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=10.0)
        runs.kill_group(process)  # what it left in its group
    records = wait_until(
        lambda: (done := service.requests("chat")) and all(r.status for r in done) and done,
        8.0,
        "the upstream exchanges to end",
    )
    assert {record.status for record in records} == {499}, "kirod played an answer out"
    assert time.monotonic() - interrupted < 10.0
    assert service.counters().get("streams_completed", 0) == completed

    def idle() -> bool:
        pool: dict[str, Any] = daemon.client.request("GET", "/pool")
        return not (pool["queued"] or any(account["in_flight"] for account in pool["accounts"]))

    wait_until(idle, 5.0, "the account slots to be released")
    statuses = wait_until(
        lambda: [line["status"] for line in new_access_lines(daemon, mark)],
        5.0,
        "kirod's access-log lines for the interrupted requests",
    )
    assert set(statuses) == {"499"}
    service.default_script = Script(reply=Reply(text="Back again."))
    again = opencode.run("hello again", timeout_s=20.0)
    assert again.succeeded() == "Back again."
    assert again.elapsed_s < 15.0


def test_the_responses_provider(
    opencode: OpenCode, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """`@ai-sdk/openai` instead: opencode speaks the Responses API, and it works the same."""
    opencode.configure(opencode_env.config(daemon.base_url, opencode_env.OPENAI))
    answer = "Hello over Responses."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    assert opencode.run("hello").succeeded() == answer
    lines = new_access_lines(daemon, mark)
    assert {line["path"] for line in lines} == {"/v1/responses"}
    assert {line["status"] for line in lines} == {"200"}
    assert {current(body)["modelId"] for body in chats(service)} == {KIRO_MODEL}


def test_chat_completions_while_off_says_how_to_turn_them_on(
    opencode: OpenCode, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """`@ai-sdk/openai-compatible` needs Chat Completions, off by default: opencode stops
    at once and shows kirod's message, which names the setting. Nothing reaches Kiro."""
    opencode.configure(opencode_env.config(daemon.base_url, opencode_env.OPENAI_COMPATIBLE))
    service.clear_requests()
    mark = len(daemon.log())
    error = opencode.run("hello").failed()["data"]
    assert error["statusCode"] == 404
    assert error["isRetryable"] is False
    assert "enable_chat_completions = true" in error["message"]
    lines = new_access_lines(daemon, mark)
    # the title request, the agent request and one more attempt at the title; no retry loop
    assert 1 <= len(lines) <= 3, lines
    assert set(routes(lines)) == {("/v1/chat/completions", "404")}
    assert service.requests("chat") == []


def test_a_wrong_key_is_refused_once_and_clearly(
    opencode_binary: opencode_env.Binary, daemon: DaemonProcess, short_tmp: Path
) -> None:
    """A key kirod never issued: a 401 in Anthropic's envelope, which opencode shows and does
    not retry; the key is nowhere in kirod's log."""
    wrong = "sk-kirod-" + "x" * 43
    client = OpenCode(opencode_binary, wrong, short_tmp)
    client.configure(opencode_env.config(daemon.base_url))
    mark = len(daemon.log())
    error = client.run("hello").failed()["data"]
    assert error["statusCode"] == 401
    assert error["isRetryable"] is False
    assert json.loads(error["responseBody"])["error"]["type"] == "authentication_error"
    lines = new_access_lines(daemon, mark)
    assert 1 <= len(lines) <= 2, lines  # the agent request, and the title one if it got out
    assert {line["status"] for line in lines} == {"401"}
    assert wrong not in daemon.log()


def test_the_line_make_demo_prints_works_as_pasted(
    opencode_binary: opencode_env.Binary, short_tmp: Path
) -> None:
    """`make demo`'s opencode line, run by a shell with the real binary on PATH: the fake's echo
    of the prompt is the answer."""
    with demo_env.demo() as shown:
        line = demo_env.line_after(shown, "opencode (")
        env = opencode_env.client_env(short_tmp / "home", "unset")
        del env[opencode_env.KEY_ENV]  # the line sets it
        env["PATH"] = f"{opencode_binary.path.parent}{os.pathsep}{env.get('PATH', '')}"
        done = demo_env.paste(line, env, short_tmp)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        assert "You said: hello" in done.stdout, done.stdout


def test_thinking_is_shown_signed_and_taken_back_on_the_next_turn(
    opencode: OpenCode, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """Thinking turned on as opencode's docs say (the model's `options.thinking`): the model's
    thinking comes out as opencode's reasoning part, signed; `--continue` sends it back in the
    history, kirod accepts it, and Kiro sees the first answer there. Sonnet 4.6's catalog schema
    takes the effort in the root field, so the budget goes there as its band, not as tags."""
    document = opencode_env.config(daemon.base_url)
    model = document["provider"]["kirod"]["models"][opencode_env.MODEL]
    model["options"] = {"thinking": {"type": "enabled", "budgetTokens": 8000}}
    opencode.configure(document)
    service.default_script = Script(reply=Reply(text="Answer one.", thinking="Pondering it."))
    first = opencode.run("hello", "--thinking")
    assert first.succeeded() == "Answer one."
    (reasoning,) = first.parts("reasoning")
    assert reasoning["text"] == "Pondering it."
    assert reasoning["metadata"]["anthropic"]["signature"]
    for body in chats(service):  # where Kiro reads the effort (docs/KIRO-PROTOCOL.md §2.6)
        fields = body["additionalModelRequestFields"]
        assert (fields["output_config"], fields["thinking"]) == (
            {"effort": "medium"},
            {"type": "adaptive"},
        )
        assert "<thinking_mode>" not in json.dumps(body)
    service.clear_requests()
    service.default_script = Script(reply=Reply(text="Answer two."))
    mark = len(daemon.log())
    assert opencode.run("and again", "--continue").succeeded() == "Answer two."
    assert {line["status"] for line in new_access_lines(daemon, mark)} == {"200"}
    history = chats(service)[-1]["conversationState"]["history"]
    answers = [
        turn["assistantResponseMessage"]["content"]
        for turn in history
        if "assistantResponseMessage" in turn
    ]
    assert any("Answer one." in answer for answer in answers), answers
    assert "and again" in current(chats(service)[-1])["content"]
