"""The real Codex CLI (from npm) → the real kirod daemon → the fake Kiro service.

Installed with the other clients by `make clients` (the pin in versions.json, into
`.cache/clients/`); without npm or the binary these tests skip, saying why; a binary that is
installed but fails makes them fail. `KIROD_TEST_CODEX_BIN=/path/to/codex` drives any other
binary, `KIROD_TEST_CODEX_VERSION` another installed version (`make clients-latest` sets it).

Each test writes a private `$CODEX_HOME/config.toml` (a provider `kirod` at the daemon, retries
off, see `codex_env.py`), scripts the fake, runs `codex exec --json` with stdin closed and a
bound on its time, and checks Codex's events and rollout, what the fake received, and kirod's
access log:

* code mode (`gpt-5.6-sol`): the fake calls `functions__exec` (Codex's namespaced freeform
  `exec` tool as Kiro sees it) with JavaScript that `cat`s a file; Codex must get a
  `custom_tool_call`, run it through `codex-code-mode-host`, and send the file back;
* the classic shape (`claude-sonnet-4-6`): top-level function tools, `exec_command`;
* the same code-mode round trip over WebSocket (`supports_websockets = true`);
* compaction, local (the provider is not called "OpenAI": an ordinary request with Codex's
  summary prompt) and remote v2 (provider named "OpenAI": a `compaction_trigger` input item);
  Codex 0.171.0 no longer sends the v1 `POST /v1/responses/compact`;
* a cut answer (`incomplete`, `max_output_tokens`), with Codex's own retries and transport: the
  turn fails, after one request; resumed with "continue", it ends with the whole answer.

What the pinned Codex sends is in `captures/codex-<version>-<model>.json` (`python -m
tests.clients.capture --client codex`), checked in test_captures.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Fault, Reply, Script, ToolCall
from tests.clients import codex_env
from tests.clients.cc_env import wait_until
from tests.clients.codex_env import CLAUDE_MODEL, CODE_MODE_MODEL, DEFAULT_MODEL, Binary, Codex
from tests.clients.kiro_bodies import chats, context, current, new_access_lines

CANARY = "The canary sings at 04:51 in room 7."
FINAL = "The note is about a canary."
SOURCE = "const r = await tools.exec_command({cmd: 'cat notes.txt'}); text(r.output);"
"""What the model sends to code mode's `exec`: JavaScript that runs a command and prints it."""
COMPACT_LIMIT = 5000
"""`model_auto_compact_token_limit`: below what kirod reports for Codex's first turn (about
10 000 input tokens: its system prompt alone), so the next turn starts by compacting."""
FALLBACK = "Falling back from WebSockets"
UPGRADED = {"101", "499"}
"""The status of an upgrade's access-log line: 101, or 499 when the client went away without a
close frame, as `codex exec` does when it exits."""


@dataclass(frozen=True)
class Shape:
    """How one kind of model calls the command tool, at each hop."""

    model: str  # what Codex asks for
    upstream_model: str  # what Kiro gets
    tool: str  # the tool's name as Kiro sees it
    arguments: dict[str, Any]  # the call's input as Kiro sees it
    item: str  # the output item Codex must get for the call
    result_item: str  # the input item Codex answers with


CODE_MODE = Shape(
    CODE_MODE_MODEL,
    "gpt-5.6-sol",
    "functions__exec",
    {"input": SOURCE},
    "custom_tool_call",
    "custom_tool_call_output",
)
DEFAULT = dataclasses.replace(CODE_MODE, model=DEFAULT_MODEL)
"""No `model` line: code mode on Codex's default slug, served by the newest GPT of its tier."""
CLASSIC = Shape(
    CLAUDE_MODEL,
    "claude-sonnet-4.6",
    "exec_command",
    {"cmd": "cat notes.txt"},
    "function_call",
    "function_call_output",
)

MakeCodex = Callable[..., Codex]


@pytest.fixture(scope="module")
def codex_key(daemon: DaemonProcess) -> Iterator[str]:
    """A key made for Codex through the control API; it must never reach the daemon's log."""
    answer = daemon.client.request("POST", "/keys", {"name": "codex"})
    secret: str = answer["secret"]
    yield secret
    daemon.kill()
    assert secret not in daemon.log()


@pytest.fixture
def make_codex(
    codex_binary: Binary, daemon: DaemonProcess, codex_key: str, short_tmp: Path
) -> MakeCodex:
    """Codex with a fresh HOME, CODEX_HOME and working directory, configured for one model."""
    made: list[Codex] = []

    def make(
        model: str | None,
        *,
        websockets: bool | None = False,
        retries: bool = False,
        provider_name: str = "kirod",
        settings: dict[str, Any] | None = None,
    ) -> Codex:
        config = codex_env.config_toml(
            model,
            daemon.base_url,
            provider_name=provider_name,
            websockets=websockets,
            retries=retries,
            settings=settings,
            tables=codex_env.QUIET_CONFIG,
        )
        codex = Codex(codex_binary, short_tmp / f"c{len(made)}", codex_key, config)
        made.append(codex)
        return codex

    return make


# -- what each hop saw --------------------------------------------------------------------------


def upstream_tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tools = context(body).get("tools", [])
    return {tool["toolSpecification"]["name"]: tool["toolSpecification"] for tool in tools}


def everything_sent(body: dict[str, Any]) -> str:
    """The history and the current message as one text, to look for what must have reached Kiro."""
    return json.dumps(body["conversationState"], ensure_ascii=False)


def show(lines: list[dict[str, str]]) -> str:
    """Access-log lines for an assertion message, one per line."""
    return "\n".join(" ".join(f"{key}={value}" for key, value in line.items()) for line in lines)


def http_turns(lines: list[dict[str, str]]) -> list[dict[str, str]]:
    return [line for line in lines if (line["method"], line["path"]) == ("POST", "/v1/responses")]


def script_tool_round_trip(service: FakeKiro, shape: Shape) -> None:
    service.enqueue(
        Reply(text="Let me read it.", tool_calls=(ToolCall(shape.tool, shape.arguments),)),
        Reply(text=FINAL),
    )


def assert_tool_round_trip(
    codex: Codex, run: codex_env.Run, service: FakeKiro, shape: Shape
) -> None:
    """Codex ran the command the fake asked for and the file's content reached Kiro as the
    tool's result; the model's last word is Codex's answer."""
    run.succeeded()
    assert run.answer == FINAL, run.describe()
    commands = run.items("command_execution")
    assert len(commands) == 1, run.describe()
    assert "cat notes.txt" in commands[0]["command"], run.describe()  # `<shell> -lc '…'`
    assert CANARY in commands[0]["aggregated_output"], run.describe()
    assert commands[0]["exit_code"] == 0, run.describe()

    bodies = chats(service)
    assert len(bodies) == 2, [current(body).get("content", "")[-200:] for body in bodies]
    first, second = bodies
    for body in (first, second):
        assert current(body)["modelId"] == shape.upstream_model
    declared = upstream_tools(first)
    assert shape.tool in declared, sorted(declared)
    if shape.item == "custom_tool_call":  # a freeform tool goes to Kiro as a JSON tool
        schema = declared[shape.tool]["inputSchema"]["json"]
        assert set(schema["properties"]) == {"input"}, schema
        assert schema["properties"]["input"]["type"] == "string", schema
    assistant = second["conversationState"]["history"][-1]["assistantResponseMessage"]
    uses = assistant["toolUses"]
    assert [(use["name"], use["input"]) for use in uses] == [(shape.tool, shape.arguments)]
    results = context(second)["toolResults"]
    assert [result["toolUseId"] for result in results] == [uses[0]["toolUseId"]]
    assert results[0]["status"] == "success"
    assert CANARY in json.dumps(results[0]["content"]), results

    # What Codex made of kirod's output item, and what it answered with.
    rollout = codex.rollout()
    calls = [item for item in rollout if item["type"] == shape.item]
    assert len(calls) == 1, [item["type"] for item in rollout]
    call = calls[0]
    if shape.item == "custom_tool_call":
        assert (call["name"], call.get("namespace"), call["input"]) == ("exec", "functions", SOURCE)
    else:
        assert call["name"] == "exec_command"
        assert json.loads(call["arguments"]) == shape.arguments
    outputs = [item for item in rollout if item["type"] == shape.result_item]
    assert [output["call_id"] for output in outputs] == [call["call_id"]]
    assert CANARY in json.dumps(outputs[0]["output"])


# -- tool round trips over HTTP -----------------------------------------------------------------


@pytest.mark.parametrize("shape", [CODE_MODE, CLASSIC], ids=["code-mode-gpt-5.6-sol", CLAUDE_MODEL])
def test_tool_round_trip_over_http(
    make_codex: MakeCodex, service: FakeKiro, daemon: DaemonProcess, shape: Shape
) -> None:
    """The fake asks for `cat notes.txt` (code mode: `exec` with JavaScript; classic:
    `exec_command`); Codex runs it and sends the content back; its final answer is the fake's."""
    codex = make_codex(shape.model)
    (codex.workdir / "notes.txt").write_text(CANARY + "\n")
    script_tool_round_trip(service, shape)
    mark = len(daemon.log())
    run = codex.run("What does notes.txt say?")
    assert_tool_round_trip(codex, run, service, shape)
    lines = new_access_lines(daemon, mark)
    turns = http_turns(lines)
    assert [line["status"] for line in turns] == ["200", "200"], lines
    assert {line["upstream_model"] for line in turns} == {shape.upstream_model}
    assert [line for line in lines if line["method"] == "GET"] == [], "no WebSocket attempt"


def test_no_model_line_runs_code_mode_on_codexs_default_served_by_its_tier(
    make_codex: MakeCodex, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """The config most users write: a provider and no `model`. Codex asks for its catalog's
    first slug; kirod serves it with the newest offered GPT of the same tier, and says so."""
    codex = make_codex(None)
    (codex.workdir / "notes.txt").write_text(CANARY + "\n")
    script_tool_round_trip(service, DEFAULT)
    mark = len(daemon.log())
    run = codex.run("What does notes.txt say?")
    assert_tool_round_trip(codex, run, service, DEFAULT)
    lines = new_access_lines(daemon, mark)
    turns = http_turns(lines)
    assert [line["status"] for line in turns] == ["200", "200"], show(lines)
    assert {line["upstream_model"] for line in turns} == {"gpt-5.6-sol"}, show(lines)
    substituted = [line for line in daemon.log().splitlines() if "model_substituted" in line]
    assert any(f"requested={DEFAULT_MODEL} " in line and "via=tier" in line for line in substituted)


# -- the same over WebSocket --------------------------------------------------------------------


def test_code_mode_round_trip_over_websocket(
    make_codex: MakeCodex, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """`supports_websockets = true`: Codex upgrades `GET /v1/responses` (a warm-up connection
    with `generate: false`, then one for the turn, whose second `response.create` carries only the
    tool's output and `previous_response_id`). The round trip must complete on the socket: no
    fallback to HTTP, no `POST /v1/responses`, and the warm-up must not reach Kiro."""
    codex = make_codex(CODE_MODE_MODEL, websockets=True)
    (codex.workdir / "notes.txt").write_text(CANARY + "\n")
    script_tool_round_trip(service, CODE_MODE)
    mark = len(daemon.log())
    run = codex.run("What does notes.txt say?")
    assert not [error for error in run.errors if FALLBACK in error], run.describe()
    assert_tool_round_trip(codex, run, service, CODE_MODE)

    def settled() -> list[dict[str, str]] | None:
        """The lines once every connection has closed: kirod writes each turn's line (`method=WS`)
        at the turn's end, an upgrade's line (with the `turns` it served) at the close."""
        lines = new_access_lines(daemon, mark)
        upgrades = [
            line for line in lines if (line["method"], line["path"]) == ("GET", "/v1/responses")
        ]
        if any(line["status"] not in UPGRADED for line in upgrades):
            return lines  # refused: there is nothing more to wait for
        served = sum(int(line.get("turns", "0")) for line in upgrades)
        turns = [line for line in lines if line["method"] == "WS"]
        return lines if upgrades and served >= len(turns) else None

    lines = wait_until(settled, 5.0, "kirod's access-log lines of the WebSocket connections")
    upgrades = [
        line for line in lines if (line["method"], line["path"]) == ("GET", "/v1/responses")
    ]
    assert upgrades, show(lines)
    assert {line["status"] for line in upgrades} <= UPGRADED, show(lines)
    assert http_turns(lines) == [], show(lines)
    turns = [line for line in lines if line["method"] == "WS"]
    # Every turn served, the warm-up (`generate: false`, annotated so) included.
    refused = [line for line in turns if line["status"] != "200"]
    assert refused == [], f"turns refused on the socket:\n{show(lines)}"
    assert len([line for line in turns if "generate" not in line]) == 2, show(lines)


# -- compaction ---------------------------------------------------------------------------------


def compaction_runs(codex: Codex, service: FakeKiro) -> tuple[codex_env.Run, codex_env.Run]:
    """Turn one (`hello`), then `exec resume --last`: above the compaction limit, Codex
    compacts before its second turn. The fake answers the turn, the summary, the next turn."""
    service.enqueue(
        Reply(text="First answer."),
        Reply(text="SUMMARY: the user greeted; the first answer was given."),
        Reply(text="Second answer."),
    )
    first = codex.run("hello").succeeded()
    assert first.answer == "First answer.", first.describe()
    second = codex.run("and again", resume=True).succeeded()
    assert second.answer == "Second answer.", second.describe()
    return first, second


def test_local_compaction(make_codex: MakeCodex, service: FakeKiro, daemon: DaemonProcess) -> None:
    """A provider not named "OpenAI" compacts locally: an ordinary `/v1/responses` turn whose
    last user message is Codex's checkpoint prompt; the summary the fake wrote comes back as a
    user message of the next turn (and the first turn's exchange does not)."""
    codex = make_codex(CODE_MODE_MODEL, settings={"model_auto_compact_token_limit": COMPACT_LIMIT})
    mark = len(daemon.log())
    compaction_runs(codex, service)
    _, summary, after = chats(service)
    assert "CONTEXT CHECKPOINT COMPACTION" in current(summary)["content"]
    assert "First answer." in everything_sent(summary)
    sent = everything_sent(after)
    assert "SUMMARY: the user greeted" in sent
    assert "and again" in current(after)["content"]
    assert "First answer." not in sent
    (compacted,) = codex.rollout("compacted")
    assert "SUMMARY: the user greeted" in json.dumps(compacted["replacement_history"])
    assert [line["status"] for line in http_turns(new_access_lines(daemon, mark))] == ["200"] * 3


def test_remote_compaction_v2(
    make_codex: MakeCodex, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """A provider named "OpenAI" compacts remotely (0.171.0: always v2): a `/v1/responses` turn
    ending with a `{"type": "compaction_trigger"}` item. kirod must answer it with exactly one
    `compaction` item, which Codex keeps in its history and sends back next turn; kirod then
    gives Kiro the summary the fake wrote in place of the conversation it replaced."""
    codex = make_codex(
        CODE_MODE_MODEL,
        provider_name="OpenAI",
        settings={"model_auto_compact_token_limit": COMPACT_LIMIT},
    )
    mark = len(daemon.log())
    _, second = compaction_runs(codex, service)
    assert not second.errors, second.describe()
    first, summary, after = chats(service)
    assert "functions__exec" in upstream_tools(first)
    assert upstream_tools(summary) == {}, "the summarisation turn runs without tools"
    assert "First answer." in everything_sent(summary)
    # Codex continues from a history holding kirod's one `compaction` item.
    (compacted,) = codex.rollout("compacted")
    kept = [item for item in compacted["replacement_history"] if item["type"] == "compaction"]
    assert len(kept) == 1, compacted
    assert kept[0]["id"].startswith("cmp_"), kept
    assert kept[0]["encrypted_content"], kept
    assert "SUMMARY" not in json.dumps(compacted), "the summary travels sealed"
    sent = everything_sent(after)
    assert "SUMMARY: the user greeted" in sent
    assert "and again" in current(after)["content"]
    assert "First answer." not in sent
    assert [line["status"] for line in http_turns(new_access_lines(daemon, mark))] == ["200"] * 3


# -- web search --------------------------------------------------------------------------------


def test_web_search_runs_inside_the_turn(
    make_codex: MakeCodex, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """With a Claude model Codex declares the hosted `web_search` tool; kirod runs the model's
    search through Kiro's MCP endpoint and Codex receives a `web_search_call` item, then the
    model's answer, in one turn."""
    codex = make_codex(CLAUDE_MODEL)
    service.enqueue(
        Reply(tool_calls=(ToolCall("web_search", {"query": "kirod gateway"}),)),
        Reply(text=FINAL),
    )
    run = codex.run("Search the web for kirod.")
    run.succeeded()
    assert run.answer == FINAL, run.describe()
    [search] = [record.json for record in service.requests("mcp")]
    assert search["params"]["arguments"] == {"query": "kirod gateway"}
    first, second = chats(service)
    assert "web_search" in upstream_tools(first)
    assert "https://example.com/kirod-gateway/1" in everything_sent(second)
    searches = [item for item in codex.rollout() if item["type"] == "web_search_call"]
    assert [item["action"]["query"] for item in searches] == ["kirod gateway"], searches


# -- a cut answer ------------------------------------------------------------------------------


CUT = "Step 1 of 3 is done. Step 2 of 3 is done. Now step 3, which is to"
CUT_SHOWN = CUT[:32]
"""What reaches Codex: four content frames of eight characters, then a clean end without tail."""
WHOLE = "finish step 3. All three steps are done."


@pytest.mark.parametrize("model", [CODE_MODE_MODEL, CLAUDE_MODEL])
def test_a_cut_answer_fails_the_turn_after_one_request(
    make_codex: MakeCodex, service: FakeKiro, daemon: DaemonProcess, model: str
) -> None:
    """Kiro ends the first answer cleanly but without its tail frames, half way through: kirod
    sends it as `incomplete` with `max_output_tokens` (docs/KIRO-PROTOCOL.md §3.4). Codex 0.171.0,
    with its own retries and transport (HTTP: a provider defined in config.toml tries no WebSockets
    unless told), shows the text that came, fails the turn naming the reason and exits 1. It
    sends the request once: neither again (as it does five times after a broken stream) nor to
    continue, so the whole answer scripted next is never asked for. Sent as `completed`, the same
    run exits 0 with `turn.completed`, the cut text taken for the whole answer. The user's way on,
    `exec resume --last continue`, sends the cut text back and ends with the whole answer."""
    codex = make_codex(model, websockets=None, retries=True)
    service.enqueue(
        Script(reply=Reply(text=CUT), fault=Fault.CUT_GENERATION, fault_at=4, chunk_size=8),
        Reply(text=WHOLE),
    )
    mark = len(daemon.log())
    run = codex.run("Do the three steps.")
    kinds = [event.get("type") for event in run.events]
    assert run.exit_code == 1, run.describe()
    assert "turn.completed" not in kinds, run.describe()
    [failed] = [event for event in run.events if event.get("type") == "turn.failed"]
    assert failed["error"]["message"] == (
        "Incomplete response returned, reason: max_output_tokens"
    ), run.describe()
    assert run.answer == CUT_SHOWN, run.describe()
    assert len(chats(service)) == 1, "Codex asked Kiro again"
    lines = new_access_lines(daemon, mark)
    assert [(line["method"], line["status"]) for line in lines] == [("POST", "200")], show(lines)
    assert "answer_cut" in daemon.log()[mark:]

    resumed = codex.run("continue", resume=True).succeeded()
    assert resumed.answer == WHOLE, resumed.describe()
    assert CUT_SHOWN in json.dumps(chats(service)[-1]["conversationState"]["history"])
