"""Structured log events and the request id they carry.

A log line is an event name plus fields: `log.event(logger, "request", status=200)`. The request id
lives in a context variable set by the HTTP ingress, so every line of a request carries it without
threading it through every call. Callers pass only safe fields: never tokens, keys, prompts or
tool arguments.
"""

from __future__ import annotations

import contextvars
import logging
import time
from typing import Any

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kirod_request_id", default=None
)
# Fields the layers below add to the request's one access-log line (`annotate`).
request_fields_var: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "kirod_request_fields", default=None
)

FIELDS_ATTR = "kirod_fields"
THROTTLE_INTERVAL_S = 10.0

ROOT = "kirod"
"""The parent of every kirod logger, whose level `--log-level` sets."""
ACCESS = "kirod.access"
"""The access log: one `request` line per public request and per WebSocket turn.

Every other logger is its module's `__name__`, so a line names where it came from. This is the
one name kept stable whatever module writes it, for filters that select the access log (`journalctl
--user -u kirod | grep kirod.access`): the table of such names is this module's `PUBLIC_LOGGERS`."""
PUBLIC_LOGGERS = (ACCESS,)


def event(logger: logging.Logger, name: str, *, level: int = logging.INFO, **fields: Any) -> None:
    """Log `name` with structured `fields` at `level`."""
    if logger.isEnabledFor(level):
        logger.log(level, name, extra={FIELDS_ATTR: fields})


def annotate(**fields: Any) -> None:
    """Add `fields` to the current request's access-log line; outside a request, a no-op."""
    current = request_fields_var.get()
    if current is not None:
        current.update(fields)


def redact_url(url: str | None) -> str | None:
    """`url` with the password of its user part masked: `socks5://user:***@host:1080`.

    A user part with no password is masked whole (it may be a token); anything that does not
    parse as a URL with a host is masked entirely. For logs and the control API alike.
    """
    if url is None or "@" not in url:
        return url
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "***"
    userinfo, _, hostpart = rest.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    masked = f"{user}:***" if colon and user else "***"
    return f"{scheme}://{masked}@{hostpart}"


class Throttle:
    """Lets an event through at most once per interval, with the count of the ones it held
    back: for events anyone can cause (a connection flood, malformed requests), so that they
    cannot fill the log."""

    def __init__(self, logger: logging.Logger, interval_s: float = THROTTLE_INTERVAL_S) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._next = 0.0
        self._held = 0

    def event(self, name: str, *, level: int = logging.WARNING, **fields: Any) -> None:
        now = time.monotonic()
        if now < self._next:
            self._held += 1
            return
        held, self._held, self._next = self._held, 0, now + self._interval_s
        event(self._logger, name, level=level, **fields, suppressed=held or None)
