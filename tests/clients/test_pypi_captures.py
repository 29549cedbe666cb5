"""The committed captures of aider and llm (`capture_pypi.py`) name their pinned versions, hold
no secret or local detail, and show what the tests and the README rely on.

No client needed: these read only files in the tree.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aider_env
import capture
import capture_pypi
import install
import llm_env

USER_AGENTS = {aider_env.CLIENT: "litellm/", llm_env.CLIENT: "Anthropic/Python "}


def pinned_capture(client: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        capture_pypi.output(client, install.pin(client).version).read_text()
    )
    return document


@pytest.mark.parametrize("client", capture_pypi.CLIENTS)
def test_the_capture_names_its_version_and_one_streamed_messages_request(client: str) -> None:
    document = pinned_capture(client)
    pin = install.pin(client)
    assert document["client"] == client
    assert document["version"] == pin.version
    plugins = [f"{name}=={version}" for name, version in document.get("plugins", {}).items()]
    assert plugins == list(pin.plugins)
    (request,) = document["requests"]
    assert (request["method"], request["path"]) == ("POST", "/v1/messages")
    assert request["headers"]["user-agent"].startswith(USER_AGENTS[client])
    assert request["body"]["stream"] is True
    assert request["body"]["messages"][-1]["role"] == "user"


def test_the_commands_are_the_drivers() -> None:
    assert pinned_capture(aider_env.CLIENT)["command"] == aider_env.command(capture_pypi.PROMPT)
    assert pinned_capture(llm_env.CLIENT)["command"] == llm_env.command(capture_pypi.PROMPT)


@pytest.mark.parametrize("client", capture_pypi.CLIENTS)
def test_no_session_or_conversation_id_is_sent(client: str) -> None:
    """Nothing kirod could keep a conversation on one account by: no id header, no
    `metadata.user_id` (see the README's "How requests use your accounts")."""
    (request,) = pinned_capture(client)["requests"]
    assert not [
        name for name in request["headers"] if re.search("session|conversation|thread", name)
    ]
    assert "metadata" not in request["body"]


@pytest.mark.parametrize("client", capture_pypi.CLIENTS)
def test_the_capture_holds_no_secret_or_local_detail(client: str) -> None:
    document = pinned_capture(client)
    text = json.dumps(document)
    for request in document["requests"]:
        assert not set(request["headers"]) & capture.SECRET_HEADERS
        assert not set(request["headers"]) & capture.VARIABLE_HEADERS
    assert capture.TOKEN not in text
    local = re.sub(rf"{re.escape(capture.HOME_PLACEHOLDER)}[\w/.-]*", "", text)
    assert not re.search(r"/tmp/|/home/|/root\b|/work/|kd-capture|kd-", local)
    assert not re.search(capture._UUID, text)
    assert not re.search(r"\b[0-9a-f]{32,}\b", text)
    assert not re.search(r"Platform: (?!<platform>)|Current date: (?!<date>)", text)


def test_the_machine_placeholders() -> None:
    info = "- Platform: Linux-6.1-x86_64-with-glibc2.36\n- Current date: 2026-12-05"
    assert capture_pypi.machine_free({"system": [{"text": info}]}) == {
        "system": [{"text": "- Platform: <platform>\n- Current date: <date>"}]
    }
