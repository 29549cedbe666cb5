"""Web search failing inside an ordinary turn: the official SDKs → the real daemon → the fake
Kiro, whose MCP endpoint answers each way the real one is reported to fail.

A failed search never fails the turn: the client sees the search with an `unavailable` result
(Anthropic `web_search_tool_result_error`, Responses a `failed` web_search_call), the model gets
the failure as an error tool result, and its continuation streams on in the same response. An
answer with no results is an empty result, not a failure.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from kirod.testing.fake_kiro import FakeKiro, Reply, Search, SearchFault, ToolCall

MODEL = "claude-sonnet-4-6"
SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search"}
READ_TOOL = {
    "name": "Read",
    "description": "Reads a file.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
FAILURES = [
    SearchFault.FORBIDDEN,
    SearchFault.SERVER_ERROR,
    SearchFault.MALFORMED,
    SearchFault.RPC_ERROR,
    SearchFault.TOOL_ERROR,
]
EMPTY = [SearchFault.NO_RESULTS, SearchFault.TEXT_ERROR]


def script(service: FakeKiro, fault: SearchFault) -> None:
    service.enqueue(
        Reply(text="Searching.", tool_calls=(ToolCall("web_search", {"query": "aiohttp"}),)),
        Reply(text="I could not look that up."),
    )
    service.enqueue_search(Search(fault=fault))


def fed_back(service: FakeKiro) -> tuple[str, dict[str, Any]]:
    """The status and decoded text of the search's tool result in the continuation's request."""
    chats = service.requests("chat")
    assert len(chats) == 2
    current = chats[1].json["conversationState"]["currentMessage"]["userInputMessage"]
    [result] = current["userInputMessageContext"]["toolResults"]
    return result["status"], json.loads(result["content"][0]["text"])


def ask_claude(claude: anthropic.Anthropic, *, stream: bool) -> Any:
    asked: Any = {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "What is new in aiohttp?"}],
        "tools": [READ_TOOL, SEARCH_TOOL],
    }
    if not stream:
        return claude.messages.create(**asked)
    with claude.messages.stream(**asked) as events:
        return events.get_final_message()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("fault", FAILURES, ids=lambda fault: fault.value)
def test_a_failed_search_is_unavailable_and_the_turn_goes_on(
    claude: anthropic.Anthropic, service: FakeKiro, fault: SearchFault, stream: bool
) -> None:
    script(service, fault)
    message = ask_claude(claude, stream=stream)
    assert [block.type for block in message.content] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    result = message.content[2]
    assert result.tool_use_id == message.content[1].id
    assert result.content.type == "web_search_tool_result_error"
    assert result.content.error_code == "unavailable"
    assert message.content[3].text == "I could not look that up."
    assert message.stop_reason == "end_turn"
    assert fed_back(service) == ("error", {"error": "unavailable"})
    assert len(service.requests("mcp")) == 1  # one try per call: the model decides what next


@pytest.mark.parametrize("fault", EMPTY, ids=lambda fault: fault.value)
def test_a_search_without_results_is_an_empty_result(
    claude: anthropic.Anthropic, service: FakeKiro, fault: SearchFault
) -> None:
    script(service, fault)
    message = ask_claude(claude, stream=True)
    assert message.content[2].type == "web_search_tool_result"
    assert message.content[2].content == []
    assert fed_back(service) == ("success", {"results": []})
    assert message.usage.server_tool_use.web_search_requests == 1


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    "fault", [SearchFault.FORBIDDEN, SearchFault.MALFORMED], ids=lambda fault: fault.value
)
def test_responses_shows_a_failed_search_and_goes_on(
    gpt: openai.OpenAI, service: FakeKiro, fault: SearchFault, stream: bool
) -> None:
    script(service, fault)
    asked: Any = {"model": MODEL, "input": "find aiohttp news", "tools": [{"type": "web_search"}]}
    if stream:
        with gpt.responses.stream(**asked) as events:
            kinds = [event.type for event in events]
            final = events.get_final_response()
        assert "response.web_search_call.completed" in kinds  # the step ended; the item says how
        assert kinds[-1] == "response.completed"
    else:
        final = gpt.responses.create(**asked)
    assert [item.type for item in final.output] == ["message", "web_search_call", "message"]
    search = final.output[1]
    assert search.status == "failed"
    assert search.action.query == "aiohttp"  # type: ignore[union-attr]
    assert final.output_text.endswith("I could not look that up.")
    assert final.status == "completed"
    assert fed_back(service) == ("error", {"error": "unavailable"})


def test_a_failed_search_does_not_cool_the_account_down(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    """MCP's 403 is about the search, not the account: the next turn is served as usual."""
    script(service, SearchFault.FORBIDDEN)
    ask_claude(claude, stream=True)
    service.enqueue(Reply(text="still here"))
    after = claude.messages.create(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert after.content[0].text == "still here"  # type: ignore[union-attr]
