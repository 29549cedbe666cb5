"""Dispatch: a canonical request in, a canonical event stream out, over the account pool.

    affinity key → branch queue → account lease → fresh token → payload → KiroClient → first event
                                       ▲ recoverable failure before any output: the next account
    → Dispatch (committed) → translated events → the protocol encoder

`Dispatcher.open` is an async context manager with two phases. Before it yields, nothing has
reached the client. A bearer rejection is retried once on the same account after a forced
refresh; any other recoverable failure (throttling, quota, suspension, server error, network, a
stream that fails before its first event, a model missing from this account's catalog) moves the
request to another eligible account, at most `max_account_attempts` accounts in all; failures of
the request itself (validation, context too long, a model Kiro refuses) raise at once. The
exchange commits when the upstream produced its first event: from then on failures become the
stream's terminal `ErrorEvent` and nothing is replayed.

Leaving the context, however it happens (done, failed, or cancelled because the client went away),
aborts the upstream response if still open, releases the account's slot and the conversation's
branch, and writes the request's operation-log row through the store's writer. The row's status is
inferred: 200 when the block ends normally (an error that ended the stream is still recorded),
the `ApiError`'s status when one escapes, 499 when the client went away before the event stream
ran to its end (one that leaves once it has it all, mid-cleanup, got its answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from kirod import log
from kirod.accounts.account import to_upstream
from kirod.accounts.affinity import AffinityMap
from kirod.accounts.branches import BranchQueue
from kirod.accounts.models import ModelDirectory
from kirod.accounts.pool import AccountPool, Lease
from kirod.accounts.probes import UsageProbes
from kirod.accounts.tokens import TokenKeeper
from kirod.canonical.events import (
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    Usage,
)
from kirod.canonical.models import ModelInfo
from kirod.canonical.request import CanonicalRequest
from kirod.canonical.tokens import estimate_request_tokens
from kirod.errors import ApiError, ErrorKind, KirodError
from kirod.storage.affinity import Binding
from kirod.storage.oplog import UNKNOWN_MODEL, Attempt, OpEntry, OpLog
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import Failure, RefreshError, UpstreamError, UpstreamHttpError
from kirod.upstream.frames import Frame
from kirod.upstream.payload import BuiltPayload, ParameterPolicy, build_payload
from kirod.upstream.translate import Translator

logger = logging.getLogger("kirod.dispatch")

QUOTA_PROBE_TIMEOUT_S = 10.0

# A stream that fails with one of these before its first event can go to another account.
_EARLY_FAILURES: dict[str | None, Failure] = {
    "upstream_throttled": Failure.THROTTLED,
    "upstream_unavailable": Failure.SERVER,
    "empty_response": Failure.SERVER,
}


@dataclass(frozen=True)
class Dispatch:
    """A committed upstream exchange: its events, and what the encoders need to know."""

    message_id: str
    model: ModelInfo
    model_name: str  # what responses name: the client's own name, or the substitute's public id
    account_id: str
    input_tokens: int
    payload: BuiltPayload
    events: AsyncIterator[CanonicalEvent]


@dataclass(frozen=True)
class DispatchPolicy:
    max_account_attempts: int = 3
    branch_timeout_s: float = 600.0  # how long a turn waits for its conversation's previous one
    parameter_policy: ParameterPolicy = "drop"


class _Retry(Exception):
    """An attempt failed recoverably; `error` is what the client sees if no account succeeds."""

    def __init__(self, error: ApiError, failure: Failure | None = None) -> None:
        self.error = error
        self.failure = failure


# Failures a request can cause itself (a body Kiro chokes on): the same one on two accounts in a
# row ends the failover, so one bad payload does not count against every account it visits.
_SUSPECT_REQUEST: frozenset[Failure] = frozenset({Failure.SERVER, Failure.PROTOCOL})


@dataclass
class _Opened:
    lease: Lease
    model: ModelInfo
    model_name: str
    payload: BuiltPayload
    message_id: str
    input_tokens: int
    first: list[CanonicalEvent]
    frames: AsyncIterator[Frame]
    translator: Translator
    conversation_id: str


class _Operation:
    """The operation-log row of one request, filled in as it goes."""

    def __init__(self, request: CanonicalRequest, tenant: str) -> None:
        self.request = request
        self.tenant = tenant
        self.at = time.time()
        self._start = time.monotonic()
        self.attempts: list[Attempt] = []
        self.account_id: str | None = None
        self.dropped: tuple[str, ...] = ()
        self.ttfb_ms: float | None = None
        self.stop_reason: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.credits: float | None = None
        self.stream_error: str | None = None
        self.finished = False  # the committed event stream ran to its end

    def tried(self, account_id: str, outcome: str) -> None:
        self.attempts.append(Attempt(account_id, outcome))

    def committed(self) -> None:
        self.ttfb_ms = self._elapsed_ms()

    def observe(self, event: CanonicalEvent) -> CanonicalEvent:
        if isinstance(event, Usage):
            self.input_tokens, self.output_tokens = event.input_tokens, event.output_tokens
            self.credits = event.credits
        elif isinstance(event, MessageStop):
            self.stop_reason = event.stop_reason.value
        elif isinstance(event, ErrorEvent):
            self.stream_error = event.code or event.kind.name.lower()
        return event

    def entry(self, exc: BaseException | None) -> OpEntry:
        if self.finished and isinstance(exc, asyncio.CancelledError | ConnectionError):
            exc = None  # the client went away after the whole answer was handed to it
        status, error = _outcome(exc)
        return OpEntry(
            at=self.at,
            request_id=self.request.request_id,
            key_id=self.tenant,
            protocol=self.request.protocol.value,
            # A name no account serves is the client's invention: logged as a marker.
            model=UNKNOWN_MODEL if error == "model_not_found" else self.request.model,
            stream=self.request.stream,
            account_id=self.account_id,
            attempts=tuple(self.attempts),
            stop_reason=self.stop_reason,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            credits=self.credits,
            ttfb_ms=self.ttfb_ms,
            total_ms=self._elapsed_ms(),
            status=status,
            error=error or self.stream_error,
            dropped=self.dropped,
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
    return 500, "internal_error"


class Dispatcher:
    def __init__(
        self,
        pool: AccountPool,
        client: KiroClient,
        keeper: TokenKeeper,
        models: ModelDirectory,
        affinity: AffinityMap,
        probes: UsageProbes,
        oplog: OpLog,
        *,
        policy: DispatchPolicy = DispatchPolicy(),
        authorize: Callable[[str, ModelInfo], None] | None = None,
    ) -> None:
        """`authorize(tenant, model)` raises an `ApiError` when the API key may not use it."""
        self._pool = pool
        self._client = client
        self._keeper = keeper
        self._models = models
        self._affinity = affinity
        self._probes = probes
        self._oplog = oplog
        self._policy = policy
        self._authorize = authorize
        self._branches = BranchQueue()

    @contextlib.asynccontextmanager
    async def open(self, request: CanonicalRequest, *, tenant: str) -> AsyncIterator[Dispatch]:
        """Open an upstream exchange for `request` on behalf of API key `tenant`."""
        operation = _Operation(request, tenant)
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
                    self._affinity.bind(key_hash, opened.lease.account_id, opened.conversation_id)
                yield Dispatch(
                    message_id=opened.message_id,
                    model=opened.model,
                    model_name=opened.model_name,
                    account_id=opened.lease.account_id,
                    input_tokens=opened.input_tokens,
                    payload=opened.payload,
                    events=_events(opened, operation),
                )
        except BaseException as exc:
            failure = exc
            raise
        finally:
            if operation.credits and operation.account_id:
                self._pool.spent(operation.account_id, operation.credits)
            self._oplog.append(operation.entry(failure))

    async def _open(
        self,
        request: CanonicalRequest,
        binding: Binding | None,
        operation: _Operation,
        stack: contextlib.AsyncExitStack,
    ) -> _Opened:
        """Try accounts until one produces a first event; its slot and response join `stack`."""
        tried: list[str] = []
        last: ApiError | None = None
        previous: Failure | None = None
        while len(tried) < self._policy.max_account_attempts:
            try:
                lease = await self._pool.lease(
                    prefer=binding.account_id if binding else None, exclude=tried
                )
            except ApiError as unavailable:
                if last is None:
                    raise
                raise _with_retry_after(last, unavailable) from None
            tried.append(lease.account_id)
            operation.account_id = lease.account_id
            async with contextlib.AsyncExitStack() as attempt:
                attempt.callback(lease.release)
                try:
                    opened = await self._attempt(lease, request, binding, operation, attempt)
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
        binding: Binding | None,
        operation: _Operation,
        stack: contextlib.AsyncExitStack,
    ) -> _Opened:
        account = await self._fresh(lease, operation, to_upstream(lease.account))
        try:
            resolution = self._models.resolve(
                request.model, await self._models.catalog_for(account)
            )
        except ApiError as unknown:
            # Not in this account's catalog (its plan lacks it?): another account may list it.
            operation.tried(lease.account_id, "model_not_listed")
            raise _Retry(unknown) from None
        model = resolution.info
        if self._authorize is not None:
            self._authorize(operation.tenant, model)
        conversation_id = AffinityMap.conversation_id(binding, lease.account_id)
        payload = build_payload(
            request,
            model,
            conversation_id=conversation_id,
            profile_arn=account.profile_arn,
            parameter_policy=self._policy.parameter_policy,
        )
        operation.dropped = payload.dropped_parameters
        frames: AsyncIterator[Frame] | None = None
        for forced in (False, True):
            try:
                frames = await stack.enter_async_context(
                    self._client.chat(account, payload.encoded or payload.body)
                )
                break
            except UpstreamError as exc:
                if exc.failure is Failure.BEARER and not forced:
                    operation.tried(lease.account_id, exc.failure.value)
                    rejected = account.credentials.access_token
                    account = await self._fresh(lease, operation, account, rejected=rejected)
                    continue
                token = account.credentials.access_token if exc.failure is Failure.BEARER else None
                failed = await self._failed(lease, operation, exc, rejected_token=token)
                if exc.failure is Failure.CONTEXT_TOO_LONG:
                    failed = _too_long(request, model)
                raise failed from None
        assert frames is not None
        message_id = secrets.token_hex(12)
        model_name = request.model if resolution.via == "exact" else model.public_id
        input_tokens = estimate_request_tokens(request)
        translator = Translator(
            message_id=message_id,
            model=model_name,
            context_window=model.context_window,
            input_tokens_estimate=input_tokens,
            tool_names=payload.tool_names.original,
            declared_tools={tool.name for tool in request.tools},
            thinking_mode=payload.thinking_mode,
        )
        try:
            first = await _first_events(frames, translator)
        except UpstreamError as exc:
            raise await self._failed(lease, operation, exc) from None
        early = next((e for e in first if isinstance(e, ErrorEvent)), None)
        if early is not None and early.code in _EARLY_FAILURES:
            raise await self._failed(
                lease,
                operation,
                early.to_error(),
                failure=_EARLY_FAILURES[early.code],
                detail=early.code or "",
            )
        log.annotate(
            account=lease.account_id,
            upstream_model=model.kiro_id,
            attempt=len(operation.attempts) + 1,
            dropped=",".join(payload.dropped_parameters) or None,
        )
        return _Opened(
            lease=lease,
            model=model,
            model_name=model_name,
            payload=payload,
            message_id=message_id,
            input_tokens=input_tokens,
            first=first,
            frames=frames,
            translator=translator,
            conversation_id=conversation_id,
        )

    async def _fresh(
        self,
        lease: Lease,
        operation: _Operation,
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

    async def _failed(
        self,
        lease: Lease,
        operation: _Operation,
        error: UpstreamError | ApiError,
        *,
        failure: Failure | None = None,
        detail: str | None = None,
        rejected_token: str | None = None,
    ) -> _Retry | ApiError:
        """Record a failed attempt on the account; return what to raise."""
        if isinstance(error, UpstreamError):
            failure = error.failure
            detail = _detail(error)
            retry_after, api_error = error.retry_after_s, error.to_api_error()
        else:
            retry_after, api_error = None, error
        assert failure is not None
        operation.tried(lease.account_id, failure.value)
        log.event(
            logger,
            "upstream_attempt_failed",
            level=logging.WARNING,
            account=lease.account_id,
            failure=failure.value,
            detail=detail,
        )
        if not failure.retryable:
            return api_error
        await self._pool.failed(
            lease.account_id,
            failure,
            detail=detail or "",
            retry_after_s=retry_after,
            rejected_token=rejected_token,
        )
        if failure is Failure.QUOTA:
            await self._confirm_quota(lease.account_id)
        return _Retry(api_error, failure)

    async def _confirm_quota(self, account_id: str) -> None:
        """A 402 is checked against getUsageLimits at once: the probe tells for how long the
        account is out (until its window resets), or that it still has credits after all."""
        try:
            async with asyncio.timeout(QUOTA_PROBE_TIMEOUT_S):
                await self._probes.probe(account_id)
        except (TimeoutError, KirodError) as exc:
            log.event(
                logger,
                "quota_probe_failed",
                level=logging.WARNING,
                account=account_id,
                error=type(exc).__name__,
            )


def _detail(error: UpstreamError) -> str:
    """A short, secret-free description of an upstream failure, for the account's last error."""
    if isinstance(error, UpstreamHttpError):
        if error.failure is Failure.SUSPENDED and error.upstream_message:
            return error.upstream_message
        return f"HTTP {error.status}" + (f" {error.reason}" if error.reason else "")
    return str(error)


def _too_long(request: CanonicalRequest, model: ModelInfo) -> ApiError:
    """Kiro's "too long", in the form Claude Code reads to start its auto-compaction.

    The local estimate can fall short of Kiro's count; Kiro said the prompt does not fit, so
    the count given is at least one more than the window.
    """
    window = model.context_window
    tokens = max(estimate_request_tokens(request), window + 1)
    return ApiError(
        ErrorKind.INVALID_REQUEST,
        f"prompt is too long: {tokens} tokens > {window} maximum",
        code="context_length_exceeded",
        final=True,
    )


def _with_retry_after(error: ApiError, unavailable: ApiError) -> ApiError:
    """The last attempt's error, told when an account is expected back if it did not say."""
    retry_after = unavailable.headers.get("Retry-After")
    if retry_after is None or "Retry-After" in error.headers:
        return error
    if error.kind not in (ErrorKind.RATE_LIMIT, ErrorKind.OVERLOADED, ErrorKind.UNAVAILABLE):
        return error
    return ApiError(
        error.kind,
        error.message,
        code=error.code,
        param=error.param,
        headers={**error.headers, "Retry-After": retry_after},
        final=error.final,
    )


async def _first_events(
    frames: AsyncIterator[Frame], translator: Translator
) -> list[CanonicalEvent]:
    """Read until the translator produces more than `MessageStart` (or the stream ends)."""
    events: list[CanonicalEvent] = []
    async for frame in frames:
        events += translator.feed(frame)
        if any(not isinstance(event, MessageStart) for event in events):
            return events
    return events + translator.finish()


async def _events(opened: _Opened, operation: _Operation) -> AsyncIterator[CanonicalEvent]:
    """The committed stream; an upstream failure mid-stream becomes its terminal error."""
    for event in opened.first:
        yield operation.observe(event)
    try:
        async for frame in opened.frames:
            for event in opened.translator.feed(frame):
                yield operation.observe(event)
    except UpstreamError as exc:
        log.event(
            logger, "upstream_stream_failed", level=logging.WARNING, failure=exc.failure.value
        )
        yield operation.observe(ErrorEvent.from_error(exc.to_api_error()))
    else:
        for event in opened.translator.finish():
            yield operation.observe(event)
    operation.finished = True
