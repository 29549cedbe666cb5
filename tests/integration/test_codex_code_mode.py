"""Codex with GPT-5.6 ("code mode"), freeform tools and compaction, end to end.

The request bodies start from a capture of the real Codex 0.171.0 with `model = "gpt-5.6-sol"`
(its file name and header say so): tools only in an `additional_tools` input item, the `exec`
tool a freeform (`custom`) tool with a lark grammar. The daemon is the real one, the upstream the
fake Kiro; the SDK that reads the answers is the official openai one.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, ThreadedFake, ToolCall

sys.path.insert(0, str(Path(__file__).parent))
from kiro_env import import_account, start_daemon

CAPTURE = Path(__file__).resolve().parents[1] / "clients" / "captures"
CODE_MODE = CAPTURE / "codex-0.171.0-gpt-5.6-sol.json"
SOURCE = "const r = await tools.exec_command({cmd: 'cat notes.txt'});\ntext(r.output);"


def captured_body() -> dict[str, Any]:
    """Codex 0.171.0's first `/v1/responses` body for gpt-5.6-sol, as captured."""
    capture = json.loads(CODE_MODE.read_text())
    first = next(r for r in capture["requests"] if r["path"].startswith("/v1/responses"))
    body: dict[str, Any] = copy.deepcopy(first["body"])
    return body


@pytest.fixture(scope="module")
def fake() -> Iterator[ThreadedFake]:
    with ThreadedFake() as server:
        yield server


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake)
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def service(fake: ThreadedFake) -> FakeKiro:
    fake.fake.clear_scripts()
    fake.fake.clear_requests()
    return fake.fake


@pytest.fixture
def gpt(daemon: DaemonProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=f"{daemon.base_url}/v1", api_key=daemon.api_key, max_retries=0
    ) as client:
        yield client


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


def test_a_foreign_compaction_blob_is_a_400_naming_the_item(gpt: openai.OpenAI) -> None:
    body = captured_body()
    body["input"].insert(1, {"type": "compaction", "encrypted_content": "gAAAAABopenai-blob"})
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
