"""Three accounts behind the real daemon: Claude Code's session header keeps a conversation on one
account and Kiro conversation, failover rotates both, and nothing is replayed once streaming began.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Fault, Reply, Script, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
SESSION_HEADER = "x-claude-code-session-id"


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake) -> Iterator[DaemonProcess]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    proc = start_daemon(
        root,
        fake,
        {"KIROD_ACCOUNT_SELECTION_STRATEGY": "round-robin"},
    )
    for _ in range(3):
        import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        assert proc.stop() == 0
        shutil.rmtree(root, ignore_errors=True)


def ask(claude: anthropic.Anthropic, session: str | None = None) -> str:
    headers = {SESSION_HEADER: session} if session else {}
    message = claude.messages.create(
        model=MODEL,
        max_tokens=50,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers=headers,
    )
    return message.content[0].text  # type: ignore[union-attr]


def served(service: FakeKiro) -> list[tuple[str | None, str]]:
    """(fake account, Kiro conversation id) of each chat, in order."""
    out = []
    for chat in service.requests("chat"):
        body: Any = chat.json
        out.append((chat.account_id, body["conversationState"]["conversationId"]))
    return out


def test_a_session_stays_on_its_account_and_rotates_on_failover(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    for _ in range(3):
        ask(claude, "session-1")
        ask(claude)
    chats = served(service)
    bound = {chats[i] for i in (0, 2, 4)}
    assert len(bound) == 1  # one account, one conversation id
    assert len({account for account, _ in chats}) == 3  # the others kept rotating
    [(account, conversation)] = bound

    service.clear_requests()
    service.enqueue(Script(fault=Fault.THROTTLE_429, retry_after_s=1), account_id=account)
    ask(claude, "session-1")
    ask(claude, "session-1")
    throttled, moved, stayed = served(service)
    assert throttled == (account, conversation)
    assert moved[0] != account
    assert moved[1] != conversation  # the binding and the conversation rotated together
    assert stayed == moved


def test_failover_is_invisible_to_the_client(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    service.enqueue(Script(fault=Fault.THROTTLE_429, retry_after_s=1))
    service.enqueue(Reply(text="from another account"))
    assert ask(claude) == "from another account"
    first, second = served(service)
    assert first[0] != second[0]


def test_no_replay_after_the_first_byte(claude: anthropic.Anthropic, service: FakeKiro) -> None:
    service.enqueue(
        Script(reply=Reply(text="partial answer " * 5), fault=Fault.MIDSTREAM_EXCEPTION, fault_at=3)
    )
    received: list[str] = []
    with (
        pytest.raises(anthropic.APIStatusError),
        claude.messages.stream(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "x"}]
        ) as stream,
    ):
        received.extend(stream.text_stream)
    assert "".join(received).startswith("partial")
    assert len(service.requests("chat")) == 1
