"""Web search through Kiro's MCP endpoint, for the hosted web-search tools clients declare.

Kiro runs no hosted tools in a chat, but its MCP endpoint answers `tools/call` of `web_search`
(docs/UPSTREAM.md §2.1). kirod uses it two ways:

- A search-only call (`WebSearch.query` set: Claude Code's WebSearch side call) is answered
  without a model turn: `answer_search` makes the whole message — the search call, its results,
  and a plain listing of them.
- Inside an ordinary turn the tool is declared to the model as a function tool (`SEARCH_TOOL`);
  when the model calls it, `WebSearchStep` runs the search, shows the call and its results to
  the client, and sends the results back to the model as the tool's result, so the turn goes on
  (`kirod.upstream.turn`), at most `max_uses` searches per request. Searches called beside the
  client's own tools are run and shown too, and the message ends for the client's calls.

Kiro's `web_search` refuses a query over 200 characters, and a blank one, with JSON-RPC `-32602`
(docs/UPSTREAM.md §2.1): a longer query is cut at a word boundary to fit (the cut is annotated on
the request's access-log line), a blank one is an `invalid_tool_input` result without a call.
A search that fails (MCP error, 403, timeout, malformed answer) is an `unavailable` result, not
a failed request: the client shows no links and the turn continues. An answer without results
(`{totalResults: 0}`, `{error: …}` inside the text) is an empty result. Results are filtered by
the tool's `allowed_domains` / `blocked_domains` and bounded in number and size.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import secrets
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import urlsplit

from kirod import log
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    MessageStart,
    MessageStop,
    SearchHit,
    SearchResults,
    ServerToolUse,
    StopReason,
    TextDelta,
    Usage,
)
from kirod.canonical.request import (
    Block,
    Message,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    WebSearch,
)
from kirod.canonical.token_count import estimate_text_tokens
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import UpstreamError, UpstreamProtocolError
from kirod.upstream.step import Next, Part

logger = logging.getLogger(__name__)

SEARCH_TIMEOUT_S: Final = 30.0
MAX_HITS: Final = 20
MAX_QUERY_CHARS: Final = 200  # Kiro's own limit (docs/UPSTREAM.md §2.1)
MAX_FIELD_CHARS: Final = 2000  # of a title, URL or snippet
KIRO_TOOL: Final = "web_search"  # the MCP tool kirod calls, with `{"query": …}`

SEARCH_TOOL: Final = ToolSpec(
    WebSearch.TOOL_NAME,
    "Searches the web. Returns the title, URL and a snippet of each result.",
    {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to search for."}},
        "required": ["query"],
    },
)
"""How a hosted web-search tool is declared to the model: kirod runs its calls."""


@dataclass(frozen=True, slots=True)
class Found:
    hits: tuple[SearchHit, ...] = ()
    error_code: str | None = None  # Anthropic's web_search_tool_result_error codes
    searched: bool = True  # whether Kiro was asked (a blank query is answered without a call)


def kiro_query(query: str) -> str:
    """`query` within Kiro's `MAX_QUERY_CHARS`: stripped, and cut at the last word boundary that
    fits (mid-word only when one word is longer than the limit)."""
    query = query.strip()
    if len(query) <= MAX_QUERY_CHARS:
        return query
    cut = query[:MAX_QUERY_CHARS]
    if not (query[MAX_QUERY_CHARS].isspace() or cut[-1].isspace()):  # the cut splits a word
        words = cut.rsplit(None, 1)
        if len(words) == 2:
            cut = words[0]
    return cut.rstrip()


async def search(
    client: KiroClient,
    account: UpstreamAccount,
    query: str,
    tool: WebSearch,
    *,
    timeout_s: float = SEARCH_TIMEOUT_S,
) -> Found:
    """Run one search; every failure is a `Found` with an error code, never an exception."""
    sent = kiro_query(query)
    if not sent:
        return Found(error_code="invalid_tool_input", searched=False)
    if len(sent) < len(query.strip()):
        log.annotate(web_search_query_cut=f"{len(query.strip())}>{len(sent)}")
    query = sent
    call = {
        "id": f"web_search_tooluse_{_token(22)}_{int(time.time() * 1000)}_{_token(8).lower()}",
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"name": KIRO_TOOL, "arguments": {"query": query}},
    }
    try:
        async with asyncio.timeout(timeout_s):
            answer = await client.mcp(account, call)
    except (UpstreamError, TimeoutError) as exc:
        failure = exc.failure.value if isinstance(exc, UpstreamError) else "timeout"
        log.event(logger, "web_search_failed", level=logging.WARNING, failure=failure)
        return Found(error_code="unavailable")
    hits = _hits(answer)
    if hits is None:
        log.event(logger, "web_search_failed", level=logging.WARNING, failure="bad_answer")
        return Found(error_code="unavailable")
    kept = tuple(hit for hit in hits if _allowed(hit.url, tool))[:MAX_HITS]
    return Found(kept)


async def listed_tool(client: KiroClient, account: UpstreamAccount) -> Mapping[str, Any] | None:
    """The entry of `KIRO_TOOL` in Kiro's MCP `tools/list` (docs/KIRO-PROTOCOL.md §6.4), None
    when the list does not name it; raises the `UpstreamError` of the call, and
    `UpstreamProtocolError` when the answer is not a tool list."""
    answer = await client.mcp(
        account, {"id": "tools-list", "jsonrpc": "2.0", "method": "tools/list"}
    )
    result = answer.get("result")
    tools = result.get("tools") if isinstance(result, dict) else None
    if answer.get("error") is not None or not isinstance(tools, list):
        raise UpstreamProtocolError("Kiro's MCP answered tools/list without a tool list")
    return next(
        (tool for tool in tools if isinstance(tool, dict) and tool.get("name") == KIRO_TOOL), None
    )


def _hits(answer: Mapping[str, Any]) -> tuple[SearchHit, ...] | None:
    """The results of a JSON-RPC answer; None when it is an error or not the expected shape."""
    result = answer.get("result")
    if answer.get("error") is not None or not isinstance(result, dict) or result.get("isError"):
        return None
    content = result.get("content")
    if not isinstance(content, list):
        return None
    hits: list[SearchHit] = []
    for part in content:
        text = part.get("text") if isinstance(part, dict) else None
        if not isinstance(text, str):
            continue
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            return None
        found = document.get("results") if isinstance(document, dict) else None
        for entry in found if isinstance(found, list) else ():  # no `results`: nothing found
            if hit := _hit(entry):
                hits.append(hit)
            if len(hits) >= MAX_HITS * 4:
                break
    return tuple(hits)


def _hit(entry: object) -> SearchHit | None:
    if not isinstance(entry, dict):
        return None
    url, title = entry.get("url"), entry.get("title")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        return None
    snippet = entry.get("snippet")
    return SearchHit(
        url=url[:MAX_FIELD_CHARS],
        title=(title if isinstance(title, str) and title else url)[:MAX_FIELD_CHARS],
        snippet=snippet[:MAX_FIELD_CHARS] if isinstance(snippet, str) else "",
        page_age=_page_age(entry.get("publishedDate")),
    )


def _page_age(published: object) -> str | None:
    """`publishedDate` (epoch milliseconds) as Anthropic shows page ages: "March 5, 2026"."""
    if not isinstance(published, int | float) or isinstance(published, bool):
        return None
    try:
        when = datetime.fromtimestamp(published / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return f"{when:%B} {when.day}, {when.year}"


def _allowed(url: str, tool: WebSearch) -> bool:
    host = (urlsplit(url).hostname or "").lower()

    def within(domain: str) -> bool:
        domain = domain.lower().strip(".")
        return host == domain or host.endswith("." + domain)

    if tool.allowed_domains and not any(within(d) for d in tool.allowed_domains):
        return False
    return not any(within(d) for d in tool.blocked_domains)


def _token(size: int) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(size))


def server_tool_use_id() -> str:
    return f"srvtoolu_{_token(24)}"


def result_text(found: Found) -> str:
    """The search's outcome as the model reads it in the tool result: the data, no prose."""
    if found.error_code is not None:
        return json.dumps({"error": found.error_code})
    results = [
        {"title": hit.title, "url": hit.url, "snippet": hit.snippet, "page_age": hit.page_age}
        for hit in found.hits
    ]
    return json.dumps({"results": results}, ensure_ascii=False)


def listing(query: str, found: Found) -> str:
    """The plain listing that ends a search-only answer (gateway-made: facts, no claims)."""
    if found.error_code is not None:
        return f'The web search for "{query}" could not be run ({found.error_code}).'
    if not found.hits:
        return f'The web search for "{query}" found no results.'
    lines = [f'Web search results for "{query}":']
    lines += [f"{n}. {hit.title} — {hit.url}" for n, hit in enumerate(found.hits, 1)]
    return "\n".join(lines)


async def answer_search(
    client: KiroClient,
    account: UpstreamAccount,
    tool: WebSearch,
    *,
    message_id: str,
    model_name: str,
    input_tokens: int,
) -> list[CanonicalEvent]:
    """The whole message answering a search-only call (module docstring)."""
    assert tool.query is not None
    found = await search(client, account, tool.query, tool) if tool.max_uses > 0 else None
    found = found or Found(error_code="max_uses_exceeded", searched=False)
    use_id = server_tool_use_id()
    text = listing(tool.query, found)
    searched = int(found.searched)
    return [
        MessageStart(message_id, model_name, input_tokens),
        ServerToolUse(0, use_id, WebSearch.TOOL_NAME, tool.query),
        SearchResults(1, use_id, found.hits, found.error_code),
        BlockStart(2, BlockKind.TEXT),
        TextDelta(2, text),
        BlockStop(2),
        Usage(input_tokens, estimate_text_tokens(text), web_search_requests=searched),
        MessageStop(StopReason.END_TURN),
    ]


class WebSearchStep:
    """Runs the searches the model asks for inside a turn (module docstring)."""

    def __init__(self, client: KiroClient, account: UpstreamAccount, tool: WebSearch) -> None:
        self._client = client
        self._account = account
        self._tool = tool
        self._uses = 0

    async def after(self, part: Part) -> Next | None:
        if part.error is not None:
            return None
        content = part.completion.content
        calls = [b for b in content if isinstance(b, ToolUseBlock) and b.name == SEARCH_TOOL.name]
        if not calls:
            return None
        shown, results = await self._run(calls)
        if len(calls) != sum(isinstance(b, ToolUseBlock) for b in content):
            # Beside a call of the client's own tools the turn is the client's to continue: it
            # sees the searches, and sends them back in its history (carried as text).
            return Next(None, tuple(shown))
        asked = Message(Role.ASSISTANT, _replayable(content))
        messages = (*part.request.messages, asked, Message(Role.USER, tuple(results)))
        return Next(dataclasses.replace(part.request, messages=messages), tuple(shown))

    async def _run(self, calls: Sequence[ToolUseBlock]) -> tuple[list[CanonicalEvent], list[Block]]:
        """The searches of `calls` (within `max_uses`): the blocks shown, the tool results."""
        shown: list[CanonicalEvent] = []
        results: list[Block] = []
        searched = 0
        for call in calls:
            query = call.input.get("query")
            query = query if isinstance(query, str) else ""
            if self._uses >= self._tool.max_uses:
                found = Found(error_code="max_uses_exceeded", searched=False)
            else:
                self._uses += 1
                found = await search(self._client, self._account, query, self._tool)
                searched += found.searched
            use_id = server_tool_use_id()
            index = len(shown)
            shown += [
                ServerToolUse(index, use_id, WebSearch.TOOL_NAME, query),
                SearchResults(index + 1, use_id, found.hits, found.error_code),
            ]
            text = TextBlock(result_text(found))
            results.append(ToolResultBlock(call.id, (text,), is_error=found.error_code is not None))
        shown.append(Usage(0, 0, web_search_requests=searched))
        return shown, results


def _replayable(content: Sequence[object]) -> tuple[Block, ...]:
    replay: list[Block] = []
    for block in content:
        if isinstance(block, TextBlock | ThinkingBlock | RedactedThinkingBlock | ToolUseBlock):
            replay.append(block)
    return tuple(replay)
