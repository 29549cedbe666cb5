"""How the decoders read hosted web-search tools and the search blocks of earlier turns."""

from __future__ import annotations

from typing import Any

import pytest

from kirod.canonical.request import CanonicalRequest, Role, TextBlock, WebSearch
from kirod.errors import ApiError
from kirod.protocols.anthropic import ThinkingSigner, decode_messages
from kirod.protocols.responses import ReasoningBox, decode_responses
from kirod.protocols.search import open_snippet, seal_snippet

SIGNER = ThinkingSigner(b"k" * 32)
BOX = ReasoningBox(b"r" * 32)
SEARCH = {"type": "web_search_20250305", "name": "web_search"}
READ = {"name": "Read", "input_schema": {"type": "object"}}
ASK = "Perform a web search for the query: "


def anthropic(**fields: Any) -> CanonicalRequest:
    body = {"model": "claude-sonnet-4-6", "max_tokens": 64, **fields}
    body.setdefault("messages", [{"role": "user", "content": "hi"}])
    return decode_messages(body, {}, request_id="req_1", signer=SIGNER)


def test_the_side_call_shape_is_a_search_only_call() -> None:
    request = anthropic(
        messages=[{"role": "user", "content": ASK + "  kirod docs "}],
        tools=[{**SEARCH, "type": "web_search_20260318", "max_uses": 8}],
        tool_choice={"type": "tool", "name": "web_search"},
    )
    assert request.web_search == WebSearch(max_uses=8, query="kirod docs")
    assert request.tools == ()
    assert request.server_tools == frozenset()  # answered without a model turn


@pytest.mark.parametrize(
    "fields",
    [
        {"tools": [SEARCH, READ]},  # beside the client's tools
        {"tools": [SEARCH], "messages": [{"role": "user", "content": "what is new in aiohttp?"}]},
        {
            "tools": [SEARCH],
            "messages": [
                {"role": "user", "content": ASK + "a"},
                {"role": "assistant", "content": "b"},
                {"role": "user", "content": ASK + "c"},
            ],
        },
    ],
    ids=["beside-tools", "other-prompt", "several-turns"],
)
def test_any_other_shape_runs_the_search_inside_the_turn(fields: dict[str, Any]) -> None:
    request = anthropic(**{"messages": [{"role": "user", "content": ASK + "x"}], **fields})
    assert request.web_search is not None
    assert request.web_search.query is None
    assert request.server_tools == {"web_search"}
    assert "web_search" not in {tool.name for tool in request.tools}


def test_domain_filters_and_their_errors() -> None:
    request = anthropic(tools=[{**SEARCH, "blocked_domains": ["ads.example"]}, READ])
    assert request.web_search == WebSearch(blocked_domains=("ads.example",))
    with pytest.raises(ApiError) as both:
        anthropic(tools=[{**SEARCH, "allowed_domains": ["a"], "blocked_domains": ["b"]}])
    assert both.value.param == "tools.0"
    with pytest.raises(ApiError) as named:
        anthropic(tools=[{**SEARCH, "name": "search"}])
    assert named.value.param == "tools.0.name"
    with pytest.raises(ApiError) as twice:
        anthropic(tools=[SEARCH, {"name": "web_search", "input_schema": {"type": "object"}}])
    assert twice.value.param == "tools.1.name"
    with pytest.raises(ApiError) as uses:
        anthropic(tools=[{**SEARCH, "max_uses": 0}])
    assert uses.value.param == "tools.0.max_uses"


def test_other_server_tools_are_still_refused() -> None:
    with pytest.raises(ApiError) as caught:
        anthropic(tools=[{"type": "code_execution_20250825", "name": "code_execution"}])
    assert caught.value.code == "unsupported_capability"


def test_search_blocks_in_history_become_text_and_read_kirods_own_snippets() -> None:
    sealed = seal_snippet("what the page says")
    request = anthropic(
        tools=[READ],
        messages=[
            {"role": "user", "content": "search"},
            {
                "role": "assistant",
                "content": [
                    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                     "input": {"query": "kiro"}},
                    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
                        {"type": "web_search_result", "url": "https://a.example/", "title": "A",
                         "encrypted_content": sealed, "page_age": None},
                        {"type": "web_search_result", "url": "https://b.example/", "title": "B",
                         "encrypted_content": "someone-elses-blob"},
                    ]},
                    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_2",
                     "content": {"type": "web_search_tool_result_error",
                                 "error_code": "unavailable"}},
                    {"type": "text", "text": "Found two."},
                ],
            },
            {"role": "user", "content": "thanks"},
        ],
    )  # fmt: skip
    assistant = request.messages[1]
    assert assistant.role is Role.ASSISTANT
    texts = [block.text for block in assistant.content if isinstance(block, TextBlock)]
    assert texts[0] == "Web search: kiro"
    assert "- A <https://a.example/>: what the page says" in texts[1]
    assert "- B <https://b.example/>" in texts[1]
    assert "someone-elses-blob" not in texts[1]
    assert texts[-1] == "Found two."


def test_search_blocks_in_a_user_turn_are_refused() -> None:
    with pytest.raises(ApiError) as caught:
        anthropic(
            messages=[
                {"role": "user", "content": [{"type": "server_tool_use", "id": "s", "name": "x",
                                              "input": {}}]},
            ]
        )  # fmt: skip
    assert caught.value.code == "unsupported_capability"


def test_snippets_round_trip_and_foreign_blobs_read_as_nothing() -> None:
    assert open_snippet(seal_snippet("é ✓ text")) == "é ✓ text"
    assert open_snippet("kirod1.%%%") == ""
    assert open_snippet(None) == ""


def responses(**fields: Any) -> CanonicalRequest:
    body = {"model": "claude-sonnet-4-6", "input": "hi", **fields}
    return decode_responses(body, {}, request_id="req_1", reasoning_box=BOX).request


@pytest.mark.parametrize("kind", ["web_search", "web_search_preview"])
def test_responses_web_search_alone_or_beside_functions(kind: str) -> None:
    alone = responses(tools=[{"type": kind, "filters": {"allowed_domains": ["docs.example"]}}])
    assert alone.web_search == WebSearch(allowed_domains=("docs.example",))
    assert alone.server_tools == {"web_search"}
    beside = responses(tools=[{"type": kind}, {"type": "function", "name": "run"}])
    assert [tool.name for tool in beside.tools] == ["run"]
    assert beside.web_search == WebSearch()


def test_responses_web_search_call_items_replay_as_assistant_text() -> None:
    request = responses(
        input=[
            {"role": "user", "content": "search"},
            {
                "type": "web_search_call",
                "id": "ws_1",
                "status": "completed",
                "action": {
                    "type": "search",
                    "query": "kiro",
                    "sources": [{"type": "url", "url": "https://a.example/"}],
                },
            },
            {"role": "user", "content": "more"},
        ]
    )
    [text] = request.messages[1].content
    assert isinstance(text, TextBlock)
    assert text.text == "Web search: kiro\n- <https://a.example/>"
