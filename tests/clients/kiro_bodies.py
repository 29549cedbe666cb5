"""What reached the fake Kiro through kirod, and what kirod logged: the bodies of its chat
requests (the current message, the tools declared, the tool results) and kirod's access-log
lines, as the client tests read them.

Imported by the client test modules (not a test module itself).
"""

from __future__ import annotations

import re
import time
from typing import Any

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro

KIRO_MODEL = "claude-sonnet-4.6"
"""What Kiro calls `claude-sonnet-4-6`, the guide's model."""


def chats(service: FakeKiro) -> list[dict[str, Any]]:
    """The body of every chat request the fake received, in order; there must be one."""
    bodies = [record.json for record in service.requests("chat")]
    assert bodies
    assert all(isinstance(body, dict) for body in bodies)
    return bodies


def current(body: dict[str, Any]) -> dict[str, Any]:
    """The current user message of a chat body (`content`, `modelId`, its context)."""
    message: dict[str, Any] = body["conversationState"]["currentMessage"]["userInputMessage"]
    return message


def context(body: dict[str, Any]) -> dict[str, Any]:
    """The current message's `userInputMessageContext`: `tools`, `toolResults` (or nothing)."""
    found: dict[str, Any] = current(body).get("userInputMessageContext", {})
    return found


def tool_names(body: dict[str, Any]) -> set[str]:
    return {tool["toolSpecification"]["name"] for tool in context(body).get("tools", [])}


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = context(body).get("toolResults", [])
    return results


# -- what kirod logged ------------------------------------------------------------------------

_FIELD = re.compile(r"(\w+)=(\S+)")


def access_lines(log: str) -> list[dict[str, str]]:
    """kirod's access-log lines (`… request method=… path=… status=…`) as field maps."""
    return [dict(_FIELD.findall(line)) for line in log.splitlines() if " request method=" in line]


SETTLED_S = 0.2
"""How long kirod's log must stay as it is before its access lines are read as complete."""
SETTLE_TIMEOUT_S = 5.0


def new_access_lines(daemon: DaemonProcess, mark: int) -> list[dict[str, str]]:
    """The access-log lines kirod wrote after `mark` (a length of its log), once there is one
    and the log has stopped growing: kirod writes a request's line as its handler returns, which
    can be just after the client read the last byte and exited (at most `SETTLE_TIMEOUT_S`)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    seen = daemon.log()
    while time.monotonic() < deadline:
        time.sleep(SETTLED_S)
        now = daemon.log()
        if now == seen and access_lines(now[mark:]):
            break
        seen = now
    return access_lines(seen[mark:])


def routes(lines: list[dict[str, str]]) -> list[tuple[str, str]]:
    """The path and status of each access-log line."""
    return [(line["path"], line["status"]) for line in lines]
