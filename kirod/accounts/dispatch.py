"""Dispatch: a canonical request in, a canonical event stream out, over the account pool.

    affinity key → branch queue → account lease → fresh token → model route → upstream exchange
                                       ▲ recoverable failure before any output: the next account
    → Dispatch (committed) → event batches → the protocol encoder

Dispatch keeps the account logic only; building the payload, calling Kiro and translating its
frames is one `kirod.upstream.exchange` exchange, or the turn of several (`kirod.upstream.turn`)
that the request's steps make of it. The model is routed before any lease: only accounts whose
catalog offers it are leased (`ModelDirectory.route`), and pacing waits happen in the pool.
`Dispatcher.open` is an async context manager
with two phases. Before it yields, nothing has reached the client. A bearer rejection is retried
once on the same account after a forced refresh; any other recoverable failure (throttling,
quota, suspension, server error, network, a stream that fails before its first event, a model
missing from this account's catalog) moves the request to another eligible account, at most
`max_account_attempts` accounts in all; failures of the request itself (validation, context too
long, a model Kiro refuses) raise at once, and the same server or protocol failure on two
accounts in a row ends the failover. The exchange commits when the upstream produced its first
event: from then on failures become the stream's terminal `ErrorEvent` and nothing is replayed.

Leaving the context, however it happens (done, failed, or cancelled because the client went away),
aborts the upstream response if still open, releases the account's slot and the conversation's
branch, and writes the request's operation-log row (`kirod.accounts.operation`) through the
store's writer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from kirod import log
from kirod.accounts.account import to_upstream
from kirod.accounts.affinity import AffinityMap
from kirod.accounts.branches import BranchQueue
from kirod.accounts.models import ModelDirectory, Routing
from kirod.accounts.operation import Operation
from kirod.accounts.pool import AccountPool, Lease
from kirod.accounts.probes import UsageProbes
from kirod.accounts.profiles import ProfileFinder
from kirod.accounts.tokens import TokenKeeper
from kirod.canonical.events import CanonicalEvent
from kirod.canonical.models import ModelInfo, resolve
from kirod.canonical.request import CanonicalRequest
from kirod.canonical.shape import request_shape
from kirod.errors import ApiError
from kirod.storage.affinity import Binding
from kirod.storage.oplog import OpLog
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import Failure, RefreshError, UpstreamError, UpstreamHttpError
from kirod.upstream.exchange import (
    Exchange,
    ParameterPolicy,
    Route,
    ToolDelivery,
    open_exchange,
)
from kirod.upstream.turn import Step, run_turn

StepsFor = Callable[[CanonicalRequest, Route], Sequence[Step]]
"""The steps that may add parts to this request's turn on this route (`kirod.upstream.turn`)."""

logger = logging.getLogger("kirod.dispatch")


@dataclass(frozen=True)
class Dispatch:
    """A committed upstream exchange: its events, and what the encoders need to know."""

    message_id: str
    model: ModelInfo
    model_name: str  # what responses name: the client's own name, or the substitute's public id
    account_id: str
    input_tokens: int
    events: AsyncIterator[list[CanonicalEvent]]  # one batch per upstream network chunk


@dataclass(frozen=True)
class DispatchPolicy:
    max_account_attempts: int = 3
    branch_timeout_s: float = 600.0  # how long a turn waits for its conversation's previous one
    parameter_policy: ParameterPolicy = "drop"
    prompt_cache_points: bool = False
    tool_delivery: ToolDelivery = "complete"
    max_turn_parts: int = 10  # upstream exchanges in one turn, whatever its steps ask


class _Retry(Exception):
    """An attempt failed recoverably; `error` is what the client sees if no account succeeds."""

    def __init__(self, error: ApiError, failure: Failure | None = None) -> None:
        self.error = error
        self.failure = failure


# Failures a request can cause itself (a body Kiro chokes on): the same one on two accounts in a
# row ends the failover, so one bad payload does not count against every account it visits.
# Kiro refusing the model (INVALID_MODEL_ID) on two accounts in a row ends it too.
_SUSPECT_REQUEST: frozenset[Failure] = frozenset(
    {Failure.SERVER, Failure.PROTOCOL, Failure.INVALID_MODEL}
)


@dataclass(frozen=True, slots=True)
class _Opened:
    lease: Lease
    route: Route
    exchange: Exchange


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
    ) -> None:
        """`authorize(tenant, model)` raises an `ApiError` when the API key may not use it."""
        self._pool = pool
        self._client = client
        self._keeper = keeper
        self._models = models
        self._finder = finder
        self._affinity = affinity
        self._probes = probes
        self._oplog = oplog
        self._policy = policy
        self._authorize = authorize
        self._steps = steps
        self._branches = BranchQueue()

    @contextlib.asynccontextmanager
    async def open(self, request: CanonicalRequest, *, tenant: str) -> AsyncIterator[Dispatch]:
        """Open an upstream exchange for `request` on behalf of API key `tenant`."""
        operation = Operation(request, tenant)
        if logger.isEnabledFor(logging.DEBUG):  # counts and flags only: never the content
            log.event(logger, "request_shape", level=logging.DEBUG, **request_shape(request))
        failure: BaseException | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                key_hash: str | None = None
                binding: Binding | None = None
                if request.affinity_key:
                    key_hash = self._affinity.key(tenant, request.affinity_key)
                    await stack.enter_async_context(
                        self._branches.turn(key_hash, timeout_s=self._policy.branch_timeout_s)
                    )
                    binding = await self._affinity.lookup(key_hash)
                opened = await self._open(request, binding, operation, stack)
                if key_hash is not None:
                    self._affinity.bind(
                        key_hash, opened.lease.account_id, opened.route.conversation_id
                    )
                route, exchange = opened.route, opened.exchange
                yield Dispatch(
                    message_id=exchange.message_id,
                    model=route.model,
                    model_name=route.model_name,
                    account_id=opened.lease.account_id,
                    input_tokens=exchange.input_tokens,
                    events=operation.observed(self._events(request, route, exchange, operation)),
                )
        except BaseException as exc:
            failure = exc
            raise
        finally:
            if operation.credits and operation.account_id:
                self._pool.spent(operation.account_id, operation.credits)
            self._oplog.append(operation.entry(failure))

    def _events(
        self, request: CanonicalRequest, route: Route, exchange: Exchange, operation: Operation
    ) -> AsyncIterator[list[CanonicalEvent]]:
        """The exchange's batches, or the turn its steps may add parts to (same route)."""
        steps = self._steps(request, route) if self._steps is not None else ()
        if not steps:
            return exchange.batches()
        client = self._client

        @contextlib.asynccontextmanager
        async def open_part(following: CanonicalRequest) -> AsyncIterator[Exchange]:
            async with open_exchange(client, following, route) as part:
                operation.exchanged(part)
                yield part

        return run_turn(exchange, request, steps, open_part, max_parts=self._policy.max_turn_parts)

    async def _open(
        self,
        request: CanonicalRequest,
        binding: Binding | None,
        operation: Operation,
        stack: contextlib.AsyncExitStack,
    ) -> _Opened:
        """Try accounts until one produces a first event; its slot and response join `stack`.

        Only accounts whose catalog offers the request's model are leased (`ModelDirectory.route`);
        a model none offers is its 404 before any lease.
        """
        routing = self._models.route(request.model, await self._pool.current())
        tried: list[str] = []
        last: ApiError | None = None
        previous: Failure | None = None
        while len(tried) < self._policy.max_account_attempts:
            try:
                lease = await self._pool.lease(
                    prefer=binding.account_id if binding else None,
                    exclude=tried,
                    eligible=routing.offers,
                )
            except ApiError as unavailable:
                if last is None:
                    raise
                # The last attempt's error, told when an account is expected back.
                raise last.told_when(unavailable.headers.get("Retry-After")) from None
            tried.append(lease.account_id)
            operation.account_id = lease.account_id
            async with contextlib.AsyncExitStack() as attempt:
                attempt.callback(lease.release)
                try:
                    opened = await self._attempt(
                        lease, request, routing, binding, operation, attempt
                    )
                except _Retry as retry:
                    last = retry.error
                    if retry.failure in _SUSPECT_REQUEST and retry.failure is previous:
                        log.event(logger, "failover_stopped", failure=retry.failure.value)
                        raise last from None
                    previous = retry.failure
                    continue
                await self._pool.succeeded(lease)
                operation.tried(lease.account_id, "ok")
                operation.committed()
                stack.push_async_exit(attempt.pop_all())
                return opened
        assert last is not None
        raise last

    async def _attempt(
        self,
        lease: Lease,
        request: CanonicalRequest,
        routing: Routing,
        binding: Binding | None,
        operation: Operation,
        stack: contextlib.AsyncExitStack,
    ) -> _Opened:
        operation.attempting(lease.account_id, lease.account.region)
        account = await self._fresh(lease, operation, to_upstream(lease.account))
        route = await self._route(lease, request, routing, binding, operation, account)
        operation.attempting(lease.account_id, account.region, route.model.kiro_id)
        # Each second chance at most once: a refreshed token, a rediscovered profile.
        refreshed = profiled = False
        while True:
            try:
                exchange = await stack.enter_async_context(
                    open_exchange(self._client, request, route)
                )
                break
            except UpstreamError as exc:
                if exc.failure is Failure.BEARER and not refreshed:
                    refreshed = True
                    operation.tried(lease.account_id, exc.failure.value)
                    rejected = route.account.credentials.access_token
                    account = await self._fresh(lease, operation, route.account, rejected=rejected)
                    route = dataclasses.replace(route, account=account)
                    continue
                if exc.failure is Failure.PROFILE_REQUIRED and not profiled:
                    profiled = True
                    found = await self._profile(lease, operation, route.account)
                    if found is not None:
                        route = dataclasses.replace(route, account=found)
                        continue
                if exc.failure is Failure.INVALID_MODEL:
                    # Not in this account's plan after all: its catalog forgets the model (and is
                    # read again), and another account may serve it.
                    self._models.refused(lease.account_id, route.model.kiro_id)
                    operation.tried(lease.account_id, exc.failure.value)
                    raise _Retry(exc.to_api_error(), exc.failure) from None
                token = account.credentials.access_token if exc.failure is Failure.BEARER else None
                raise await self._failed(lease, operation, exc, rejected_token=token) from None
        operation.dropped = exchange.dropped
        operation.exchanged(exchange)
        log.annotate(
            account=lease.account_id,
            upstream_model=route.model.kiro_id,
            attempt=len(operation.attempts) + 1,
            dropped=",".join(exchange.dropped) or None,
        )
        return _Opened(lease, route, exchange)

    async def _route(
        self,
        lease: Lease,
        request: CanonicalRequest,
        routing: Routing,
        binding: Binding | None,
        operation: Operation,
        account: UpstreamAccount,
    ) -> Route:
        """The routed model on this account (its own catalog entry), under which names."""
        catalog = await self._models.catalog_for(account)
        model = catalog.get(routing.kiro_id) if routing.kiro_id else None
        resolution = routing.resolution
        if model is None or resolution is None:
            # Leased before its catalog was read, and it lacks the routed model: the name on its
            # own catalog (family fallback), else another account may list it.
            try:
                resolution = resolve(request.model, catalog, self._models.policy)
            except ApiError as unknown:
                operation.tried(lease.account_id, "model_not_listed")
                raise _Retry(unknown) from None
            model = resolution.info
        self._models.served(request.model, resolution)
        if self._authorize is not None:
            self._authorize(operation.tenant, model)
        asked, limit = request.max_output_tokens, model.max_output_tokens
        if asked is not None and asked > limit:
            # Kiro takes no output limit: the model's own applies, whatever the client asked.
            log.annotate(max_tokens_clamped=f"{asked}>{limit}")
        return Route(
            account=account,
            model=model,
            model_name=request.model if resolution.via == "exact" else model.public_id,
            conversation_id=AffinityMap.conversation_id(binding, lease.account_id),
            parameter_policy=self._policy.parameter_policy,
            cache_points=self._policy.prompt_cache_points,
            tool_delivery=self._policy.tool_delivery,
        )

    async def _fresh(
        self,
        lease: Lease,
        operation: Operation,
        account: UpstreamAccount,
        *,
        rejected: str | None = None,
    ) -> UpstreamAccount:
        try:
            return await self._keeper.fresh(account, rejected_token=rejected)
        except RefreshError as exc:
            # The keeper recorded it (a dead refresh token: needs_login); another account may do.
            operation.tried(lease.account_id, "needs_login" if exc.permanent else "refresh_failed")
            raise _Retry(exc.to_api_error()) from None

    async def _profile(
        self, lease: Lease, operation: Operation, account: UpstreamAccount
    ) -> UpstreamAccount | None:
        """Kiro asked for a profile: the account with the one discovery finds now, or None."""
        try:
            record = await self._finder.find(lease.account)
        except RefreshError as exc:
            operation.tried(lease.account_id, "needs_login" if exc.permanent else "refresh_failed")
            raise _Retry(exc.to_api_error()) from None
        if record.profile_arn is None or record.profile_arn == account.profile_arn:
            return None
        operation.tried(lease.account_id, Failure.PROFILE_REQUIRED.value)
        return dataclasses.replace(account, profile_arn=record.profile_arn, region=record.region)

    async def _failed(
        self,
        lease: Lease,
        operation: Operation,
        error: UpstreamError,
        *,
        rejected_token: str | None = None,
    ) -> _Retry | ApiError:
        """Record a failed attempt on the account; return what to raise."""
        failure, detail = error.failure, error.detail
        http = error if isinstance(error, UpstreamHttpError) else None
        operation.tried(
            lease.account_id,
            failure.value,
            status=http.status if http else None,
            reason=http.reason if http else None,
        )
        log.event(
            logger,
            "upstream_attempt_failed",
            level=logging.WARNING,
            account=lease.account_id,
            failure=failure.value,
            detail=detail,
        )
        api_error = error.to_api_error()
        if not failure.retryable:
            return api_error
        await self._pool.failed(
            lease.account_id,
            failure,
            detail=detail,
            retry_after_s=error.retry_after_s,
            rejected_token=rejected_token,
        )
        if failure is Failure.QUOTA:
            await self._probes.confirm_quota(lease.account_id)
        return _Retry(api_error, failure)
