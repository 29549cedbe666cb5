"""The conversation key of a Gemini CLI session, which names none over the Gemini API.

Gemini CLI 0.61.0 sends its session id only to Google's Code Assist backend: with an API key its
requests carry no session header and no session field (`tests/clients/captures/
gemini-cli-0.61.0-default.json`). What it does keep is the first user turn of every main call: its
`<session_context>` (the date, the workspace folders and their listing) with the session's first
prompt, until it compresses the history. The digest of that turn keys the conversation, so its
turns stay on one account and one Kiro conversation as other clients' session headers keep
theirs. Only streamed calls are keyed: Gemini CLI's main turns are streamed, while its side calls
(the router, web search, summaries) are not and may repeat the same first turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Final

SESSION_CONTEXT: Final = "<session_context>"
PREFIX: Final = "gemini-cli:"


def conversation_key(body: object) -> str | None:
    """`gemini-cli:<sha256 of the first content>` when it is Gemini CLI's session context."""
    contents = body.get("contents") if isinstance(body, Mapping) else None
    if not isinstance(contents, list) or not contents or not isinstance(contents[0], Mapping):
        return None
    first = contents[0]
    parts = first.get("parts")
    if first.get("role") != "user" or not isinstance(parts, list) or not parts:
        return None
    text = parts[0].get("text") if isinstance(parts[0], Mapping) else None
    if not isinstance(text, str) or not text.startswith(SESSION_CONTEXT):
        return None
    canonical = json.dumps(first, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return PREFIX + hashlib.sha256(canonical.encode()).hexdigest()
