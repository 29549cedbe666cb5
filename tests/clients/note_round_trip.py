"""The file-read round trip the client tests make with each client's own read tool: a note in
the working directory holding a canary, the fake Kiro scripted to call the tool on it first and
to answer after its result, and that result as it reached Kiro.

Imported by the client test modules (not a test module itself).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ToolCall
from tests.clients.kiro_bodies import chats, tool_names, tool_results

CANARY = "The canary sings at 04:51 in room 7."
FINAL = "The note is about a canary."
"""The model's answer after the tool's result."""


def write_the_note(workdir: Path) -> Path:
    """`notes.txt` in `workdir`, holding the canary."""
    note = workdir / "notes.txt"
    note.write_text(CANARY + "\n")
    return note


def call_first(service: FakeKiro, call: ToolCall) -> None:
    """Script the fake to make `call`, then to answer FINAL."""
    service.default_script = Script(reply=Reply(text=FINAL), call_first=call)


def assert_the_note_in(body: dict[str, Any], tool: str) -> None:
    """`body` declares `tool` and carries one tool result: a success holding the canary."""
    (result,) = tool_results(body)
    assert result["status"] == "success", result
    assert CANARY in json.dumps(result["content"])
    assert tool in tool_names(body)


def assert_the_note_reached_kiro(service: FakeKiro, tool: str) -> list[dict[str, Any]]:
    """Kiro got two model turns, the first without a tool result, the second with the note's
    (see `assert_the_note_in`); their bodies."""
    bodies = chats(service)
    assert len(bodies) == 2, [tool_results(body) for body in bodies]
    assert not tool_results(bodies[0])
    assert_the_note_in(bodies[1], tool)
    return bodies
