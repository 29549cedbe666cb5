"""Web-search results as the wire protocols carry them, both ways.

Anthropic's `web_search_result.encrypted_content` is opaque to clients; kirod puts the result's
snippet there, base64url-encoded behind a `kirod1.` prefix (readable, not secret: it is the search
engine's text), so a result a client sends back in its history can be read again. Search blocks
in history go upstream as plain text (Kiro has no such blocks): `history_text` renders them.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Final

_PREFIX: Final = "kirod1."


def seal_snippet(snippet: str) -> str:
    return _PREFIX + base64.urlsafe_b64encode(snippet.encode()).decode().rstrip("=")


def open_snippet(content: object) -> str:
    """The snippet of a result kirod made, or "" for anyone else's (or a damaged) blob."""
    if not isinstance(content, str) or not content.startswith(_PREFIX):
        return ""
    data = content[len(_PREFIX) :]
    try:
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return ""


def history_text(query: str | None, results: Iterable[tuple[str, str, str]]) -> str:
    """A search and its (url, title, snippet) results as one text for the model's history."""
    lines = [f"Web search: {query}" if query else "Web search results:"]
    for url, title, snippet in results:
        named = f"{title} <{url}>" if title and title != url else f"<{url}>"
        lines.append(f"- {named}" + (f": {snippet}" if snippet else ""))
    return "\n".join(lines)
