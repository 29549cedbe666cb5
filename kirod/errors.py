"""kirod's exception tree.

Foreign exceptions (aiohttp, botocore, sqlite, OS) are mapped into this tree by the module that
calls the foreign library; nothing else catches them.

    KirodError
    ├── ConfigError            a setting is unknown, removed or has a bad value
    ├── StartupError           the daemon cannot start (exit code 1)
    │   └── AlreadyRunning     another instance holds the lock or the control socket
    ├── StoreError             the SQLite store cannot be opened, migrated or written
    │   └── GenerationConflict a compare-and-swap update lost against a newer write
    └── ApiError               a request failed; rendered at the edge in its protocol's envelope
        └── ClientDisconnected the client went away before we could answer (logged as 499)
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class KirodError(Exception):
    """Base of every error kirod raises on purpose."""


class ConfigError(KirodError):
    """A configuration key, value or file is invalid. The message names the key."""


class StartupError(KirodError):
    """The daemon cannot start; the message says why and what to do."""


class AlreadyRunning(StartupError):
    """Another kirod instance holds the single-instance lock or the control socket."""


class StoreError(KirodError):
    """The database cannot be opened, migrated, read or written."""


class GenerationConflict(StoreError):
    """A compare-and-swap update found a newer generation than the one it read."""


class ErrorKind(enum.Enum):
    """Protocol-neutral error classes; each envelope maps them to its own type names."""

    INVALID_REQUEST = 400
    AUTHENTICATION = 401
    PERMISSION = 403
    NOT_FOUND = 404
    METHOD_NOT_ALLOWED = 405
    REQUEST_TOO_LARGE = 413
    RATE_LIMIT = 429
    INTERNAL = 500
    UPSTREAM = 502
    UNAVAILABLE = 503
    OVERLOADED = 529

    @property
    def status(self) -> int:
        return self.value


class ApiError(KirodError):
    """An error answered to an API client.

    `message` is shown to the client, so it must never carry internal detail (exception text,
    tokens, paths). `code` is a stable machine-readable reason such as `malformed_request_body`.
    `final` marks an error that retrying cannot fix until the user acts (no account, a login
    needed, a model the key may not use): it is answered with `x-should-retry: false`, which
    the Anthropic and OpenAI SDKs and Claude Code honour instead of retrying for minutes.
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
        final: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.code = code
        self.param = param
        self.headers: dict[str, str] = dict(headers or {})
        self.final = final

    @property
    def status(self) -> int:
        return self.kind.status


class ClientDisconnected(ApiError):
    """The client closed its connection while we were reading its request."""

    def __init__(self) -> None:
        super().__init__(ErrorKind.INVALID_REQUEST, "client closed the connection")
