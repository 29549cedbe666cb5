"""kirod's exception tree.

Foreign exceptions (aiohttp, botocore, sqlite, OS) are mapped into this tree by the module that
calls the foreign library; nothing else catches them.

    KirodError
    ├── ConfigError            a setting is unknown, removed or has a bad value
    ├── StartupError           the daemon cannot start (exit code 1)
    │   └── AlreadyRunning     another instance holds the lock or the control socket
    ├── StoreError             the SQLite store cannot be opened, migrated or written
    │   ├── GenerationConflict a compare-and-swap update lost against a newer write
    │   ├── StoreFull          the filesystem holding the store has no room (SQLITE_FULL, ENOSPC)
    │   └── DatabaseDamaged    SQLite found the file damaged: refused at start, read-only after
    ├── ApiError               a request failed; rendered at the edge in its protocol's envelope
    │   └── ClientDisconnected the client went away before we could answer (logged as 499)
    ├── EventOrderError        a producer broke the canonical event grammar (a bug in kirod)
    ├── UpstreamError          talking to Kiro failed (kirod.upstream.errors draws this branch
    │   │                      and the `Failure` classes each carries: throttled, penalty_window,
    │   │                      daily_limit, service_throttled, capacity, context_too_long, …)
    │   ├── UpstreamProtocolError, UpstreamHttpError, UpstreamConnectionError,
    │   ├── UpstreamTimeout, UpstreamStreamError, UpstreamPromptTooLong,
    │   ├── UpstreamDocumentRefused, UpstreamUnreachable (a kind of UpstreamConnectionError),
    │   ├── RefreshError           a token refresh failed
    │   └── LoginError             a device-code login ended without tokens
    ├── CredentialImportError  a credential file saved by another Kiro tool is unreadable
    ├── DaemonUnreachable      kiroctl: nothing answers on the control socket
    └── ControlError           a control request failed: {"error": {"code", "message"}}, both ends
        ├── InvalidControlRequest  400: the body, a parameter or an import is wrong
        ├── ControlNotFound        404: no such account, login or key
        ├── ControlConflict        409: the name is taken
        ├── TooManyLogins          429: too many device logins are waiting
        ├── ControlUpstreamFailed  502: Kiro did not answer the refresh, probe or login
        └── ControlStorageFull     507: the disk holding the store is full
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


class StoreFull(StoreError):
    """A write failed for want of space on the filesystem holding `path` (SQLITE_FULL or
    ENOSPC): the user must free space there, and nothing was written."""

    def __init__(self, path: str, action: str) -> None:
        super().__init__(f"{action} {path}: disk full")
        self.path = path

    @property
    def sentence(self) -> str:
        """What a person reads: the path and what to do."""
        return f"disk full: kirod cannot write to {self.path}; free space on its filesystem"


class DatabaseDamaged(StoreError):
    """SQLite found the database file damaged (`SQLITE_CORRUPT`, `SQLITE_NOTADB`, a failed check).

    `reason` is SQLite's own words; the message names the file and `kiroctl db recover`.
    """

    def __init__(self, path: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


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
    INSUFFICIENT_STORAGE = 507
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

    def told_when(self, retry_after: str | None) -> ApiError:
        """This error with a `Retry-After`, if it is one that waiting cures: the sooner of its
        own and `retry_after` (when an account is back), as a retry may succeed at either."""
        waits = self.kind in (ErrorKind.RATE_LIMIT, ErrorKind.OVERLOADED, ErrorKind.UNAVAILABLE)
        if retry_after is None or not waits:
            return self
        own = self.headers.get("Retry-After")
        if own is not None and not (retry_after.isdigit() and own.isdigit()):
            return self
        if own is not None and int(own) <= int(retry_after):
            return self
        return ApiError(
            self.kind,
            self.message,
            code=self.code,
            param=self.param,
            headers={**self.headers, "Retry-After": retry_after},
            final=self.final,
        )


def insufficient_storage(full: StoreFull) -> ApiError:
    """The answer to a request whose purpose is a write the full disk refused. It names the
    state directory's file, as a person running kirod needs it to act; `final`: retrying
    cannot help until someone frees space."""
    return ApiError(
        ErrorKind.INSUFFICIENT_STORAGE,
        f"{full.sentence}; nothing was stored",
        code="insufficient_storage",
        final=True,
    )


class ClientDisconnected(ApiError):
    """The client closed its connection while we were reading its request."""

    def __init__(self) -> None:
        super().__init__(ErrorKind.INVALID_REQUEST, "client closed the connection")


class DaemonUnreachable(KirodError):
    """Nothing answers on the control socket."""


class ControlError(KirodError):
    """A control request failed. The daemon raises it and renders it as
    `{"error": {"code", "message"}}` with `status`; kiroctl's client raises it from that answer."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class InvalidControlRequest(ControlError):
    def __init__(self, message: str, code: str = "invalid_request") -> None:
        super().__init__(400, code, message)


class ControlNotFound(ControlError):
    def __init__(self, what: str) -> None:
        super().__init__(404, "not_found", f"no such {what}")


class ControlConflict(ControlError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(409, code, message)


class TooManyLogins(ControlError):
    def __init__(self) -> None:
        super().__init__(429, "too_many_logins", "too many logins are waiting")


class ControlUpstreamFailed(ControlError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(502, code, message)


class ControlStorageFull(ControlError):
    def __init__(self, full: StoreFull) -> None:
        super().__init__(507, "insufficient_storage", f"{full.sentence}; nothing was changed")
