"""The API-key gate: keys are compared as SHA-256 digests, in constant time, then held to scope.

A stored key may be limited to model patterns and to a request rate. The rate is enforced when the
request arrives; the model only once the dispatcher has resolved the client's name to a catalog
entry, so an alias can never reach a model outside the key's patterns. The response cache is
decided later than the rate (after the body and the extensions), so a hit's admission is
taken back (`refund`): hits never use up a key's window, though a key already at its limit is
refused before its body is read.

With `ollama_keyless_loopback`, a request that offers no key on a route an Ollama client calls
(VS Code's Ollama provider sends `Authorization: Bearer ` with nothing after it) is admitted as
`KEYLESS_TENANT` when it is a local program's (`local_caller`): from a loopback peer, naming a
loopback Host (a web page on a rebinding domain names its own), and carrying no Origin (browsers
send one with every POST and every cross-origin fetch). A key that is offered is always checked.
"""

from __future__ import annotations

import fnmatch
import hmac
from collections.abc import Iterable

from aiohttp import web

from kirod.budgets.limits import NONE, Limits
from kirod.canonical.catalog import ModelInfo
from kirod.config.hosts import host_name, is_loopback, loopback_address
from kirod.errors import ApiError, ErrorKind
from kirod.http.ingress import is_ollama_path
from kirod.http.ratelimit import RateWindows, retry_after_header
from kirod.storage.keys import UNRESTRICTED, KeyScope, KeyStore, UsableKey, hash_key

BEARER = "bearer "
KEYLESS_TENANT = "keyless-loopback"
"""The tenant of every request admitted without a key: unrestricted, never answered from the
response cache, counted in the operation log as one more key."""


KEY_HEADERS = ("x-api-key", "x-goog-api-key")
"""Anthropic's and Google's key headers. Google's SDKs may also put a key in the URL (`?key=`),
which kirod never reads: a URL ends up in logs and in a shell's history."""


def presented_keys(request: web.Request) -> list[str]:
    """Keys offered by `x-api-key`, `x-goog-api-key` and `Authorization: Bearer` (scheme
    case-insensitive)."""
    keys: list[str] = []
    for header in KEY_HEADERS:
        api_key = request.headers.get(header, "").strip()
        if api_key:
            keys.append(api_key)
    authorization = request.headers.get("Authorization", "")
    if authorization[: len(BEARER)].lower() == BEARER:
        token = authorization[len(BEARER) :].strip()
        if token:
            keys.append(token)
    return keys


def local_caller(request: web.Request) -> bool:
    """Whether the request is a program's on this machine rather than a web page's."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    if not isinstance(peer, tuple) or not peer or not loopback_address(str(peer[0])):
        return False
    host = request.headers.get("Host")
    return host is not None and is_loopback(host_name(host)) and "Origin" not in request.headers


def _missing_key(request: web.Request, keyless_route: bool, keyless: bool) -> ApiError:
    message = "missing API key: send it as 'Authorization: Bearer <key>' or 'x-api-key'"
    if "key" in request.query:
        message += " ('x-goog-api-key' for a Gemini client); a key in the URL is not read"
    # What a local client that cannot send a key (VS Code's Ollama provider) needs to know.
    if keyless_route and keyless:
        message += (
            "; requests without one are accepted only from a local program on a loopback "
            "address (no Origin header)"
        )
    elif keyless_route and is_ollama_path(request.path):
        message += "; to let a local client that sends none in, set ollama_keyless_loopback = true"
    return ApiError(
        ErrorKind.AUTHENTICATION,
        message,
        code="missing_api_key",
        headers={"WWW-Authenticate": "Bearer"},
    )


def _invalid_key() -> ApiError:
    return ApiError(
        ErrorKind.AUTHENTICATION,
        "invalid API key",
        code="invalid_api_key",
        headers={"WWW-Authenticate": "Bearer"},
    )


class KeyGate:
    """Holds every accepted key: configured ones (unrestricted) and those in the store.

    A configured key's id is `config-` plus a prefix of its digest, stable across restarts.
    `reload` re-reads the store, so a created or revoked key takes effect on the next request.
    """

    def __init__(
        self,
        config_keys: Iterable[str] = (),
        store: KeyStore | None = None,
        rates: RateWindows | None = None,
        *,
        keyless: bool = False,
    ) -> None:
        digests = [hash_key(key) for key in config_keys]
        self._config = [UsableKey(f"config-{d[:12]}", d, UNRESTRICTED) for d in digests]
        self._keyless = keyless
        self._keys: list[UsableKey] = []
        self._scopes: dict[str, KeyScope] = {}
        self._limits: dict[str, Limits] = {}
        self._index(self._config)
        self._store = store
        self._rates = rates or RateWindows()

    def _index(self, keys: list[UsableKey]) -> None:
        self._keys = keys
        self._scopes = {key.id: key.scope for key in keys}
        self._limits = {}
        for key in keys:
            scope = key.scope
            limits = Limits(scope.credits_per_day, scope.credits_per_month, scope.tokens_per_minute)
            if limits.any:
                self._limits[key.id] = limits
        if self._keyless:
            self._scopes[KEYLESS_TENANT] = UNRESTRICTED

    def load(self, stored: Iterable[UsableKey]) -> None:
        self._index([*self._config, *stored])
        self._rates.keep_only(set(self._scopes))

    async def reload(self) -> None:
        if self._store is not None:
            self.load(await self._store.usable())

    @property
    def empty(self) -> bool:
        return not self._keys

    def match(self, key: str) -> str | None:
        """The id of the key, if accepted."""
        digest = hash_key(key)
        # Compare against every digest without stopping early, so timing does not reveal which.
        found: str | None = None
        for known in self._keys:
            if hmac.compare_digest(digest, known.key_hash):
                found = known.id
        return found

    def check(self, request: web.Request, *, keyless_route: bool = False) -> str:
        """The id of the presented key, within its rate; raises a 401 or 429 `ApiError`.

        On a `keyless_route`, a request offering no key is `KEYLESS_TENANT`'s when the gate was
        built `keyless` and the caller is local.
        """
        keys = presented_keys(request)
        if not keys:
            if keyless_route and self._keyless and local_caller(request):
                return KEYLESS_TENANT
            raise _missing_key(request, keyless_route, self._keyless)
        key_id = next((found for key in keys if (found := self.match(key)) is not None), None)
        if key_id is None:
            raise _invalid_key()
        rpm = self._scopes[key_id].rpm
        if rpm is not None and (wait_s := self._rates.admit(key_id, rpm)) is not None:
            raise ApiError(
                ErrorKind.RATE_LIMIT,
                f"this API key is limited to {rpm} requests per minute",
                code="rate_limit_exceeded",
                headers={"Retry-After": retry_after_header(wait_s)},
            )
        return key_id

    async def admit(self, request: web.Request, *, keyless_route: bool = False) -> str:
        """`check`, then note the key's use for `kiroctl keys list`."""
        key_id = self.check(request, keyless_route=keyless_route)
        if (
            self._store is not None
            and not key_id.startswith("config-")
            and key_id != KEYLESS_TENANT
        ):
            await self._store.touch(key_id)
        return key_id

    def limits(self, key_id: str) -> Limits:
        """The key's budgets (kirod.budgets); `NONE` for a key without any."""
        return self._limits.get(key_id, NONE)

    @property
    def key_ids(self) -> set[str]:
        return set(self._scopes)

    def caches(self, key_id: str) -> bool:
        """Whether the key may be answered from the response cache (configured keys never)."""
        scope = self._scopes.get(key_id)
        return scope is not None and scope.cache

    def refund(self, key_id: str) -> None:
        """Take back the request's rpm admission: an answer from the cache is not counted."""
        self._rates.refund(key_id)

    def allows(self, key_id: str, model: ModelInfo) -> bool:
        """Whether the key's patterns admit the resolved model (either of its ids)."""
        scope = self._scopes.get(key_id)
        if scope is None:
            return False
        if not scope.models:
            return True
        names = (model.public_id, model.kiro_id)
        return any(fnmatch.fnmatchcase(name, p) for p in scope.models for name in names)

    def authorize_model(self, key_id: str, model: ModelInfo) -> None:
        """Raise a 403 unless the key may use the resolved model."""
        scope = self._scopes.get(key_id)
        if scope is None:  # revoked since the request was admitted
            raise _invalid_key()
        if self.allows(key_id, model):
            return
        self._rates.refund(key_id)  # a refusal is not a request served: it costs no rpm
        raise ApiError(
            ErrorKind.PERMISSION,
            f"this API key may not use model '{model.public_id}'; it is limited to "
            + ", ".join(scope.models),
            code="model_not_allowed",
            param="model",
            final=True,
        )
