"""The window Kiro really has, through the real daemon and the official SDKs: GPT-5.6 is listed
at 272 000 but its percentages are of 1 000 000 on most accounts (docs/KIRO-PROTOCOL.md §6.2).
kirod learns that per account after a few answers, and from then on reports the real input
(Responses and Messages `usage`), a 1M-based limit on `/v1/models` and in `kiroctl models`, and
remembers it across a restart, and tells a prompt too long by it; an account still at 272K
learns nothing; with two accounts each learns its own."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from click.testing import CliRunner

from kirod.accounts.windows import STREAK
from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Model, ThreadedFake
from kirod.testing.fake_kiro.validate import estimate_tokens
from tests.support.kiro_env import import_account, start_daemon

MODEL = "gpt-5.6-sol"
LISTED = 272_000
SENTENCE = "The quick brown fox jumps over the lazy dog near the quiet river bank. "
FILLER = SENTENCE * 1_200  # about 17 000 tokens by either count


@pytest.fixture
def service(fake: ThreadedFake) -> FakeKiro:
    fake.fake.clear_scripts()
    fake.fake.clear_requests()
    return fake.fake


def ask(gpt: openai.OpenAI, n: int) -> int:
    """One Responses request (a different prompt each time); the input tokens kirod reported."""
    response = gpt.responses.create(model=MODEL, input=f"Question {n}. {FILLER}")
    assert response.usage is not None
    return response.usage.input_tokens


def real_input(service: FakeKiro) -> int:
    """The fake's count of its last chat's prompt (its percentage adds the short echo answer)."""
    return estimate_tokens(service.requests("chat")[-1].json["conversationState"])


def openai_client(proc: DaemonProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proc.base_url}/v1", api_key=proc.api_key, max_retries=0)


def kiroctl_listing(proc: DaemonProcess) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli, ["--socket", str(proc.socket_path), "models", "--json"])
    assert result.exit_code == 0, result.output
    models: list[dict[str, Any]] = json.loads(result.output)["models"]
    return models


def kiroctl_models(proc: DaemonProcess) -> dict[str, Any]:
    [row] = [row for row in kiroctl_listing(proc) if row["kiro_id"] == MODEL]
    return row


def listed_limit(gpt: openai.OpenAI) -> int:
    model = gpt.models.retrieve(MODEL)
    limit = (model.model_extra or {})["context_window"]
    assert isinstance(limit, int)
    return limit


def near(reported: int, real: int) -> bool:
    """Within 2 % (the answer's few tokens, which the percentage also counts)."""
    return abs(reported - real) <= 0.02 * real


def test_a_1m_account_learns_its_window_and_keeps_it_across_a_restart(
    fake: ThreadedFake, service: FakeKiro, short_tmp: Path
) -> None:
    proc = start_daemon(short_tmp, fake)
    account = import_account(proc, service.issue_social_account())
    try:
        with openai_client(proc) as gpt:
            before = [ask(gpt, n) for n in range(STREAK)]
            real = real_input(service)
            # Multiplied by the listed 272 000: 3.68x too few, until the window is learned.
            assert all(tokens < real / 3 for tokens in before)
            assert near(ask(gpt, STREAK), real_input(service))
            assert listed_limit(gpt) == 872_000  # 1M less the 128 000 output (the probe's)
        row = kiroctl_models(proc)
        assert (row["listed_window"], row["context_window"]) == (LISTED, 872_000)
        assert [(w["account"], w["window"]) for w in row["learned_windows"]] == [
            (account["id"], 1_000_000)
        ]
        table = CliRunner().invoke(cli, ["--socket", str(proc.socket_path), "models"]).output
        assert "1,000,000 (1/1)" in table
        assert proc.stop() == 0

        again = start_daemon(short_tmp, fake)
        try:
            with openai_client(again) as gpt:
                assert near(ask(gpt, 100), real_input(service))  # the first one after restart
                assert listed_limit(gpt) == 872_000
            with anthropic.Anthropic(
                base_url=again.base_url, api_key=again.api_key, max_retries=0
            ) as claude:
                message = claude.messages.create(
                    model=MODEL,
                    max_tokens=100,
                    messages=[{"role": "user", "content": f"Once more. {FILLER}"}],
                )
                assert near(message.usage.input_tokens, real_input(service))
        finally:
            assert again.stop() == 0
    finally:
        proc.kill()


def test_an_account_still_at_272k_learns_nothing(
    fake: ThreadedFake, service: FakeKiro, short_tmp: Path
) -> None:
    proc = start_daemon(short_tmp, fake)
    tokens = service.issue_social_account()
    service.set_listed_windows(tokens.account_id)
    import_account(proc, tokens)
    try:
        with openai_client(proc) as gpt:
            for n in range(STREAK + 2):
                assert near(ask(gpt, n), real_input(service))
            assert listed_limit(gpt) == LISTED
        row = kiroctl_models(proc)
        assert (row["listed_window"], row["context_window"], row["learned_windows"]) == (
            LISTED,
            LISTED,
            [],
        )
    finally:
        assert proc.stop() == 0


def test_two_accounts_each_learn_their_own(
    fake: ThreadedFake, service: FakeKiro, short_tmp: Path
) -> None:
    proc = start_daemon(short_tmp, fake, {"KIROD_ACCOUNT_SELECTION_STRATEGY": "round-robin"})
    wide, narrow = service.issue_social_account(), service.issue_social_account()
    service.set_listed_windows(narrow.account_id)
    ids = {tokens.account_id: import_account(proc, tokens)["id"] for tokens in (wide, narrow)}
    try:
        with openai_client(proc) as gpt:
            served: dict[str, list[bool]] = {wide.account_id: [], narrow.account_id: []}
            n = 0
            while min(len(answers) for answers in served.values()) < STREAK + 1 and n < 20:
                reported = ask(gpt, n)
                last = service.requests("chat")[-1]
                served[str(last.account_id)].append(near(reported, real_input(service)))
                n += 1
            # The 1M account is under-reported until it has answered STREAK times, then right;
            # the 272K one is right all along.
            assert served[wide.account_id][:STREAK] == [False] * STREAK
            assert all(served[wide.account_id][STREAK:])
            assert all(served[narrow.account_id])
            # A client budgets by the limit every account that may serve it takes.
            assert listed_limit(gpt) == LISTED
        row = kiroctl_models(proc)
        assert [(w["account"], w["window"]) for w in row["learned_windows"]] == [
            (ids[wide.account_id], 1_000_000)
        ]
    finally:
        assert proc.stop() == 0


def test_the_too_long_answer_names_the_learned_limit(
    fake: ThreadedFake, service: FakeKiro, short_tmp: Path
) -> None:
    # A Claude model whose listing, like GPT-5.6's, says less than the account has: listed at
    # 10 000, a 50 000 window, prompts to 45 000 (small enough for the fake's body limit).
    service.set_model(
        Model("claude-sonnet-4.5", "Claude Sonnet 4.5", 10_000, 5_000, 1.3, window=50_000)
    )
    proc = start_daemon(short_tmp, fake)
    import_account(proc, service.issue_social_account())
    try:
        with anthropic.Anthropic(
            base_url=proc.base_url, api_key=proc.api_key, max_retries=0
        ) as claude:
            for n in range(STREAK):
                claude.messages.create(
                    model="claude-sonnet-4-5",
                    max_tokens=100,
                    messages=[{"role": "user", "content": f"Question {n}. {FILLER}"}],
                )
            with pytest.raises(anthropic.BadRequestError) as refused:
                claude.messages.create(
                    model="claude-sonnet-4-5",
                    max_tokens=100,
                    messages=[{"role": "user", "content": FILLER * 3}],
                )
        [row] = [r for r in kiroctl_listing(proc) if r["kiro_id"] == "claude-sonnet-4.5"]
        limit = row["context_window"]
        # The learned window (about 50 000, by kirod's estimate) less the 5 000 output.
        assert 30_000 <= limit <= 45_000
        assert refused.value.status_code == 400
        assert "prompt is too long: " in refused.value.message
        assert f"tokens > {limit} maximum" in refused.value.message
    finally:
        assert proc.stop() == 0


def test_a_window_that_shrinks_back_is_noticed(
    fake: ThreadedFake, service: FakeKiro, short_tmp: Path
) -> None:
    proc = start_daemon(short_tmp, fake)
    tokens = service.issue_social_account()
    import_account(proc, tokens)
    database = proc.state_dir / "kirod.db"
    try:
        with openai_client(proc) as gpt:
            for n in range(STREAK):
                ask(gpt, n)
            assert kiroctl_models(proc)["learned_windows"]
            service.set_listed_windows(tokens.account_id)  # Kiro takes the 1M window back
            after = [ask(gpt, n) for n in range(STREAK, 2 * STREAK + 1)]
            # Over-reported 3.68x until the streak is complete, then right again.
            assert all(reported > 3 * real_input(service) for reported in after[:STREAK])
            assert near(after[STREAK], real_input(service))
            assert listed_limit(gpt) == LISTED
        assert kiroctl_models(proc)["learned_windows"] == []
    finally:
        assert proc.stop() == 0
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT count(*) FROM model_windows").fetchone() == (0,)
