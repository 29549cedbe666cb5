"""The client pins agree with their lockfiles, and the committed capture is sanitized.

No npm and no client binary needed: these read only files in the tree.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture
import continue_env
import copilot_env
import install
import opencode_env

PINS = install.pins()


def all_keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from all_keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from all_keys(item)


NPM_PINS = sorted(name for name, pin in PINS.items() if pin.registry == "npm")
PYPI_PINS = sorted(name for name, pin in PINS.items() if pin.registry == "pypi")


def test_versions_file_pins_the_clients() -> None:
    assert set(install.TESTED_CLIENTS) == set(PINS)
    assert set(NPM_PINS) == {
        "claude-code",
        "codex",
        "opencode",
        "kilo-code",
        "cline",
        "continue",
        "copilot",
    }
    assert set(PYPI_PINS) == {"aider", "llm"}
    for pin in PINS.values():
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?", pin.version), pin


@pytest.mark.parametrize("client", PYPI_PINS)
def test_requirements_match_the_pin(client: str) -> None:
    """Every distribution pinned with its sha256 (`pip --require-hashes`), the package and its
    plugins at their pins."""
    pin = PINS[client]
    lines = [line for line in pin.lockfile.read_text().splitlines() if not line.startswith("#")]
    pinned = {}
    for line in lines:
        found = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+) --hash=sha256:[0-9a-f]{64}", line)
        assert found, line
        pinned[found.group(1).lower().replace("_", "-")] = found.group(2)
    for requirement in (f"{pin.package}=={pin.version}", *pin.plugins):
        name, version = requirement.split("==")
        assert pinned[name] == version, requirement


@pytest.mark.parametrize("client", NPM_PINS)
def test_lockfile_matches_the_pin(client: str) -> None:
    pin = PINS[client]
    folder = install.NPM_DIR / client
    manifest = json.loads((folder / "package.json").read_text())
    lock = json.loads((folder / "package-lock.json").read_text())
    assert manifest["dependencies"] == {pin.package: pin.version}
    assert manifest["private"] is True
    assert lock["lockfileVersion"] == 3
    assert lock["packages"][""]["dependencies"] == {pin.package: pin.version}
    entry = lock["packages"][f"node_modules/{pin.package}"]
    assert entry["version"] == pin.version
    if pin.path is None:
        assert pin.bin in entry["bin"]
    else:  # a platform package, which declares no `bin`
        assert pin.path.startswith(f"{pin.package}/bin/"), pin
    # `npm ci` verifies every tarball against `integrity`; no entry names a registry host.
    assert "resolved" not in set(all_keys(lock))
    for name, entry in lock["packages"].items():
        if name:
            assert entry["integrity"].startswith("sha512-"), name


def pinned_capture(client: str = capture.CLIENT) -> dict[str, Any]:
    version = PINS[client].version
    path = capture.default_output(version)
    if client != capture.CLIENT:
        path = capture.client_output(client, version)
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def test_the_pinned_capture_names_its_client_and_command() -> None:
    document = pinned_capture()
    assert document["client"] == "claude-code"
    assert document["version"] == PINS["claude-code"].version
    assert document["command"] == ["claude", "-p", "hello", "--output-format", "json"]
    first = document["requests"][0]
    assert (first["method"], first["path"]) == ("POST", "/v1/messages?beta=true")
    assert first["headers"]["user-agent"].startswith(f"claude-cli/{document['version']} ")


def test_the_opencode_capture_names_its_client_and_command() -> None:
    document = pinned_capture(opencode_env.CLIENT)
    assert document["client"] == opencode_env.CLIENT
    assert document["version"] == PINS[opencode_env.CLIENT].version
    assert document["command"] == ["opencode", "run", "--format", "json", "hello"]
    assert document["opencode_json"]["provider"]["kirod"]["npm"] == opencode_env.ANTHROPIC
    for request in document["requests"]:
        assert (request["method"], request["path"]) == ("POST", "/v1/messages")
        assert request["headers"]["user-agent"].startswith(f"opencode/{document['version']} ")
        assert request["headers"]["x-session-affinity"] == capture.OPENCODE_SESSION_PLACEHOLDER


SESSION_HINTS = ("session", "affinity", "thread", "conversation")


def sends_no_session_id(request: dict[str, Any]) -> bool:
    """No header that could name a conversation, and no `metadata` in the body (what kirod
    reads for affinity over Messages)."""
    named = [name for name in request["headers"] if any(hint in name for hint in SESSION_HINTS)]
    return not named and "metadata" not in request["body"]


def test_the_continue_capture_names_its_client_and_command() -> None:
    """Continue's `cn -p` with the README's `config.yaml`: one Messages request, no session id."""
    document = pinned_capture(continue_env.CLIENT)
    assert document["version"] == PINS[continue_env.CLIENT].version
    assert document["command"][:3] == ["cn", "-p", "--config"]
    assert "provider: anthropic" in document["config_yaml"]
    (request,) = document["requests"]
    assert (request["method"], request["path"]) == ("POST", "/v1/messages")
    assert request["headers"]["user-agent"] == "node-fetch"
    assert sends_no_session_id(request)
    assert request["body"]["model"] == continue_env.MODEL
    assert continue_env.READ_TOOL in {tool["name"] for tool in request["body"]["tools"]}


def test_the_copilot_capture_names_its_client_and_command() -> None:
    """Copilot CLI with the README's variables: one Messages request from the Anthropic SDK,
    no session id (its session lives only in the local state path of the system prompt)."""
    document = pinned_capture(copilot_env.CLIENT)
    assert document["version"] == PINS[copilot_env.CLIENT].version
    assert document["command"] == ["copilot", "-p", "hello"]
    assert document["environment"]["COPILOT_PROVIDER_TYPE"] == copilot_env.ANTHROPIC
    (request,) = document["requests"]
    assert (request["method"], request["path"]) == ("POST", "/v1/messages")
    assert request["headers"]["user-agent"].startswith("Anthropic/JS ")
    assert request["headers"]["x-initiator"] == "user"
    assert sends_no_session_id(request)
    assert request["body"]["model"] == copilot_env.MODEL
    assert copilot_env.READ_TOOL in {tool["name"] for tool in request["body"]["tools"]}


@pytest.mark.parametrize(
    "client", [capture.CLIENT, opencode_env.CLIENT, continue_env.CLIENT, copilot_env.CLIENT]
)
def test_the_pinned_capture_holds_no_secret_or_local_detail(client: str) -> None:
    document = pinned_capture(client)
    text = json.dumps(document)
    for request in document["requests"]:
        assert not set(request["headers"]) & capture.SECRET_HEADERS
    assert capture.TOKEN not in text
    home, workdir = re.escape(capture.HOME_PLACEHOLDER), re.escape(capture.WORKDIR_PLACEHOLDER)
    local = re.sub(rf"(?:{home}|{workdir})[\w/.-]*", "", text)  # paths under the placeholders
    assert not re.search(r"/tmp/|/home/|/root\b|/work/|kd-capture", local)
    assert set(re.findall(capture._UUID, text)) <= {capture.SESSION_PLACEHOLDER}
    assert set(re.findall(r"\b[0-9a-f]{64}\b", text)) <= {capture.DEVICE_PLACEHOLDER}
    assert set(re.findall(r"\bses_\w+", text)) <= {capture.OPENCODE_SESSION_PLACEHOLDER}


def test_differences_name_what_a_new_version_changed() -> None:
    old = pinned_capture()
    new = copy.deepcopy(old)
    request = new["requests"][0]
    request["headers"]["anthropic-beta"] += ",brand-new-2027-01-01"
    request["body"]["brand_new_field"] = True
    request["body"]["messages"].append(
        {"role": "developer", "content": [{"type": "hologram", "data": "…"}]}
    )
    request["body"]["tools"].append({"name": "Teleport", "input_schema": {}, "eager": True})
    request["body"]["model"] = "claude-opus-6"
    new["requests"].append(copy.deepcopy(request))
    lines = capture.differences(old, new)
    assert f"requests per run: {len(old['requests'])} → {len(new['requests'])}" in lines
    assert "new anthropic-beta values: brand-new-2027-01-01" in lines
    assert "new body fields: brand_new_field" in lines
    assert "new message roles: developer" in lines
    assert "new content block types: hologram" in lines
    assert "new tool names: Teleport" in lines
    assert "new tool fields: eager" in lines
    assert "new models: claude-opus-6" in lines
    assert capture.differences(old, copy.deepcopy(old)) == []
