"""OpenAI Responses, Chat Completions and models end to end: the official SDK → daemon → fake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Fault, Reply, Script, ThreadedFake, ToolCall
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
SHELL_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a shell command",
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}},
        "required": ["cmd"],
    },
}


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    root = module_tmp
    proc = start_daemon(root, fake, {"KIROD_ENABLE_CHAT_COMPLETIONS": "true"})
    import_account(proc, fake.fake.issue_social_account(subscription="KIRO POWER"))
    try:
        yield proc
    finally:
        proc.kill()
        log = proc.log()
        for secret in (*fake.fake.issued_secrets(), proc.api_key):
            assert secret not in log


@pytest.fixture
def gpt(daemon: DaemonProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=daemon.base_url + "/v1", api_key=daemon.api_key, max_retries=0
    ) as client:
        yield client


def last_state(service: FakeKiro) -> dict[str, Any]:
    body = service.requests("chat")[-1].json
    assert isinstance(body, dict)
    state: dict[str, Any] = body["conversationState"]
    return state


def test_create_retrieve_list_inputs_delete(gpt: openai.OpenAI, service: FakeKiro) -> None:
    service.enqueue(Reply(text="Hello from Kiro."))
    response = gpt.responses.create(model=MODEL, input="hi", instructions="Be brief.")
    assert response.id.startswith("resp_")
    assert response.status == "completed"
    assert response.output_text == "Hello from Kiro."
    assert response.usage is not None
    assert response.usage.output_tokens > 0
    history = last_state(service)["history"]
    assert "Be brief." in history[0]["userInputMessage"]["content"]

    again = gpt.responses.retrieve(response.id)
    assert again.output_text == "Hello from Kiro."
    items = gpt.responses.input_items.list(response.id)
    assert [item.type for item in items.data] == ["message"]
    gpt.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        gpt.responses.retrieve(response.id)


def test_streaming_events(gpt: openai.OpenAI, service: FakeKiro) -> None:
    service.enqueue(Script(reply=Reply(text="streamed words here"), chunk_size=4))
    with gpt.responses.stream(model=MODEL, input="go") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in kinds
    assert kinds[-1] == "response.completed"
    assert final.output_text == "streamed words here"


def test_function_call_round_trip_without_store(gpt: openai.OpenAI, service: FakeKiro) -> None:
    service.enqueue(Reply(tool_calls=(ToolCall("exec_command", {"cmd": "ls"}),)))
    first = gpt.responses.create(
        model=MODEL,
        input="list files",
        tools=[SHELL_TOOL],
        store=False,  # type: ignore[list-item]
    )
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1
    call = calls[0]
    assert call.name == "exec_command"  # type: ignore[union-attr]
    assert json.loads(call.arguments) == {"cmd": "ls"}  # type: ignore[union-attr]
    with pytest.raises(openai.NotFoundError):
        gpt.responses.retrieve(first.id)  # store=False keeps nothing

    service.enqueue(Reply(text="Two files."))
    second = gpt.responses.create(
        model=MODEL,
        tools=[SHELL_TOOL],  # type: ignore[list-item]
        store=False,
        input=[
            {"role": "user", "content": "list files"},
            {
                "type": "function_call",
                "call_id": call.call_id,  # type: ignore[union-attr]
                "name": "exec_command",
                "arguments": call.arguments,  # type: ignore[union-attr]
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "a b"},  # type: ignore[union-attr]
        ],
    )
    assert second.output_text == "Two files."
    state = last_state(service)
    results = state["currentMessage"]["userInputMessage"]["userInputMessageContext"]["toolResults"]
    assert results[0]["toolUseId"] == call.call_id  # type: ignore[union-attr]
    assert results[0]["content"] == [{"text": "a b"}]


def test_codex_shaped_request(gpt: openai.OpenAI, service: FakeKiro) -> None:
    service.enqueue(Reply(text="done"))
    with gpt.responses.stream(
        model=MODEL,
        instructions=None,  # type: ignore[arg-type]
        store=False,
        include=["reasoning.encrypted_content"],
        reasoning={"summary": "auto"},
        tool_choice="auto",
        parallel_tool_calls=True,
        prompt_cache_key="session-123",
        input=[
            {"role": "developer", "content": "You are Codex."},
            {"role": "developer", "content": "Sandbox: workspace-write."},
            {"role": "user", "content": "<environment_context>cwd=/tmp</environment_context>"},
            {"role": "user", "content": "say done"},
        ],
        tools=[
            SHELL_TOOL,  # type: ignore[list-item]
            {
                "type": "namespace",  # type: ignore[list-item]
                "name": "multi_agent_v1",
                "description": "agents",
                "tools": [
                    {
                        "type": "function",
                        "name": "spawn",
                        "description": "spawn an agent",
                        "parameters": {"type": "object", "properties": {}},
                    }
                ],
            },
            {"type": "web_search"},
        ],
        extra_headers={"session-id": "session-123"},
    ) as stream:
        final = stream.get_final_response()
    assert final.status == "completed"
    assert final.output_text == "done"
    state = last_state(service)
    tools = state["currentMessage"]["userInputMessage"]["userInputMessageContext"]["tools"]
    names = sorted(tool["toolSpecification"]["name"] for tool in tools)
    assert names == ["exec_command", "multi_agent_v1__spawn", "web_search"]  # kirod runs it
    assert "You are Codex." in json.dumps(state["history"][0])


def test_previous_response_id_continues_the_conversation(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="My name is Kiro."))
    first = gpt.responses.create(model=MODEL, input="What is your name?")
    service.enqueue(Reply(text="I said Kiro."))
    second = gpt.responses.create(
        model=MODEL, input="What did you say?", previous_response_id=first.id
    )
    assert second.output_text == "I said Kiro."
    state = last_state(service)
    flat = json.dumps(state["history"])
    assert "What is your name?" in flat
    assert "My name is Kiro." in flat
    assert state["currentMessage"]["userInputMessage"]["content"] == "What did you say?"
    with pytest.raises(openai.BadRequestError) as error:
        gpt.responses.create(model=MODEL, input="x", previous_response_id="resp_unknown")
    assert error.value.code == "previous_response_not_found"


@pytest.mark.parametrize("model", ["claude-opus-4-7", "gpt-5.6-sol"])
def test_native_reasoning_round_trips_encrypted(
    gpt: openai.OpenAI, service: FakeKiro, model: str
) -> None:
    """Kiro's opus answers reasoning as text, gpt-5.6 as opaque `redactedContent`; both come back
    sealed and go upstream again as Kiro sent them."""
    service.enqueue(Reply(thinking="Deep thought about files.", text="Answer one."))
    first = gpt.responses.create(
        model=model,
        input="think",
        store=False,
        reasoning={"effort": "high", "summary": "auto"},
        include=["reasoning.encrypted_content"],
    )
    reasoning = [item for item in first.output if item.type == "reasoning"]
    assert len(reasoning) == 1
    sealed = reasoning[0].encrypted_content  # type: ignore[union-attr]
    assert sealed
    assert "Deep thought" not in sealed
    # Both read their effort from the root (docs/KIRO-PROTOCOL.md §2.6), nothing in the message
    fields = service.requests("chat")[-1].json["additionalModelRequestFields"]
    if model.startswith("gpt-"):
        assert fields == {"reasoning": {"effort": "high"}}
    else:
        assert fields == {"output_config": {"effort": "high"}, "thinking": {"type": "adaptive"}}
    assert "reasoning" not in last_state(service)["currentMessage"]["userInputMessage"]

    service.enqueue(Reply(text="Answer two."))
    replay: list[Any] = [
        {"role": "user", "content": "think"},
        reasoning[0].model_dump(exclude_none=True),
        {"role": "assistant", "content": "Answer one."},
        {"role": "user", "content": "again"},
    ]
    second = gpt.responses.create(
        model=model,
        input=replay,
        store=False,
        reasoning={"effort": "high"},
        include=["reasoning.encrypted_content"],
    )
    assert second.output_text == "Answer two."
    assistant = last_state(service)["history"][-1]["assistantResponseMessage"]
    if model.startswith("gpt-"):
        assert assistant["reasoningContent"]["redactedContent"]
    else:
        assert assistant["reasoningContent"]["reasoningText"]["text"] == "Deep thought about files."

    service.enqueue(Reply(text="Answer three."))
    replay[1] = {**replay[1], "encrypted_content": sealed[:-8] + "AAAAAAAA"}
    gpt.responses.create(model=model, input=replay, store=False)
    assert "reasoningContent" not in json.dumps(last_state(service)["history"])


def test_chat_completions_with_tools_and_usage(gpt: openai.OpenAI, service: FakeKiro) -> None:
    tool: Any = {
        "type": "function",
        "function": {"name": "exec_command", "parameters": SHELL_TOOL["parameters"]},
    }
    service.enqueue(Reply(tool_calls=(ToolCall("exec_command", {"cmd": "pwd"}),)))
    completion = gpt.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "where am I"}], tools=[tool]
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"cmd": "pwd"}  # type: ignore[union-attr]
    assert completion.usage is not None
    assert completion.usage.total_tokens > 0

    service.enqueue(Script(reply=Reply(text="streaming chat"), chunk_size=3))
    chunks = list(
        gpt.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streaming chat"
    assert chunks[-1].usage is not None


PDF_URL = "data:application/pdf;base64,JVBERi0xLjQK"
PDF_SENT = {"name": "report", "format": "pdf", "source": {"bytes": "JVBERi0xLjQK"}}


def test_responses_input_file_and_chat_file(gpt: openai.OpenAI, service: FakeKiro) -> None:
    service.enqueue(Reply(text="A report."))
    gpt.responses.create(
        model=MODEL,
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_file", "filename": "report.pdf", "file_data": PDF_URL},
                    {"type": "input_text", "text": "What is this?"},
                ],
            }
        ],
    )
    current = last_state(service)["currentMessage"]["userInputMessage"]
    assert (current["documents"], current["content"]) == ([PDF_SENT], "What is this?")

    service.enqueue(Reply(text="A report."))
    gpt.chat.completions.create(
        model=MODEL,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "file", "file": {"filename": "report.pdf", "file_data": PDF_URL}}
                ],
            }
        ],
    )
    assert last_state(service)["currentMessage"]["userInputMessage"]["documents"] == [PDF_SENT]


def test_files_named_beyond_kiros_rule_are_renamed(gpt: openai.OpenAI, service: FakeKiro) -> None:
    """docs/KIRO-PROTOCOL.md §2.3, rule 21: a file name becomes one Kiro accepts."""
    gpt.responses.create(
        model=MODEL,
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_file", "filename": "budget 2027.v3.pdf", "file_data": PDF_URL},
                    {"type": "input_file", "filename": "budget 2027.v3.pdf", "file_data": PDF_URL},
                    {"type": "input_text", "text": "Compare."},
                ],
            }
        ],
    )
    current = last_state(service)["currentMessage"]["userInputMessage"]
    assert [document["name"] for document in current["documents"]] == [
        "budget 2027 v3",
        "budget 2027 v3 (2)",
    ]
    gpt.chat.completions.create(
        model=MODEL,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "file", "file": {"filename": "été #1.pdf", "file_data": PDF_URL}},
                    {"type": "file", "file": {"file_data": PDF_URL}},
                ],
            }
        ],
    )
    current = last_state(service)["currentMessage"]["userInputMessage"]
    assert [document["name"] for document in current["documents"]] == ["ete 1", "document-2"]


def test_files_kirod_cannot_send_are_400s(gpt: openai.OpenAI, service: FakeKiro) -> None:
    def send(model: str, part: dict[str, Any]) -> openai.BadRequestError:
        message: Any = {"role": "user", "content": [part]}
        with pytest.raises(openai.BadRequestError) as error:
            gpt.responses.create(model=model, input=[message])
        return error.value

    inline = {"type": "input_file", "filename": "report.pdf", "file_data": PDF_URL}
    refused = send("gpt-5.6-sol", inline)  # not Claude, and its entry lists no DOCUMENT input
    assert refused.code == "unsupported_capability"
    assert "documents (PDF and other files) are not supported" in refused.message
    fetched = send(MODEL, {"type": "input_file", "file_id": "file-abc"})
    assert (fetched.code, fetched.param) == (
        "unsupported_capability",
        "input[0].content[0].file_id",
    )
    assert service.requests("chat") == []


def test_chat_completions_are_off_by_default(fake: ThreadedFake, short_tmp: Path) -> None:
    proc = start_daemon(short_tmp, fake)
    try:
        with (
            openai.OpenAI(base_url=proc.base_url + "/v1", api_key=proc.api_key, max_retries=0) as c,
            pytest.raises(openai.NotFoundError) as error,
        ):
            c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        assert "enable_chat_completions" in str(error.value)
    finally:
        proc.kill()


def test_models_for_both_sdks(gpt: openai.OpenAI, daemon: DaemonProcess) -> None:
    ids = [model.id for model in gpt.models.list()]
    assert "claude-sonnet-4-5" in ids
    assert "claude-sonnet-4.5" not in ids  # one row per model; Kiro's spelling resolves:
    assert gpt.models.retrieve("claude-sonnet-4.5").id == "claude-sonnet-4-5"
    assert gpt.models.retrieve("claude-sonnet-4-5").owned_by == "anthropic"
    with pytest.raises(openai.NotFoundError):
        gpt.models.retrieve("no-such-model")
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as claude:
        page = claude.models.list(limit=1000)
        assert "claude-sonnet-4-5" in [model.id for model in page.data]
        assert page.data[0].display_name


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        (
            {"text": {"format": {"type": "json_schema", "name": "x", "schema": {}}}},
            "unsupported_capability",
        ),
        ({"tool_choice": "required", "tools": [SHELL_TOOL]}, "unsupported_capability"),
        (
            {
                "input": [
                    {
                        "role": "user",
                        "content": [{"type": "input_image", "image_url": "https://x/y.png"}],
                    }
                ]
            },
            None,
        ),
    ],
)
def test_rejections(
    gpt: openai.OpenAI, service: FakeKiro, kwargs: dict[str, Any], code: str | None
) -> None:
    request: dict[str, Any] = {"model": MODEL, "input": "x", **kwargs}
    with pytest.raises(openai.BadRequestError) as error:
        gpt.responses.create(**request)
    if code is not None:
        assert error.value.code == code
    assert service.requests("chat") == []


def test_quota_exhaustion_is_429_with_the_reason(gpt: openai.OpenAI, service: FakeKiro) -> None:
    service.enqueue(Script(fault=Fault.QUOTA_402))
    with pytest.raises(openai.RateLimitError) as error:
        gpt.responses.create(model=MODEL, input="x")
    assert "MONTHLY_REQUEST_COUNT" in str(error.value)


def test_failure_after_start_is_response_failed(gpt: openai.OpenAI, service: FakeKiro) -> None:
    service.enqueue(
        Script(reply=Reply(text="partial " * 10), fault=Fault.MIDSTREAM_EXCEPTION, fault_at=3)
    )
    with gpt.responses.stream(model=MODEL, input="x") as stream:
        kinds = [event.type for event in stream]
    assert kinds[-1] == "response.failed"
    assert "error" in kinds
