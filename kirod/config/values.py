"""Option values: how a raw value (a string from the environment or a flag, a TOML value) becomes
its `Kind`'s type, and why it is refused when it cannot; and `Webhook`, the one value type of
kirod's own.

Errors name the option, where the value came from and what was expected; a secret option's value
is never shown.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kirod.config.option import Kind, Option
from kirod.errors import ConfigError


@dataclass(frozen=True, repr=False)
class Webhook:
    """One `[[alerts.webhook]]` table. The secret signs the body (HMAC-SHA256); repr shows
    neither it nor the URL's user part, path or query."""

    url: str
    secret: str | None = None

    def __repr__(self) -> str:
        return f"Webhook({self.shown!r})"

    @property
    def shown(self) -> str:
        """The URL without user part, path or query, which may carry a token (chat webhooks do)."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port else ""
        rest = "/…" if parts.path.strip("/") or parts.query else ""
        return f"{parts.scheme}://{host}{port}{rest}"


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _bad(option: Option, value: object, source: str) -> ConfigError:
    expected = option.describe_type()
    if option.secret:
        shown = "<redacted>"  # a malformed list of keys still holds keys
    else:
        shown = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return ConfigError(
        f"invalid value for {option.name!r} from {source}: {shown} (expected {expected})"
    )


def coerce(option: Option, value: object, source: str) -> Any:
    """Turn a raw value (a string from env or flags, a TOML value) into the option's type."""
    if value is None or (option.optional and value == ""):
        if option.optional:
            return None
        raise _bad(option, value, source)
    kind = option.kind
    result: Any
    if kind is Kind.BOOL:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        if isinstance(value, int) and value in (0, 1):  # as "0" and "1" in the environment
            return bool(value)
        raise _bad(option, value, source)
    if kind is Kind.INT:
        if isinstance(value, bool):
            raise _bad(option, value, source)
        try:
            result = int(value) if isinstance(value, int | str) else None
        except ValueError:
            result = None
        if result is None:
            raise _bad(option, value, source)
    elif kind is Kind.FLOAT:
        if isinstance(value, bool):
            raise _bad(option, value, source)
        try:
            result = float(value) if isinstance(value, int | float | str) else None
        except ValueError:
            result = None
        if result is None or not math.isfinite(result):
            raise _bad(option, value, source)
    elif kind is Kind.LIST:
        if isinstance(value, str):
            items = [part.strip() for part in value.split(",")]
            return _long_enough(option, tuple(item for item in items if item), source)
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return _long_enough(option, tuple(value), source)
        raise _bad(option, value, source)
    elif kind is Kind.HOSTS:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise _bad(option, value, source)
        return tuple(_host(option, item, number, source) for number, item in enumerate(value, 1))
    elif kind is Kind.ORIGINS:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise _bad(option, value, source)
        return tuple(_origin(option, item, number, source) for number, item in enumerate(value, 1))
    elif kind is Kind.MAP:
        return _table(option, value, source)
    elif kind is Kind.WEBHOOKS:
        return _webhooks(option, value, source)
    elif kind is Kind.EXTENSIONS:
        return _extension_tables(option, value, source)
    elif kind is Kind.PATH:
        if not isinstance(value, str | Path) or not str(value):
            raise _bad(option, value, source)
        return Path(value).expanduser()
    else:
        if not isinstance(value, str):
            raise _bad(option, value, source)
        if kind is Kind.CHOICE:
            result = value.strip().lower()
            if result not in option.choices:
                raise _bad(option, value, source)
            return result
        if kind is Kind.URL:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise _bad(option, value, source)
        return value
    if option.minimum is not None and result < option.minimum:
        raise _bad(option, value, source)
    if option.maximum is not None and result > option.maximum:
        raise _bad(option, value, source)
    return result


def _long_enough(option: Option, items: tuple[str, ...], source: str) -> tuple[str, ...]:
    """`items`, unless one is shorter than the option allows (a short key can be guessed)."""
    for number, item in enumerate(items, 1):
        if len(item) < option.min_item_length:
            raise ConfigError(
                f"invalid value for {option.name!r} from {source}: item {number} has "
                f"{len(item)} characters, fewer than {option.min_item_length} (a short key "
                "can be guessed; make one with `kiroctl keys create NAME`)"
            )
    return items


_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_HOST = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
_DEFAULT_PORTS = {"http": 80, "https": 443}


_HOST_ENTRY = re.compile(r"[A-Za-z0-9_.:\[\]*-]+")


def _host(option: Option, item: str, number: int, source: str) -> str:
    """`item`, a host name or address as a `Host` header carries it (a port may follow), or `*`;
    a ConfigError for a URL or anything else no `Host` header holds."""
    if not _HOST_ENTRY.fullmatch(item) or ("*" in item and item != "*"):
        raise ConfigError(
            f"invalid value for {option.name!r} from {source}: item {number} ({item!r}): expected "
            "a host name such as host.docker.internal, without a scheme or a path, or '*'"
        )
    return item


def _origin(option: Option, item: str, number: int, source: str) -> str:
    """`item` as browsers write an origin in `Origin` (lower case, no default port), or a
    ConfigError saying why it is none. One trailing slash is forgiven: it is how origins get
    pasted from an address bar."""
    where = f"invalid value for {option.name!r} from {source}: item {number} ({item!r})"
    if item.strip() == "null":
        raise ConfigError(
            f"{where}: the opaque origin 'null' is not allowed: every sandboxed frame and local "
            "file sends it"
        )
    if "*" in item:
        raise ConfigError(
            f"{where}: wildcards are not allowed; name each origin (every request carries an "
            "API key, so only pages you trust may call kirod)"
        )
    shape = "expected scheme://host[:port], as the page's address bar shows it, without a path"
    text = item.removesuffix("/")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:  # a port that is no number, a bracketed host that is no address
        raise ConfigError(f"{where}: {shape}") from None
    host = parts.hostname
    scheme = parts.scheme.lower()
    if (
        not _SCHEME.fullmatch(scheme)
        or not host
        or parts.username is not None
        or parts.path
        or "?" in text
        or "#" in text
        or port == 0
    ):
        raise ConfigError(f"{where}: {shape}")
    try:
        if ":" in host:  # browsers write an IPv6 address compressed, in brackets
            host = f"[{ipaddress.IPv6Address(host).compressed}]"
        else:
            host = host.encode("idna").decode("ascii")  # and a name in its ASCII form
    except (ValueError, UnicodeError):
        raise ConfigError(f"{where}: {shape}") from None
    if not host.startswith("[") and not _HOST.fullmatch(host):
        raise ConfigError(f"{where}: {shape}")
    shown_port = "" if port is None or port == _DEFAULT_PORTS.get(scheme) else f":{port}"
    return f"{scheme}://{host}{shown_port}"


def _table(option: Option, value: object, source: str) -> Mapping[str, str]:
    """A TOML table of strings, or `a=b,c=d` from the environment or a flag."""
    if isinstance(value, str):
        pairs: list[tuple[str, str]] = []
        for item in filter(None, (part.strip() for part in value.split(","))):
            name, sep, target = item.partition("=")
            if not sep or not name.strip() or not target.strip():
                raise _bad(option, value, source)
            pairs.append((name.strip(), target.strip()))
        return dict(pairs)
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in value.items()
    ):
        return dict(value)
    raise _bad(option, value, source)


def _webhooks(option: Option, value: object, source: str) -> tuple[Webhook, ...]:
    """`[[alerts.webhook]]` tables, or a JSON list of objects from the environment or a flag.

    Errors name the table and the key, never a value: a URL may carry a token.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            raise ConfigError(
                f"invalid value for {option.name!r} from {source}: not JSON (expected a list "
                'of objects like {"url": "https://…", "secret": "…"})'
            ) from None
    if not isinstance(value, list | tuple):
        raise _bad(option, value, source)
    hooks: list[Webhook] = []
    for number, table in enumerate(value, 1):
        where = f"invalid value for {option.name!r} from {source}: webhook {number}"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where} is not a table")
        unknown = sorted(set(table) - {"url", "secret"})
        if unknown:
            raise ConfigError(f"{where} has an unknown key {unknown[0]!r} (expected url, secret)")
        url, secret = table.get("url"), table.get("secret")
        if not isinstance(url, str) or not _is_http_url(url):
            raise ConfigError(f"{where}: 'url' must be an http(s) URL")
        if secret is not None and (not isinstance(secret, str) or not secret):
            raise ConfigError(f"{where}: 'secret' must be a non-empty string")
        hooks.append(Webhook(url=url, secret=secret))
    return tuple(hooks)


def _extension_tables(
    option: Option, value: object, source: str
) -> Mapping[str, Mapping[str, Any]]:
    """`[extensions.NAME]` tables, or a JSON object of them from the environment or a flag.

    Only the shape is checked here: each extension's schema judges its options when it loads
    (`kirod.dispatch.extensions`). Errors name the table and key, never a value.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            raise ConfigError(
                f"invalid value for {option.name!r} from {source}: not JSON (expected an object "
                'like {"redactor": {}})'
            ) from None
    if not isinstance(value, Mapping):
        raise ConfigError(f"invalid value for {option.name!r} from {source}: not a table")
    tables: dict[str, Mapping[str, Any]] = {}
    for name, table in value.items():
        if not isinstance(table, Mapping):
            raise ConfigError(f"'extensions.{name}' in {source} must be a table")
        tables[name] = dict(table)
    return tables


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is no number, a bracketed host that is no address
        return False
