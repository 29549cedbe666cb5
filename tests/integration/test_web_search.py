"""Web search end to end: the official SDKs → the real daemon → the fake Kiro's chat and MCP.

Two shapes: Claude Code's WebSearch side call (one user message, the `web_search` server tool
alone), answered from MCP without a model turn; and a hosted web search inside an ordinary turn
(Anthropic beside other tools; Responses' `{"type": "web_search"}`), where the model calls the
tool, kirod searches, and the model's continuation streams on in the same response.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Search, SearchFault, ToolCall

MODEL = "claude-sonnet-4-6"
SIDE_CALL_SYSTEM = "You are an assistant for performing a web search tool use"
SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 8}
READ_TOOL = {
    "name": "Read",
    "description": "Reads a file.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def side_call(claude: anthropic.Anthropic, query: str, **tool: Any) -> Any:
    """Claude Code's WebSearch side call, as its bundle words it."""
    return claude.messages.stream(
        model=MODEL,
        max_tokens=1024,
        system=SIDE_CALL_SYSTEM,
        messages=[{"role": "user", "content": f"Perform a web search for the query: {query}"}],
        tools=[{**SEARCH_TOOL, **tool}],
        tool_choice={"type": "tool", "name": "web_search"},
    )


def mcp_calls(service: FakeKiro) -> list[dict[str, Any]]:
    return [request.json for request in service.requests("mcp")]


def test_the_side_call_is_answered_from_mcp_without_a_model_turn(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    with side_call(claude, "kirod release notes") as stream:
        kinds = [event.type for event in stream]
        message = stream.get_final_message()
    assert not service.requests("chat")
    [call] = mcp_calls(service)
    assert call["method"] == "tools/call"
    assert call["params"] == {"name": "web_search", "arguments": {"query": "kirod release notes"}}
    assert call["profileArn"]  # the root-level profile the real endpoint requires
    [request] = service.requests("mcp")
    assert request.headers["x-amzn-kiro-profile-arn"] == call["profileArn"]

    use, result, listing = message.content
    assert use.type == "server_tool_use"
    assert use.id.startswith("srvtoolu_")
    assert use.input == {"query": "kirod release notes"}
    assert result.type == "web_search_tool_result"
    assert result.tool_use_id == use.id
    urls = [hit.url for hit in result.content]
    assert urls == [f"https://example.com/kirod-release-notes/{n}" for n in (1, 2, 3)]
    assert result.content[0].title == "Result 1 for kirod release notes"
    assert result.content[0].page_age == "January 2, 2026"
    assert listing.type == "text"
    assert all(url in listing.text for url in urls)
    assert message.stop_reason == "end_turn"
    assert message.usage.server_tool_use is not None
    assert message.usage.server_tool_use.web_search_requests == 1
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"


def test_the_side_call_without_streaming_and_with_domain_filters(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    service.enqueue_search(
        Search(
            results=(
                {"title": "Docs", "url": "https://docs.example.org/a", "snippet": "a"},
                {"title": "Blog", "url": "https://blog.example.net/b", "snippet": "b"},
                {"title": "Sub", "url": "https://api.docs.example.org/c"},
            )
        )
    )
    message = claude.messages.create(
        model=MODEL,
        max_tokens=512,
        messages=[{"role": "user", "content": "Perform a web search for the query: docs"}],
        tools=[{**SEARCH_TOOL, "allowed_domains": ["docs.example.org"]}],  # type: ignore[list-item]
    )
    result = message.content[1]
    assert result.type == "web_search_tool_result"
    assert [hit.url for hit in result.content] == [  # type: ignore[union-attr]
        "https://docs.example.org/a",
        "https://api.docs.example.org/c",
    ]


def test_a_query_over_kiros_200_characters_is_cut_at_a_word_and_annotated(
    claude: anthropic.Anthropic, service: FakeKiro, daemon: DaemonProcess
) -> None:
    """docs/UPSTREAM.md §2.1: Kiro answers -32602 above 200 characters; kirod sends what fits."""
    query = " ".join(f"word{n:02d}" for n in range(40))  # 279 characters
    with side_call(claude, query) as stream:
        message = stream.get_final_message()
    [call] = mcp_calls(service)
    sent = call["params"]["arguments"]["query"]
    assert sent == " ".join(f"word{n:02d}" for n in range(28))  # 195 characters, whole words
    result = message.content[1]
    assert len(result.content) == 3  # type: ignore[union-attr, arg-type]
    assert message.usage.server_tool_use.web_search_requests == 1  # type: ignore[union-attr]
    assert "web_search_query_cut" in daemon.log()
    assert "279>195" in daemon.log()


def test_a_blank_query_from_the_model_is_answered_without_a_search(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    service.enqueue(
        Reply(tool_calls=(ToolCall("web_search", {"query": "   "}),)),
        Reply(text="No query, no search."),
    )
    message = claude.messages.create(
        model=MODEL,
        max_tokens=512,
        messages=[{"role": "user", "content": "search for nothing"}],
        tools=[SEARCH_TOOL, READ_TOOL],  # type: ignore[list-item]
    )
    assert not service.requests("mcp")
    result = next(b for b in message.content if b.type == "web_search_tool_result")
    assert result.content.error_code == "invalid_tool_input"  # type: ignore[union-attr]
    assert message.content[-1].text == "No query, no search."  # type: ignore[union-attr]
    assert message.usage.server_tool_use is None  # no search was made, none is billed


@pytest.mark.parametrize(
    "fault",
    [
        SearchFault.FORBIDDEN,
        SearchFault.SERVER_ERROR,
        SearchFault.MALFORMED,
        SearchFault.RPC_ERROR,
        SearchFault.TOOL_ERROR,
    ],
)
def test_a_failed_search_is_a_200_with_an_unavailable_result(
    claude: anthropic.Anthropic, service: FakeKiro, fault: SearchFault
) -> None:
    """Claude Code then shows "no links" instead of failing the user's turn."""
    service.enqueue_search(Search(fault=fault))
    with side_call(claude, "anything") as stream:
        message = stream.get_final_message()
    result = message.content[1]
    assert result.type == "web_search_tool_result"
    assert result.content.type == "web_search_tool_result_error"  # type: ignore[union-attr]
    assert result.content.error_code == "unavailable"  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"


@pytest.mark.parametrize("fault", [SearchFault.NO_RESULTS, SearchFault.TEXT_ERROR])
def test_an_answer_without_results_is_an_empty_result(
    claude: anthropic.Anthropic, service: FakeKiro, fault: SearchFault
) -> None:
    service.enqueue_search(Search(fault=fault))
    with side_call(claude, "nothing here") as stream:
        message = stream.get_final_message()
    assert message.content[1].content == []  # type: ignore[union-attr]
    assert "no results" in message.content[2].text  # type: ignore[union-attr]


def test_a_search_in_an_ordinary_turn_streams_the_continuation_as_one_message(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    service.enqueue(
        Reply(text="Let me check.", tool_calls=(ToolCall("web_search", {"query": "aiohttp"}),)),
        Reply(text="aiohttp 4 is out."),
    )
    with claude.messages.stream(
        model=MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": "What is new in aiohttp?"}],
        tools=[READ_TOOL, SEARCH_TOOL],  # type: ignore[list-item]
    ) as stream:
        message = stream.get_final_message()
    kinds = [block.type for block in message.content]
    assert kinds == ["text", "server_tool_use", "web_search_tool_result", "text"]
    assert message.content[0].text == "Let me check."  # type: ignore[union-attr]
    assert message.content[3].text == "aiohttp 4 is out."  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert message.usage.server_tool_use.web_search_requests == 1  # type: ignore[union-attr]

    first, second = (request.json["conversationState"] for request in service.requests("chat"))
    context = first["currentMessage"]["userInputMessage"]["userInputMessageContext"]
    declared = [tool["toolSpecification"]["name"] for tool in context["tools"]]
    assert declared == ["Read", "web_search"]
    assert first["conversationId"] == second["conversationId"]
    results = second["currentMessage"]["userInputMessage"]["userInputMessageContext"]["toolResults"]
    found = json.loads(results[0]["content"][0]["text"])
    assert found["results"][0]["url"] == "https://example.com/aiohttp/1"
    asked = second["history"][-1]["assistantResponseMessage"]
    assert asked["toolUses"][0]["name"] == "web_search"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_search_beside_a_client_tool_is_run_and_the_message_ends_for_the_client(
    claude: anthropic.Anthropic, service: FakeKiro, stream: bool
) -> None:
    """The model calls web_search and Read in one reply: kirod searches and shows it, and the
    message stops for Read (no second model turn: the client answers its call first)."""
    service.enqueue(
        Reply(
            text="Two things.",
            tool_calls=(
                ToolCall("web_search", {"query": "aiohttp"}),
                ToolCall("Read", {"path": "notes.md"}),
            ),
        )
    )
    asked: Any = {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Search aiohttp and read notes.md"}],
        "tools": [READ_TOOL, SEARCH_TOOL],
    }
    if stream:
        with claude.messages.stream(**asked) as events:
            message = events.get_final_message()
    else:
        message = claude.messages.create(**asked)
    kinds = [block.type for block in message.content]
    assert kinds == ["text", "tool_use", "server_tool_use", "web_search_tool_result"]
    read, search, results = message.content[1:]
    assert (read.name, read.input) == ("Read", {"path": "notes.md"})  # type: ignore[union-attr]
    assert search.input == {"query": "aiohttp"}  # type: ignore[union-attr]
    assert results.tool_use_id == search.id  # type: ignore[union-attr]
    assert results.content[0].url == "https://example.com/aiohttp/1"  # type: ignore[union-attr,index]
    assert message.stop_reason == "tool_use"
    assert message.usage.server_tool_use.web_search_requests == 1  # type: ignore[union-attr]
    assert len(service.requests("chat")) == 1
    assert [call["params"]["arguments"]["query"] for call in mcp_calls(service)] == ["aiohttp"]

    # The next turn: the client's Read result, with the search blocks in its history.
    service.enqueue(Reply(text="Done."))
    history: Any = [
        *asked["messages"],
        {"role": "assistant", "content": [block.model_dump() for block in message.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": read.id, "content": "hi"}],  # type: ignore[union-attr]
        },
    ]
    after = claude.messages.create(**{**asked, "messages": history})
    assert after.content[0].text == "Done."  # type: ignore[union-attr]
    state = service.requests("chat")[-1].json["conversationState"]
    assistant = state["history"][-1]["assistantResponseMessage"]
    assert [use["name"] for use in assistant["toolUses"]] == ["Read"]
    assert "https://example.com/aiohttp/1" in assistant["content"]  # the search, as text


def test_responses_search_beside_a_function_call_ends_for_the_client(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    service.enqueue(
        Reply(
            tool_calls=(
                ToolCall("web_search", {"query": "kirod"}),
                ToolCall("exec_command", {"cmd": "ls"}),
            )
        )
    )
    tools: Any = [
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
        {"type": "web_search"},
    ]
    with gpt.responses.stream(model=MODEL, input="find kirod and list", tools=tools) as stream:
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["function_call", "web_search_call"]
    call, search = final.output
    assert call.name == "exec_command"  # type: ignore[union-attr]
    assert search.status == "completed"  # type: ignore[union-attr]
    assert search.action.query == "kirod"  # type: ignore[union-attr]
    assert final.status == "completed"
    assert len(service.requests("chat")) == 1


def test_searches_beyond_max_uses_are_answered_max_uses_exceeded(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    calls = [ToolCall("web_search", {"query": f"q{n}"}) for n in range(2)]
    service.enqueue(
        Reply(tool_calls=(calls[0],)), Reply(tool_calls=(calls[1],)), Reply(text="done")
    )
    message = claude.messages.create(
        model=MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": "search twice"}],
        tools=[READ_TOOL, {**SEARCH_TOOL, "max_uses": 1}],  # type: ignore[list-item]
    )
    results = [block for block in message.content if block.type == "web_search_tool_result"]
    assert results[0].content[0].url  # type: ignore[union-attr,index]
    assert results[1].content.error_code == "max_uses_exceeded"  # type: ignore[union-attr]
    assert len(mcp_calls(service)) == 1
    assert message.usage.server_tool_use.web_search_requests == 1  # type: ignore[union-attr]


def test_search_blocks_sent_back_in_history_go_upstream_as_text(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    first = claude.messages.create(
        model=MODEL,
        max_tokens=512,
        messages=[{"role": "user", "content": "Perform a web search for the query: kiro"}],
        tools=[SEARCH_TOOL],  # type: ignore[list-item]
    )
    service.enqueue(Reply(text="Thanks."))
    claude.messages.create(
        model=MODEL,
        max_tokens=512,
        messages=[
            {"role": "user", "content": "Perform a web search for the query: kiro"},
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},  # type: ignore[misc]
            {"role": "user", "content": "Summarise."},
        ],
        tools=[READ_TOOL],
    )
    state = service.requests("chat")[-1].json["conversationState"]
    replayed = json.dumps(state["history"])
    assert "Web search: kiro" in replayed
    assert "https://example.com/kiro/1" in replayed
    assert "Snippet 1 about kiro." in replayed  # read back from kirod's encrypted_content


def test_responses_web_search_runs_inside_the_turn(gpt: openai.OpenAI, service: FakeKiro) -> None:
    service.enqueue(
        Reply(tool_calls=(ToolCall("web_search", {"query": "kirod"}),)),
        Reply(text="Found it."),
    )
    with gpt.responses.stream(
        model=MODEL,
        input="find kirod",
        tools=[{"type": "web_search"}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    search, answer = final.output
    assert search.type == "web_search_call"
    assert search.status == "completed"
    assert search.action.query == "kirod"  # type: ignore[union-attr]
    assert answer.type == "message"
    assert final.output_text == "Found it."
    order = [kind for kind in kinds if kind.startswith("response.web_search_call")]
    assert order == [
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
    ]
    assert len(service.requests("chat")) == 2


def test_responses_web_search_whole_and_replayed_as_text(
    gpt: openai.OpenAI, service: FakeKiro
) -> None:
    """Codex's shape (`web_search` beside its function tools, with `external_web_access`), not
    streamed; the `web_search_call` item Codex sends back next turn goes upstream as text."""
    service.enqueue(
        Reply(tool_calls=(ToolCall("web_search", {"query": "aiohttp"}),)),
        Reply(text="Here."),
    )
    tools: Any = [
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
        {"type": "web_search", "external_web_access": True},
    ]
    first = gpt.responses.create(model=MODEL, input="search", tools=tools, store=False)
    search, answer = first.output
    assert (search.type, answer.type) == ("web_search_call", "message")
    assert search.status == "completed"
    assert [source.url for source in search.action.sources or []][:1] == [  # type: ignore[union-attr]
        "https://example.com/aiohttp/1"
    ]
    assert first.output_text == "Here."
    assert [tool.type for tool in first.tools] == ["function", "web_search"]

    service.enqueue(Reply(text="ok"))
    gpt.responses.create(
        model=MODEL,
        tools=tools,
        input=[
            {"role": "user", "content": "search"},
            search.model_dump(exclude_none=True),
            {"role": "assistant", "content": "Here."},
            {"role": "user", "content": "thanks"},
        ],
    )
    replayed = json.dumps(service.requests("chat")[-1].json["conversationState"]["history"])
    assert "Web search: aiohttp" in replayed
    assert "https://example.com/aiohttp/1" in replayed


def test_a_function_named_web_search_beside_the_hosted_one_is_refused(gpt: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gpt.responses.create(
            model=MODEL,
            input="hi",
            tools=[
                {"type": "function", "name": "web_search", "parameters": {"type": "object"}},
                {"type": "web_search"},
            ],
        )
    assert "web_search" in caught.value.message
