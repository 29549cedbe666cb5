"""Choosing among the accounts that can take a request now: the selection strategies.

Pure: the pool hands over the candidates (eligible, with a free slot) and gets one back.

- `sticky`: keep using the account chosen last while it can take requests, so one account carries
  the load and the others stay fresh (and a user looks like one user to Kiro).
- `round-robin`: the next account in a fixed order after the one chosen last.
- `lowest-usage`: the account with the most remaining credits, as the last usage probe reported
  them minus what was spent since.

An affinity binding's account wins when it is a candidate. Ties go to the least-occupied account,
then to the oldest.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import NamedTuple


class Strategy(enum.Enum):
    STICKY = "sticky"
    ROUND_ROBIN = "round-robin"
    LOWEST_USAGE = "lowest-usage"


class Candidate(NamedTuple):
    """A tuple, not a dataclass: the pool builds one per account per request."""

    account_id: str
    order: int  # stable position: the order accounts were added
    in_flight: int
    remaining: float | None  # credits left, None before the first usage probe


class Selector:
    """Remembers the previous choice, which sticky and round-robin build on."""

    def __init__(self, strategy: Strategy) -> None:
        self.strategy = strategy
        self._last: Candidate | None = None

    def keeps(self) -> str | None:
        """The account chosen again whenever it is a candidate (sticky's last choice), if any:
        the pool can take it without listing the other candidates."""
        if self.strategy is Strategy.STICKY and self._last is not None:
            return self._last.account_id
        return None

    def choose(self, candidates: Sequence[Candidate], prefer: str | None = None) -> Candidate:
        if not candidates:
            raise ValueError("no candidates")
        preferred = next((c for c in candidates if c.account_id == prefer), None)
        if preferred is not None:
            return preferred  # a binding's choice does not move the strategy's position
        self._last = self._by_strategy(candidates)
        return self._last

    def _by_strategy(self, candidates: Sequence[Candidate]) -> Candidate:
        last = self._last
        if self.strategy is Strategy.STICKY:
            if last is not None:
                for candidate in candidates:
                    if candidate.account_id == last.account_id:
                        return candidate
            return min(candidates, key=lambda c: (c.in_flight, c.order))
        if self.strategy is Strategy.ROUND_ROBIN:
            after = last.order if last is not None else -1
            ordered = sorted(candidates, key=lambda c: c.order)
            return next((c for c in ordered if c.order > after), ordered[0])
        return min(
            candidates,
            key=lambda c: (
                -(c.remaining if c.remaining is not None else float("-inf")),
                c.in_flight,
                c.order,
            ),
        )
