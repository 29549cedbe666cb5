"""The opt-in response cache: which requests it may answer, their key, and the answers it keeps.

A request is looked up only when its API key allows it and it asked (`x-kirod-cache: use`, the
route's `cache` flag), and only when replaying an answer cannot be wrong: not streamed, no tools
(declared, hosted or in the history), no images or documents. The route leaves out requests that
read server-side state (`previous_response_id`).

The key is the API key's id and a SHA-256 of the request as the extensions' `on_request` left it,
after model resolution: the Kiro model id, system, messages, reasoning, output limit, stop
sequences and sampling. The protocol is not part of it: what is kept is the canonical event
stream the client was sent (after the stream hooks), which every protocol's encoder renders,
so one answer serves the same question asked over Messages, Responses or Chat.

Only an answer that ended well (`end_turn` or `stop_sequence`, no error, nothing cut at the
output limit) is kept; a hit replays it with a new message id and no credits: it cost none.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from kirod.canonical.catalog import ModelInfo
from kirod.canonical.events import (
    SCHEMA_VERSION,
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    MessageStart,
    MessageStop,
    RedactedThinking,
    SignatureDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
    Usage,
)
from kirod.canonical.request import (
    CanonicalRequest,
    DocumentBlock,
    ImageBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from kirod.report_types import CacheStats
from kirod.storage.cache import CacheStore

_FORMAT = f"kirod-response-cache/1/events-{SCHEMA_VERSION}"  # a new format misses every old row
_KEPT = (
    MessageStart,
    BlockStart,
    TextDelta,
    ThinkingDelta,
    SignatureDelta,
    RedactedThinking,
    BlockStop,
    Usage,
    MessageStop,
)
_TYPES = {cls.__name__: cls for cls in _KEPT}
_ENUMS: Mapping[str, type[enum.Enum]] = {"kind": BlockKind, "stop_reason": StopReason}
_MERGED = (TextDelta, ThinkingDelta, SignatureDelta)
_ENDED_WELL = frozenset({StopReason.END_TURN, StopReason.STOP_SEQUENCE})
_UNCACHEABLE_BLOCKS = (ImageBlock, DocumentBlock, ToolUseBlock, ToolResultBlock)


@dataclass(frozen=True)
class Lookup:
    """One eligible request: its key and the model it resolved to; `events` is the hit's."""

    tenant: str
    digest: str
    model: ModelInfo
    model_name: str
    events: list[CanonicalEvent] | None

    async def replay(self) -> AsyncIterator[list[CanonicalEvent]]:
        assert self.events is not None
        yield self.events


def eligible(request: CanonicalRequest) -> bool:
    """Whether a stored answer could stand for this request's."""
    if request.stream or request.tools or request.web_search is not None:
        return False
    return not any(
        isinstance(block, _UNCACHEABLE_BLOCKS)
        for message in request.messages
        for block in message.content
    )


def _plain(value: Any) -> Any:
    """`value` as JSON, dataclasses tagged with their type so equal shapes of two kinds differ."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"type": type(value).__name__, **fields}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    return value


def request_digest(request: CanonicalRequest, model: ModelInfo) -> str:
    """The request's cache key within its API key's entries."""
    document = {
        "format": _FORMAT,
        "model": model.kiro_id,
        "system": _plain(request.system),
        "messages": _plain(request.messages),
        "tool_choice": _plain(request.tool_choice),
        "reasoning": _plain(request.reasoning),
        "max_output_tokens": request.max_output_tokens,
        "stop_sequences": _plain(request.stop_sequences),
        "sampling": _plain(request.sampling),
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def encode_events(events: list[CanonicalEvent]) -> str | None:
    """The stream as stored, consecutive deltas of a block joined; None if it may not be kept."""
    if not events or not isinstance(events[0], MessageStart):
        return None
    if not isinstance(events[-1], MessageStop):
        return None
    if events[-1].stop_reason not in _ENDED_WELL:
        return None
    kept: list[CanonicalEvent] = []
    for event in events:
        if not isinstance(event, _KEPT):
            return None  # an error, or a block a replay could not stand for
        if isinstance(event, Usage):
            event = dataclasses.replace(event, credits=None)
        previous = kept[-1] if kept else None
        if (
            isinstance(event, _MERGED)
            and type(previous) is type(event)
            and previous.index == event.index
        ):
            field = "signature" if isinstance(event, SignatureDelta) else "text"
            joined = getattr(previous, field) + getattr(event, field)
            kept[-1] = dataclasses.replace(event, **{field: joined})
            continue
        kept.append(event)
    # ASCII escapes: a lone surrogate from upstream JSON is stored as text, never an encode error.
    return json.dumps(_plain(kept), separators=(",", ":"))


def decode_events(body: str) -> list[CanonicalEvent]:
    """A stored stream, with a new message id: each answer names its own message."""
    events: list[CanonicalEvent] = []
    for item in json.loads(body):
        cls = _TYPES[item.pop("type")]
        args: dict[str, Any] = {
            key: _ENUMS[key](value) if key in _ENUMS else value for key, value in item.items()
        }
        event = cls(**args)
        if isinstance(event, MessageStart):
            event = dataclasses.replace(event, message_id=secrets.token_hex(12))
        events.append(event)
    return events


class ResponseCache:
    """Lookups, recording and the control plane's view over the cache's table."""

    def __init__(self, store: CacheStore) -> None:
        self._store = store
        self._hits = 0
        self._misses = 0

    async def lookup(
        self, request: CanonicalRequest, tenant: str, model: ModelInfo, model_name: str
    ) -> Lookup | None:
        """None for a request the cache may not answer; else its key, with the hit's events."""
        if not eligible(request):
            return None
        digest = request_digest(request, model)
        body = await self._store.get(tenant, digest)
        events = decode_events(body) if body is not None else None
        if events is None:
            self._misses += 1
        else:
            self._hits += 1
        return Lookup(tenant, digest, model, model_name, events)

    async def recorded(
        self, lookup: Lookup, batches: AsyncIterator[list[CanonicalEvent]]
    ) -> AsyncIterator[list[CanonicalEvent]]:
        """`batches` passed on; once they ran to their end, the answer is queued for the store
        (its writer, not this handler, writes it: a client going away cannot cut the write)."""
        seen: list[CanonicalEvent] = []
        async for batch in batches:
            seen.extend(batch)
            yield batch
        body = encode_events(seen)
        if body is not None:
            self._store.put(lookup.tenant, lookup.digest, body)

    async def stats(self) -> CacheStats:
        usage = await self._store.usage()
        return CacheStats(
            entries=usage.entries,
            bytes=usage.bytes,
            max_bytes=self._store.max_bytes,
            ttl_s=self._store.ttl_s,
            oldest_at=usage.oldest_at,
            hits=self._hits,
            misses=self._misses,
        )

    async def clear(self) -> int:
        return await self._store.clear()

    async def close(self) -> None:
        await self._store.close()
