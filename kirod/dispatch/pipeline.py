"""Dispatch: a canonical request in, a canonical event stream out, over the account pool.

    affinity key → branch queue → account lease → fresh token → model route → upstream exchange
                   ▲ recoverable failure before the client was sent anything: the next account
    → Dispatch (committed) → event batches → the protocol encoder

Dispatch keeps the account logic only; building the payload, calling Kiro and translating its
frames is one `kirod.upstream.exchange` exchange, or the turn of several (`kirod.upstream.turn`)
that the request's steps make of it. The model is routed before any lease: only accounts whose
catalog offers it are leased (`ModelDirectory.route`), and pacing waits happen in the pool.
`Dispatcher.open` is an async context manager
with two phases. Before it yields, nothing has reached the client. One account's try is
`kirod.dispatch.attempt`: a bearer rejection is retried once on the same account after a forced
refresh, "profileArn is required" once after discovery; any other recoverable failure (throttling,
quota, suspension, server error, network, a stream that fails before its first event, a model
missing from this account's catalog) moves the request to another eligible account, at most
`max_account_attempts` accounts in all; failures of the request itself (validation, context too
long, a model Kiro refuses) raise at once, and the same server, protocol, capacity or
service-wide throttling failure on two accounts in a row ends the failover.

The request commits once its client may be sent a byte. A stream commits when the upstream
produced its first event: from then on failures become the stream's terminal `ErrorEvent` and
nothing is replayed. A request answered whole commits when its answer is whole: its client is
sent nothing before, so a stream that broke off on the account after its first event moves it to
the next account like a failure before that event. Either way a break after the first event
counts against the account (`Exchange.failure`: the breaker, throttling) as one before it does,
and the account's health hears how an answer ended before the client is sent its last event.

Extensions (`kirod.dispatch.extensions`) run at both ends: `on_request` before the affinity key
and the routing (the key's model scope is checked again on the model it leaves), the stream
hooks on the committed events before the operation log notes them, `on_error` on an error that
ends the request before it commits. With none enabled the request and its stream are untouched.

Budgets (`kirod.budgets`) come after the response cache (a hit costs nothing) and before any
lease: the request's estimate is held against its API key, and against the account it leases
where that account has a ceiling or the overage guard watches it (what is left of its plan is
then its ceiling), and only accounts with room for it are leased. When the request
ends, the hold settles to what Kiro metered, and an account whose ceiling is now spent rests.
Every request settles, budgets or not, so that a budget set later counts its day.

The response cache (`kirod.dispatch.cache`) comes after the extensions and before routing, when
the route asks for it (`cache=True`: the key allows it and the request asked): the redacted
request is what is hashed, and the key's scope is judged on the resolved model first. A hit is
yielded at once, leasing no account and running no hook (it replays what the stream hooks made
of the first answer, so `on_response` is not called again); a miss goes on as any request and
its answer is recorded once the stream ran to its end.

Leaving the context, however it happens (done, failed, or cancelled because the client went away),
aborts the upstream response if still open, releases the account's slot and the conversation's
branch, and writes the request's operation-log row (`kirod.dispatch.operation`) through the
store's writer.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from kirod import log
from kirod.accounts.affinity import AffinityMap
from kirod.accounts.maintenance import IDLE_STATUSES
from kirod.accounts.model_directory import ModelDirectory, Routing
from kirod.accounts.pool import AccountPool
from kirod.accounts.probes import UsageProbes
from kirod.accounts.profiles import ProfileFinder
from kirod.accounts.tokens import TokenKeeper
from kirod.budgets.budgets import Budgets, Hold
from kirod.budgets.limits import NONE, Limits
from kirod.budgets.periods import next_day
from kirod.budgets.rates import Estimate, basis_tokens
from kirod.canonical.catalog import ModelInfo
from kirod.canonical.events import CanonicalEvent, ErrorEvent, MessageStart, MessageStop
from kirod.canonical.request import CanonicalRequest
from kirod.canonical.shape import request_shape
from kirod.dispatch.attempt import Attempts, Opened, Retry, RouteSettings
from kirod.dispatch.branches import BranchQueue
from kirod.dispatch.cache import Lookup, ResponseCache
from kirod.dispatch.extensions import NONE as NO_EXTENSIONS
from kirod.dispatch.extensions import Extensions
from kirod.dispatch.operation import Operation
from kirod.errors import ApiError, ErrorKind
from kirod.extension import KeyBudget
from kirod.storage.accounts import AccountRecord
from kirod.storage.affinity import Binding
from kirod.storage.oplog import OpLog
from kirod.upstream.client import KiroClient
from kirod.upstream.errors import Failure, UpstreamError
from kirod.upstream.exchange import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    Exchange,
    ParameterPolicy,
    Route,
    ToolDelivery,
    open_exchange,
)
from kirod.upstream.step import Step
from kirod.upstream.turn import run_turn

StepsFor = Callable[[CanonicalRequest, Route], Sequence[Step]]
"""The steps that may add parts to this request's turn on this route (`kirod.upstream.turn`)."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Dispatch:
    """A committed upstream exchange: its events, and what the encoders need to know."""

    message_id: str
    model: ModelInfo
    model_name: str  # what responses name: the client's own name, or the substitute's public id
    account_id: str | None  # None for an answer from the response cache
    input_tokens: int
    events: AsyncIterator[list[CanonicalEvent]]  # one batch per upstream network chunk
    # Monotonic ns when the answer's first event was ready (an answer read whole before it is
    # handed on was ready earlier than it is handed on).
    first_ns: int
    cache: str | None = None  # "hit" or "miss" when the cache was asked; the x-kirod-cache header


@dataclass(frozen=True)
class DispatchPolicy:
    max_account_attempts: int = 3
    branch_timeout_s: float = 600.0  # how long a turn waits for its conversation's previous one
    parameter_policy: ParameterPolicy = "drop"
    prompt_cache_points: bool = False
    tool_delivery: ToolDelivery = "complete"
    max_body_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES  # the kiro_max_body_bytes option
    max_turn_parts: int = 10  # upstream exchanges in one turn, whatever its steps ask


# Failures a request can cause itself (a body Kiro chokes on): the same one on two accounts in a
# row ends the failover, so one bad payload does not count against every account it visits.
# Kiro refusing the model (INVALID_MODEL_ID) on two accounts in a row ends it too, and so do a
# model out of capacity and a service-wide throttle: Kiro's, they would meet every account
# (docs/KIRO-PROTOCOL.md §4.3); and so does Kiro unreachable from this machine on two accounts.
_SUSPECT_REQUEST: frozenset[Failure] = frozenset(
    {
        Failure.SERVER,
        Failure.PROTOCOL,
        Failure.INVALID_MODEL,
        Failure.CAPACITY,
        Failure.SERVICE_THROTTLED,
        Failure.UNREACHABLE,
    }
)


class Dispatcher:
    def __init__(
        self,
        pool: AccountPool,
        client: KiroClient,
        keeper: TokenKeeper,
        models: ModelDirectory,
        affinity: AffinityMap,
        probes: UsageProbes,
        finder: ProfileFinder,
        oplog: OpLog,
        *,
        policy: DispatchPolicy = DispatchPolicy(),
        authorize: Callable[[str, ModelInfo], None] | None = None,
        steps: StepsFor | None = None,
        extensions: Extensions = NO_EXTENSIONS,
        cache: ResponseCache | None = None,
        budgets: Budgets | None = None,
        key_limits: Callable[[str], Limits] | None = None,
    ) -> None:
        """`authorize(tenant, model)` raises an `ApiError` when the API key may not use it;
        `key_limits(tenant)` are the key's budgets."""
        self._authorize = authorize
        self._budgets = budgets
        self._key_limits = key_limits
        self._extensions = extensions
        self._cache = cache
        self._pool = pool
        self._client = client
        self._models = models
        self._affinity = affinity
        self._oplog = oplog
        settings = RouteSettings(
            policy.parameter_policy,
            policy.prompt_cache_points,
            policy.tool_delivery,
            policy.max_body_bytes,
        )
        self._attempts = Attempts(
            pool, client, keeper, models, probes, finder, settings, authorize=authorize
        )
        self._policy = policy
        self._steps = steps
        self._branches = BranchQueue()

    @contextlib.asynccontextmanager
    async def open(
        self, request: CanonicalRequest, *, tenant: str, cache: bool = False
    ) -> AsyncIterator[Dispatch]:
        """Open an upstream exchange for `request` on behalf of API key `tenant`; with `cache`
        (the key allows it and the request asked), answer from the response cache if it can."""
        operation = Operation(request, tenant)
        if logger.isEnabledFor(logging.DEBUG):  # counts and flags only: never the content
            log.event(logger, "request_shape", level=logging.DEBUG, **request_shape(request))
        failure: BaseException | None = None
        committed = False
        limits = self._key_limits(tenant) if self._key_limits is not None else NONE
        hold: Hold | None = None
        try:
            if self._extensions:
                request = await self._extended(request, operation, limits)
            lookup = await self._looked_up(request, tenant) if cache else None
            if lookup is not None:
                operation.cache = "miss" if lookup.events is None else "hit"
                log.annotate(cache=operation.cache)  # on the request's access-log line
            if lookup is not None and lookup.events is not None:
                start = lookup.events[0]
                assert isinstance(start, MessageStart)  # only such streams are kept
                committed = True
                operation.committed()
                yield Dispatch(
                    message_id=start.message_id,
                    model=lookup.model,
                    model_name=lookup.model_name,
                    account_id=None,
                    input_tokens=start.input_tokens,
                    events=operation.observed(lookup.replay()),
                    first_ns=time.monotonic_ns(),
                    cache="hit",
                )
                return
            records = await self._pool.current()
            routing = self._models.route(request.model, records)
            hold = self._admitted(request, tenant, limits, records, routing, operation)
            async with contextlib.AsyncExitStack() as stack:
                key_hash: str | None = None
                binding: Binding | None = None
                if request.affinity_key:
                    key_hash = self._affinity.key(tenant, request.affinity_key)
                    await stack.enter_async_context(
                        self._branches.turn(key_hash, timeout_s=self._policy.branch_timeout_s)
                    )
                    binding = await self._affinity.lookup(key_hash)
                opened, answer = await self._open(request, routing, binding, operation, stack, hold)
                operation.model_info = opened.route.model
                if key_hash is not None:
                    self._affinity.bind(
                        key_hash, opened.lease.account_id, opened.route.conversation_id
                    )
                route, exchange = opened.route, opened.exchange
                events = self._extensions.events(answer)
                if lookup is not None and self._cache is not None:
                    events = self._cache.recorded(lookup, events)
                committed = True
                yield Dispatch(
                    message_id=exchange.message_id,
                    model=route.model,
                    model_name=route.model_name,
                    account_id=opened.lease.account_id,
                    input_tokens=exchange.input_tokens,
                    events=operation.observed(events),
                    first_ns=exchange.opened_ns,
                    cache=None if lookup is None else "miss",
                )
        except BaseException as exc:
            failure = exc
            if not committed and isinstance(exc, ApiError) and self._extensions:
                await self._extensions.error(exc)  # after the commit, the stream's hooks saw it
            raise
        finally:
            if operation.credits and operation.account_id:
                await self._pool.spent(operation.account_id, operation.credits)
            self._oplog.append(operation.entry(failure))
            if self._budgets is not None:
                await self._settled(hold, request, limits, operation)

    async def _looked_up(self, request: CanonicalRequest, tenant: str) -> Lookup | None:
        """The cache's answer to `request`, None when it may not answer it: judged after
        `on_request` and on the resolved model, within the key's scope."""
        if self._cache is None:
            return None
        routing = self._models.route(request.model, await self._pool.current())
        resolution = routing.resolution
        if resolution is None:  # only a catalog not read yet may know the name
            return None
        if self._authorize is not None:
            self._authorize(tenant, resolution.info)
        name = request.model if resolution.via == "exact" else resolution.info.public_id
        return await self._cache.lookup(request, tenant, resolution.info, name)

    def _admitted(
        self,
        request: CanonicalRequest,
        tenant: str,
        limits: Limits,
        records: Sequence[AccountRecord],
        routing: Routing,
        operation: Operation,
    ) -> Hold | None:
        """The request's hold on its key's budgets, taken before any lease; None when neither
        its key nor any of the `records` (the accounts) has one (a ceiling, or the overage guard
        watching it). Raises the key's 429 when it does not fit, and the accounts' when none
        serving the model has room."""
        budgets, pool = self._budgets, self._pool
        if budgets is None:
            return None
        budgeted = any(
            r.budget_day is not None
            or r.budget_month is not None
            or pool.plan_left(r.id) is not None
            for r in records
        )
        if not limits.any and not budgeted:
            return None
        model = routing.resolution.info if routing.resolution is not None else None
        estimate = budgets.estimate(request, model)
        hold = budgets.admit(tenant, limits, estimate)
        operation.reserved = estimate
        if budgeted:
            # An account that serves nothing until a person acts (disabled, needs a login) does
            # not make room: without it, the budgets are what refuse.
            serving = [
                r
                for r in records
                if (routing.offers is None or routing.offers(r)) and r.status not in IDLE_STATUSES
            ]
            if serving and not any(
                budgets.fits(r, estimate, pool.plan_left(r.id)) for r in serving
            ):
                budgets.settle(
                    hold, key_id=tenant, key_limits=limits, account=None, credits=None, tokens=None
                )
                raise self._accounts_full(serving, estimate)
        return hold

    def _accounts_full(self, full: Sequence[AccountRecord], estimate: Estimate) -> ApiError:
        """The refusal when none of `full`, the accounts serving the model, has room for
        `estimate`: under its ceilings, or in the plan credits the overage guard leaves it."""
        budgets = self._budgets
        assert budgets is not None
        guarded = [
            record
            for record in full
            if (left := self._pool.plan_left(record.id)) is not None
            and budgets.fits(record, estimate)
            and not budgets.fits(record, estimate, left)
        ]
        return _accounts_over_budget(budgets, full, estimate, guarded)

    async def _settled(
        self,
        hold: Hold | None,
        request: CanonicalRequest,
        limits: Limits,
        operation: Operation,
    ) -> None:
        """The request's spend into the ledger (and its hold settled); an account whose
        ceiling it spent rests."""
        budgets = self._budgets
        assert budgets is not None
        account = self._pool.record(operation.account_id) if operation.account_id else None
        tokens: int | None = None
        if operation.input_tokens is not None or operation.output_tokens is not None:
            tokens = (operation.input_tokens or 0) + (operation.output_tokens or 0)
        elif operation.ttfb_ms is not None and operation.estimated_input is not None:
            tokens = operation.estimated_input  # sent, never counted: its input stays counted
        basis = None
        if operation.estimated_input is not None and operation.stop_reason is not None:
            basis = basis_tokens(operation.estimated_input, request.max_output_tokens)
        rest = budgets.settle(
            hold,
            key_id=operation.tenant,
            key_limits=limits,
            account=account,
            credits=operation.credits,
            tokens=tokens,
            model=operation.model_info,
            basis=basis,
        )
        if rest is not None and account is not None:
            await self._pool.rest_for_budget(account.id, rest.period, rest.limit, rest.until)

    async def _extended(
        self, request: CanonicalRequest, operation: Operation, limits: Limits
    ) -> CanonicalRequest:
        """`request` as the extensions' `on_request` leave it, noted in the operation log.

        A changed model is judged against the key's scope here, before any lease: an extension
        cannot route a key to a model it may not use (each attempt checks it again on the
        account's own catalog)."""
        budget: KeyBudget | None = None
        if limits.any and self._budgets is not None:
            left = self._budgets.remaining(operation.tenant, limits)
            budget = KeyBudget(
                operation.tenant,
                left.credits_today,
                left.credits_this_month,
                left.tokens_this_minute,
            )
        changed, by = await self._extensions.request(request, budget)
        if not by:
            return request
        operation.request, operation.extensions = changed, by
        if changed.model != request.model and self._authorize is not None:
            routing = self._models.route(changed.model, await self._pool.current())
            if routing.resolution is not None:
                self._authorize(operation.tenant, routing.resolution.info)
        return changed

    def _turn(
        self,
        request: CanonicalRequest,
        route: Route,
        parts: _Parts,
        operation: Operation,
    ) -> AsyncIterator[list[CanonicalEvent]]:
        """The exchange's batches, or the turn its steps may add parts to (same route)."""
        exchange = parts.exchanges[0]
        steps = self._steps(request, route) if self._steps is not None else ()
        if not steps:
            return exchange.batches()
        client = self._client

        @contextlib.asynccontextmanager
        async def open_part(following: CanonicalRequest) -> AsyncIterator[Exchange]:
            try:
                async with open_exchange(client, following, route) as part:
                    operation.exchanged(part)
                    parts.exchanges.append(part)
                    yield part
            except UpstreamError as refused:  # a part's own break ends its events instead
                parts.refused = refused
                raise

        return run_turn(exchange, request, steps, open_part, max_parts=self._policy.max_turn_parts)

    async def _answer(
        self, request: CanonicalRequest, opened: Opened, operation: Operation
    ) -> AsyncIterator[list[CanonicalEvent]]:
        """The events to commit on `opened`: a stream's as they come; a whole answer's once it
        is read to its end, or `Retry` when it broke off on the account on the way."""
        parts = _Parts([opened.exchange])
        turn = self._turn(request, opened.route, parts, operation)
        if request.stream:
            return self._heard(turn, opened, parts)
        batches = [batch async for batch in turn]
        broke = parts.failure
        if broke is not None:
            retry = await self._attempts.broke(opened.lease, operation, opened.route, broke)
            if retry is not None:
                raise retry
        await self._attempts.finished(opened.lease, opened.route, broke)
        await self._measured(opened, parts)
        return _replayed(batches)

    async def _heard(
        self, batches: AsyncIterator[list[CanonicalEvent]], opened: Opened, parts: _Parts
    ) -> AsyncIterator[list[CanonicalEvent]]:
        """A committed stream, whose account's health hears how it ended before its terminal
        event (a stop or an error, always last in its batch) is handed on."""
        async for batch in batches:
            if batch and isinstance(batch[-1], MessageStop | ErrorEvent):
                await self._attempts.finished(opened.lease, opened.route, parts.failure)
                await self._measured(opened, parts)
            yield batch

    async def _measured(self, opened: Opened, parts: _Parts) -> None:
        """Kiro's context percentages of the turn's exchanges, for the window the account
        really has (`kirod.accounts.windows`)."""
        route = opened.route
        for exchange in parts.exchanges:
            usage = exchange.context_usage
            if usage is not None:
                await self._models.windows.observe(
                    opened.lease.account_id,
                    route.model.kiro_id,
                    listed=route.model.context_window,
                    in_use=route.window,
                    percentage=usage.percentage,
                    estimated_tokens=usage.estimated_tokens,
                )

    async def _open(
        self,
        request: CanonicalRequest,
        routing: Routing,
        binding: Binding | None,
        operation: Operation,
        stack: contextlib.AsyncExitStack,
        hold: Hold | None,
    ) -> tuple[Opened, AsyncIterator[list[CanonicalEvent]]]:
        """Try accounts until one commits (module docstring): the attempt and the events to
        hand on; its slot and response join `stack`.

        Only accounts whose catalog offers the request's model are leased (`ModelDirectory.route`);
        a model none offers is its 404 before any lease. With a `hold`, only accounts whose
        ceilings have room for it are.
        """
        tried: list[str] = []
        full: list[str] = []  # leased, but another request took its room meanwhile
        last: ApiError | None = None
        previous: Failure | None = None
        eligible = self._eligible(routing, hold)
        while len(tried) < self._policy.max_account_attempts:
            try:
                lease = await self._pool.lease(
                    prefer=binding.account_id if binding else None,
                    exclude=[*tried, *full],
                    eligible=eligible,
                )
            except ApiError as unavailable:
                if last is None:
                    # Requests queued for a slot hold nothing on the account until they lease
                    # it, so more may be admitted than its ceiling takes: theirs is its 429.
                    refusal = self._over_budget(routing, hold)
                    if refusal is not None:
                        raise refusal from None
                    raise
                # The last attempt's error, told when an account is expected back.
                raise last.told_when(unavailable.headers.get("Retry-After")) from None
            budgets = self._budgets
            if (
                hold is not None
                and budgets is not None
                and not budgets.hold_account(
                    hold, lease.account, self._pool.plan_left(lease.account_id)
                )
            ):
                lease.release()
                full.append(lease.account_id)
                continue
            tried.append(lease.account_id)
            operation.account_id = lease.account_id
            async with contextlib.AsyncExitStack() as attempt:
                attempt.callback(lease.release)
                try:
                    opened = await self._attempts.attempt(
                        lease, request, routing, binding, operation, attempt
                    )
                    operation.committed()  # the first event: the answering attempt's counts
                    answer = await self._answer(request, opened, operation)
                except Retry as retry:
                    if hold is not None and self._budgets is not None:
                        self._budgets.release_account(hold)  # it goes with the request
                    last = retry.error
                    if retry.failure in _SUSPECT_REQUEST and retry.failure is previous:
                        log.event(logger, "failover_stopped", failure=retry.failure.value)
                        raise last from None
                    previous = retry.failure
                    continue
                operation.tried(lease.account_id, "ok")
                stack.push_async_exit(attempt.pop_all())
                return opened, answer
        assert last is not None
        raise last

    def _over_budget(self, routing: Routing, hold: Hold | None) -> ApiError | None:
        """The accounts' budget refusal when no account serving the model has room for `hold`
        under its ceilings (None: the lease's own refusal stands)."""
        budgets = self._budgets
        if hold is None or budgets is None:
            return None
        pool = self._pool
        serving = [r for r in pool.records() if routing.offers is None or routing.offers(r)]
        full = [r for r in serving if not budgets.fits(r, hold.estimate, pool.plan_left(r.id))]
        if not full or len(full) < len(serving):
            return None
        return self._accounts_full(full, hold.estimate)

    def _eligible(
        self, routing: Routing, hold: Hold | None
    ) -> Callable[[AccountRecord], bool] | None:
        """Which accounts may take the request: those offering its model and, with a hold,
        with room for it under their ceilings."""
        budgets, offers, pool = self._budgets, routing.offers, self._pool
        if hold is None or budgets is None:
            return offers
        estimate = hold.estimate

        def room(record: AccountRecord) -> bool:
            return budgets.fits(record, estimate, pool.plan_left(record.id))

        if offers is None:
            return room
        return lambda record: offers(record) and room(record)


def _accounts_over_budget(
    budgets: Budgets,
    serving: Sequence[AccountRecord],
    estimate: Estimate,
    guarded: Sequence[AccountRecord] = (),
) -> ApiError:
    """No account serving the model has room for `estimate`: under its ceilings, or, for those
    in `guarded`, in the plan credits the overage guard leaves them."""
    rests = [rest.until for record in serving if (rest := budgets.rest(record)) is not None]
    rests += [reset for record in guarded if (reset := _plan_resets(record)) is not None]
    until = min(rests) if rests else next_day(time.time())
    wait = max(1, int(until - time.time()) + 1)
    cost = f"this request may cost about {estimate.credits:.4g} credits"
    if guarded and len(guarded) == len(serving):
        return ApiError(
            ErrorKind.RATE_LIMIT,
            "every Kiro account that serves this model has too few plan credits left for this "
            f"request ({cost}), and kirod does not spend into overage unless allowed "
            "('kiroctl accounts set-budget ACCOUNT --allow-overage')",
            code="accounts_exhausted",
            headers={"Retry-After": str(wait)},
            final=True,
        )
    return ApiError(
        ErrorKind.RATE_LIMIT,
        "every Kiro account that serves this model has spent the credit budget set for it "
        f"({cost}); 'kiroctl accounts set-budget' changes the budgets",
        code="accounts_over_budget",
        headers={"Retry-After": str(wait)},
        final=True,
    )


def _plan_resets(record: AccountRecord) -> float | None:
    """When the account's plan credits renew, by its last usage probe."""
    resets_at = (record.usage or {}).get("resets_at")
    return float(resets_at) if isinstance(resets_at, int | float) else None


@dataclass
class _Parts:
    """The exchanges of one attempt's turn, in order, and a later part Kiro refused to open."""

    exchanges: list[Exchange]
    refused: UpstreamError | None = None

    @property
    def failure(self) -> UpstreamError | None:
        """Why the turn broke off on the account, if it did: its last part broke, or the part
        after it could not open."""
        return self.refused or self.exchanges[-1].failure


async def _replayed(batches: list[list[CanonicalEvent]]) -> AsyncIterator[list[CanonicalEvent]]:
    for batch in batches:
        yield batch
