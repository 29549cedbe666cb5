"""Tool calls Kiro cuts off, end to end: the official SDKs → the real daemon → the fake Kiro.

The default daemon continues a cut call once and the client gets one whole answer; a second cut,
or a daemon with `truncation_recovery = false`, ends the answer with the protocol's error
(Anthropic `error` event or 502, Responses `response.failed` or 502). No client ever sees the cut
call, and `kiroctl stats` counts both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from click.testing import CliRunner

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, ThreadedFake, ToolCall, ToolCut
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
WRITE_ARGS = {"file_path": "notes.md", "content": "All work and no play. " * 200}
CUT = Reply("Writing the notes.", tool_calls=(ToolCall("Write", WRITE_ARGS, cut=ToolCut.END),))
SMALLER = Reply("I will write them in two smaller parts.")
WRITE_TOOL: dict[str, Any] = {
    "name": "Write",
    "description": "Writes a file.",
    "input_schema": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
    },
}
WRITE_FUNCTION: dict[str, Any] = {
    "type": "function",
    "name": "Write",
    "description": "Writes a file.",
    "parameters": WRITE_TOOL["input_schema"],
}
PROMPT = [{"role": "user", "content": "Write my notes."}]
CHAT = {"KIROD_ENABLE_CHAT_COMPLETIONS": "true"}


def _daemon(fake: ThreadedFake, root: Path, env: dict[str, str]) -> DaemonProcess:
    proc = start_daemon(root, fake, env)
    import_account(proc, fake.fake.issue_social_account())
    return proc


@pytest.fixture(scope="module")
def daemons(fake: ThreadedFake, module_tmp: Path) -> Iterator[dict[str, DaemonProcess]]:
    """The default daemon ("recovering") and one with truncation recovery off ("strict")."""
    procs = {
        "recovering": _daemon(fake, module_tmp / "a", CHAT),
        "strict": _daemon(fake, module_tmp / "b", {**CHAT, "KIROD_TRUNCATION_RECOVERY": "false"}),
    }
    try:
        yield procs
    finally:
        for proc in procs.values():
            proc.kill()


def claude(proc: DaemonProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key, max_retries=0)


def gpt(proc: DaemonProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=proc.base_url + "/v1", api_key=proc.api_key, max_retries=0)


def _ask_claude(proc: DaemonProcess, stream: bool) -> anthropic.types.Message:
    with claude(proc) as client:
        if not stream:
            return client.messages.create(
                model=MODEL, max_tokens=4096, tools=[WRITE_TOOL], messages=PROMPT
            )
        with client.messages.stream(
            model=MODEL, max_tokens=4096, tools=[WRITE_TOOL], messages=PROMPT
        ) as events:
            for _ in events:
                pass
            return events.get_final_message()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_messages_continue_a_cut_call_into_one_answer(
    daemons: dict[str, DaemonProcess], service: FakeKiro, stream: bool
) -> None:
    service.enqueue(CUT, SMALLER)
    message = _ask_claude(daemons["recovering"], stream)
    assert [block.type for block in message.content] == ["text", "text"]
    assert [block.text for block in message.content if block.type == "text"] == [
        CUT.text,
        SMALLER.text,
    ]
    assert message.stop_reason == "end_turn"
    assert len(service.requests("chat")) == 2


def test_a_search_call_beside_the_cut_call_does_not_stop_the_continuation(
    daemons: dict[str, DaemonProcess], service: FakeKiro
) -> None:
    """A whole web_search call (kirod's own tool, never shown) before the cut Write: the client
    holds no call, so the turn continues; the continuation replays no search call."""
    search = ToolCall("web_search", {"query": "notes format"})
    cut = ToolCall("Write", WRITE_ARGS, cut=ToolCut.END)
    service.enqueue(Reply("Looking it up.", tool_calls=(search, cut)), SMALLER)
    tools: Any = [WRITE_TOOL, {"type": "web_search_20250305", "name": "web_search"}]
    with claude(daemons["recovering"]) as client:
        message = client.messages.create(model=MODEL, max_tokens=4096, tools=tools, messages=PROMPT)
    assert [block.type for block in message.content] == ["text", "text"]
    assert message.stop_reason == "end_turn"
    _, second = (r.json["conversationState"] for r in service.requests("chat"))
    replayed = second["history"][-1]["assistantResponseMessage"]
    assert [use["name"] for use in replayed["toolUses"]] == ["Write"]
    results = second["currentMessage"]["userInputMessage"]["userInputMessageContext"]
    assert [r["status"] for r in results["toolResults"]] == ["error"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_messages_end_with_the_error_when_the_continuation_is_cut_too(
    daemons: dict[str, DaemonProcess], service: FakeKiro, stream: bool
) -> None:
    service.enqueue(CUT, CUT)
    with pytest.raises(anthropic.APIStatusError) as raised:
        _ask_claude(daemons["recovering"], stream)
    if not stream:
        assert raised.value.status_code == 502
    assert raised.value.body["type"] == "error"  # type: ignore[index]
    assert len(service.requests("chat")) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_messages_without_recovery_end_with_the_error(
    daemons: dict[str, DaemonProcess], service: FakeKiro, stream: bool
) -> None:
    service.enqueue(CUT)
    with pytest.raises(anthropic.APIStatusError) as raised:
        _ask_claude(daemons["strict"], stream)
    assert raised.value.status_code == (200 if stream else 502)
    assert len(service.requests("chat")) == 1


def _ask_gpt(proc: DaemonProcess, stream: bool) -> tuple[str, Any]:
    """The Responses outcome: ("completed", response), or ("failed", the error)."""
    with gpt(proc) as client:
        if not stream:
            try:
                response = client.responses.create(
                    model=MODEL, input="Write my notes.", tools=[WRITE_FUNCTION]
                )
            except openai.APIStatusError as error:
                return "failed", error
            return response.status or "", response
        with client.responses.stream(
            model=MODEL, input="Write my notes.", tools=[WRITE_FUNCTION]
        ) as events:
            seen = list(events)
        last = seen[-1]
        if last.type == "response.failed":
            return "failed", next(e for e in seen if e.type == "error")
        assert last.type == "response.completed"
        return "completed", last.response


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_responses_continue_a_cut_call_into_one_answer(
    daemons: dict[str, DaemonProcess], service: FakeKiro, stream: bool
) -> None:
    service.enqueue(CUT, SMALLER)
    status, response = _ask_gpt(daemons["recovering"], stream)
    assert status == "completed"
    assert [item.type for item in response.output] == ["message", "message"]
    assert response.output_text == CUT.text + SMALLER.text


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_responses_without_recovery_fail(
    daemons: dict[str, DaemonProcess], service: FakeKiro, stream: bool
) -> None:
    service.enqueue(CUT)
    status, error = _ask_gpt(daemons["strict"], stream)
    assert status == "failed"
    if stream:
        assert error.code == "tool_input_truncated"
    else:
        assert error.status_code == 502
        assert error.code == "tool_input_truncated"


def test_chat_completions_continue_or_fail_like_the_other_protocols(
    daemons: dict[str, DaemonProcess], service: FakeKiro
) -> None:
    function = {k: v for k, v in WRITE_FUNCTION.items() if k != "type"}
    chat_tool: Any = {"type": "function", "function": function}
    asked: Any = {"model": MODEL, "messages": PROMPT, "tools": [chat_tool]}
    service.enqueue(CUT, SMALLER)
    with gpt(daemons["recovering"]) as client:
        answer = client.chat.completions.create(**asked)
    assert answer.choices[0].message.content == CUT.text + SMALLER.text
    assert answer.choices[0].message.tool_calls is None
    service.enqueue(CUT)
    with gpt(daemons["strict"]) as client, pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(**asked)
    assert raised.value.status_code == 502
    service.enqueue(CUT)
    seen: list[Any] = []
    with gpt(daemons["strict"]) as client, pytest.raises(openai.APIError) as streamed:
        seen.extend(client.chat.completions.create(**asked, stream=True))
    assert "tool_input_truncated" in str(streamed.value.body)
    assert not any(chunk.choices and chunk.choices[0].delta.tool_calls for chunk in seen)


def test_stats_count_cut_calls_and_recoveries(
    daemons: dict[str, DaemonProcess], service: FakeKiro
) -> None:
    proc = daemons["recovering"]
    before = proc.client.stats()
    service.enqueue(CUT, SMALLER, CUT, CUT)
    _ask_claude(proc, stream=False)
    with pytest.raises(anthropic.APIStatusError):
        _ask_claude(proc, stream=False)
    after = proc.client.stats()
    assert (after.truncated - before.truncated, after.recovered - before.recovered) == (2, 1)
    assert after.truncation_rate is not None
    assert after.recovery_rate is not None
    shown = CliRunner().invoke(cli, ["--socket", str(proc.socket_path), "stats"])
    assert shown.exit_code == 0, shown.output
    assert f"cut calls  {after.truncated:,} requests" in shown.stdout
