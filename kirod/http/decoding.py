"""Decoding a request body with the model judged first.

A decoder reports the first problem it meets, and most fields come before any catalog is at hand.
When a body is invalid, its model is checked against the accounts' catalogs before the decoder's
error is raised, so a client that names a model kirod cannot serve hears that, not that its
messages are malformed. A valid body costs nothing extra: dispatch resolves its model anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from kirod.errors import ApiError
from kirod.http.services import Services

T = TypeVar("T")


async def decode_model_first(services: Services, body: object, decode: Callable[[], T]) -> T:
    try:
        return decode()
    except ApiError as invalid:
        if invalid.param != "model" and isinstance(body, dict):
            await services.models.check(body.get("model"))
        raise
