"""Answers Kiro ends without their tail frames, or ends by saying why (docs/KIRO-PROTOCOL.md §3.4),
end to end: the official SDKs (and the `ollama` client) → the real daemon with two accounts → the
fake Kiro.

A cut generation (content, then a clean end without `metadataEvent` / `contextUsageEvent` /
`meteringEvent`) reaches the client as the output limit, so that it continues instead of taking
half the work for done: Messages `max_tokens`, Responses `incomplete` (`max_output_tokens`), Chat
`length`, Ollama `length`. It is the answer, not the account's failure: the second account is never
asked, and `kiroctl trace` shows the cut. CONTENT_FILTERED is a refusal, never a 502 and never
tried on the other account; MODEL_CONTEXT_WINDOW_EXCEEDED is each protocol's prompt-too-long error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import ollama
import openai
import pytest
from click.testing import CliRunner

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Fault, Reply, Script, ThreadedFake, ToolCall
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
TEXT = "Step 1 is done. Step 2 is done. Now step 3: I will edit the file and then run the tests."
CUT = Script(reply=Reply(text=TEXT), fault=Fault.CUT_GENERATION, fault_at=4, chunk_size=8)
SEEN = TEXT[:32]  # four frames of eight characters
READ_TOOL: dict[str, Any] = {
    "name": "Read",
    "description": "Reads a file.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
PROMPT: Any = [{"role": "user", "content": "Do the twelve steps."}]


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    env = {"KIROD_ENABLE_CHAT_COMPLETIONS": "true", "KIROD_ENABLE_OLLAMA_API": "true"}
    proc = start_daemon(module_tmp, fake, env)
    for _ in range(2):  # a second account that a retry would reach
        import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


def one_account_asked(service: FakeKiro) -> None:
    """Exactly one upstream call: nothing was retried, on this account or the other."""
    assert len(service.requests("chat")) == 1


def ask_claude(client: anthropic.Anthropic, stream: bool, **extra: Any) -> anthropic.types.Message:
    if not stream:
        return client.messages.create(model=MODEL, max_tokens=4096, messages=PROMPT, **extra)
    with client.messages.stream(model=MODEL, max_tokens=4096, messages=PROMPT, **extra) as events:
        for _ in events:
            pass
        return events.get_final_message()


def ask_responses(client: openai.OpenAI, stream: bool) -> Any:
    if not stream:
        return client.responses.create(model=MODEL, input="Do the twelve steps.")
    ends = ("response.completed", "response.incomplete")  # the SDK's helper waits for the first
    events = client.responses.create(model=MODEL, input="Do the twelve steps.", stream=True)
    [response] = [event.response for event in events if event.type in ends]
    return response


def ask_chat(client: openai.OpenAI, stream: bool) -> tuple[str, str | None]:
    """The text and the finish_reason."""
    messages: Any = PROMPT
    if not stream:
        choice = client.chat.completions.create(model=MODEL, messages=messages).choices[0]
        return choice.message.content or "", choice.finish_reason
    text, reason = "", None
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, stream=True):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            reason = choice.finish_reason or reason
    return text, reason


# -- a cut generation


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_messages_end_a_cut_answer_at_max_tokens(
    claude: anthropic.Anthropic, service: FakeKiro, stream: bool
) -> None:
    service.enqueue(CUT)
    message = ask_claude(claude, stream)
    assert message.stop_reason == "max_tokens"  # before: end_turn, and the client stopped
    assert [block.text for block in message.content if block.type == "text"] == [SEEN]
    one_account_asked(service)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_whole_tool_call_without_the_tail_is_not_tool_use(
    claude: anthropic.Anthropic, service: FakeKiro, stream: bool
) -> None:
    """Sibling calls may be missing: the turn ends at the output limit, not as `tool_use`."""
    calls = (ToolCall("Read", {"path": "a.py"}), ToolCall("Read", {"path": "b.py"}))
    # Five frames: the text, then the first call's opening frame, two fragments and its stop.
    reply = Reply("Reading.", tool_calls=calls)
    service.enqueue(Script(reply=reply, fault=Fault.CUT_GENERATION, fault_at=5))
    message = ask_claude(claude, stream, tools=[READ_TOOL])
    assert message.stop_reason == "max_tokens"
    assert [block.type for block in message.content] == ["text", "tool_use"]
    one_account_asked(service)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_responses_end_a_cut_answer_incomplete(
    gpt: openai.OpenAI, service: FakeKiro, stream: bool
) -> None:
    service.enqueue(CUT)
    response = ask_responses(gpt, stream)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == SEEN
    one_account_asked(service)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_chat_ends_a_cut_answer_at_length(
    gpt: openai.OpenAI, service: FakeKiro, stream: bool
) -> None:
    service.enqueue(CUT)
    assert ask_chat(gpt, stream) == (SEEN, "length")
    one_account_asked(service)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_ollama_ends_a_cut_answer_at_length(
    daemon: DaemonProcess, service: FakeKiro, stream: bool
) -> None:
    service.enqueue(CUT)
    headers = {"Authorization": f"Bearer {daemon.api_key}"}
    with ollama.Client(host=daemon.base_url, headers=headers, timeout=30) as client:
        messages: Any = PROMPT
        if stream:
            parts = list(client.chat(model=MODEL, messages=messages, stream=True))
            text = "".join(part.message.content or "" for part in parts)
            last = parts[-1]
        else:
            last = client.chat(model=MODEL, messages=messages)
            text = last.message.content or ""
    assert (text, last.done, last.done_reason) == (SEEN, True, "length")
    one_account_asked(service)


def test_a_cut_is_counted_in_the_operation_log_and_shown_by_the_trace(
    daemon: DaemonProcess, claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    service.enqueue(CUT)
    raw = claude.messages.with_raw_response.create(model=MODEL, max_tokens=64, messages=PROMPT)
    request_id = raw.headers["x-request-id"]
    whole = claude.messages.with_raw_response.create(model=MODEL, max_tokens=64, messages=PROMPT)
    runner = CliRunner()
    socket = ["--socket", str(daemon.socket_path)]
    shown = runner.invoke(cli, [*socket, "trace", request_id])
    assert shown.exit_code == 0, shown.output
    assert "stop max_tokens" in shown.output
    assert "Kiro cut 1 answer(s) off (no tail frames)" in shown.output
    assert TEXT[:8] not in shown.output  # shapes, never content
    other = runner.invoke(cli, [*socket, "trace", whole.headers["x-request-id"]])
    assert "stop end_turn" in other.output
    assert "answer(s) off" not in other.output
    as_json = runner.invoke(cli, [*socket, "trace", request_id, "--json"])
    assert [row["cuts"] for row in json.loads(as_json.stdout)["requests"]] == [1]


# -- stated stops


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_content_filtered_is_a_refusal_on_every_protocol_and_never_retried(
    claude: anthropic.Anthropic, gpt: openai.OpenAI, service: FakeKiro, stream: bool
) -> None:
    filtered = Script(fault=Fault.CONTENT_FILTERED)
    service.enqueue(filtered)
    message = ask_claude(claude, stream)
    assert (message.stop_reason, message.content) == ("refusal", [])
    one_account_asked(service)  # before: a 502 "empty response" after trying every account
    service.clear_requests()
    service.enqueue(filtered)
    response = ask_responses(gpt, stream)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "content_filter"
    one_account_asked(service)
    service.clear_requests()
    service.enqueue(filtered)
    assert ask_chat(gpt, stream) == ("", "content_filter")
    one_account_asked(service)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_context_window_exceeded_is_the_prompt_too_long_error(
    claude: anthropic.Anthropic, gpt: openai.OpenAI, service: FakeKiro, stream: bool
) -> None:
    exceeded = Script(fault=Fault.CONTEXT_WINDOW_EXCEEDED)
    service.enqueue(exceeded)
    with pytest.raises(anthropic.BadRequestError) as refused:
        ask_claude(claude, stream)
    assert refused.value.body is not None
    assert "prompt is too long" in str(refused.value.body)  # what Claude Code compacts on
    one_account_asked(service)
    for ask in (ask_responses, ask_chat):
        service.clear_requests()
        service.enqueue(exceeded)
        with pytest.raises(openai.BadRequestError) as too_long:
            ask(gpt, stream)
        assert too_long.value.code == "context_length_exceeded"
        one_account_asked(service)
