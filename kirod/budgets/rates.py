"""What a request is expected to cost, before it is sent: tokens, and credits at the recent rate.

Kiro meters a request in credits only at the end of its stream (`meteringEvent`), and does not
say how it computes them; the catalog gives each model a `rateMultiplier`. So the estimate is
learned: per Kiro model, credits per *basis token*, the basis being what is known before the
request is sent (its estimated input tokens plus the output it may produce: its `max_tokens`, or
`DEFAULT_OUTPUT_TOKENS` when it sets none). Learning against the same basis the estimate uses
makes a request like the ones before it cost what they cost, whatever the client's habits with
`max_tokens`; the error is what differs between requests. The rate is the dearest of the model's
last `RECENT` metered requests, not their mean: requests in flight all reserve at the rate known
when they were admitted, so a mean that half of them exceed would let a burst overspend a budget
by the sum of their errors, where the dearest recent rate overspends only by the requests that
cost more than any recent one. The rates are learned again at start from the operation log's
rows (`seed`), so a restart does not reset them to the prior. A model not seen yet is estimated
from the other models' rate per unit of multiplier, and before any request at all from
`PRIOR_CREDITS_PER_TOKEN`, set high so that a budget errs on the side of spending less.

The rate is learned per model rather than per account: accounts are charged alike for a model,
and a model's rate is learned from every account's requests at once.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_OUTPUT_TOKENS = 4096  # the output a request reserves when it names no cap
# Credits per basis token at multiplier 1 before anything was metered: about 1 credit for a
# 50,000-token turn, above what small answers cost, so the first estimates are cautious.
PRIOR_CREDITS_PER_TOKEN = 2e-5
RECENT = 16  # the metered requests per model whose dearest rate the estimate takes
SEED_ROWS = 256  # the operation log's newest rows learned from again at start: a few models' worth


@dataclass(frozen=True, slots=True)
class Estimate:
    """What a request reserves: tokens (input and output cap) and credits."""

    tokens: int
    credits: float


def basis_tokens(input_tokens: int, max_output_tokens: int | None) -> int:
    return max(0, input_tokens) + (max_output_tokens or DEFAULT_OUTPUT_TOKENS)


class CreditRates:
    def __init__(self) -> None:
        self._by_model: dict[str, collections.deque[float]] = {}  # credits per basis token
        # credits per basis token and unit of multiplier, of every model
        self._per_multiplier: collections.deque[float] = collections.deque(maxlen=RECENT)

    def estimate(self, model: str | None, multiplier: float | None, tokens: int) -> Estimate:
        recent = self._by_model.get(model) if model is not None else None
        if recent:
            rate = max(recent)
        else:
            per_unit = max(self._per_multiplier, default=PRIOR_CREDITS_PER_TOKEN)
            rate = per_unit * (multiplier if multiplier and multiplier > 0 else 1.0)
        return Estimate(tokens, tokens * rate)

    def learn(self, model: str, multiplier: float | None, tokens: int, credits: float) -> None:
        """A request on `model` with `tokens` basis tokens was metered `credits`."""
        if tokens <= 0 or credits < 0:
            return
        rate = credits / tokens
        self._by_model.setdefault(model, collections.deque(maxlen=RECENT)).append(rate)
        unit = multiplier if multiplier and multiplier > 0 else 1.0
        self._per_multiplier.append(rate / unit)

    def seed(self, metered: Iterable[tuple[str, int, float]]) -> None:
        """Learn again, at start, from the operation log's rows (model, basis tokens, credits),
        newest first; a model's rate takes its `RECENT` newest."""
        for model, tokens, credits in reversed(list(metered)):
            if tokens > 0 and credits >= 0:
                self._by_model.setdefault(model, collections.deque(maxlen=RECENT)).append(
                    credits / tokens
                )
