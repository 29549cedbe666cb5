"""A replayed reasoning signature Kiro refuses, end to end (docs/KIRO-PROTOCOL.md §2.6): a Claude
Code-like conversation whose tool list changes between turns (a tool dropped, as Claude Code
2.1.278 did) replays signed thinking made under the old list. The fake refuses it as Kiro does
(400 "Invalid `signature` in `thinking` block", here without a reason); kirod sends the turn once
more with every earlier reasoning block left out, the answer streams as usual, the retry is in the
trace and the log, and the account is not held to blame."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, ToolCall

MODEL = "claude-opus-4-7"
ADAPTIVE: Any = {"type": "adaptive"}


def tool(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"The {name} tool.",
        "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}},
    }


READ, BASH = tool("Read"), tool("Bash")


def first_turn(claude: anthropic.Anthropic, service: FakeKiro) -> list[Any]:
    """Turn one under [Read, Bash]: signed thinking and a Read call; the history to go on with."""
    service.enqueue(
        Reply(thinking="I should read the file.", tool_calls=(ToolCall("Read", {"arg": "a.py"}),))
    )
    answer = claude.messages.create(
        model=MODEL,
        max_tokens=2_000,
        thinking=ADAPTIVE,
        tools=[READ, BASH],
        messages=[{"role": "user", "content": "Fix a.py"}],
    )
    assert [block.type for block in answer.content] == ["thinking", "tool_use"]
    use = answer.content[1]
    assert use.type == "tool_use"
    return [
        {"role": "user", "content": "Fix a.py"},
        {"role": "assistant", "content": [block.model_dump() for block in answer.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "print(1)"}],
        },
    ]


def reasoning_replayed(service: FakeKiro) -> list[bool]:
    """Each chat: does its history carry reasoning?"""
    return [
        any(
            "reasoningContent" in entry.get("assistantResponseMessage", {})
            for entry in chat.json["conversationState"].get("history", [])
        )
        for chat in service.requests("chat")
    ]


def test_the_same_tool_list_replays_the_signature(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    history = first_turn(claude, service)
    service.clear_requests()
    service.enqueue(Reply(text="Fixed."))
    answer = claude.messages.create(
        model=MODEL, max_tokens=2_000, thinking=ADAPTIVE, tools=[READ, BASH], messages=history
    )
    assert answer.content[-1].type == "text"
    assert reasoning_replayed(service) == [True]  # accepted as it is: no retry


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_refused_signature_is_retried_once_without_reasoning(
    daemon: DaemonProcess, claude: anthropic.Anthropic, service: FakeKiro, stream: bool
) -> None:
    history = first_turn(claude, service)
    service.clear_requests()
    service.enqueue(Reply(thinking="Now the fix.", text="Fixed a.py."))
    before = daemon.log().count("reasoning_signature_refused")
    request = {
        "model": MODEL,
        "max_tokens": 2_000,
        "thinking": ADAPTIVE,
        "tools": [READ],  # Bash dropped since the signature was made
        "messages": history,
    }
    if stream:
        with claude.messages.stream(**request) as events:
            kinds = [event.type for event in events]
            answer = events.get_final_message()
            request_id = events.response.headers["request-id"]
        assert kinds[0] == "message_start"
        assert "content_block_delta" in kinds
    else:
        raw = claude.messages.with_raw_response.create(**request)
        answer, request_id = raw.parse(), raw.headers["request-id"]
    assert [block.type for block in answer.content] == ["thinking", "text"]
    assert answer.content[-1].text == "Fixed a.py."  # type: ignore[union-attr]
    assert answer.stop_reason == "end_turn"

    refused, retried = service.requests("chat")
    assert refused.rejected_by == "reasoning_signature_invalid"
    assert reasoning_replayed(service) == [True, False]
    # Only the reasoning went: the retry is the same turn otherwise.
    assert len(retried.json["conversationState"]["history"]) == len(
        refused.json["conversationState"]["history"]
    )
    attempts = daemon.client.trace(request_id).requests[0].attempts
    assert [(a.outcome, a.upstream_status, a.failover_reason) for a in attempts] == [
        ("signature_invalid", 400, None),
        ("ok", None, "retried after signature_invalid"),
    ]
    assert daemon.log().count("reasoning_signature_refused") == before + 1
    [account] = daemon.client.request("GET", "/accounts")["accounts"]
    assert account["status"] == "active"
    assert account["last_error"] is None
