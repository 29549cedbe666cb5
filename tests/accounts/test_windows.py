"""The per-(account, model) window learner (`kirod.accounts.windows`): what Kiro's percentages
must say, how often, before a window is taken; how it is rounded; that it shrinks back; and that
an account at its listed window learns nothing (docs/KIRO-PROTOCOL.md §6.2)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kirod.accounts.windows import STREAK, WindowLearner, rounded
from kirod.drift import Drift, Kind
from kirod.log import FIELDS_ATTR
from kirod.storage.db import Database
from kirod.storage.windows import WindowStore

LISTED = 272_000
TOKENS = 50_000  # kirod's estimate of one request, prompt and answer


def percentage(window: int, tokens: int = TOKENS, error: float = 1.0) -> float:
    """Kiro's percentage of `window` for a request whose real size is `tokens` x `error`."""
    return round(100 * tokens * error / window, 4)


async def observe(
    learner: WindowLearner, pct: float, *, account: str = "a1", in_use: int = LISTED
) -> int | None:
    return await learner.observe(
        account,
        "gpt-5.6-sol",
        listed=LISTED,
        in_use=in_use,
        percentage=pct,
        estimated_tokens=TOKENS,
    )


async def test_a_1m_window_is_learned_after_a_streak_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    learner = WindowLearner()
    caplog.set_level(logging.INFO, "kirod.accounts.windows")
    # Kiro's tokenizer counts 10-30 % more than kirod's estimate: still a 1M window.
    for error in (1.1, 1.3)[: STREAK - 1]:
        assert await observe(learner, percentage(1_000_000, error=error)) is None
        assert learner.window("a1", "gpt-5.6-sol") is None
    assert await observe(learner, percentage(1_000_000, error=1.2)) == 1_000_000
    assert learner.window("a1", "gpt-5.6-sol") == 1_000_000
    assert learner.window("a2", "gpt-5.6-sol") is None  # the account's own fact
    [record] = [r for r in caplog.records if r.msg == "context_window_learned"]
    fields = getattr(record, FIELDS_ATTR)
    assert (fields["account"], fields["model"]) == ("a1", "gpt-5.6-sol")
    assert (fields["listed"], fields["learned"]) == (LISTED, 1_000_000)


async def test_an_account_at_the_listed_window_learns_nothing() -> None:
    learner = WindowLearner()
    for error in (0.6, 1.0, 1.6, 1.9, 0.55, 1.2):  # within the estimate's 2x either way
        assert await observe(learner, percentage(LISTED, error=error)) is None
    assert learner.window("a1", "gpt-5.6-sol") is None


async def test_an_agreeing_answer_breaks_the_streak() -> None:
    learner = WindowLearner()
    for _ in range(STREAK - 1):
        await observe(learner, percentage(1_000_000))
    await observe(learner, percentage(LISTED))
    for _ in range(STREAK - 1):
        assert await observe(learner, percentage(1_000_000)) is None
    assert await observe(learner, percentage(1_000_000)) == 1_000_000


async def test_small_requests_do_not_count() -> None:
    learner = WindowLearner()
    for _ in range(STREAK + 2):
        await learner.observe(
            "a1", "m", listed=LISTED, in_use=LISTED, percentage=0.1, estimated_tokens=1_000
        )
    assert learner.window("a1", "m") is None


async def test_a_window_that_shrinks_back_is_the_listed_one_again() -> None:
    learner = WindowLearner()
    for _ in range(STREAK):
        await observe(learner, percentage(1_000_000))
    assert learner.window("a1", "gpt-5.6-sol") == 1_000_000
    for _ in range(STREAK - 1):
        assert await observe(learner, percentage(LISTED), in_use=1_000_000) is None
    assert await observe(learner, percentage(LISTED), in_use=1_000_000) == LISTED
    assert learner.window("a1", "gpt-5.6-sol") is None


@pytest.mark.parametrize(
    ("implied", "window"),
    [
        (300_000, LISTED),  # within the estimate's error of the listing
        (880_000, 1_000_000),  # near a known size
        (1_200_000, 1_000_000),
        (700_000, 700_000),  # near none: two significant figures
        (3_456_789, 3_500_000),
    ],
)
def test_rounding(implied: int, window: int) -> None:
    assert rounded(implied, LISTED) == window


async def test_learned_windows_survive_in_the_store(short_tmp: Path) -> None:
    async with Database(short_tmp / "kirod.db") as db:
        learner = WindowLearner(WindowStore(db))
        for _ in range(STREAK):
            await observe(learner, percentage(1_000_000))
    async with Database(short_tmp / "kirod.db") as db:
        again = WindowLearner(WindowStore(db))
        await again.load()
        assert again.window("a1", "gpt-5.6-sol") == 1_000_000
        [kept] = again.learned()
        assert (kept.listed, kept.window) == (LISTED, 1_000_000)
        for _ in range(STREAK):
            await observe(again, percentage(LISTED), in_use=1_000_000)
    async with Database(short_tmp / "kirod.db") as db:
        last = WindowLearner(WindowStore(db))
        await last.load()
        assert last.learned() == ()


async def _learn(learner: WindowLearner, kiro_id: str, listed: int, window: int) -> int | None:
    learned = None
    for _ in range(STREAK):
        learned = await learner.observe(
            "a1",
            kiro_id,
            listed=listed,
            in_use=listed,
            percentage=percentage(window),
            estimated_tokens=TOKENS,
        )
    return learned


async def test_a_window_kiro_moved_unannounced_is_drift_and_followed() -> None:
    drift = Drift(clock=lambda: 1_796_342_400.0)
    learner = WindowLearner(drift=drift)
    assert await _learn(learner, "claude-sonnet-4.5", 200_000, 1_000_000) == 1_000_000
    assert learner.window("a1", "claude-sonnet-4.5") == 1_000_000
    [record] = drift.pending()
    assert (record.kind, record.where, record.count) == (
        Kind.WINDOW,
        "generateAssistantResponse",
        1,
    )
    assert dict(record.shape) == {
        "learned": "1000000",
        "listed": "200000",
        "model": "claude-sonnet-4.5",
    }


async def test_gpt_5_6_at_1m_is_the_known_rollout_not_drift() -> None:
    drift = Drift()
    learner = WindowLearner(drift=drift)
    assert await _learn(learner, "gpt-5.6-sol", LISTED, 1_000_000) == 1_000_000
    assert drift.pending() == []
    # Beyond the known rollout, the same model's window is drift again.
    assert await _learn(learner, "gpt-5.6-terra", LISTED, 2_000_000) == 2_000_000
    assert [dict(r.shape)["model"] for r in drift.pending()] == ["gpt-5.6-terra"]


async def test_a_window_back_at_the_listed_one_is_no_drift() -> None:
    drift = Drift()
    learner = WindowLearner(drift=drift)
    await _learn(learner, "gpt-5.6-sol", LISTED, 1_000_000)
    assert await _learn_back(learner) == LISTED
    assert drift.pending() == []


async def _learn_back(learner: WindowLearner) -> int | None:
    learned = None
    for _ in range(STREAK):
        learned = await learner.observe(
            "a1",
            "gpt-5.6-sol",
            listed=LISTED,
            in_use=1_000_000,
            percentage=percentage(LISTED),
            estimated_tokens=TOKENS,
        )
    return learned
