"""The operation-log row of one request, filled in as the dispatch goes.

Its status is inferred from how the request left the dispatch context: 200 when the stream ended
normally (an error that ended the stream is still recorded), the `ApiError`'s status when one
escaped, 499 when the client went away before the event stream ran to its end (one that leaves
once it has it all, mid-cleanup, got its answer). The exchanges of its turn tell which tool calls
Kiro cut off: each one that another exchange followed was continued.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator

from kirod.budgets.rates import Estimate
from kirod.canonical.catalog import ModelInfo
from kirod.canonical.events import (
    CanonicalEvent,
    ErrorEvent,
    MessageStop,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.request import CanonicalRequest
from kirod.errors import ApiError, StoreFull
from kirod.storage.oplog import Attempt, OpEntry
from kirod.upstream.exchange import Exchange

_UNNOTED = (TextDelta, ThinkingDelta, ToolInputDelta)


class Operation:
    """The operation-log row of one request, filled in as it goes."""

    def __init__(self, request: CanonicalRequest, tenant: str) -> None:
        self.request = request
        self.tenant = tenant
        self.at = time.time()
        self._start = time.monotonic()
        self.attempts: list[Attempt] = []
        self.account_id: str | None = None
        self.dropped: tuple[str, ...] = ()
        self.extensions: tuple[str, ...] = ()  # those whose on_request changed the request
        self.cache: str | None = None  # "hit" or "miss" when the response cache was asked
        self.ttfb_ms: float | None = None
        self.stop_reason: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.credits: float | None = None
        self.stream_error: str | None = None
        self.finished = False  # the committed event stream ran to its end
        self.reserved: Estimate | None = None  # what its budgets held for it (kirod.budgets)
        self.model_info: ModelInfo | None = None  # the model that answered
        self._exchanges: list[Exchange] = []  # the turn's, in order
        self._on: tuple[str, str | None, str | None] | None = None  # account, region, model

    def attempting(self, account_id: str, region: str | None, model: str | None = None) -> None:
        """The account (its region, the Kiro model routed to) the next `tried` is about."""
        self._on = (account_id, region, model)

    def tried(
        self,
        account_id: str,
        outcome: str,
        *,
        status: int | None = None,
        reason: str | None = None,
    ) -> None:
        """One attempt ended; `status` and `reason` are Kiro's when it answered an error."""
        region = model = None
        if self._on is not None and self._on[0] == account_id:
            _, region, model = self._on
        self.attempts.append(
            Attempt(
                account_id,
                outcome,
                region=region,
                model=model,
                status=status,
                reason=reason,
                ms=self._elapsed_ms(),
            )
        )

    def exchanged(self, exchange: Exchange) -> None:
        self._exchanges.append(exchange)

    def abandoned(self) -> None:
        """The attempt's answer broke off and goes to another account: its exchanges are not
        the answer's (their frames, truncations and continuations)."""
        self._exchanges.clear()

    @property
    def estimated_input(self) -> int | None:
        """The input tokens kirod estimated for the answering exchange, once one opened."""
        return self._exchanges[0].input_tokens if self._exchanges else None

    def committed(self) -> None:
        self.ttfb_ms = self._elapsed_ms()

    async def observed(
        self, batches: AsyncIterator[list[CanonicalEvent]]
    ) -> AsyncIterator[list[CanonicalEvent]]:
        """The committed stream, noted in the row as it goes."""
        async for batch in batches:
            self.observe(batch)
            yield batch
        self.finished = True

    def observe(self, batch: list[CanonicalEvent]) -> None:
        for event in batch:
            if isinstance(event, _UNNOTED):
                continue  # the deltas, most of every stream
            if isinstance(event, Usage):
                self.input_tokens, self.output_tokens = event.input_tokens, event.output_tokens
                self.credits = event.credits
            elif isinstance(event, MessageStop):
                self.stop_reason = event.stop_reason.value
            elif isinstance(event, ErrorEvent):
                self.stream_error = event.code or event.kind.name.lower()

    def entry(self, exc: BaseException | None) -> OpEntry:
        if self.finished and isinstance(exc, asyncio.CancelledError | ConnectionError):
            exc = None  # the client went away after the whole answer was handed to it
        status, error = _outcome(exc)
        cut = [exchange.truncation is not None for exchange in self._exchanges]
        attempts = self.attempts
        if attempts and attempts[-1].outcome == "ok" and self._exchanges:
            frames = sum(exchange.frames for exchange in self._exchanges)
            bytes_read = sum(exchange.bytes_read for exchange in self._exchanges)
            answered = dataclasses.replace(attempts[-1], frames=frames, bytes_read=bytes_read)
            attempts = [*attempts[:-1], answered]
        return OpEntry(
            at=self.at,
            request_id=self.request.request_id,
            key_id=self.tenant,
            protocol=self.request.protocol.value,
            model=self.request.model,  # as asked: a trace of a 404 shows the name that failed
            stream=self.request.stream,
            account_id=self.account_id,
            attempts=tuple(attempts),
            stop_reason=self.stop_reason,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            credits=self.credits,
            ttfb_ms=self.ttfb_ms,
            total_ms=self._elapsed_ms(),
            status=status,
            error=error or self.stream_error,
            dropped=self.dropped,
            truncations=sum(cut),
            continuations=sum(cut[:-1]),  # a cut exchange that is not the last was continued
            cuts=sum(exchange.cut for exchange in self._exchanges),
            extensions=self.extensions,
            cache=self.cache,
            reserved_credits=None if self.reserved is None else round(self.reserved.credits, 6),
            reserved_tokens=None if self.reserved is None else self.reserved.tokens,
        )

    def _elapsed_ms(self) -> float:
        return round((time.monotonic() - self._start) * 1000, 3)


def _outcome(exc: BaseException | None) -> tuple[int, str | None]:
    """The HTTP status a request ended with, from how it left the dispatch context."""
    if exc is None:
        return 200, None
    if isinstance(exc, asyncio.CancelledError | ConnectionError):
        return 499, "client_closed"
    if isinstance(exc, ApiError):
        return exc.status, exc.code or exc.kind.name.lower()
    if isinstance(exc, StoreFull):
        return 507, "insufficient_storage"
    return 500, "internal_error"
