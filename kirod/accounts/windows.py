"""The context window each account really has for each model, learned from Kiro's percentages.

ListAvailableModels lists a window per model, but the one Kiro measures against can differ by
account: GPT-5.6 is listed at 272 000 and has 1 000 000 on the accounts its rollout reached,
others still 272 000 (docs/KIRO-PROTOCOL.md §6.2). Every answer's `contextUsagePercentage` is
of the real window, so with kirod's own estimate of the same request's tokens (prompt and
answer: docs/KIRO-PROTOCOL.md §3.5) it implies that window:

    implied = estimated tokens x 100 / percentage

The estimate is good to about 2x on odd text (`kirod.canonical.token_count`, and Kiro adds a
hidden prompt of its own), so one answer proves nothing. When `STREAK` answers in a row on the
account imply a window more than `DISAGREEMENT`x away from the one in use, the account's window
becomes their median, rounded (`rounded`): the listed one when within `DISAGREEMENT` of it (a
window that shrank back), else a size Kiro uses when within `SNAP` of one, else two significant
figures. An answer that agrees breaks the streak; small requests (`MIN_TOKENS`), where the hidden
prompt and the percentage's rounding weigh most, are not counted.

On the request path this is dictionary work: the learned windows are in memory (read once at
start), and the store is written only when a window is learned or changes.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kirod import log
from kirod.drift import Drift, Kind
from kirod.errors import StoreError
from kirod.storage.windows import LearnedWindow, WindowStore

logger = logging.getLogger(__name__)

DISAGREEMENT = 2.0  # beyond the estimate's error
STREAK = 3  # answers in a row that disagree the same way
MIN_TOKENS = 4_000  # smaller requests are not counted
SNAP = 0.25  # relative distance within which a figure is taken as a known size
KNOWN_WINDOWS = (128_000, 200_000, 272_000, 400_000, 500_000, 1_000_000, 2_000_000)
"""Round sizes models have: the windows of docs/KIRO-PROTOCOL.md §2.7, GPT-5.6's 1M found by
probe (docs/KIRO-PROTOCOL.md §6.2), and the sizes between and above that new models list."""

KNOWN_ROLLOUTS: Mapping[str, int] = {"gpt-5.6-": 1_000_000}
"""Windows Kiro is known to measure against though its catalog lists less, by model id prefix:
GPT-5.6's 1M, rolled out per account (docs/KIRO-PROTOCOL.md §6.2). Learning one follows Kiro as
kirod knows it; any other learned window that is not the listed one is drift (`Kind.WINDOW`)."""

Key = tuple[str, str]  # (account id, Kiro model id)


@dataclass(slots=True)
class _Streak:
    implied: list[int]
    larger: bool  # the way the streak disagrees with the window in use


def rounded(implied: float, listed: int) -> int:
    """The window `implied` stands for: the listed one within the estimate's error of it, else
    the nearest known size within `SNAP`, else two significant figures (Kiro's are round)."""
    if listed / DISAGREEMENT <= implied <= listed * DISAGREEMENT:
        return listed
    known = min(KNOWN_WINDOWS, key=lambda size: abs(size - implied))
    if abs(known - implied) <= SNAP * known:
        return known
    return int(float(f"{implied:.2g}"))


def known_rollout(kiro_id: str, window: int) -> bool:
    """`window` is one `KNOWN_ROLLOUTS` names for the model."""
    return any(
        kiro_id.startswith(prefix) and window == size for prefix, size in KNOWN_ROLLOUTS.items()
    )


class WindowLearner:
    """The learned windows, by (account, model); `store` None keeps them in memory only."""

    def __init__(
        self,
        store: WindowStore | None = None,
        clock: Callable[[], float] = time.time,
        drift: Drift | None = None,
    ) -> None:
        self._store = store
        self._drift = drift
        self._clock = clock
        self._learned: dict[Key, LearnedWindow] = {}
        self._streaks: dict[Key, _Streak] = {}

    async def load(self) -> None:
        """Read what was learned before a restart."""
        if self._store is not None:
            self._learned = {(w.account_id, w.kiro_id): w for w in await self._store.all()}

    def window(self, account_id: str, kiro_id: str) -> int | None:
        """The account's window for the model when it is not the listed one."""
        learned = self._learned.get((account_id, kiro_id))
        return None if learned is None else learned.window

    def learned(self) -> tuple[LearnedWindow, ...]:
        return tuple(self._learned.values())

    async def observe(
        self,
        account_id: str,
        kiro_id: str,
        *,
        listed: int,
        in_use: int,
        percentage: float,
        estimated_tokens: int,
    ) -> int | None:
        """One answer's percentage, converted with the window `in_use`, beside kirod's estimate
        of its tokens; returns the window learned from it, if one was."""
        if estimated_tokens < MIN_TOKENS or percentage <= 0:
            return None
        key = (account_id, kiro_id)
        implied = round(estimated_tokens * 100 / percentage)
        if in_use / DISAGREEMENT <= implied <= in_use * DISAGREEMENT:
            self._streaks.pop(key, None)
            return None
        larger = implied > in_use
        streak = self._streaks.get(key)
        if streak is None or streak.larger is not larger:
            streak = self._streaks[key] = _Streak([], larger)
        streak.implied.append(implied)
        if len(streak.implied) < STREAK:
            return None
        del self._streaks[key]
        median = statistics.median(streak.implied)
        window = rounded(median, listed)
        if window == in_use:  # the median rounds back to it: nothing learned
            return None
        await self._keep(account_id, kiro_id, listed, window, round(median))
        return window

    async def _keep(
        self, account_id: str, kiro_id: str, listed: int, window: int, implied: int
    ) -> None:
        key = (account_id, kiro_id)
        log.event(
            logger,
            "context_window_learned",
            account=account_id,
            model=kiro_id,
            listed=listed,
            learned=window,
            implied=implied,
        )
        if window != listed and not known_rollout(kiro_id, window) and self._drift is not None:
            # Kiro's window moved away from what its catalog lists, in a way kirod did not know
            # of: kirod follows it, and says so.
            self._drift.observe(
                Kind.WINDOW,
                "generateAssistantResponse",
                model=kiro_id,
                listed=listed,
                learned=window,
            )
        learned = LearnedWindow(account_id, kiro_id, listed, window, self._clock())
        if window == listed:
            self._learned.pop(key, None)
        else:
            self._learned[key] = learned
        if self._store is None:
            return
        try:
            if window == listed:
                await self._store.drop(account_id, kiro_id)
            else:
                await self._store.put(learned)
        except StoreError as exc:
            # Kept in memory all the same: only a restart forgets it, and learns it again.
            self._store.skipped(exc)
