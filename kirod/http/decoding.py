"""Decoding a request body with the model judged first, off the event loop when it is large.

A decoder reports the first problem it meets, and most fields come before any catalog is at hand.
When a body is invalid, its model is checked against the accounts' catalogs before the decoder's
error is raised, so a client that names a model kirod cannot serve hears that, not that its
messages are malformed. A valid body costs nothing extra: dispatch resolves its model anyway.

A body above `kirod.http.body.INLINE_BYTES` (parsed in a worker thread already) is decoded in
one too: the decoders are pure, and a large conversation costs them milliseconds per thousand
blocks that the event loop, and every stream on it, would otherwise wait for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kirod.errors import ApiError
from kirod.http.body import off_loop
from kirod.http.services import Services

T = TypeVar("T")


def _model_field(body: Mapping[str, Any]) -> object:
    return body.get("model")


async def decode_model_first(
    services: Services,
    body: object,
    decode: Callable[[], T],
    model_of: Callable[[Mapping[str, Any]], object] = _model_field,
) -> T:
    """`decode()`; `model_of` reads the model a body names as its codec does (Ollama's drops a
    tag)."""
    try:
        if off_loop():
            return await asyncio.to_thread(decode)
        return decode()
    except ApiError as invalid:
        if invalid.param != "model" and isinstance(body, dict):
            await services.models.check(model_of(body))
        raise
