"""The hosted web search, which kirod runs: its tool declaration and its items, both ways.

A top-level `web_search` tool (also `web_search_preview`) is run by kirod inside the turn through
Kiro's MCP search (`kirod.upstream.websearch`) and shown as `web_search_call` items; such items
sent back in the input go upstream as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kirod.canonical.events import SearchHit
from kirod.canonical.request import TextBlock, WebSearch
from kirod.protocols.fields import invalid
from kirod.protocols.search import history_text

WEB_SEARCH_TYPES: Final = frozenset({"web_search", "web_search_preview", "web_search_2025_08_26"})


def web_search_tool(tool: Mapping[str, Any], path: str) -> WebSearch:
    """The hosted web search: `filters.allowed_domains` honoured; `user_location`,
    `search_context_size` and Codex's `external_web_access` accepted without effect."""
    filters = tool.get("filters")
    allowed: list[str] = []
    if isinstance(filters, Mapping) and isinstance(filters.get("allowed_domains"), list):
        for index, domain in enumerate(filters["allowed_domains"][:100]):
            if not isinstance(domain, str) or not domain:
                raise invalid(f"{path}.filters.allowed_domains[{index}]", "must be a domain")
            allowed.append(domain)
    return WebSearch(allowed_domains=tuple(allowed))


def search_history(item: Mapping[str, Any]) -> TextBlock:
    """A web search of an earlier turn, as text: Kiro has no search items (`history_text`)."""
    action = item.get("action")
    action = action if isinstance(action, Mapping) else {}
    query = action.get("query")
    sources = action.get("sources")
    urls = [
        (source["url"], source["url"], "")
        for source in (sources if isinstance(sources, list) else [])[:100]
        if isinstance(source, Mapping) and isinstance(source.get("url"), str)
    ]
    return TextBlock(history_text(query if isinstance(query, str) else None, urls))


def web_search_item(ws_id: str, query: str, status: str) -> dict[str, Any]:
    return {
        "id": ws_id,
        "type": "web_search_call",
        "status": status,
        "action": {"type": "search", "query": query},
    }


def web_search_done(
    item: Mapping[str, Any], hits: tuple[SearchHit, ...], error_code: str | None
) -> dict[str, Any]:
    """The search item once its results are in: completed with its sources, or failed."""
    action = {**item["action"], "sources": [{"type": "url", "url": hit.url} for hit in hits]}
    return {**item, "status": "failed" if error_code else "completed", "action": action}
