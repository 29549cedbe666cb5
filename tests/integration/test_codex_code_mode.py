"""Codex with GPT-5.6 ("code mode"), freeform tools and compaction, end to end.

The request bodies start from the capture of the pinned Codex with `model = "gpt-5.6-sol"`
(its file name and header say so): tools only in an `additional_tools` input item, the `exec`
tool a freeform (`custom`) tool with a lark grammar. The daemon is the real one, the upstream the
fake Kiro; the SDK that reads the answers is the official openai one.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from kirod.testing.fake_kiro import FakeKiro, Reply, ToolCall
from tests.integration.code_mode import captured_body

SOURCE = "const r = await tools.exec_command({cmd: 'cat notes.txt'});\ntext(r.output);"


def last_state(service: FakeKiro) -> dict[str, Any]:
    body = service.requests("chat")[-1].json
    assert isinstance(body, dict)
    state: dict[str, Any] = body["conversationState"]
    return state


def stream_events(gpt: openai.OpenAI, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST the body as Codex does (streaming) and return the parsed events."""
    response = gpt.post(
        "/responses", body=body, cast_to=openai._legacy_response.HttpxBinaryResponseContent
    )
    events = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            events.append(json.loads(line[6:]))
    return events


def test_code_mode_exec_round_trip(gpt: openai.OpenAI, service: FakeKiro) -> None:
    body = captured_body()
    assert body["model"] == "gpt-5.6-sol"
    assert "tools" not in body
    assert body["input"][0]["type"] == "additional_tools"
    service.enqueue(Reply(tool_calls=(ToolCall("functions__exec", {"input": SOURCE}),)))
    events = stream_events(gpt, body)
    declared = last_state(service)["currentMessage"]["userInputMessage"]["userInputMessageContext"]
    names = {tool["toolSpecification"]["name"] for tool in declared["tools"]}
    assert {"functions__exec", "functions__wait", "collaboration__spawn_agent"} <= names
    exec_spec = next(
        t for t in declared["tools"] if t["toolSpecification"]["name"] == "functions__exec"
    )
    schema = exec_spec["toolSpecification"]["inputSchema"]["json"]
    assert schema["required"] == ["input"]
    assert "lark grammar" in schema["properties"]["input"]["description"]

    kinds = [event["type"] for event in events]
    assert "response.function_call_arguments.delta" not in kinds
    deltas = [e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta"]
    assert "".join(deltas) == SOURCE
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    [call] = [item for item in done if item["type"] == "custom_tool_call"]
    assert (call["namespace"], call["name"], call["input"]) == ("functions", "exec", SOURCE)
    assert kinds[-1] == "response.completed"

    # The next turn, as Codex sends it: the whole history, the call and its output.
    body["input"] += [
        {k: v for k, v in call.items() if k not in ("id", "status")},
        {
            "type": "custom_tool_call_output",
            "call_id": call["call_id"],
            "output": [
                {
                    "type": "input_text",
                    "text": "Script completed\nWall time 0.1 seconds\nOutput:\n",
                },
                {"type": "input_text", "text": "the notes say 42"},
            ],
        },
    ]
    service.enqueue(Reply(text="The notes say 42."))
    events = stream_events(gpt, body)
    state = last_state(service)
    results = state["currentMessage"]["userInputMessage"]["userInputMessageContext"]["toolResults"]
    assert results[0]["toolUseId"] == call["call_id"]
    assert "the notes say 42" in json.dumps(results[0]["content"])
    uses = [entry for entry in state["history"] if "assistantResponseMessage" in entry]
    assert uses[-1]["assistantResponseMessage"]["toolUses"][0]["input"] == {"input": SOURCE}
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "The notes say 42."


def test_compaction_trigger_answers_one_compaction_item_a_later_turn_expands(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    body = captured_body()
    body["input"].append({"type": "compaction_trigger"})
    service.enqueue(Reply(text="SUMMARY: the user said hi; nothing else happened."))
    events = stream_events(gpt, body)
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [item["type"] for item in done] == ["compaction"]
    assert done[0]["id"].startswith("cmp_")
    assert events[-1]["type"] == "response.completed"
    sent = last_state(service)
    assert "tools" not in sent["currentMessage"]["userInputMessage"].get(
        "userInputMessageContext", {}
    )
    assert (
        "Summarise the conversation above" in sent["currentMessage"]["userInputMessage"]["content"]
    )

    service.enqueue(Reply(text="Continuing."))
    follow = captured_body()
    follow["input"] = [follow["input"][0], done[0], {"role": "user", "content": "go on"}]
    stream_events(gpt, follow)
    current = last_state(service)["currentMessage"]["userInputMessage"]["content"]
    assert "SUMMARY: the user said hi" in current
    assert current.endswith("go on")


def test_compact_endpoint_returns_user_messages_and_one_compaction(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    body = captured_body()
    body.pop("stream")
    service.enqueue(Reply(text="SUMMARY v1"))
    answer = gpt.post("/responses/compact", body=body, cast_to=object)
    assert isinstance(answer, dict)
    kinds = [(item.get("type"), item.get("role")) for item in answer["output"]]
    assert kinds[-1] == ("compaction", None)
    assert kinds[:-1]
    assert all(kind == ("message", "user") for kind in kinds[:-1])
    prompt = body["input"][-1]["content"][0]["text"]
    assert answer["output"][-2]["content"][0]["text"] == prompt
    assert "SUMMARY v1" not in json.dumps(answer)  # sealed, not readable
    summarised = last_state(service)["currentMessage"]["userInputMessage"]
    assert "tools" not in summarised.get("userInputMessageContext", {})

    # Codex replaces its history with the answer's items and goes on from there.
    service.enqueue(Reply(text="Continuing."))
    follow = captured_body()
    follow["input"] = [follow["input"][0], *answer["output"], {"role": "user", "content": "go on"}]
    stream_events(gpt, follow)
    sent = json.dumps(last_state(service))
    assert "SUMMARY v1" in sent
    assert last_state(service)["currentMessage"]["userInputMessage"]["content"].endswith("go on")


def sealed_compaction(gpt: openai.OpenAI, service: FakeKiro) -> dict[str, Any]:
    """A compaction item kirod sealed, from the v1 endpoint."""
    body = captured_body()
    body.pop("stream")
    service.enqueue(Reply(text="SUMMARY to tamper with"))
    answer = gpt.post("/responses/compact", body=body, cast_to=object)
    assert isinstance(answer, dict)
    item: dict[str, Any] = answer["output"][-1]
    return item


def tampered(item: dict[str, Any]) -> dict[str, Any]:
    blob = item["encrypted_content"]
    middle = len(blob) // 2
    flipped = "A" if blob[middle] != "A" else "B"
    return {**item, "encrypted_content": blob[:middle] + flipped + blob[middle + 1 :]}


@pytest.mark.parametrize("kind", ["foreign", "tampered", "reasoning"])
def test_a_compaction_blob_kirod_did_not_seal_as_one_is_a_400_naming_the_item(
    gpt: openai.OpenAI, service: FakeKiro, kind: str
) -> None:
    if kind == "foreign":
        item = {"type": "compaction", "encrypted_content": "gAAAAABopenai-blob"}
    elif kind == "tampered":
        item = tampered(sealed_compaction(gpt, service))
    else:  # a reasoning item's sealed content offered as a compaction's
        service.enqueue(Reply(text="Done.", thinking="weighing it"))
        answer = gpt.responses.create(
            model="claude-opus-4-7",
            input="think",
            reasoning={"effort": "high"},
            include=["reasoning.encrypted_content"],
            store=False,
        )
        reasoning = next(out for out in answer.output if out.type == "reasoning")
        assert reasoning.encrypted_content
        item = {"type": "compaction", "encrypted_content": reasoning.encrypted_content}
    body = captured_body()
    body["input"].insert(1, item)
    with pytest.raises(openai.BadRequestError) as caught:
        gpt.post("/responses", body=body, cast_to=object)
    assert caught.value.param == "input[1].encrypted_content"  # type: ignore[attr-defined]


def test_a_warm_up_over_http_calls_no_model(gpt: openai.OpenAI, service: FakeKiro) -> None:
    body = captured_body()
    body.update(input=[], generate=False, stream=False)
    answer = gpt.post("/responses", body=body, cast_to=object)
    assert isinstance(answer, dict)
    assert (answer["status"], answer["output"]) == ("completed", [])
    assert service.requests("chat") == []


# -- built-in tools the client runs: local_shell, shell, apply_patch ------------------------------

CLIENT_RUN = [
    pytest.param(
        {"type": "local_shell"},
        {"command": ["ls", "-la"], "workdir": "/srv/app", "timeout_ms": 5000},
        "local_shell_call",
        ("action", "command"),
        ["ls", "-la"],
        {"type": "local_shell_call_output", "output": '{"output": "notes.txt\\n"}'},
        id="local_shell",
    ),
    pytest.param(
        {"type": "shell", "environment": {"type": "local"}},
        {"commands": ["ls -la", "cat notes.txt"]},
        "shell_call",
        ("action", "commands"),
        ["ls -la", "cat notes.txt"],
        {
            "type": "shell_call_output",
            "output": [{"stdout": "notes.txt\n", "stderr": "", "outcome": {"type": "exit"}}],
        },
        id="shell",
    ),
    pytest.param(
        {"type": "apply_patch"},
        {"type": "update_file", "path": "notes.txt", "diff": "@@\n-41\n+42\n"},
        "apply_patch_call",
        ("operation", "path"),
        "notes.txt",
        {"type": "apply_patch_call_output", "status": "completed", "output": "patched"},
        id="apply_patch",
    ),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "call_type", "where", "expected", "output"), CLIENT_RUN
)
def test_a_client_run_builtin_tool_round_trips_as_its_typed_item(
    gpt: openai.OpenAI,
    service: FakeKiro,
    tool: dict[str, Any],
    arguments: dict[str, Any],
    call_type: str,
    where: tuple[str, str],
    expected: object,
    output: dict[str, Any],
) -> None:
    """The client executes these tools, so they are never dropped as hosted: declared upstream
    under their type's name, the model's call comes back as the typed item (streamed and whole,
    read by the SDK's own types), and its output goes back upstream as the tool's result."""
    name = tool["type"]
    service.enqueue(Reply(tool_calls=(ToolCall(name, arguments),)))
    with gpt.responses.stream(model="claude-sonnet-4-6", input="list files", tools=[tool]) as s:
        kinds = [event.type for event in s]
        final = s.get_final_response()
    declared = last_state(service)["currentMessage"]["userInputMessage"]["userInputMessageContext"]
    assert [t["toolSpecification"]["name"] for t in declared["tools"]] == [name]
    assert "response.function_call_arguments.delta" not in kinds
    [call] = final.output
    assert call.type == call_type
    assert call.status == "completed"
    assert getattr(getattr(call, where[0]), where[1]) == expected
    assert final.tools[0].type == name

    service.enqueue(Reply(text="done"))
    reply = gpt.responses.create(
        model="claude-sonnet-4-6",
        previous_response_id=final.id,
        input=[{**output, ("id" if name == "local_shell" else "call_id"): call.call_id}],  # type: ignore[list-item]
        tools=[tool],  # type: ignore[list-item]
    )
    assert reply.output_text == "done"
    state = last_state(service)
    [result] = state["currentMessage"]["userInputMessage"]["userInputMessageContext"]["toolResults"]
    assert result["toolUseId"] == call.call_id
    assert result["status"] == "success"
    [use] = state["history"][-1]["assistantResponseMessage"]["toolUses"]
    assert use["name"] == name
    assert use["input"] == arguments


def test_a_client_run_call_replays_from_the_input_and_answers_whole_without_streaming(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    """Codex replays the typed call itself and may answer it with a `function_call_output`."""
    service.enqueue(Reply(tool_calls=(ToolCall("local_shell", {"command": ["pwd"]}),)))
    first = gpt.responses.create(
        model="claude-sonnet-4-6", input="where am I", tools=[{"type": "local_shell"}], store=False
    )
    [call] = first.output
    assert call.type == "local_shell_call"
    assert call.action.command == ["pwd"]
    assert call.action.env == {}
    service.enqueue(Reply(text="in /srv"))
    gpt.responses.create(
        model="claude-sonnet-4-6",
        tools=[{"type": "local_shell"}],
        input=[
            {"role": "user", "content": "where am I"},
            call.model_dump(exclude_none=True),  # type: ignore[list-item]
            {"type": "function_call_output", "call_id": call.call_id, "output": "/srv"},
        ],
    )
    state = last_state(service)
    [use] = state["history"][-1]["assistantResponseMessage"]["toolUses"]
    assert (use["toolUseId"], use["name"], use["input"]) == (
        call.call_id,
        "local_shell",
        {"command": ["pwd"]},
    )


def test_a_failed_patch_goes_upstream_as_an_error_result(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="sorry"))
    gpt.responses.create(
        model="claude-sonnet-4-6",
        tools=[{"type": "apply_patch"}],
        input=[
            {"role": "user", "content": "fix it"},
            {
                "type": "apply_patch_call",
                "call_id": "call_1",
                "status": "completed",
                "operation": {"type": "delete_file", "path": "gone.txt"},
            },
            {"type": "apply_patch_call_output", "call_id": "call_1", "status": "failed"},
        ],
    )
    context = last_state(service)["currentMessage"]["userInputMessage"]["userInputMessageContext"]
    [result] = context["toolResults"]
    assert result["status"] == "error"
    assert "failed" in json.dumps(result["content"])


def test_a_shell_tool_in_a_hosted_container_is_a_hosted_tool(gpt: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gpt.responses.create(
            model="claude-sonnet-4-6",
            input="hi",
            tools=[{"type": "shell", "environment": {"type": "container_auto"}}],
        )
    assert "Kiro runs no hosted tools" in caught.value.message


def test_compact_summarises_the_turns_previous_response_id_names(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="Stored answer about the lighthouse."))
    stored = gpt.responses.create(
        model="claude-sonnet-4-6", input="Tell me about the lighthouse.", store=True
    )
    service.enqueue(Reply(text="SUMMARY with history"))
    answer = gpt.post(
        "/responses/compact",
        body={"model": "claude-sonnet-4-6", "previous_response_id": stored.id, "input": "and now?"},
        cast_to=object,
    )
    assert isinstance(answer, dict)
    summarised = json.dumps(last_state(service))
    assert "Stored answer about the lighthouse." in summarised
    retained = json.dumps(answer["output"][:-1])
    assert "Tell me about the lighthouse." in retained
    assert "and now?" in retained

    with pytest.raises(openai.BadRequestError) as caught:
        gpt.post(
            "/responses/compact",
            body={"model": "claude-sonnet-4-6", "previous_response_id": "resp_nope", "input": "x"},
            cast_to=object,
        )
    assert caught.value.param == "previous_response_id"  # type: ignore[attr-defined]
