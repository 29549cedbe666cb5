"""The committed captures of Kilo Code and Cline (`agent_capture.py`) name their pinned versions,
hold no secret or local detail, and show what the tests and the README rely on: Kilo's session
id in `x-session-affinity`, and no id at all from Cline.

No client needed: these read only files in the tree.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent_capture
import capture
import cline_env
import install
import kilo_env

USER_AGENTS = {kilo_env.CLIENT: "Kilo-Code/{version} ", cline_env.CLIENT: "ai-sdk/anthropic/"}


@pytest.mark.parametrize("client", agent_capture.CLIENTS)
def test_the_capture_names_its_version_and_one_streamed_messages_request(client: str) -> None:
    document = agent_capture.pinned(client)
    assert document["client"] == client
    assert document["version"] == install.pin(client).version
    (request,) = document["requests"]
    assert (request["method"], request["path"]) == ("POST", "/v1/messages")
    agent = USER_AGENTS[client].format(version=document["version"])
    assert request["headers"]["user-agent"].startswith(agent)
    assert request["body"]["stream"] is True
    assert request["body"]["model"] == "claude-sonnet-4-6"


def test_the_commands_and_settings_are_the_drivers() -> None:
    """What was run is what the tests run, with the README's provider."""
    kilo = agent_capture.pinned(kilo_env.CLIENT)
    assert kilo["command"] == kilo_env.command(agent_capture.PROMPTS[kilo_env.CLIENT])
    assert kilo["kilo_json"] == kilo_env.config(agent_capture.BASE_URL_PLACEHOLDER)
    assert kilo_env.OFFLINE.items() <= kilo["environment"].items()
    cline = agent_capture.pinned(cline_env.CLIENT)
    home = Path(capture.HOME_PLACEHOLDER)
    assert cline["command"] == cline_env.command(agent_capture.PROMPTS[cline_env.CLIENT], home)
    expected = cline_env.providers(agent_capture.BASE_URL_PLACEHOLDER, "<token>")
    assert cline["providers_json"] == expected
    assert cline["global_settings_json"] == cline_env.GLOBAL_SETTINGS


def test_kilo_sends_its_session_id_where_kirod_reads_it() -> None:
    (request,) = agent_capture.pinned(kilo_env.CLIENT)["requests"]
    headers = request["headers"]
    assert headers["x-session-affinity"] == capture.OPENCODE_SESSION_PLACEHOLDER
    assert headers["x-session-id"] == capture.OPENCODE_SESSION_PLACEHOLDER
    assert "read" in {tool["name"] for tool in request["body"]["tools"]}


def test_cline_sends_no_session_or_conversation_id() -> None:
    """Nothing kirod could keep a task on one account by: no id header, no `metadata`."""
    (request,) = agent_capture.pinned(cline_env.CLIENT)["requests"]
    names = [
        name
        for name in request["headers"]
        if re.search("session|affinity|conversation|thread", name)
    ]
    assert names == []
    assert "metadata" not in request["body"]
    assert "read_files" in {tool["name"] for tool in request["body"]["tools"]}


@pytest.mark.parametrize("client", agent_capture.CLIENTS)
def test_the_capture_holds_no_secret_or_local_detail(client: str) -> None:
    document = agent_capture.pinned(client)
    text = json.dumps(document)
    for request in document["requests"]:
        assert not set(request["headers"]) & capture.SECRET_HEADERS
        assert not set(request["headers"]) & capture.VARIABLE_HEADERS
    assert capture.TOKEN not in text
    home, workdir = re.escape(capture.HOME_PLACEHOLDER), re.escape(capture.WORKDIR_PLACEHOLDER)
    local = re.sub(rf"(?:{home}|{workdir})[\w/.-]*", "", text)
    assert not re.search(r"/tmp/|/home/|/root\b|/work/|kd-capture|kd-", local)
    assert not re.search(capture._UUID, text)
    assert set(re.findall(r"\bses_\w+", text)) <= {capture.OPENCODE_SESSION_PLACEHOLDER}
    assert not re.search(
        r"Today's date: (?!<date>)|Message time: (?!<date>)|\d\. Date: (?!<date>)", text
    )


def test_the_date_placeholders() -> None:
    prompt = "Today's date: Sat Dec 05 2026\nMessage time: 2026-12-05T19:04:08Z\n2. Date: 12/5/2026"
    assert agent_capture.undated({"system": [prompt]}) == {
        "system": ["Today's date: <date>\nMessage time: <date>\n2. Date: <date>"]
    }
