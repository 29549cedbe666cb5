"""What a request is expected to cost, before it is sent: tokens, and credits at the recent rate.

Kiro meters a request in credits only at the end of its stream (`meteringEvent`), and does not
say how it computes them; the catalog gives each model a `rateMultiplier`. So the estimate is
learned: per Kiro model, credits per *basis token*, the basis being what is known before the
request is sent (its estimated input tokens plus the output it may produce: its `max_tokens`, or
`DEFAULT_OUTPUT_TOKENS` when it sets none). Learning against the same basis the estimate uses
makes a request like the ones before it cost what they cost, whatever the client's habits with
`max_tokens`; the error is what differs between requests. A model not seen yet is estimated
from the other models' rate per unit of multiplier, and before any request at all from
`PRIOR_CREDITS_PER_TOKEN`, set high so that a budget errs on the side of spending less.

The rate is learned per model rather than per account: accounts are charged alike for a model,
and a model's rate is learned from every account's requests at once.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_OUTPUT_TOKENS = 4096  # the output a request reserves when it names no cap
# Credits per basis token at multiplier 1 before anything was metered: about 1 credit for a
# 50,000-token turn, above what small answers cost, so the first estimates are cautious.
PRIOR_CREDITS_PER_TOKEN = 2e-5
SMOOTHING = 0.3  # each metered request's weight in the learned rate


@dataclass(frozen=True, slots=True)
class Estimate:
    """What a request reserves: tokens (input and output cap) and credits."""

    tokens: int
    credits: float


def basis_tokens(input_tokens: int, max_output_tokens: int | None) -> int:
    return max(0, input_tokens) + (max_output_tokens or DEFAULT_OUTPUT_TOKENS)


class CreditRates:
    def __init__(self) -> None:
        self._by_model: dict[str, float] = {}  # credits per basis token
        self._per_multiplier: float | None = None  # credits per basis token and multiplier

    def estimate(self, model: str | None, multiplier: float | None, tokens: int) -> Estimate:
        rate = self._by_model.get(model) if model is not None else None
        if rate is None:
            per_unit = self._per_multiplier
            if per_unit is None:
                per_unit = PRIOR_CREDITS_PER_TOKEN
            rate = per_unit * (multiplier if multiplier and multiplier > 0 else 1.0)
        return Estimate(tokens, tokens * rate)

    def learn(self, model: str, multiplier: float | None, tokens: int, credits: float) -> None:
        """A request on `model` with `tokens` basis tokens was metered `credits`."""
        if tokens <= 0 or credits < 0:
            return
        rate = credits / tokens
        self._by_model[model] = _smoothed(self._by_model.get(model), rate)
        unit = multiplier if multiplier and multiplier > 0 else 1.0
        self._per_multiplier = _smoothed(self._per_multiplier, rate / unit)


def _smoothed(before: float | None, seen: float) -> float:
    # The first observation is taken as it is: identical requests then estimate exactly.
    return seen if before is None else before + SMOOTHING * (seen - before)
