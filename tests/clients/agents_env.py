"""Driving the OpenAI Agents SDK (`openai-agents` from PyPI, in its own venv) against a kirod:
the guide's settings, the scripts the tests run, one run.

Imported by the client test and capture modules (not a test module itself).

The SDK is a library, not a program: each run is a small script run by the Python of the pinned
venv. The settings are the guide's lines (docs/guide/client-settings.md, `## OpenAI Agents
SDK`): tracing off (else the SDK posts traces to OpenAI) and an `AsyncOpenAI` client at kirod's
`/v1` as the SDK's default, so every agent speaks Responses to kirod. Its default model
(`gpt-5.6-luna` in 0.24) is a GPT name, which kirod serves by tier (docs/guide/client-settings.md);
the tests name a Claude model the way a user of Kiro would.
"""

from __future__ import annotations

from pathlib import Path

from tests.clients import install, runs
from tests.clients.guide_snippets import GUIDE_PORT, KEY_VARIABLE

CLIENT = "openai-agents"
GUIDE_HEADING = "OpenAI Agents SDK"
MODEL = "claude-sonnet-4-6"
RUN_TIMEOUT_S = 60.0
"""One script: a few model turns against the fake, a second or two; this bounds a hang."""
SCRIPT = "agent.py"

SETTINGS = f"""import os

from openai import AsyncOpenAI
from agents import set_default_openai_client, set_tracing_disabled

set_tracing_disabled(True)
set_default_openai_client(
    AsyncOpenAI(base_url="{GUIDE_PORT}/v1", api_key=os.environ["{KEY_VARIABLE}"])
)
"""
"""What the guide's block starts with: every setting the SDK needs."""

HELLO = f"""{SETTINGS}
from agents import Agent, Runner

agent = Agent(name="Assistant", instructions="Answer briefly.", model="{MODEL}")
print(Runner.run_sync(agent, "hello").final_output)
"""
"""The capture's script: one plain turn."""

DEFAULT_MODEL = f"""{SETTINGS}
from agents import Agent, Runner

agent = Agent(name="Assistant", instructions="Answer briefly.")
print(Runner.run_sync(agent, "hello").final_output)
"""
"""An agent with the SDK's own model (`gpt-5.6-luna` in 0.24) and model settings."""

READ_TOOL = "read_file"
TOOL = f'''
from agents import Agent, Runner, function_tool


@function_tool
def {READ_TOOL}(path: str) -> str:
    """Read a text file and return its content."""
    with open(path) as file:
        return file.read()


agent = Agent(
    name="Assistant",
    instructions="Answer briefly.",
    model="{MODEL}",
    tools=[{READ_TOOL}],
)
'''
"""An agent with the file-read function tool (what the guide's block defines after SETTINGS)."""

STREAMED = f"""{SETTINGS}{TOOL}
import asyncio

from openai.types.responses import ResponseTextDeltaEvent


async def main() -> None:
    result = Runner.run_streamed(agent, "What does notes.txt say?")
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            print("delta:", event.data.delta)
        elif event.type == "run_item_stream_event":
            print("item:", event.item.type)
    print("final:", result.final_output)


asyncio.run(main())
"""
"""The same agent, run with `Runner.run_streamed`: each text delta and run item as it comes."""

HANDOFF_AGENT = "Billing agent"
HANDOFF = f"""{SETTINGS}
from agents import Agent, Runner

billing = Agent(
    name="{HANDOFF_AGENT}",
    handoff_description="Answers questions about invoices.",
    instructions="You answer questions about invoices.",
    model="{MODEL}",
)
triage = Agent(
    name="Triage agent",
    instructions="Hand invoice questions to the billing agent.",
    model="{MODEL}",
    handoffs=[billing],
)
result = Runner.run_sync(triage, "Why was my invoice charged twice?")
print("last agent:", result.last_agent.name)
print("final:", result.final_output)
"""
"""Two agents: the triage agent hands the question to the billing agent, which answers."""
HANDOFF_TOOL = "transfer_to_billing_agent"
"""The tool the SDK offers the triage agent for the handoff (`transfer_to_<name>`)."""

STRUCTURED = f"""{SETTINGS}
import openai
from pydantic import BaseModel

from agents import Agent, Runner


class Weather(BaseModel):
    city: str
    degrees: int


agent = Agent(name="Assistant", model="{MODEL}", output_type=Weather)
try:
    Runner.run_sync(agent, "The weather in Lyon?")
except openai.BadRequestError as error:
    print("status:", error.status_code)
    print("message:", error.body["message"])
"""
"""An agent with `output_type`, which asks Responses for structured output: kirod's 400."""

Binary = install.Binary


def client_env(home: Path, token: str) -> dict[str, str]:
    """A private HOME, and the key where the guide's lines read it."""
    return runs.private_env(home, {KEY_VARIABLE: token})


def script(source: str, base_url: str) -> str:
    """`source` (written for kirod's default port) pointed at `base_url`."""
    return source.replace(GUIDE_PORT, base_url)


def command() -> list[str]:
    return ["python", SCRIPT]


class Agents(runs.Client):
    """The SDK's venv Python in a private HOME and working directory, with one kirod key."""

    def __init__(self, binary: Binary, token: str, root: Path) -> None:
        super().__init__(binary, root)
        self.env = client_env(self.home, token)

    def run(self, source: str, base_url: str, timeout_s: float = RUN_TIMEOUT_S) -> runs.Finished:
        """`source` pointed at `base_url`, written to `agent.py` and run to its end."""
        (self.workdir / SCRIPT).write_text(script(source, base_url))
        return self.launch(runs.Finished, command(), timeout_s)
