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
    """Holds (key id, digest) for every accepted key: configured ones and those in the store.

    A configured key's id is `config-` plus a prefix of its digest, stable across restarts.
    """

    def __init__(self, config_keys: Iterable[str] = ()) -> None:
        digests = [hash_key(key) for key in config_keys]
        self._config = [(f"config-{digest[:12]}", digest) for digest in digests]
        self._store: list[tuple[str, str]] = []

    def replace_store_digests(self, keys: Iterable[tuple[str, str]]) -> None:
        self._store = list(keys)

    @property
    def empty(self) -> bool:
        return not self._config and not self._store

    def match(self, key: str) -> str | None:
        """The id of the key, if accepted."""
        digest = hash_key(key)
        # Compare against every digest without stopping early, so timing does not reveal which.
        found: str | None = None
        for key_id, known in (*self._config, *self._store):
            if hmac.compare_digest(digest, known):
                found = key_id
        return found

    def check(self, request: web.Request) -> str:
        """The id of the presented key; raises a 401 `ApiError` otherwise."""
        keys = presented_keys(request)
        if not keys:
            raise ApiError(
                ErrorKind.AUTHENTICATION,
                "missing API key: send it as 'Authorization: Bearer <key>' or 'x-api-key'",
                code="missing_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        for key in keys:
            key_id = self.match(key)
            if key_id is not None:
                return key_id
        raise ApiError(
            ErrorKind.AUTHENTICATION,
            "invalid API key",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
