"""The Claude Agent SDK (`claude-agent-sdk` from PyPI) driving the pinned Claude Code → the real
kirod daemon → the fake Kiro.

`make test` installs the pinned SDK (`tests/clients/versions.json`) in a venv of its own and
runs these; they skip, saying why, when it or Claude Code could not be installed.
`KIROD_TEST_CLAUDE_AGENT_SDK_BIN` names another venv's `python`.

The guide's shell lines run the guide's script (with `cli_path` naming the pinned Claude Code)
in a private HOME. What the SDK makes Claude Code send is in
`captures/claude-agent-sdk-0.2.190-default.json` (`capture.py --client claude-agent-sdk`):
Claude Code's usual request, with `thinking.display: "updates"` and the beta
`thinking-display-updates-2026-08-18`, and `sdk-py, agent-sdk/0.2.190` in its user agent.
Refused with a 400, Claude Code sends the turn again without `display`, and again with its
tools declared another way: so a run that costs exactly one request per model turn is a run in
which kirod refused nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ToolCall
from tests.clients import claude_sdk_env, runs
from tests.clients.cc_env import Binary as ClaudeBinary
from tests.clients.claude_sdk_env import ClaudeSDK
from tests.clients.guide_snippets import GUIDE_PORT, guide_block, guide_code, paste
from tests.clients.kiro_bodies import chats, new_access_lines, routes, tool_names
from tests.clients.note_round_trip import (
    FINAL,
    assert_the_note_reached_kiro,
    call_first,
    write_the_note,
)

MESSAGES = ("/v1/messages", "200")


@pytest.fixture
def sdk(
    claude_sdk_python: claude_sdk_env.Binary,
    claude_binary: ClaudeBinary,
    daemon: DaemonProcess,
    api_key: str,
    short_tmp: Path,
) -> ClaudeSDK:
    return ClaudeSDK(claude_sdk_python, claude_binary.path, daemon.base_url, api_key, short_tmp)


def test_the_guides_query_calls_its_custom_tool(
    sdk: ClaudeSDK, service: FakeKiro, daemon: DaemonProcess, api_key: str
) -> None:
    """The guide's lines, pasted: the model calls the SDK server's `read_note`, the SDK runs it
    in the script's process and Claude Code sends its result back; the answer after it is the
    query's result. One request per model turn, each a 200: `display: "updates"` is accepted,
    nothing is retried."""
    shell = guide_block(claude_sdk_env.GUIDE_HEADING, "sh").replace(GUIDE_PORT, daemon.base_url)
    assert shell == claude_sdk_env.SHELL.replace(GUIDE_PORT, daemon.base_url)
    sdk.write(guide_code(claude_sdk_env.GUIDE_HEADING, "python"))
    write_the_note(sdk.workdir)
    call_first(service, ToolCall(claude_sdk_env.MCP_TOOL, {"path": "notes.txt"}))
    mark = len(daemon.log())
    run = paste(
        runs.Finished,
        sdk,
        shell,
        api_key,
        set_by_script=(claude_sdk_env.BASE_ENV, claude_sdk_env.TOKEN_ENV),
        timeout_s=claude_sdk_env.RUN_TIMEOUT_S,
    )
    assert run.exit_code == 0, run.describe()
    assert run.stdout.strip() == FINAL, run.describe()
    first, _ = assert_the_note_reached_kiro(service, claude_sdk_env.MCP_TOOL)
    assert "ToolSearch" not in tool_names(first)  # `tools=[]`: the tool is offered as it is
    assert routes(new_access_lines(daemon, mark)) == [MESSAGES] * 2


def test_a_plain_query_with_claude_codes_own_tools(
    sdk: ClaudeSDK, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """`query("hello")` with the SDK's defaults (Claude Code's own tools, its default model,
    thinking with `display: "updates"`): one 200, and the model's answer is the result."""
    answer = "Hello from the fake Kiro, Agent SDK edition."
    service.default_script = Script(reply=Reply(text=answer))
    mark = len(daemon.log())
    run = sdk.run(claude_sdk_env.HELLO)
    assert run.exit_code == 0, run.describe()
    assert run.stdout.strip() == answer, run.describe()
    (body,) = chats(service)
    assert "ToolSearch" in tool_names(body)
    assert routes(new_access_lines(daemon, mark)) == [MESSAGES]
