"""The fake's MCP web search: what `POST …/mcp` answers, and the failures it can be told to make.

As the real endpoint (docs/UPSTREAM.md §2.1): JSON-RPC `tools/list` and `tools/call` of
`web_search`; a social account's call without a root-level `profileArn` gets `400 {"message":
"profileArn is required for this request."}`, a profile that is not the account's a 403. A queued
`Search` answers the next call: its results, or one of the failures reported for this endpoint.
A query Kiro refuses (`query_problem`) is answered JSON-RPC `-32602` before any scripted answer.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class SearchFault(enum.Enum):
    FORBIDDEN = "forbidden"  # 403 AccessDeniedException
    SERVER_ERROR = "server_error"  # 500
    SLOW = "slow"  # answers after `delay_s`
    MALFORMED = "malformed"  # a body that is not JSON-RPC
    RPC_ERROR = "rpc_error"  # {"error": {"code", "message"}}
    TOOL_ERROR = "tool_error"  # result.isError
    NO_RESULTS = "no_results"  # {"totalResults": 0} with no `results`
    TEXT_ERROR = "text_error"  # the decoded text is {"error": "..."}


@dataclass(frozen=True)
class Search:
    """One scripted answer: `results` (each `{title, url, snippet?, publishedDate?}`), or None
    for the fake's deterministic three results; or a `fault`."""

    results: tuple[Mapping[str, Any], ...] | None = None
    fault: SearchFault | None = None
    delay_s: float = 0.0


MAX_QUERY_CHARS = 200
INVALID_PARAMS = -32602


def query_problem(query: object) -> str | None:
    """Why Kiro refuses `query` with `INVALID_PARAMS`, or None.

    Over 200 characters: sunerpy/kiro-provider
    docs/audits/evidence/web-search-v1-2026-10-05/rpc.json, 2026-10-05 (`over_backend_200_chars`,
    sent and answered `rpc_invalid_params`). Blank: the same evidence lists a whitespace-only query
    as refused, though that gateway refused it itself before sending (`dispatched: false`); the
    fake refuses it as the endpoint's schema-checked `query` would, so kirod never relies on it.
    """
    if not isinstance(query, str) or not query.strip():
        return "Invalid params: query must not be empty"
    if len(query) > MAX_QUERY_CHARS:
        return f"Invalid params: query must be at most {MAX_QUERY_CHARS} characters"
    return None


WEB_SEARCH_TOOL = {
    "name": "web_search",
    "description": "Search the web (fake Kiro: deterministic results).",
    "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
}


def default_results(query: str) -> list[dict[str, Any]]:
    slug = "-".join(query.lower().split())[:60] or "empty"
    return [
        {
            "title": f"Result {n} for {query}",
            "url": f"https://example.com/{slug}/{n}",
            "snippet": f"Snippet {n} about {query}.",
            "domain": "example.com",
            "publishedDate": 1_767_225_600_000 + n * 86_400_000,
        }
        for n in range(1, 4)
    ]


def search_text(script: Search, query: str) -> str:
    """The JSON text inside the `tools/call` result's one content part."""
    if script.fault is SearchFault.NO_RESULTS:
        return json.dumps({"totalResults": 0, "query": query})
    if script.fault is SearchFault.TEXT_ERROR:
        return json.dumps({"error": "search backend unavailable"})
    results = default_results(query) if script.results is None else list(script.results)
    return json.dumps({"results": results, "totalResults": len(results), "query": query})
