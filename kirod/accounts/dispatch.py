"""Dispatch: a canonical request in, a canonical event stream out.

canonical request → account → payload → KiroClient → frames → translator → canonical events.

`Dispatcher.open` is an async context manager with two phases. Before it yields, nothing has
reached the client: failures raise `ApiError` (rendered as an HTTP error status), and a bearer
rejection is retried once after a forced token refresh. After it yields, the stream is committed:
failures become a terminal `ErrorEvent`, and nothing is ever replayed. Leaving the context early
(client gone) aborts the upstream response.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

from kirod import log
from kirod.accounts.account import to_upstream
from kirod.accounts.tokens import TokenKeeper
from kirod.canonical.events import CanonicalEvent, ErrorEvent
from kirod.canonical.models import STATIC_CATALOG, ModelCatalog, ModelInfo, resolve_model
from kirod.canonical.models import catalog_from_list_available_models as parse_catalog
from kirod.canonical.request import CanonicalRequest
from kirod.canonical.tokens import estimate_request_tokens
from kirod.errors import ApiError, ErrorKind
from kirod.storage.accounts import AccountStore
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import Failure, RefreshError, UpstreamError
from kirod.upstream.frames import Frame
from kirod.upstream.payload import BuiltPayload, ParameterPolicy, build_payload
from kirod.upstream.translate import Translator

logger = logging.getLogger("kirod.dispatch")

CATALOG_TTL_S = 3600.0


@dataclass(frozen=True)
class Dispatch:
    """A committed upstream exchange: its events, and what the encoders need to know."""

    message_id: str
    model: ModelInfo
    account_id: str
    input_tokens: int
    payload: BuiltPayload
    events: AsyncIterator[CanonicalEvent]


class CatalogCache:
    """Each account's model catalog from ListAvailableModels, with the static list as fallback."""

    def __init__(self, client: KiroClient) -> None:
        self._client = client
        self._entries: dict[str, tuple[float, ModelCatalog]] = {}

    def cached(self, account_id: str) -> ModelCatalog | None:
        entry = self._entries.get(account_id)
        return entry[1] if entry else None

    async def get(self, account: UpstreamAccount) -> ModelCatalog:
        entry = self._entries.get(account.id)
        if entry is not None and time.monotonic() - entry[0] < CATALOG_TTL_S:
            return entry[1]
        try:
            catalog = parse_catalog(await self._client.list_models(account))
        except UpstreamError as exc:
            log.event(
                logger,
                "model_catalog_fallback",
                level=logging.WARNING,
                account=account.id,
                failure=exc.failure.value,
            )
            return entry[1] if entry else STATIC_CATALOG
        if len(catalog) == 0:
            catalog = STATIC_CATALOG
        self._entries[account.id] = (time.monotonic(), catalog)
        return catalog


class Dispatcher:
    def __init__(
        self,
        store: AccountStore,
        client: KiroClient,
        keeper: TokenKeeper,
        catalogs: CatalogCache,
        *,
        parameter_policy: ParameterPolicy = "drop",
    ) -> None:
        self._store = store
        self._client = client
        self._keeper = keeper
        self._catalogs = catalogs
        self._policy = parameter_policy

    async def _account(self) -> UpstreamAccount:
        """The first active account (the account pool replaces this choice)."""
        for record in await self._store.list():
            if record.status == "active":
                return to_upstream(record)
        raise ApiError(
            ErrorKind.UNAVAILABLE,
            "no active Kiro account: add one with 'kiroctl accounts login' or "
            "'kiroctl accounts import'",
            code="no_active_accounts",
        )

    async def _fresh(
        self, account: UpstreamAccount, rejected: str | None = None
    ) -> UpstreamAccount:
        try:
            return await self._keeper.fresh(account, rejected_token=rejected)
        except RefreshError as exc:
            raise exc.to_api_error() from None

    @contextlib.asynccontextmanager
    async def open(self, request: CanonicalRequest, *, tenant: str) -> AsyncIterator[Dispatch]:
        """Open an upstream exchange for `request` on behalf of API key `tenant`."""
        account = await self._account()
        catalog = await self._catalogs.get(account)
        model = resolve_model(request.model, catalog)
        payload = build_payload(
            request,
            model,
            conversation_id=str(uuid.uuid4()),
            profile_arn=account.profile_arn,
            parameter_policy=self._policy,
        )
        account = await self._fresh(account)
        async with contextlib.AsyncExitStack() as stack:
            frames: AsyncIterator[Frame] | None = None
            for attempt in (1, 2):
                try:
                    frames = await stack.enter_async_context(
                        self._client.chat(account, payload.body)
                    )
                    break
                except UpstreamError as exc:
                    log.event(
                        logger,
                        "upstream_attempt_failed",
                        level=logging.WARNING,
                        account=account.id,
                        attempt=attempt,
                        failure=exc.failure.value,
                        status=getattr(exc, "status", None),
                    )
                    if exc.failure is Failure.BEARER and attempt == 1:
                        account = await self._fresh(account, account.credentials.access_token)
                        continue
                    raise exc.to_api_error() from None
            assert frames is not None
            message_id = secrets.token_hex(12)
            input_tokens = estimate_request_tokens(request)
            translator = Translator(
                message_id=message_id,
                model=model.public_id,
                context_window=model.context_window,
                input_tokens_estimate=input_tokens,
                tool_names=payload.tool_names.original,
                declared_tools={tool.name for tool in request.tools},
                thinking_mode=payload.thinking_mode,
            )
            log.event(
                logger,
                "upstream_stream_opened",
                account=account.id,
                model=model.kiro_id,
                dropped=",".join(payload.dropped_parameters) or None,
            )
            yield Dispatch(
                message_id=message_id,
                model=model,
                account_id=account.id,
                input_tokens=input_tokens,
                payload=payload,
                events=_translate(frames, translator),
            )


async def _translate(
    frames: AsyncIterator[Frame], translator: Translator
) -> AsyncIterator[CanonicalEvent]:
    """Frames to events; an upstream failure mid-stream becomes the stream's terminal error."""
    try:
        async for frame in frames:
            for event in translator.feed(frame):
                yield event
    except UpstreamError as exc:
        log.event(
            logger, "upstream_stream_failed", level=logging.WARNING, failure=exc.failure.value
        )
        yield ErrorEvent.from_error(exc.to_api_error())
        return
    for event in translator.finish():
        yield event
