"""The API-key gate: keys are compared as SHA-256 digests, in constant time."""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from aiohttp import web

from kirod.errors import ApiError, ErrorKind
from kirod.storage.keys import hash_key

BEARER = "bearer "


def presented_keys(request: web.Request) -> list[str]:
    """Keys offered by `x-api-key` and `Authorization: Bearer` (scheme case-insensitive)."""
    keys: list[str] = []
    api_key = request.headers.get("x-api-key", "").strip()
    if api_key:
        keys.append(api_key)
    authorization = request.headers.get("Authorization", "")
    if authorization[: len(BEARER)].lower() == BEARER:
        token = authorization[len(BEARER) :].strip()
        if token:
            keys.append(token)
    return keys


class KeyGate:
    """Holds the digests of every accepted key: configured ones and those in the store."""

    def __init__(self, config_keys: Iterable[str] = ()) -> None:
        self._config_digests = [hash_key(key) for key in config_keys]
        self._store_digests: list[str] = []

    def replace_store_digests(self, digests: Iterable[str]) -> None:
        self._store_digests = list(digests)

    @property
    def empty(self) -> bool:
        return not self._config_digests and not self._store_digests

    def accepts(self, key: str) -> bool:
        digest = hash_key(key)
        # Compare against every digest without stopping early, so timing does not reveal which.
        matched = False
        for known in (*self._config_digests, *self._store_digests):
            matched |= hmac.compare_digest(digest, known)
        return matched

    def check(self, request: web.Request) -> None:
        keys = presented_keys(request)
        if not keys:
            raise ApiError(
                ErrorKind.AUTHENTICATION,
                "missing API key: send it as 'Authorization: Bearer <key>' or 'x-api-key'",
                code="missing_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not any(self.accepts(key) for key in keys):
            raise ApiError(
                ErrorKind.AUTHENTICATION,
                "invalid API key",
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
