"""Driving the Claude Agent SDK (`claude-agent-sdk` from PyPI, in its own venv) against a kirod:
the guide's settings and script, one run.

Imported by the client test and capture modules (not a test module itself).

The SDK runs Claude Code as a subprocess, which inherits the script's environment: the guide's
shell lines (docs/guide/client-settings.md, `## Claude Agent SDK`) are Claude Code's own,
`ANTHROPIC_BASE_URL` without `/v1` and `ANTHROPIC_AUTH_TOKEN`, and its Python block is a
`query()` with one custom tool, served in-process as an SDK MCP server. The SDK bundles a Claude
Code of its own (2.1.337 in 0.2.190); the tests point `cli_path` at the pinned Claude Code
instead, the one line they add to the guide's script (`with_cli`).
"""

from __future__ import annotations

from pathlib import Path

from tests.clients import cc_env, install, runs
from tests.clients.guide_snippets import GUIDE_PORT, KEY_VARIABLE

CLIENT = "claude-agent-sdk"
GUIDE_HEADING = "Claude Agent SDK"
RUN_TIMEOUT_S = 60.0
"""One script: Claude Code's start (a second or two) and a few turns against the fake."""
SCRIPT = "agent.py"
BASE_ENV = "ANTHROPIC_BASE_URL"
TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN"

READ_TOOL = "read_note"
SERVER = "notes"
MCP_TOOL = f"mcp__{SERVER}__{READ_TOOL}"
"""The name Claude Code gives the SDK server's tool, in its requests and its permission rules."""

SHELL = f"""export {BASE_ENV}={GUIDE_PORT}
export {TOKEN_ENV}="${KEY_VARIABLE}"
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
python {SCRIPT}
"""
"""The guide's shell lines, as `guide_snippets.paste` runs them."""

RUN_LINE = "asyncio.run(main())"
"""The last line of the guide's script, before which `with_cli` names the pinned Claude Code."""

HELLO = f"""import asyncio

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

options = ClaudeAgentOptions(max_turns=2)


async def main() -> None:
    async for message in query(prompt="hello", options=options):
        if isinstance(message, ResultMessage):
            print(message.result)


{RUN_LINE}
"""
"""The capture's script: one plain turn, with Claude Code's built-in tools."""

Binary = install.Binary


def with_cli(source: str, cli: Path) -> str:
    """The guide's script with `cli_path` set to `cli` just before it runs."""
    assert source.count(RUN_LINE) == 1, source
    return source.replace(RUN_LINE, f"options.cli_path = {str(cli)!r}\n{RUN_LINE}")


def client_env(home: Path, base_url: str | None, token: str) -> dict[str, str]:
    """A private HOME; kirod's URL and key as Claude Code reads them (unless the guide's shell
    lines set them: `base_url` None), the key also where those lines read it; no traffic
    beyond the gateway."""
    settings = {KEY_VARIABLE: token}
    if base_url is not None:
        settings |= {BASE_ENV: base_url, TOKEN_ENV: token}
    return runs.private_env(home, settings, cc_env.OFFLINE)


def command() -> list[str]:
    return ["python", SCRIPT]


class ClaudeSDK(runs.Client):
    """The SDK's venv Python in a private HOME and working directory, with one kirod key,
    running scripts whose Claude Code is `cli`."""

    def __init__(self, binary: Binary, cli: Path, base_url: str, token: str, root: Path) -> None:
        super().__init__(binary, root)
        self.cli = cli
        self.env = client_env(self.home, base_url, token)

    def write(self, source: str) -> Path:
        """`source` with the pinned Claude Code, as `agent.py` in the working directory."""
        path = self.workdir / SCRIPT
        path.write_text(with_cli(source, self.cli))
        return path

    def run(self, source: str, timeout_s: float = RUN_TIMEOUT_S) -> runs.Finished:
        self.write(source)
        return self.launch(runs.Finished, command(), timeout_s)
