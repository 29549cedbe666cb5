"""Web search against the fake Kiro's MCP endpoint on loopback: the call kirod makes, what it
reads out of each answer the real endpoint is reported to give, and that no failure escapes as
an exception (a failed search is an `unavailable` result, never a failed turn)."""

from __future__ import annotations

import dataclasses

import pytest

from kirod.canonical.events import SearchResults, ServerToolUse, Usage
from kirod.canonical.request import WebSearch
from kirod.testing.fake_kiro import FakeKiro, Search, SearchFault
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.websearch import (
    MAX_HITS,
    MAX_QUERY_CHARS,
    answer_search,
    kiro_query,
    search,
)

TOOL = WebSearch()


async def test_a_search_sends_json_rpc_with_the_profile_in_header_and_body(
    loopback: tuple[FakeKiro, KiroClient, UpstreamAccount],
) -> None:
    service, client, account = loopback
    found = await search(client, account, "  event loops  ", TOOL)
    assert found.error_code is None
    assert [hit.url for hit in found.hits] == [
        f"https://example.com/event-loops/{n}" for n in (1, 2, 3)
    ]
    assert found.hits[0].snippet == "Snippet 1 about event loops."
    assert found.hits[0].page_age == "January 2, 2026"
    [request] = service.requests("mcp")
    body = request.json
    assert body["jsonrpc"] == "2.0"
    assert body["id"].startswith("web_search_tooluse_")
    assert body["params"] == {"name": "web_search", "arguments": {"query": "event loops"}}
    assert body["profileArn"] == account.profile_arn
    assert request.headers["x-amzn-kiro-profile-arn"] == account.profile_arn
    assert request.headers["authorization"] == f"Bearer {account.credentials.access_token}"


async def test_without_a_profile_the_endpoints_400_is_an_unavailable_result(
    loopback: tuple[FakeKiro, KiroClient, UpstreamAccount],
) -> None:
    service, client, account = loopback
    found = await search(client, dataclasses.replace(account, profile_arn=None), "q", TOOL)
    assert found.error_code == "unavailable"
    assert service.requests("mcp")[0].status == 400


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
async def test_each_failure_is_unavailable(
    loopback: tuple[FakeKiro, KiroClient, UpstreamAccount], fault: SearchFault
) -> None:
    service, client, account = loopback
    service.enqueue_search(Search(fault=fault))
    assert (await search(client, account, "q", TOOL)).error_code == "unavailable"


async def test_a_search_that_does_not_answer_in_time_is_unavailable(
    loopback: tuple[FakeKiro, KiroClient, UpstreamAccount],
) -> None:
    service, client, account = loopback
    service.enqueue_search(Search(fault=SearchFault.SLOW, delay_s=2.0))
    found = await search(client, account, "q", TOOL, timeout_s=0.2)
    assert found.error_code == "unavailable"


@pytest.mark.parametrize("fault", [SearchFault.NO_RESULTS, SearchFault.TEXT_ERROR])
async def test_an_answer_without_results_is_empty_not_failed(
    loopback: tuple[FakeKiro, KiroClient, UpstreamAccount], fault: SearchFault
) -> None:
    service, client, account = loopback
    service.enqueue_search(Search(fault=fault))
    found = await search(client, account, "q", TOOL)
    assert (found.hits, found.error_code) == ((), None)


async def test_results_are_filtered_bounded_and_cleaned(
    loopback: tuple[FakeKiro, KiroClient, UpstreamAccount],
) -> None:
    service, client, account = loopback
    many = tuple(
        {"title": f"t{n}", "url": f"https://a{n % 2}.example.com/{n}", "snippet": "s" * 5000}
        for n in range(200)
    )
    odd = (
        {"url": "javascript:alert(1)", "title": "no scheme"},
        {"title": "no url"},
        "not an object",
        {"url": "https://ok.example.com/", "publishedDate": "yesterday"},
    )
    service.enqueue_search(Search(results=odd + many))
    found = await search(
        client, account, "q", dataclasses.replace(TOOL, blocked_domains=("a1.example.com",))
    )
    assert found.hits[0].url == "https://ok.example.com/"
    assert found.hits[0].title == "https://ok.example.com/"  # no title: the URL stands for it
    assert found.hits[0].page_age is None
    assert len(found.hits) == MAX_HITS
    assert all("a1." not in hit.url for hit in found.hits)
    assert max(len(hit.snippet) for hit in found.hits) == 2000


@pytest.mark.parametrize("query", ["   ", "\n\t "])
async def test_a_blank_query_is_refused_without_a_call(
    loopback: tuple[FakeKiro, KiroClient, UpstreamAccount], query: str
) -> None:
    service, client, account = loopback
    found = await search(client, account, query, TOOL)
    assert (found.error_code, found.searched) == ("invalid_tool_input", False)
    assert not service.requests("mcp")


WORD = "abcdefghi "  # ten characters, a word and its space


@pytest.mark.parametrize(
    ("query", "sent"),
    [
        ("x" * MAX_QUERY_CHARS, "x" * MAX_QUERY_CHARS),  # at the limit: untouched
        (WORD * 20 + "tail", (WORD * 20).rstrip()),  # the space falls at the limit
        (WORD * 19 + "abcdefghijklmn", (WORD * 19).rstrip()),  # the last word would be cut
        ("  " + WORD * 25, (WORD * 20).rstrip()),  # stripped first
        ("y" * 250, "y" * MAX_QUERY_CHARS),  # one word longer than the limit: cut in it
    ],
)
async def test_a_long_query_is_cut_at_a_word_boundary_to_kiros_limit(
    loopback: tuple[FakeKiro, KiroClient, UpstreamAccount], query: str, sent: str
) -> None:
    service, client, account = loopback
    assert kiro_query(query) == sent
    found = await search(client, account, query, TOOL)
    assert found.error_code is None
    assert len(found.hits) == 3  # the fake answers -32602 above 200 characters
    [request] = service.requests("mcp")
    assert request.json["params"]["arguments"]["query"] == sent
    assert len(sent) <= MAX_QUERY_CHARS == 200


async def test_a_search_only_answer_is_one_whole_message(
    loopback: tuple[FakeKiro, KiroClient, UpstreamAccount],
) -> None:
    _, client, account = loopback
    events = await answer_search(
        client,
        account,
        WebSearch(query="kiro"),
        message_id="m1",
        model_name="claude-sonnet-4-6",
        input_tokens=12,
    )
    use = next(e for e in events if isinstance(e, ServerToolUse))
    results = next(e for e in events if isinstance(e, SearchResults))
    assert results.tool_use_id == use.tool_use_id
    assert len(results.hits) == 3
    usage = next(e for e in events if isinstance(e, Usage))
    assert (usage.input_tokens, usage.web_search_requests) == (12, 1)


async def test_a_search_only_call_with_a_blank_query_counts_no_search(
    loopback: tuple[FakeKiro, KiroClient, UpstreamAccount],
) -> None:
    service, client, account = loopback
    events = await answer_search(
        client,
        account,
        WebSearch(query="  "),
        message_id="m1",
        model_name="claude-sonnet-4-6",
        input_tokens=12,
    )
    results = next(e for e in events if isinstance(e, SearchResults))
    assert results.error_code == "invalid_tool_input"
    assert next(e for e in events if isinstance(e, Usage)).web_search_requests == 0
    assert not service.requests("mcp")
