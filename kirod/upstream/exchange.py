"""One upstream exchange: a canonical request sent to Kiro on one account, canonical events back.

    CanonicalRequest + Route → build_payload → KiroClient.chat → frames per chunk → Translator
                                                                      → one event batch per chunk

`open_exchange` is an async context manager that owns the upstream response: leaving it, however
that happens, aborts the response if it is still open. Before it yields, the exchange has read
Kiro's answer up to its first output (`Exchange.first`); a failure until then raises an
`UpstreamError` (an answer that is only an error event raises `UpstreamStreamError`), so the
caller, which owns the account logic (choice, lease, bearer retry, failover), can still try
elsewhere. After it yields, `batches()` carries the rest, one list of events per network chunk,
and a failure becomes the stream's terminal `ErrorEvent`; when the failure is the account's, as
it would have been before the first event (the connection dropped, the stream broke or stalled,
Kiro sent an error or throttling frame), `Exchange.failure` says so before that event is handed
on, so the caller can count it against the account, or send elsewhere an answer no client saw.

Images beyond Kiro's limits are resized first (`kirod.upstream.images`), in a worker thread
when one may have to change; an image that cannot be is refused with no call to Kiro.

A search-only call (Claude Code's WebSearch side call) is answered from Kiro's MCP search
without a chat (`kirod.upstream.websearch`); a request with a hosted web search has the search
tool declared to the model.

A turn may need more than one exchange (a web search inside the turn, a continuation after a
truncated answer): `kirod.upstream.turn` joins them into one message.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from kirod import log
from kirod.canonical.catalog import ModelInfo
from kirod.canonical.context_window import prompt_limit
from kirod.canonical.events import CanonicalEvent, ErrorEvent, MessageStart
from kirod.canonical.request import CanonicalRequest, WebSearch
from kirod.canonical.token_count import estimate_request_tokens
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import (
    Failure,
    UpstreamDocumentRefused,
    UpstreamError,
    UpstreamHttpError,
    UpstreamPromptTooLong,
    UpstreamStreamError,
)
from kirod.upstream.frames import Frame
from kirod.upstream.images import fit_images, needs_fitting
from kirod.upstream.payload import DEFAULT_MAX_PAYLOAD_BYTES, ParameterPolicy, build_payload
from kirod.upstream.reasoning import sends_request_fields
from kirod.upstream.translate import CONTEXT_TOO_LONG, ToolDelivery, Translator, Truncation
from kirod.upstream.websearch import SEARCH_TOOL, answer_search

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "AnswerTail",
    "ContextUsage",
    "Exchange",
    "ParameterPolicy",
    "Route",
    "ToolDelivery",
    "open_exchange",
    "sends_request_fields",
]

logger = logging.getLogger(__name__)

# Kiro's error events that are the account's failure: an answer that is only one of them may go
# to another account, and one after other events is a broken stream.
_FAILURE_EVENTS: dict[str | None, Failure] = {
    "upstream_throttled": Failure.THROTTLED,
    "upstream_unavailable": Failure.SERVER,
    "empty_response": Failure.SERVER,
}


@dataclass(frozen=True, slots=True)
class Route:
    """Where and as what an exchange goes: the account, the model that serves, and the names."""

    account: UpstreamAccount
    model: ModelInfo
    model_name: str  # what the events name: the client's own name, or the substitute's public id
    conversation_id: str
    parameter_policy: ParameterPolicy = "drop"
    cache_points: bool = False  # the `prompt_cache_points` experiment
    tool_delivery: ToolDelivery = "complete"
    max_body_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES  # the kiro_max_body_bytes option
    # What Kiro's context percentage is of, when the account has a window of its own for the
    # model (docs/KIRO-PROTOCOL.md §3.5); None: the model's `context_window`.
    usage_window: int | None = None
    # docs/KIRO-PROTOCOL.md §2.6: off once the account refused root fields for the model, or
    # for the one retry after Kiro refused a replayed reasoning signature.
    request_fields: bool = True
    replay_reasoning: bool = True

    @property
    def window(self) -> int:
        return self.usage_window or self.model.context_window

    @property
    def prompt_limit(self) -> int:
        """The most prompt tokens the model takes on this account."""
        if self.usage_window is None:
            return self.model.context_window
        return prompt_limit(self.model, self.usage_window)


@dataclass(frozen=True, slots=True)
class AnswerTail:
    """What an answer's tail frames said (docs/KIRO-PROTOCOL.md §3.4): the tail events that came,
    in order; the key names of `metadataEvent.tokenUsage` (None: none came); the credits of its
    `meteringEvent`s (None: no number came)."""

    events: tuple[str, ...]
    token_usage_keys: tuple[str, ...] | None
    credits: float | None


@dataclass(frozen=True, slots=True)
class ContextUsage:
    """Kiro's context percentage of an exchange, and the tokens kirod estimated for the same
    request: the prompt, and the answer, which the percentage also counts (docs/KIRO-PROTOCOL.md
    §3.5)."""

    percentage: float
    estimated_tokens: int


class Exchange:
    """An opened exchange: what its payload dropped, and its events."""

    def __init__(
        self,
        *,
        message_id: str,
        input_tokens: int,
        dropped: tuple[str, ...],
        first: list[CanonicalEvent],
        chunks: AsyncIterator[list[Frame]] | None = None,
        translator: Translator | None = None,
        frames: int = 0,
        bytes_read: int = 0,
    ) -> None:
        """Without `chunks` (an answer kirod makes itself), `first` is the whole message."""
        self.message_id = message_id
        self.input_tokens = input_tokens
        self.dropped = dropped
        self.first = first
        self.opened_ns = time.monotonic_ns()  # when its first output was read
        self._chunks = chunks
        self._translator = translator
        self.frames = frames  # upstream event-stream frames read so far, for the trace
        self.bytes_read = bytes_read  # and their bytes
        # Why the answer broke off after its first event, when that is the account's failure;
        # set before the error event that ends the stream is handed on.
        self.failure: UpstreamError | None = None

    @property
    def context_usage(self) -> ContextUsage | None:
        """Kiro's context percentage of this exchange, once it came, beside kirod's estimate."""
        translator = self._translator
        if translator is None or translator.context_usage is None:
            return None
        estimated = self.input_tokens + translator.output_tokens
        return ContextUsage(translator.context_usage, estimated)

    @property
    def tail(self) -> AnswerTail | None:
        """The answer's tail as it came (which frames, tokenUsage's keys, the credits metered),
        once the events have ended; None for an answer kirod made itself."""
        translator = self._translator
        if translator is None:
            return None
        return AnswerTail(
            tuple(translator.tail_events), translator.token_usage_keys, translator.credits
        )

    @property
    def truncation(self) -> Truncation | None:
        """The tool call Kiro cut off, once the events have ended with it."""
        return self._translator.truncation if self._translator is not None else None

    @property
    def cut(self) -> bool:
        """Whether the answer ended cleanly without its tail frames: a cut generation, ended
        `max_tokens` (`kirod.upstream.translate`); not the account's failure, so not retried."""
        return self._translator is not None and self._translator.cut

    async def batches(self) -> AsyncIterator[list[CanonicalEvent]]:
        """`first`, then one batch per network chunk; an upstream failure ends it as an error
        (and is the exchange's `failure` when it is the account's)."""
        translator = self._translator
        if translator is not None and translator.error is not None:
            self._judge(translator.error)
        yield self.first
        if self._chunks is None or translator is None:
            return
        try:
            async for frames in self._chunks:
                self.frames += len(frames)
                if len(frames) == 1:  # the usual chunk: one frame, one add
                    self.bytes_read += frames[0].size
                    events = translator.feed(frames[0])
                else:
                    self.bytes_read += sum(frame.size for frame in frames)
                    events = [event for frame in frames for event in translator.feed(frame)]
                if events:
                    if translator.error is not None:
                        self._judge(translator.error)
                    yield events
        except UpstreamError as exc:
            log.event(
                logger, "upstream_stream_failed", level=logging.WARNING, failure=exc.failure.value
            )
            ended = translator.error is not None
            events = translator.broken(exc.to_api_error())
            if not ended and translator.truncation is None:
                self.failure = exc  # a tool call cut off is a truncation, which a step continues
            if events:
                yield events
        else:
            if events := translator.finish():
                if translator.error is not None:
                    self._judge(translator.error)
                yield events

    def _judge(self, error: ErrorEvent) -> None:
        """Kiro's error event that ends the stream: the account's failure, or the request's."""
        failure = _FAILURE_EVENTS.get(error.code)
        if failure is not None:
            self.failure = UpstreamStreamError(failure, error.to_error())


@contextlib.asynccontextmanager
async def open_exchange(
    client: KiroClient, request: CanonicalRequest, route: Route
) -> AsyncIterator[Exchange]:
    """Send `request` on `route`; see the module docstring for what raises when."""
    model = route.model
    search = request.web_search
    if search is not None and search.query is not None:
        yield await _search_answer(client, request, route, search)
        return
    if request.server_tools:
        request = dataclasses.replace(request, tools=(*request.tools, SEARCH_TOOL))
    if model.supports_images and needs_fitting(request):
        # Decoding and resampling take up to a few hundred milliseconds an image
        # (docs/UPSTREAM.md §6).
        request = await asyncio.to_thread(fit_images, request)
    payload = build_payload(
        request,
        model,
        conversation_id=route.conversation_id,
        profile_arn=route.account.profile_arn,
        parameter_policy=route.parameter_policy,
        cache_points=route.cache_points,
        max_payload_bytes=route.max_body_bytes,
        request_fields=route.request_fields,
        replay_reasoning=route.replay_reasoning,
    )
    if payload.effort_clamped is not None:
        log.annotate(effort_clamped=payload.effort_clamped)  # on the request's access-log line
    if payload.max_tokens_clamped is not None:
        log.annotate(max_tokens_clamped=payload.max_tokens_clamped)
    async with contextlib.AsyncExitStack() as owned:
        try:
            chunks = await owned.enter_async_context(
                client.chat(route.account, payload.encoded or payload.body)
            )
        except UpstreamError as exc:
            if exc.failure is Failure.CONTEXT_TOO_LONG:
                # The local estimate can fall short of Kiro's count, which is the one that holds.
                tokens = estimate_request_tokens(request)
                raise UpstreamPromptTooLong(tokens, route.prompt_limit) from None
            if _bare_refusal(exc) and payload.documents:
                raise UpstreamDocumentRefused(payload.documents, route.model_name) from None
            raise
        message_id = secrets.token_hex(12)
        input_tokens = estimate_request_tokens(request)
        translator = Translator(
            message_id=message_id,
            model=route.model_name,
            context_window=route.window,
            input_tokens_estimate=input_tokens,
            tool_names=payload.tool_names.original,
            declared_tools={tool.name for tool in request.tools},
            thinking_mode=payload.thinking_mode,
            tool_delivery=route.tool_delivery,
            drift=client.drift,
            region=route.account.region,
        )
        first, frames, bytes_read = await _first_events(chunks, translator)
        # Only an error before any output may go elsewhere: one after it is the stream's end.
        early = next((e for e in first if not isinstance(e, MessageStart)), None)
        if isinstance(early, ErrorEvent) and early.code in _FAILURE_EVENTS:
            raise UpstreamStreamError(_FAILURE_EVENTS[early.code], early.to_error())
        if isinstance(early, ErrorEvent) and early.code == CONTEXT_TOO_LONG:
            # MODEL_CONTEXT_WINDOW_EXCEEDED before any output: as Kiro's 400 for the same.
            raise UpstreamPromptTooLong(input_tokens, route.prompt_limit)
        yield Exchange(
            message_id=message_id,
            input_tokens=input_tokens,
            dropped=payload.dropped_parameters,
            first=first,
            chunks=chunks,
            translator=translator,
            frames=frames,
            bytes_read=bytes_read,
        )


def _bare_refusal(error: UpstreamError) -> bool:
    """Kiro's 400 with no reason: what it answers a body it cannot take (docs/KIRO-PROTOCOL.md
    §4.2), as opposed to one naming its cause (a tool schema, a signature)."""
    return (
        isinstance(error, UpstreamHttpError)
        and error.failure is Failure.BAD_REQUEST
        and error.status == 400
        and error.reason is None
    )


async def _search_answer(
    client: KiroClient, request: CanonicalRequest, route: Route, search: WebSearch
) -> Exchange:
    """A search-only call, answered from Kiro's MCP search without a model turn."""
    message_id = secrets.token_hex(12)
    input_tokens = estimate_request_tokens(request)
    events = await answer_search(
        client,
        route.account,
        search,
        message_id=message_id,
        model_name=route.model_name,
        input_tokens=input_tokens,
    )
    return Exchange(message_id=message_id, input_tokens=input_tokens, dropped=(), first=events)


async def _first_events(
    chunks: AsyncIterator[list[Frame]], translator: Translator
) -> tuple[list[CanonicalEvent], int, int]:
    """Read until the translator produces more than `MessageStart`, or a tool call begins (or
    the stream ends).

    A call held until it is complete still commits when it begins: its input may take a minute,
    the client's stream is kept alive meanwhile, and a break inside it is its truncation, not a
    failure to try elsewhere (the same request would most likely be cut the same way). Also
    returns how many frames were read, and their bytes.
    """
    events: list[CanonicalEvent] = []
    count = size = 0
    async for frames in chunks:
        count += len(frames)
        for frame in frames:
            size += frame.size
            events += translator.feed(frame)
        if translator.tool_open or any(not isinstance(event, MessageStart) for event in events):
            return events, count, size
    return events + translator.finish(), count, size
