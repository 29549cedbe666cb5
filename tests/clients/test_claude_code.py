"""The real Claude Code CLI (from npm) → the real kirod daemon → the fake Kiro service.

Run them with `make clients` (installs the pinned binary into `.cache/clients/`, once) and then
`.venv/bin/pytest tests/clients`; `make test` runs them too, and skips them, saying why, when the
binary could not be installed (no npm, registry unreachable). A binary that is installed but
fails makes them fail. `KIROD_TEST_CLAUDE_BIN=/path/to/claude` drives any other binary.

Each test runs `claude -p … --output-format json` in a private HOME and working directory, with
the fake scripted to say something exact, and checks the JSON result, what the fake received,
and kirod's control API and access log.

Updating the pin: edit `tests/clients/versions.json`, then
`python -m tests.clients.install --relock` (rewrites `npm/<client>/package*.json`),
`make clients`, `python -m tests.clients.capture` (writes
`captures/claude-code-<version>-default.json`, what the new version sends by default) and run
these tests. `make clients-latest` does the trial run for the newest published version: it
installs it, runs these tests against it and prints how its default request differs from the
pinned capture.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Fault, Reply, Script, ThreadedFake, ToolCall
from tests.clients import cc_env, demo_env
from tests.clients.cc_env import Binary, ClaudeCode, assistant_blocks, wait_until
from tests.clients.kiro_bodies import access_lines, chats, context, current, new_access_lines
from tests.support.kiro_env import start_daemon

MODEL = "claude-sonnet-4-6"
"""A model id Kiro offers as such (as `claude-sonnet-4.6`)."""
DEFAULT = None
"""No `--model`: what Claude Code picks by itself (`claude-opus-5-5` in 2.1.332)."""
FAMILY = re.compile(r"claude-([a-z]+)-(\d+)(?:\.(\d+))?")


def model_args(model: str | None) -> list[str]:
    return [] if model is None else ["--model", model]


def newest(service: FakeKiro, family: str) -> str:
    """The newest Kiro model of a family in the fake's catalog (`claude-opus-4.7`, …)."""
    versions = [
        ((int(match[2]), int(match[3] or 0)), model.model_id)
        for model in service.models()
        if (match := FAMILY.fullmatch(model.model_id)) and match[1] == family
    ]
    return max(versions)[1]


def upstream_models(service: FakeKiro) -> list[str]:
    return [current(body)["modelId"] for body in chats(service)]


# -- models -------------------------------------------------------------------------------------


SPELLINGS = [
    pytest.param(DEFAULT, "opus", id="default"),
    pytest.param("sonnet", "sonnet", id="sonnet"),
    pytest.param("opus", "opus", id="opus"),
    pytest.param("haiku", "haiku", id="haiku"),
    pytest.param(MODEL, "sonnet", id=MODEL),
    pytest.param("claude-sonnet-4.6", "sonnet", id="claude-sonnet-4.6"),
]
"""Every way a user names the model (`--model`, or none) and the family that must serve it:
Claude Code's own default, its aliases, an Anthropic id and a Kiro id."""


def served(service: FakeKiro, model: str | None, family: str) -> str:
    """The Kiro model that must answer `model`: the one it names, else the family's newest."""
    return "claude-sonnet-4.6" if model in (MODEL, "claude-sonnet-4.6") else newest(service, family)


@pytest.mark.parametrize(("model", "family"), SPELLINGS)
def test_hello(
    claude: ClaudeCode, service: FakeKiro, daemon: DaemonProcess, model: str | None, family: str
) -> None:
    """`claude -p hello`: the answer is what the fake said, from the model family asked for
    (the newest Kiro model of it for the aliases Claude Code sends, e.g. `claude-opus-5-5`)."""
    answer = f"Hello from the fake Kiro, {model or 'default'} edition."
    service.enqueue(Reply(text=answer))
    mark = len(daemon.log())
    result = claude.run("hello", *model_args(model)).succeeded()
    assert result["result"] == answer
    expected = served(service, model, family)
    assert upstream_models(service) == [expected]
    assert re.search(r"(?m)^hello$", current(chats(service)[0])["content"])
    messages = [line for line in new_access_lines(daemon, mark) if line["path"] == "/v1/messages"]
    assert [line["status"] for line in messages] == ["200"]
    assert messages[0]["upstream_model"] == expected


def test_the_line_make_demo_prints_works_as_pasted(claude_binary: Binary, short_tmp: Path) -> None:
    """`make demo`'s Claude Code line, run by a shell with the real binary on PATH and nothing
    else set (no model, no settings): the fake's echo comes back as the answer."""
    with demo_env.demo() as shown:
        line = demo_env.line_after(shown, "Claude Code (")
        assert "--model" not in line
        assert "ANTHROPIC_MODEL" not in line
        env = cc_env.client_env(short_tmp / "home", "unset", "unset")
        del env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_AUTH_TOKEN"]  # the line sets them
        env["PATH"] = f"{claude_binary.path.parent}{os.pathsep}{env.get('PATH', '')}"
        done = demo_env.paste(line, env, short_tmp)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        assert done.stdout.startswith("You said: "), done.stdout


# -- tools --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "family"), SPELLINGS)
def test_read_tool_round_trip(
    claude: ClaudeCode, service: FakeKiro, model: str | None, family: str
) -> None:
    """The model asks for Read; Claude Code reads the file and sends its content back as a
    tool result; the model's final answer is the run's result. Both turns reach Kiro as the
    model asked for."""
    note = claude.workdir / "notes.txt"
    canary = "The canary sings at 04:51 in room 7."
    note.write_text(canary + "\n")
    service.enqueue(
        Reply(text="Let me read it.", tool_calls=(ToolCall("Read", {"file_path": str(note)}),)),
        Reply(text="The note is about a canary."),
    )
    run = claude.run(
        "What does notes.txt say?", *model_args(model), "--allowedTools", "Read", "--max-turns", "4"
    )
    result = run.succeeded()
    assert result["result"] == "The note is about a canary."
    assert result["num_turns"] == 2
    first, second = chats(service)
    expected = served(service, model, family)
    assert upstream_models(service) == [expected, expected]
    tools = {tool["toolSpecification"]["name"] for tool in context(first)["tools"]}
    assert "Read" in tools
    tool_use = second["conversationState"]["history"][-1]["assistantResponseMessage"]["toolUses"]
    assert [(use["name"], use["input"]) for use in tool_use] == [("Read", {"file_path": str(note)})]
    results = context(second)["toolResults"]
    assert [entry["toolUseId"] for entry in results] == [tool_use[0]["toolUseId"]]
    assert results[0]["status"] == "success"
    assert canary in json.dumps(results[0]["content"])


def test_a_subagent_asked_for_fable_is_served_by_the_newest_fable(
    claude: ClaudeCode, service: FakeKiro
) -> None:
    """The main model (Claude Code's default) delegates with the Agent tool's `model: fable`;
    Claude Code sends the subagent's turn as its own fable id (`claude-fable-5-2` in 2.1.332),
    which Kiro does not list: the newest Fable the account offers serves it."""
    agent = {
        "description": "Answer for me",
        "prompt": "Reply with the word FABLED.",
        "subagent_type": "general-purpose",
        "model": "fable",
        "run_in_background": False,
    }
    service.enqueue(
        Reply(text="Delegating.", tool_calls=(ToolCall("Agent", agent),)),
        Reply(text="FABLED"),
        Reply(text="The subagent said FABLED."),
    )
    run = claude.run("Delegate this.", "--allowedTools", "Agent", "--max-turns", "4")
    result = run.succeeded()
    assert result["result"] == "The subagent said FABLED.", run.describe()
    main, sub, back = upstream_models(service)
    assert (main, back) == (newest(service, "opus"), newest(service, "opus"))
    assert sub == newest(service, "fable") == "claude-fable-5.1"
    assert "Reply with the word FABLED." in current(chats(service)[1])["content"]


# -- thinking -----------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [DEFAULT, MODEL], ids=["default", MODEL])
def test_thinking_turn_then_next_turn(
    claude: ClaudeCode, service: FakeKiro, model: str | None
) -> None:
    """The fake streams a thinking block, then text: Claude Code keeps the text as the answer
    and the thinking in its transcript; on the next turn of the session (`--resume`) the
    thinking goes back to Kiro as native reasoning or not at all, never as message text."""
    thought = "Pondering whether the user wants a limerick or a haiku."
    service.enqueue(Reply(thinking=thought, text="A haiku it is."))
    first = claude.run("write me a poem", *model_args(model)).succeeded()
    assert first["result"] == "A haiku it is."
    blocks = assistant_blocks(claude.transcript(first["session_id"]))
    assert "thinking" in [block["type"] for block in blocks], blocks
    assert "A haiku it is." in [block.get("text") for block in blocks]

    service.enqueue(Reply(text="Here is another."))
    second = claude.run(
        "another one", "--resume", first["session_id"], *model_args(model)
    ).succeeded()
    assert second["result"] == "Here is another."
    assert second["session_id"] == first["session_id"]
    later = chats(service)[1]
    history = later["conversationState"]["history"]
    assert "A haiku it is." in json.dumps(history)
    # Kiro may get the thinking back only as native reasoning (docs/KIRO-PROTOCOL.md §2.6), never
    # as text of a message.
    replayed = [
        entry["assistantResponseMessage"].pop("reasoningContent")
        for entry in history
        if "reasoningContent" in entry.get("assistantResponseMessage", {})
    ]
    assert "Pondering" not in json.dumps(later)
    for reasoning in replayed:
        assert reasoning["reasoningText"]["text"] == thought
        assert reasoning["reasoningText"]["signature"]


# -- cut answers --------------------------------------------------------------------------------


def test_a_cut_first_answer_is_continued_not_taken_for_done(
    claude: ClaudeCode, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """Kiro ends the first answer cleanly but without its tail frames, half way through: kirod
    sends it as `max_tokens` (docs/KIRO-PROTOCOL.md §3.4), so Claude Code asks again to continue
    and the run ends with the second answer. Ended as `end_turn`, the run would have stopped at
    the cut text, with exit 0."""
    cut = "Step 1 of 3 is done. Step 2 of 3 is done. Now step 3, which is to"
    service.enqueue(
        Script(reply=Reply(text=cut), fault=Fault.CUT_GENERATION, fault_at=4, chunk_size=8),
        Reply(text="finish step 3. All three steps are done."),
    )
    mark = len(daemon.log())
    result = claude.run("Do the three steps.", "--model", MODEL, "--max-turns", "4").succeeded()
    assert result["result"].endswith("All three steps are done."), result
    first, second = chats(service)  # Claude Code came back for the rest
    assert cut[:32] in json.dumps(second["conversationState"]["history"])
    messages = [line for line in new_access_lines(daemon, mark) if line["path"] == "/v1/messages"]
    assert [line["status"] for line in messages] == ["200", "200"]
    assert first["conversationState"]["currentMessage"]["userInputMessage"]["content"]


# -- Ctrl-C -------------------------------------------------------------------------------------


def test_ctrl_c_aborts_the_upstream_call_and_frees_the_slot(
    claude: ClaudeCode, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """SIGINT to a `claude -p` whose answer is still streaming (20 s of it): the process ends,
    kirod aborts its call to Kiro (the fake sees the client leave), the account's slot is free
    and the next run is served at once."""
    service.enqueue(Script(reply=Reply(text="z" * 400), chunk_size=1, delay_between_s=0.05))
    completed = service.counters().get("streams_completed", 0)
    mark = len(daemon.log())
    started = claude.start("stream a long answer", *model_args(MODEL))
    try:
        wait_until(lambda: service.requests("chat"), 20.0, "the upstream call")
        time.sleep(1.0)  # a second of the answer streams to Claude Code
        if started.process.poll() is not None:
            pytest.fail(f"claude ended before Ctrl-C: {started.finish(5.0).describe()}")
        started.interrupt()
        interrupted = time.monotonic()
        run = started.finish(timeout_s=15.0)
    finally:
        started.kill()
    # 2.1.332 exits 0 with `is_error: true`, `terminal_reason: aborted_streaming`.
    assert run.exit_code in (0, 1, 130, -signal.SIGINT), run.describe()
    if run.stdout.strip():
        assert run.result.get("is_error") is True, run.describe()
    record = wait_until(
        lambda: next((r for r in service.requests("chat") if r.status is not None), None),
        5.0,
        "the upstream exchange to end",
    )
    assert record.status == 499, "kirod played the answer out instead of aborting it"
    assert time.monotonic() - interrupted < 8.0
    assert service.counters().get("streams_completed", 0) == completed

    def idle() -> dict[str, Any] | None:
        pool: dict[str, Any] = daemon.client.request("GET", "/pool")
        busy = pool["queued"] or any(account["in_flight"] for account in pool["accounts"])
        return None if busy else pool

    wait_until(idle, 5.0, "the account slot to be released")
    wait_until(
        lambda: [line for line in new_access_lines(daemon, mark) if line["status"] == "499"],
        5.0,
        "kirod's access-log line for the interrupted request",
    )

    service.enqueue(Reply(text="Back again."))
    again = claude.run("hello again", *model_args(MODEL), timeout_s=20.0)
    assert again.succeeded()["result"] == "Back again."
    assert again.elapsed_s < 15.0


# -- count_tokens -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [DEFAULT, MODEL], ids=["default", MODEL])
def test_context_command_counts_tokens_through_kirod(
    claude: ClaudeCode, service: FakeKiro, daemon: DaemonProcess, model: str | None
) -> None:
    """`claude -p /context` is the one non-interactive path that calls
    `/v1/messages/count_tokens` (a plain `-p` prompt does not): dozens of calls, each answered."""
    mark = len(daemon.log())
    run = claude.run("/context", *model_args(model))
    result = run.succeeded()
    assert "Context Usage" in result["result"], run.describe()
    calls = [
        line for line in new_access_lines(daemon, mark) if line["path"].endswith("/count_tokens")
    ]
    assert len(calls) >= 10, run.describe()
    assert {line["status"] for line in calls} == {"200"}, calls
    assert service.requests("chat") == []
    total = re.search(r"\*\*Tokens:\*\* ([\d.]+)k / ", result["result"])
    assert total is not None, result["result"]
    assert float(total[1]) > 1.0


# -- no account -----------------------------------------------------------------------------------


def test_no_account_answers_at_once_naming_the_fix(
    claude_binary: Binary, fake: ThreadedFake, module_tmp: Path, short_tmp: Path
) -> None:
    """A daemon with no account: Claude Code must not retry for minutes (it does on a plain
    503); `x-should-retry: false` makes it stop and show kirod's message."""
    empty = start_daemon(module_tmp / "empty", fake)
    try:
        run = ClaudeCode(claude_binary, empty.base_url, empty.api_key, short_tmp).run(
            "hello", timeout_s=45
        )
        served = [line for line in access_lines(empty.log()) if line["path"] == "/v1/messages"]
    finally:
        empty.kill()
    assert run.result.get("is_error") is True, run.describe()
    assert "kiroctl accounts login" in run.stdout, run.describe()
    assert run.elapsed_s < 20, run.describe()
    # One attempt per request shape Claude Code tries, none of them retried by its client.
    assert served, run.describe()
    assert all(line["status"] == "503" for line in served), served


def test_web_search_tool_round_trip(claude: ClaudeCode, service: FakeKiro) -> None:
    """The model asks for WebSearch; Claude Code makes its search side call, which kirod answers
    from Kiro's MCP search without a model turn; the links reach the model as the tool result."""
    service.enqueue(
        Reply(text="Searching.", tool_calls=(ToolCall("WebSearch", {"query": "kirod gateway"}),)),
        Reply(text="kirod is a gateway."),
    )
    run = claude.run(
        "What is kirod?", "--model", MODEL, "--allowedTools", "WebSearch", "--max-turns", "4"
    )
    result = run.succeeded()
    assert result["result"] == "kirod is a gateway."
    [search] = [record.json for record in service.requests("mcp")]
    assert search["params"]["arguments"] == {"query": "kirod gateway"}
    _, second = chats(service)  # the side call itself reached no model
    results = context(second)["toolResults"]
    assert "https://example.com/kirod-gateway/1" in json.dumps(results)
