"""Who may use the console: one-time links minted over the control socket, and the sessions
they open.

Only someone who can reach the 0600 control socket can mint a link (`kiroctl console`), so the
console trusts exactly whom the control API trusts. A link's token is single use and short
lived; it buys a session whose id lives in an HttpOnly cookie and whose CSRF token lives in the
page. Everything is in memory: a daemon restart revokes every link and session.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

LINK_TTL_S = 60.0
MAX_LINKS = 16  # links minted and not yet used; the oldest goes first
MAX_SESSIONS = 32  # open sessions; the least recently used goes first
MAX_STREAMS_PER_SESSION = 4  # live-update streams one session may hold open (tabs)


@dataclass
class Session:
    id: str
    csrf: str
    created_at: float
    last_seen: float
    streams: int = 0


@dataclass
class ConsoleSessions:
    idle_s: float
    clock: Callable[[], float] = time.monotonic
    _links: dict[str, float] = field(default_factory=dict)  # token → expiry
    _sessions: dict[str, Session] = field(default_factory=dict)

    def mint(self) -> str:
        """A new single-use token, good for `LINK_TTL_S`."""
        now = self.clock()
        self._expire(now)
        while len(self._links) >= MAX_LINKS:
            del self._links[next(iter(self._links))]
        token = secrets.token_urlsafe(24)
        self._links[token] = now + LINK_TTL_S
        return token

    def redeem(self, token: str) -> Session | None:
        """Open a session for `token` and spend it; None when it is unknown, used or expired."""
        now = self.clock()
        self._expire(now)
        found = next((t for t in self._links if hmac.compare_digest(t, token)), None)
        if found is None:
            return None
        del self._links[found]
        while len(self._sessions) >= MAX_SESSIONS:
            oldest = min(self._sessions.values(), key=lambda s: s.last_seen)
            del self._sessions[oldest.id]
        session = Session(secrets.token_urlsafe(24), secrets.token_urlsafe(24), now, now)
        self._sessions[session.id] = session
        return session

    def find(self, session_id: str) -> Session | None:
        """The live session with this id, its idle clock restarted; None when gone."""
        now = self.clock()
        self._expire(now)
        session = self._sessions.get(session_id)
        if session is not None:
            session.last_seen = now
        return session

    def end(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def _expire(self, now: float) -> None:
        for token in [t for t, until in self._links.items() if until <= now]:
            del self._links[token]
        # A session with a live stream is in use, however long since its last request.
        idle = [
            s.id
            for s in self._sessions.values()
            if not s.streams and s.last_seen + self.idle_s <= now
        ]
        for session_id in idle:
            del self._sessions[session_id]
