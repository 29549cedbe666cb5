"""GPT-5.6's reasoning effort end to end (docs/KIRO-PROTOCOL.md §2.6): the openai SDK asks the
Responses API for an effort the account's catalog does not list for the model; kirod sends the
nearest one it lists, in `additionalModelRequestFields.reasoning` (never Claude's `output_config`),
and names the clamp in the request's log line."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, ThreadedFake
from kirod.testing.fake_kiro.catalog import DEFAULT_MODELS, GPT_REQUEST_FIELDS

MODEL = "gpt-5.6-sol"
LOW_TO_HIGH: dict[str, Any] = {
    **GPT_REQUEST_FIELDS,
    "properties": {
        "reasoning": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"effort": {"type": "string", "enum": ["low", "medium", "high"]}},
        }
    },
}


def catalog() -> list[Any]:
    """The default catalog, with gpt-5.6-sol listing only the efforts low to high."""
    return [
        dataclasses.replace(model, request_fields_schema=LOW_TO_HIGH)
        if model.model_id == MODEL
        else model
        for model in DEFAULT_MODELS
    ]


@pytest.fixture(scope="module")
def fake() -> Iterator[ThreadedFake]:
    with ThreadedFake(FakeKiro(models=catalog())) as server:
        yield server


def last_body(service: FakeKiro) -> dict[str, Any]:
    body = service.requests("chat")[-1].json
    assert isinstance(body, dict)
    return body


def test_an_effort_the_model_does_not_list_is_sent_as_the_nearest_it_does(
    daemon: DaemonProcess, gpt: openai.OpenAI, service: FakeKiro
) -> None:
    service.enqueue(Reply(thinking="Weighing it up.", text="Done."))
    response = gpt.responses.create(
        model=MODEL,
        input="think hard",
        reasoning={"effort": "xhigh"},
        include=["reasoning.encrypted_content"],
        store=False,
    )
    assert response.status == "completed"
    assert response.output_text == "Done."
    body = last_body(service)
    assert body["additionalModelRequestFields"] == {"reasoning": {"effort": "high"}}
    assert "reasoning" not in body["conversationState"]["currentMessage"]["userInputMessage"]
    assert not any(name.startswith("rejected:") for name in service.counters())
    # The fake's GPT answered with native, opaque reasoning, which comes back sealed.
    [reasoning] = [item for item in response.output if item.type == "reasoning"]
    assert reasoning.encrypted_content
    clamped = [line for line in daemon.log().splitlines() if "effort_clamped" in line]
    assert len(clamped) == 1
    assert "xhigh>high" in clamped[0]


def test_a_listed_effort_goes_as_asked_and_logs_no_clamp(
    daemon: DaemonProcess, gpt: openai.OpenAI, service: FakeKiro
) -> None:
    before = daemon.log().count("effort_clamped")
    service.enqueue(Reply(text="Quick."))
    response = gpt.responses.create(model=MODEL, input="hi", reasoning={"effort": "low"})
    assert response.output_text == "Quick."
    assert last_body(service)["additionalModelRequestFields"] == {"reasoning": {"effort": "low"}}
    assert daemon.log().count("effort_clamped") == before
