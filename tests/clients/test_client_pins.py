"""The client pins agree with their lockfiles (the committed captures: test_captures.py).

No npm and no client binary needed: these read only files in the tree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.clients import install

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
        "gemini-cli",
        "pi",
    }
    assert set(PYPI_PINS) == {"aider", "llm", "openai-agents", "claude-agent-sdk"}
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
