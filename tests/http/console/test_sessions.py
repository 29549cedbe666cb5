"""One-time links and console sessions, on an injected clock: single use, expiry, idle ends,
bounds, and a session with a live page that does not go idle."""

from __future__ import annotations

from kirod.http.console.sessions import (
    LINK_TTL_S,
    MAX_LINKS,
    MAX_SESSIONS,
    ConsoleSessions,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sessions(idle_s: float = 600.0) -> tuple[ConsoleSessions, Clock]:
    clock = Clock()
    return ConsoleSessions(idle_s, clock=clock), clock


def test_a_link_opens_one_session_once() -> None:
    store, _ = sessions()
    token = store.mint()
    session = store.redeem(token)
    assert session is not None
    assert session.id != token
    assert session.csrf not in (token, session.id)
    assert store.redeem(token) is None
    assert store.find(session.id) is session


def test_a_link_expires_after_its_minute() -> None:
    store, clock = sessions()
    token = store.mint()
    clock.now += LINK_TTL_S
    assert store.redeem(token) is None


def test_an_unknown_or_empty_token_opens_nothing() -> None:
    store, _ = sessions()
    store.mint()
    assert store.redeem("") is None
    assert store.redeem("x" * 32) is None


def test_a_session_ends_when_idle_unless_a_live_page_holds_it() -> None:
    store, clock = sessions(idle_s=60)
    kept, idle = store.redeem(store.mint()), store.redeem(store.mint())
    assert kept is not None
    assert idle is not None
    kept.streams = 1
    clock.now += 59
    assert store.find(idle.id) is idle  # a request restarts the idle clock
    clock.now += 59
    assert store.find(idle.id) is idle
    clock.now += 60
    assert store.find(idle.id) is None
    assert store.find(kept.id) is kept
    kept.streams = 0
    clock.now += 60
    assert store.find(kept.id) is None


def test_links_and_sessions_are_bounded_oldest_out_first() -> None:
    store, clock = sessions()
    tokens = [store.mint() for _ in range(MAX_LINKS + 1)]
    assert store.redeem(tokens[0]) is None  # pushed out by the newest
    opened = []
    for _ in range(MAX_SESSIONS + 1):
        clock.now += 1
        session = store.redeem(store.mint())
        assert session is not None
        opened.append(session)
    assert store.find(opened[0].id) is None  # the least recently used went
    assert store.find(opened[-1].id) is opened[-1]


def test_signing_out_ends_the_session() -> None:
    store, _ = sessions()
    session = store.redeem(store.mint())
    assert session is not None
    store.end(session.id)
    assert store.find(session.id) is None
    store.end(session.id)  # twice is harmless
