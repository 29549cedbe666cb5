"""One account's try at a request, for the failover loop in `kirod.dispatch.pipeline`.

    fresh token → the model routed on this account's own catalog → the upstream exchange opened

with the second chances that stay on this account, each at most once: a bearer rejection retries
after a forced refresh, "profileArn is required" after discovery found the profile; a refusal of
the root request fields retries without them (and the account keeps going without them for that
model), a refused reasoning signature without any earlier reasoning (docs/KIRO-PROTOCOL.md §2.6).
Kiro refusing the model makes the account's catalog forget it. Any other failure is recorded on
the account (the breaker, quota, suspension) and, when another account may do better, raised as
`Retry`.

An answer that breaks off after its first event is the account's failure as much as one before
it: `broke` records it the same way for an answer no client has seen (it may go elsewhere), and
`finished` tells the account's health how a committed answer ended.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kirod import log
from kirod.accounts.account import to_upstream
from kirod.accounts.affinity import AffinityMap
from kirod.accounts.model_directory import ModelDirectory, Routing
from kirod.accounts.pool import AccountPool, Lease
from kirod.accounts.probes import UsageProbes
from kirod.accounts.profiles import ProfileFinder
from kirod.accounts.tokens import TokenKeeper
from kirod.canonical.catalog import ModelInfo
from kirod.canonical.request import CanonicalRequest
from kirod.canonical.resolution import limited_model, resolve
from kirod.dispatch.operation import Operation
from kirod.errors import ApiError
from kirod.storage.accounts import AccountRecord
from kirod.storage.affinity import Binding
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import Failure, RefreshError, UpstreamError, UpstreamHttpError
from kirod.upstream.exchange import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    Exchange,
    ParameterPolicy,
    Route,
    ToolDelivery,
    open_exchange,
    sends_request_fields,
)

logger = logging.getLogger(__name__)

# The reason of Kiro's schema refusals, the field named or not (docs/KIRO-PROTOCOL.md §2.6).
_BODY_INVALID = "REQUEST_BODY_INVALID"


class Retry(Exception):
    """An attempt failed recoverably; `error` is what the client sees if no account succeeds."""

    def __init__(self, error: ApiError, failure: Failure | None = None) -> None:
        self.error = error
        self.failure = failure


@dataclass(frozen=True, slots=True)
class Opened:
    lease: Lease
    route: Route
    exchange: Exchange


@dataclass(frozen=True)
class RouteSettings:
    """What every route carries from the settings."""

    parameter_policy: ParameterPolicy = "drop"
    cache_points: bool = False
    tool_delivery: ToolDelivery = "complete"
    max_body_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES


@dataclass(frozen=True)
class Attempts:
    """The services an attempt uses; `authorize(tenant, model)` raises when the key may not."""

    pool: AccountPool
    client: KiroClient
    keeper: TokenKeeper
    models: ModelDirectory
    probes: UsageProbes
    finder: ProfileFinder
    settings: RouteSettings
    authorize: Callable[[str, ModelInfo], None] | None = None
    # Each record's upstream view, made once: records are replaced, never changed, and the
    # conversion re-reads the credentials JSON. Keyed by account id, so bounded by the accounts.
    _upstream: dict[str, tuple[AccountRecord, UpstreamAccount]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    async def attempt(
        self,
        lease: Lease,
        request: CanonicalRequest,
        routing: Routing,
        binding: Binding | None,
        operation: Operation,
        stack: contextlib.AsyncExitStack,
    ) -> Opened:
        """Open the exchange on `lease`'s account; its response joins `stack`. Raises `Retry`
        (another account may serve) or the `ApiError` that ends the request."""
        operation.attempting(lease.account_id, lease.account.region)
        account = await self._fresh(lease, operation, self._upstream_account(lease.account))
        route = await self._route(lease, request, routing, binding, operation, account)
        operation.attempting(lease.account_id, account.region, route.model.kiro_id)
        chances = {
            Failure.BEARER,
            Failure.PROFILE_REQUIRED,
            Failure.INVALID_MODEL,
            Failure.REQUEST_FIELDS,
            Failure.SIGNATURE,
        }
        while True:
            try:
                exchange = await stack.enter_async_context(
                    open_exchange(self.client, request, route)
                )
                break
            except UpstreamError as exc:
                again = self._reshaped(lease, operation, request, route, exc, chances)
                if again is None:
                    again = await self._second_chance(lease, operation, route, exc, chances)
                if again is None:
                    refusal = await self._refused(lease, operation, route, exc)
                    if exc.failure is Failure.INVALID_MODEL and exc.failure in chances:
                        chances.discard(exc.failure)
                        again = await self._retarget(
                            lease, request, routing, binding, operation, route.account
                        )
                    if again is None:
                        raise refusal from None
                route = again
        if not route.request_fields:
            # Without the root fields it went through (or they were left out from the start).
            self.models.request_fields_refused(lease.account_id, route.model.kiro_id)
        operation.dropped = exchange.dropped
        operation.exchanged(exchange)
        log.annotate(
            account=lease.account_id,
            upstream_model=route.model.kiro_id,
            attempt=len(operation.attempts) + 1,
            dropped=",".join(exchange.dropped) or None,
        )
        return Opened(lease, route, exchange)

    async def broke(
        self, lease: Lease, operation: Operation, route: Route, error: UpstreamError
    ) -> Retry | None:
        """An answer no client has seen broke off on `lease`'s account after its first event:
        recorded as a failure before it would be; the `Retry` to raise, or None when the failure
        is the request's own (the answer stands as it ended)."""
        if not error.failure.retryable:
            return None
        operation.abandoned()
        refusal = await self._refused(lease, operation, route, error)
        return refusal if isinstance(refusal, Retry) else None

    async def finished(self, lease: Lease, route: Route, broke: UpstreamError | None) -> None:
        """A committed answer ended: a break on the account counts against it (the breaker,
        throttling) as before the first event; any other end closes its breaker."""
        if broke is None or not broke.failure.retryable:
            await self.pool.succeeded(lease)
            return
        bearer = broke.failure is Failure.BEARER
        await self.pool.failed(
            lease.account_id,
            broke.failure,
            detail=broke.detail,
            retry_after_s=broke.retry_after_s,
            rejected_token=route.account.credentials.access_token if bearer else None,
        )

    def _upstream_account(self, record: AccountRecord) -> UpstreamAccount:
        kept = self._upstream.get(record.id)
        if kept is not None and kept[0] is record:
            return kept[1]
        account = to_upstream(record)
        self._upstream[record.id] = (record, account)
        return account

    def _reshaped(
        self,
        lease: Lease,
        operation: Operation,
        request: CanonicalRequest,
        route: Route,
        error: UpstreamError,
        chances: set[Failure],
    ) -> Route | None:
        """docs/KIRO-PROTOCOL.md §2.6: the route to send the same request once more on this
        account, shaped as Kiro takes it, or None; uses up the chance. Neither refusal is the
        account's fault, so nothing is held against it.

        A refused signature (the tool list changed since it was made) goes again with every
        earlier reasoning block left out, as Kiro's own agent does. Root fields refused by name go
        again without them, and so does a body with root fields refused as REQUEST_BODY_INVALID
        with no field named (some external-IdP accounts refuse the root field itself, in words not
        published); the account keeps going without them for the model once a request went
        through that way. A bare "Improperly formed request." without that reason is not taken
        for one: it is how Kiro refuses a conversation's shape, which no retry changes.
        """
        failure = error.failure
        if failure is Failure.SIGNATURE and failure in chances:
            chances.discard(failure)
            self._reshaping(lease, operation, route, error, "reasoning_signature_refused")
            return dataclasses.replace(route, replay_reasoning=False)
        unexplained = (
            failure is Failure.BAD_REQUEST
            and isinstance(error, UpstreamHttpError)
            and error.reason == _BODY_INVALID
            and route.request_fields
            and sends_request_fields(request, route.model)
        )
        if (failure is Failure.REQUEST_FIELDS or unexplained) and (
            Failure.REQUEST_FIELDS in chances
        ):
            chances.discard(Failure.REQUEST_FIELDS)
            self._reshaping(lease, operation, route, error, "request_fields_fallback")
            return dataclasses.replace(route, request_fields=False)
        return None

    @staticmethod
    def _reshaping(
        lease: Lease, operation: Operation, route: Route, error: UpstreamError, event: str
    ) -> None:
        """The refused try, in the operation log's attempts and the log (shapes only)."""
        http = error if isinstance(error, UpstreamHttpError) else None
        operation.tried(
            lease.account_id,
            error.failure.value,
            status=http.status if http else None,
            reason=http.reason if http else None,
        )
        log.event(
            logger,
            event,
            level=logging.WARNING,
            account=lease.account_id,
            model=route.model.kiro_id,
            failure=error.failure.value,
        )

    async def _second_chance(
        self,
        lease: Lease,
        operation: Operation,
        route: Route,
        error: UpstreamError,
        chances: set[Failure],
    ) -> Route | None:
        """The route to try again on this account after `error`, or None; uses up the chance."""
        if error.failure not in chances or error.failure is Failure.INVALID_MODEL:
            return None
        chances.discard(error.failure)
        if error.failure is Failure.BEARER:
            operation.tried(lease.account_id, error.failure.value)
            rejected = route.account.credentials.access_token
            account = await self._fresh(lease, operation, route.account, rejected=rejected)
            return dataclasses.replace(route, account=account)
        found = await self._profile(lease, operation, route.account)
        return dataclasses.replace(route, account=found) if found is not None else None

    async def _retarget(
        self,
        lease: Lease,
        request: CanonicalRequest,
        routing: Routing,
        binding: Binding | None,
        operation: Operation,
        account: UpstreamAccount,
    ) -> Route | None:
        """Kiro refused a model the static list offered (no catalog of this account could be
        read): the same name on this account once more, now without that model (one account
        must not fail every request for a model the static list guessed wrong)."""
        if self.models.catalog_read(lease.account_id):
            return None
        try:
            return await self._route(lease, request, routing, binding, operation, account)
        except Retry:
            return None

    async def _refused(
        self, lease: Lease, operation: Operation, route: Route, error: UpstreamError
    ) -> Retry | ApiError:
        if error.failure is Failure.INVALID_MODEL:
            # Its catalog forgets the model until it is read again (`ModelDirectory`), and
            # another account may serve it. A model the catalog listed, or a Claude
            # one while it lists none, is the region's or a policy's doing: the client is told
            # what to do about it (docs/KIRO-PROTOCOL.md §2.7).
            kiro_id = route.model.kiro_id
            limited = self.models.limited(lease.account_id, kiro_id)
            self.models.refused(lease.account_id, kiro_id)
            operation.tried(lease.account_id, error.failure.value)
            refusal = limited_model(route.model_name) if limited else error.to_api_error()
            return Retry(refusal, error.failure)
        bearer = error.failure is Failure.BEARER
        token = route.account.credentials.access_token if bearer else None
        return await self._failed(lease, operation, error, rejected_token=token)

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
        catalog = await self.models.catalog_for(account)
        model = catalog.get(routing.kiro_id) if routing.kiro_id else None
        resolution = routing.resolution
        if model is None or resolution is None:
            # Leased before its catalog was read, and it lacks the routed model: the name on its
            # own catalog (family fallback), else another account may list it.
            try:
                resolution = resolve(request.model, catalog, self.models.policy)
            except ApiError as unknown:
                operation.tried(lease.account_id, "model_not_listed")
                raise Retry(unknown) from None
            model = resolution.info
        self.models.served(request.model, resolution)
        if self.authorize is not None:
            self.authorize(operation.tenant, model)
        asked, limit = request.max_output_tokens, model.max_output_tokens
        if asked is not None and asked > limit:
            # Kiro takes no output limit: the model's own applies, whatever the client asked.
            log.annotate(max_tokens_clamped=f"{asked}>{limit}")
        return Route(
            account=account,
            model=model,
            model_name=request.model if resolution.via == "exact" else model.public_id,
            conversation_id=AffinityMap.conversation_id(binding, lease.account_id),
            parameter_policy=self.settings.parameter_policy,
            cache_points=self.settings.cache_points,
            tool_delivery=self.settings.tool_delivery,
            max_body_bytes=self.settings.max_body_bytes,
            # The window this account really has for it, where kirod learned one.
            usage_window=self.models.windows.window(lease.account_id, model.kiro_id),
            request_fields=self.models.takes_request_fields(lease.account_id, model.kiro_id),
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
            return await self.keeper.fresh(account, rejected_token=rejected)
        except RefreshError as exc:
            raise self._refresh_failed(lease, operation, exc) from None

    async def _profile(
        self, lease: Lease, operation: Operation, account: UpstreamAccount
    ) -> UpstreamAccount | None:
        """Kiro asked for a profile: the account with the one discovery finds now, or None."""
        try:
            record = await self.finder.find(lease.account)
        except RefreshError as exc:
            raise self._refresh_failed(lease, operation, exc) from None
        if record.profile_arn is None or record.profile_arn == account.profile_arn:
            return None
        operation.tried(lease.account_id, Failure.PROFILE_REQUIRED.value)
        return dataclasses.replace(account, profile_arn=record.profile_arn, region=record.region)

    @staticmethod
    def _refresh_failed(lease: Lease, operation: Operation, error: RefreshError) -> Retry:
        # The keeper recorded it (a dead refresh token: needs_login); another account may do.
        operation.tried(lease.account_id, "needs_login" if error.permanent else "refresh_failed")
        return Retry(error.to_api_error())

    async def _failed(
        self,
        lease: Lease,
        operation: Operation,
        error: UpstreamError,
        *,
        rejected_token: str | None = None,
    ) -> Retry | ApiError:
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
        after = await self.pool.failed(
            lease.account_id,
            failure,
            detail=detail,
            retry_after_s=error.retry_after_s,
            rejected_token=rejected_token,
        )
        if failure is Failure.SUSPICIOUS:
            api_error = _resting_until(api_error, after)
        if failure is Failure.QUOTA:
            await self.probes.confirm_quota(lease.account_id)
        return Retry(api_error, failure)


def _resting_until(error: ApiError, after: AccountRecord | None) -> ApiError:
    """A flagged account's error, naming when its rest ends (Retry-After is left to the
    pool: another account may be back sooner)."""
    if after is None or after.status != "cooling_down" or after.status_until is None:
        return error
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(after.status_until))
    return ApiError(error.kind, f"{error.message} until {when}", code=error.code)
