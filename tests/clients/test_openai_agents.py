"""The OpenAI Agents SDK (`openai-agents` from PyPI) → the real kirod daemon → the fake Kiro.

`make test` installs the pinned SDK (`tests/clients/versions.json`) in a venv of its own and
runs these; they skip, saying why, when it could not be installed. `KIROD_TEST_OPENAI_AGENTS_BIN`
names another venv's `python`.

Each test runs a script in that venv, in a private HOME, with the guide's settings (tracing
off, an `AsyncOpenAI` client at kirod's `/v1` as the SDK's default). What 0.24.0 sends is in
`captures/openai-agents-0.24.0-default.json` (`capture.py --client openai-agents`): one
unstreamed `POST /v1/responses` per model turn, `include: []`, the instructions, the whole
history each turn, no session id.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ToolCall
from tests.clients import agents_env
from tests.clients.agents_env import Agents
from tests.clients.guide_snippets import guide_block
from tests.clients.kiro_bodies import KIRO_MODEL, chats, current, new_access_lines, routes
from tests.clients.note_round_trip import (
    FINAL,
    assert_the_note_reached_kiro,
    call_first,
    write_the_note,
)


@pytest.fixture
def agents(
    agents_python: agents_env.Binary, daemon: DaemonProcess, api_key: str, short_tmp: Path
) -> Agents:
    return Agents(agents_python, api_key, short_tmp)


def test_the_guides_agent_reads_a_file_with_its_function_tool(
    agents: Agents, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """The guide's script as written: the model calls `read_file`, the SDK runs it and sends
    the note back as a `function_call_output`; the answer after it is the run's final output.
    Two unstreamed Responses calls, both 200, for the guide's model."""
    block = guide_block(agents_env.GUIDE_HEADING, "python")
    assert block.startswith(agents_env.SETTINGS)  # the drivers' scripts share the guide's lines
    write_the_note(agents.workdir)
    call_first(service, ToolCall(agents_env.READ_TOOL, {"path": "notes.txt"}))
    mark = len(daemon.log())
    run = agents.run(block, daemon.base_url)
    assert run.exit_code == 0, run.describe()
    assert run.stdout.strip() == FINAL, run.describe()
    first, _ = assert_the_note_reached_kiro(service, agents_env.READ_TOOL)
    assert current(first)["modelId"] == KIRO_MODEL
    lines = new_access_lines(daemon, mark)
    assert routes(lines) == [("/v1/responses", "200")] * 2


def test_an_agent_with_the_sdks_default_model(
    agents: Agents, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """No `model`: the SDK asks for its default GPT name with that model's default settings;
    kirod serves it with the newest GPT the account offers (no Luna tier among the fake's
    models: the newest GPT, `gpt-5.6-sol`)."""
    answer = "Hello from the fake Kiro, Agents SDK edition."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    run = agents.run(agents_env.DEFAULT_MODEL, daemon.base_url)
    assert run.exit_code == 0, run.describe()
    assert run.stdout.strip() == answer, run.describe()
    (body,) = chats(service)
    assert current(body)["modelId"] == "gpt-5.6-sol"
    (line,) = new_access_lines(daemon, mark)
    assert (line["path"], line["status"], line["upstream_model"]) == (
        "/v1/responses",
        "200",
        "gpt-5.6-sol",
    )


def test_run_streamed_streams_the_tool_round_trip(
    agents: Agents, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """`Runner.run_streamed`: the run's items arrive in order (the tool call, its output, the
    answer), the answer's text as deltas, and the final output is the model's answer."""
    write_the_note(agents.workdir)
    call_first(service, ToolCall(agents_env.READ_TOOL, {"path": "notes.txt"}))
    mark = len(daemon.log())
    run = agents.run(agents_env.STREAMED, daemon.base_url)
    assert run.exit_code == 0, run.describe()
    lines = run.stdout.splitlines()
    items = [line.removeprefix("item: ") for line in lines if line.startswith("item: ")]
    assert items == ["tool_call_item", "tool_call_output_item", "message_output_item"], lines
    deltas = "".join(line.removeprefix("delta: ") for line in lines if line.startswith("delta: "))
    assert deltas.replace(" ", "") == FINAL.replace(" ", ""), lines
    assert lines[-1] == f"final: {FINAL}", run.describe()
    assert_the_note_reached_kiro(service, agents_env.READ_TOOL)
    assert routes(new_access_lines(daemon, mark)) == [("/v1/responses", "200")] * 2


def test_a_handoff_passes_the_question_to_the_second_agent(
    agents: Agents, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """The triage agent calls the handoff tool the SDK made for the billing agent; the SDK
    switches agents and asks again with the billing agent's instructions, whose answer ends
    the run."""
    answer = "Your card was charged once; the second line is a hold."
    service.default_script = Script(
        reply=Reply(text=answer), call_first=ToolCall(agents_env.HANDOFF_TOOL, {})
    )
    mark = len(daemon.log())
    run = agents.run(agents_env.HANDOFF, daemon.base_url)
    assert run.exit_code == 0, run.describe()
    assert run.stdout.splitlines() == [
        f"last agent: {agents_env.HANDOFF_AGENT}",
        f"final: {answer}",
    ], run.describe()
    first, second = chats(service)
    tools = current(first)["userInputMessageContext"]["tools"]
    assert [tool["toolSpecification"]["name"] for tool in tools] == [agents_env.HANDOFF_TOOL]
    assert "Hand invoice questions" in str(first)
    assert "You answer questions about invoices." in str(second)
    assert routes(new_access_lines(daemon, mark)) == [("/v1/responses", "200")] * 2


def test_output_type_is_refused_clearly_before_reaching_kiro(
    agents: Agents, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """`output_type` makes the SDK ask for structured output (`text.format` json_schema), which
    Kiro cannot honour: the SDK raises kirod's 400, whose message says so; Kiro is not asked."""
    mark = len(daemon.log())
    run = agents.run(agents_env.STRUCTURED, daemon.base_url)
    assert run.exit_code == 0, run.describe()
    status, message = run.stdout.splitlines()
    assert status == "status: 400", run.describe()
    assert "structured output" in message, run.describe()
    assert service.requests("chat") == []
    assert routes(new_access_lines(daemon, mark)) == [("/v1/responses", "400")]
