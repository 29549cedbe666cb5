"""The conversation key for account affinity, and the request's `metadata`.

Claude Code names its session (and subagent) in headers, SDK users carry it in
`metadata.user_id`, opencode sends `x-session-affinity`: only such explicit inputs make a key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from kirod.protocols.anthropic.checks import check, invalid

MAX_USER_ID_CHARS: Final = 256

_SESSION_HEADER: Final = "x-claude-code-session-id"
_AGENT_HEADER: Final = "x-claude-code-agent-id"
_AFFINITY_HEADERS: Final = ("x-session-affinity", "x-session-id")


def affinity_key(headers: Mapping[str, str], metadata: object) -> str | None:
    """The conversation key for account stickiness, from the headers clients send.

    Claude Code: its session id, joined with the agent id for subagents, else the session id in
    `metadata.user_id` (SDK users without the header); opencode: `x-session-affinity`, else
    `x-session-id`. Header names match case-insensitively.
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    session = lowered.get(_SESSION_HEADER)
    if session:
        agent = lowered.get(_AGENT_HEADER)
        return f"{session}:{agent}" if agent else session
    for name in _AFFINITY_HEADERS:
        if value := lowered.get(name):
            return value
    user_id = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    return _user_id_session(user_id) if isinstance(user_id, str) else None


def _user_id_session(user_id: str) -> str | None:
    """The session id in Claude Code's `metadata.user_id`: a JSON object's `session_id`
    (2.1.x) or the `…_session_<uuid>` suffix of the older `user_…_account_…_session_…` form."""
    try:
        parsed = json.loads(user_id)
    except (ValueError, RecursionError):
        _, found, session = user_id.rpartition("_session_")
        return session if found and session else None
    value = parsed.get("session_id") if isinstance(parsed, dict) else None
    return value if isinstance(value, str) and value else None


def request_metadata(value: object) -> dict[str, str]:
    """The `metadata` kept with the request: its `user_id`, bounded."""
    if value is None:
        return {}
    user_id = check.mapping(value, "metadata").get("user_id")
    if user_id is None:
        return {}
    if len(check.text(user_id, "metadata.user_id")) > MAX_USER_ID_CHARS:
        raise invalid("metadata.user_id", f"must be at most {MAX_USER_ID_CHARS} characters")
    return {"user_id": user_id}
