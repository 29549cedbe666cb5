"""The real Gemini CLI (from npm) → the real kirod daemon (Gemini API on) → the fake Kiro service.

`make test` installs the pinned version (`tests/clients/versions.json`); these skip, saying why,
when it could not be installed. `KIROD_TEST_GEMINI_CLI_BIN=/path/to/gemini` drives any other
binary.

Each test runs `gemini -p PROMPT --yolo --output-format json` in a private HOME whose
`~/.gemini/settings.json` is the guide's block (`gemini_cli_env`), with `GOOGLE_GEMINI_BASE_URL`
and `GEMINI_API_KEY`, in a trusted folder. What 0.61.0 sends is in
`captures/gemini-cli-0.61.0-default.json` (the guide's settings: one streamed call of the model
they name) and `-no-model.json` (no `model.name`: the router's side call first), checked in
test_captures.py:

* a `read_file` round trip, with its own call ids echoed back, both turns on one Kiro
  conversation although Gemini CLI names no session;
* a thinking turn: `includeThoughts` alone asks Kiro for reasoning, the thoughts count in its
  stats;
* `google_web_search`: the side call with `googleSearch` goes through Kiro's web search and comes
  back with `groundingMetadata`, which Gemini CLI turns into cited sources;
* no model set: kirod's 400 refusal of the router's structured output makes Gemini CLI fall back
  at once (one router call, no retries), to its default model, served by its class;
* a compression threshold below a resumed session's prompt: Gemini CLI compresses before its
  next call, as the guide's `compressionThreshold` makes it do in time for a smaller window;
* a prompt too long for Kiro's window: Google's 400 (which Gemini CLI does not retry, as it
  would a 429 or a 5xx), naming `/compress` and the threshold;
* `kirod demo --gemini`'s line, pasted into a shell, works.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kirod.canonical.gemini_names import gemini_class
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Fault, Reply, Script, ThreadedFake, ToolCall
from tests.clients import demo_env, gemini_cli_env, install, runs
from tests.clients.conftest import Note, _binary
from tests.clients.gemini_cli_env import GeminiCli
from tests.clients.kiro_bodies import KIRO_MODEL, chats, current, new_access_lines, tool_results
from tests.clients.note_round_trip import (
    CANARY,
    FINAL,
    assert_the_note_reached_kiro,
    call_first,
    write_the_note,
)
from tests.support.kiro_env import import_account, start_daemon

ON = {"KIROD_ENABLE_GEMINI_API": "true"}
STREAM = ":streamGenerateContent"
GENERATE = ":generateContent"
OPUS = "claude-opus-5.5"
"""The newest Opus the fake lists: what serves Gemini CLI's default, a pro model."""


@pytest.fixture(scope="session")
def gemini_binary(drove: Note) -> install.Binary:
    found = install.locate(gemini_cli_env.CLIENT, *install.env_names(gemini_cli_env.CLIENT))
    return _binary("Gemini CLI", found, lambda said, asked: said == asked, drove)


@pytest.fixture(scope="module")
def gemini_daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    """A kirod with the Gemini API on, as the guide's `kirod.toml` block has it."""
    proc = start_daemon(module_tmp / "gemini", fake, ON)
    try:
        import_account(proc, fake.fake.issue_social_account())
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def gemini_key(gemini_daemon: DaemonProcess) -> Iterator[str]:
    """A key made for Gemini CLI through the control API; it must never reach the log."""
    secret: str = gemini_daemon.client.request("POST", "/keys", {"name": "gemini-cli"})["secret"]
    yield secret
    gemini_daemon.kill()
    assert secret not in gemini_daemon.log()


def make(
    binary: install.Binary,
    daemon: DaemonProcess,
    key: str,
    root: Path,
    settings: dict[str, Any] | None = None,
) -> GeminiCli:
    chosen = gemini_cli_env.guide_settings() if settings is None else settings
    return GeminiCli(binary, daemon.base_url, key, root, chosen)


@pytest.fixture
def gemini(
    gemini_binary: install.Binary, gemini_daemon: DaemonProcess, gemini_key: str, short_tmp: Path
) -> GeminiCli:
    """Gemini CLI with the guide's settings, at the module's daemon."""
    return make(gemini_binary, gemini_daemon, gemini_key, short_tmp)


def guide_model() -> str:
    name: str = gemini_cli_env.guide_settings()["model"]["name"]
    return name


def paths(lines: list[dict[str, str]]) -> list[tuple[str, str]]:
    """(the method and model of each Gemini API call, its status)."""
    return [(line["path"].rpartition("/")[2], line["status"]) for line in lines]


def test_read_file_round_trip_with_the_guides_settings(
    gemini: GeminiCli, service: FakeKiro, gemini_daemon: DaemonProcess
) -> None:
    """The model asks for `read_file`; Gemini CLI reads the note and sends it back with the id
    it gave the call; the answer after it is its response. Both turns are streamed calls of the
    guide's model, served by it, and stay on one Kiro conversation."""
    write_the_note(gemini.workdir)
    call_first(service, ToolCall(gemini_cli_env.READ_TOOL, {"file_path": "notes.txt"}))
    mark = len(gemini_daemon.log())
    run = gemini.run("What does notes.txt say?")
    assert run.succeeded() == FINAL
    assert run.tools[gemini_cli_env.READ_TOOL]["success"] == 1, run.tools
    bodies = assert_the_note_reached_kiro(service, gemini_cli_env.READ_TOOL)
    assert [current(body)["modelId"] for body in bodies] == [KIRO_MODEL] * 2
    (result,) = tool_results(bodies[1])
    assert CANARY in json.dumps(result["content"])
    lines = new_access_lines(gemini_daemon, mark)
    assert paths(lines) == [(guide_model() + STREAM, "200")] * 2
    assert {line["upstream_model"] for line in lines} == {KIRO_MODEL}
    assert list(run.models) == [guide_model()]  # the answers' modelVersion names its model
    # Gemini CLI names no session: its first turn, the same in both calls, keys the conversation.
    assert len({body["conversationState"]["conversationId"] for body in bodies}) == 1


def test_a_thinking_turn(gemini: GeminiCli, service: FakeKiro) -> None:
    """`includeThoughts: true` alone (all Gemini CLI sends) asks Kiro for reasoning; the
    thoughts come back as thought parts, left out of the response and counted in the stats."""
    service.enqueue(Reply(text="Forty-two.", thinking="The user wants a number."))
    run = gemini.run("Think, then give me a number.")
    assert run.succeeded() == "Forty-two."
    assert len(chats(service)) == 1
    # The fake thinks only when asked to; its thoughts counted here came back as thought parts.
    (stats,) = run.models.values()
    assert stats["tokens"]["thoughts"] > 0, stats


def test_google_web_search_goes_through_kiros_web_search(
    gemini: GeminiCli, service: FakeKiro, gemini_daemon: DaemonProcess
) -> None:
    """`google_web_search` is a side call with `googleSearch`; kirod serves it with Kiro's web
    search and answers with `groundingMetadata`, which Gemini CLI turns into numbered sources
    in the tool's result for the main turn."""
    query = "aiohttp 4"
    service.enqueue(
        Reply(tool_calls=(ToolCall(gemini_cli_env.SEARCH_TOOL, {"query": query}),)),
        Reply(tool_calls=(ToolCall("web_search", {"query": query}),)),
        Reply(text="aiohttp 4 is out."),
        Reply(text=FINAL),
    )
    mark = len(gemini_daemon.log())
    run = gemini.run("What is new in aiohttp?")
    assert run.succeeded() == FINAL
    assert run.tools[gemini_cli_env.SEARCH_TOOL]["success"] == 1, run.tools
    assert service.requests("mcp")
    last = chats(service)[-1]
    (result,) = tool_results(last)
    text = json.dumps(result["content"])
    assert "aiohttp 4 is out." in text
    assert "https://example.com/aiohttp-4/1" in text
    lines = new_access_lines(gemini_daemon, mark)
    assert [status for _, status in paths(lines)] == ["200"] * 3
    (side,) = [line for line in lines if line["path"].endswith(GENERATE)]
    side_model = side["path"].rpartition("/")[2].removesuffix(GENERATE)
    assert gemini_class(side_model) == "flash", side_model  # served by gemini_models' flash


def test_without_a_model_the_router_falls_back_at_once(
    gemini_binary: install.Binary,
    gemini_daemon: DaemonProcess,
    gemini_key: str,
    short_tmp: Path,
    service: FakeKiro,
) -> None:
    """No `model.name`: the router's side call asks for JSON in a schema, which kirod refuses
    with a 400 naming why; Gemini CLI gives up on it at once (one call, no retry, no backoff)
    and asks for its default model, which the newest Opus serves."""
    settings = gemini_cli_env.without_model(gemini_cli_env.guide_settings())
    client = make(gemini_binary, gemini_daemon, gemini_key, short_tmp, settings)
    service.enqueue(Reply(text="Hello from Opus."))
    mark = len(gemini_daemon.log())
    run = client.run("hello")
    assert run.succeeded() == "Hello from Opus."
    lines = new_access_lines(gemini_daemon, mark)
    assert paths(lines) == [
        (gemini_cli_env.ROUTER_MODEL + GENERATE, "400"),
        (gemini_cli_env.DEFAULT_MODEL + STREAM, "200"),
    ]
    assert lines[1]["upstream_model"] == OPUS
    (body,) = chats(service)
    assert current(body)["modelId"] == OPUS
    assert run.elapsed_s < 30, run.describe()
    assert "structured output is not supported" in run.stderr


def test_a_prompt_past_the_threshold_is_compressed_through_kirod(
    gemini_binary: install.Binary,
    gemini_daemon: DaemonProcess,
    gemini_key: str,
    short_tmp: Path,
    service: FakeKiro,
) -> None:
    """Gemini CLI compresses when the last prompt passes `compressionThreshold` of the 1,048,576
    tokens it assumes (never on an error): here a threshold below a resumed session's history,
    so the second run first asks for a `<state_snapshot>` of the long first answer and checks
    it (two side calls, which name a pro model: the newest Opus serves them), then goes on from
    the snapshot alone."""
    settings = gemini_cli_env.guide_settings()
    settings["model"]["compressionThreshold"] = 0.001  # 1,049 tokens
    client = make(gemini_binary, gemini_daemon, gemini_key, short_tmp, settings)
    # About 3,000 tokens, none repeated (Gemini CLI stops a stream that repeats itself).
    first = "First answer. " + " ".join(f"Fact {n}." for n in range(1000))
    snapshot = "<state_snapshot>The user said hello.</state_snapshot>"
    checked = "<state_snapshot>The user said hello, once.</state_snapshot>"
    service.enqueue(Reply(text=first), Reply(text=snapshot), Reply(text=checked), Reply(text=FINAL))
    assert client.run("hello").succeeded() == first
    mark = len(gemini_daemon.log())
    run = client.run("What next?", "--resume", "latest")
    assert run.succeeded() == FINAL
    lines = new_access_lines(gemini_daemon, mark)
    assert [status for _, status in paths(lines)] == ["200"] * 3
    summaries = [line for line in lines if line["path"].endswith(GENERATE)]
    assert len(summaries) == 2
    assert {line["upstream_model"] for line in summaries} == {OPUS}
    last = json.dumps(chats(service)[-1])
    assert checked in last
    assert "First answer." not in last
    assert lines[-1]["path"].endswith(guide_model() + STREAM)


def test_the_demos_gemini_line_works(gemini_binary: install.Binary, short_tmp: Path) -> None:
    """`kirod demo --gemini`'s Gemini CLI line, run by a shell with the real binary on PATH in a
    private HOME: the settings it wrote are enough, and the fake's echo is the answer."""
    with demo_env.demo("--gemini") as shown:
        line = demo_env.line_after(shown, "Gemini CLI")
        env = runs.private_env(short_tmp / "home")
        env["PATH"] = f"{gemini_binary.path.parent}{os.pathsep}{env.get('PATH', '')}"
        (short_tmp / "work").mkdir()
        done = demo_env.paste(f"{line} --output-format json", env, short_tmp / "work")
    assert done.returncode == 0, (line, done.stdout, done.stderr)
    answer = json.loads(done.stdout)["response"]
    assert answer.startswith("You said: <session_context>")  # the start of Gemini CLI's turn


def test_a_prompt_too_long_for_the_window_is_a_400_it_does_not_retry(
    gemini: GeminiCli, service: FakeKiro, gemini_daemon: DaemonProcess
) -> None:
    """Kiro's context window overflows: kirod answers Google's 400 INVALID_ARGUMENT (a 429 or a
    5xx Gemini CLI would retry with backoff), naming `/compress` and the threshold; Gemini CLI
    makes one call, shows the message and fails the turn."""
    service.enqueue(Script(fault=Fault.CONTEXT_WINDOW_EXCEEDED))
    mark = len(gemini_daemon.log())
    run = gemini.run("hello")
    assert run.exit_code != 0, run.describe()
    lines = new_access_lines(gemini_daemon, mark)
    assert paths(lines) == [(guide_model() + STREAM, "400")]
    assert "/compress" in run.stderr, run.describe()
    assert "compressionThreshold" in run.stderr
