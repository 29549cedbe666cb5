"""Settings: one declaration per option, loaded with precedence flag > env > file > default.

Each `Option` names its type, default, `KIROD_*` environment variable and help text; the daemon's
command-line flags, the man page and the example config are all derived from `OPTIONS`.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import ipaddress
import json
import math
import os
import re
import ssl
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from kirod import paths
from kirod.errors import ConfigError

ENV_PREFIX = "KIROD_"
CONFIG_ENV = "KIROD_CONFIG"
DEFAULT_PORT = 5476  # "KIRO" on a phone keypad; below the ephemeral range, not a registered service


class Kind(enum.Enum):
    STR = "string"
    INT = "integer"
    FLOAT = "number"
    BOOL = "boolean"
    PATH = "path"
    LIST = "list of strings"
    ORIGINS = "list of origins (scheme://host[:port])"
    CHOICE = "one of"
    URL = "http(s) URL"
    MAP = "table of strings"
    WEBHOOKS = "list of webhook tables"
    EXTENSIONS = "extension tables"


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


@dataclass(frozen=True)
class Option:
    name: str
    kind: Kind
    help: str
    default: Any = None
    default_factory: Callable[[Mapping[str, str], str], Any] | None = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    optional: bool = False
    secret: bool = False
    min_item_length: int = 0  # LIST: shortest item accepted

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def describe_type(self) -> str:
        text = self.kind.value
        if self.kind is Kind.CHOICE:
            text = "one of " + ", ".join(self.choices)
        if self.minimum is not None and self.maximum is not None:
            text += f" from {self.minimum:g} to {self.maximum:g}"
        elif self.minimum is not None:
            text += f" >= {self.minimum:g}"
        return text


def _socket_default(env: Mapping[str, str], platform: str) -> Path:
    return paths.socket_path(env, platform)


def _state_default(env: Mapping[str, str], platform: str) -> Path:
    return paths.state_dir(env, platform)


def _api_key_file_default(env: Mapping[str, str], platform: str) -> Path:
    return paths.config_dir(env, platform) / paths.API_KEY_FILE


OPTIONS: tuple[Option, ...] = (
    Option("host", Kind.STR, "Address of the public API listener.", "127.0.0.1"),
    Option(
        "port",
        Kind.INT,
        "TCP port of the public API listener (0 picks a free port).",
        DEFAULT_PORT,
        minimum=0,
        maximum=65535,
    ),
    Option(
        "socket_path",
        Kind.PATH,
        "Unix socket of the local control API.",
        default_factory=_socket_default,
    ),
    Option(
        "state_dir",
        Kind.PATH,
        "Directory for the database and the lock.",
        default_factory=_state_default,
    ),
    Option(
        "log_level",
        Kind.CHOICE,
        "Log verbosity.",
        "info",
        choices=("debug", "info", "warning", "error"),
    ),
    Option("log_format", Kind.CHOICE, "Log line format.", "text", choices=("text", "json")),
    Option(
        "api_key_file",
        Kind.PATH,
        "Where kirod writes the API key it creates on first start (mode 0600).",
        default_factory=_api_key_file_default,
    ),
    Option(
        "api_keys",
        Kind.LIST,
        "API keys accepted on the public API, besides those in the store.",
        (),
        secret=True,
        min_item_length=16,
    ),
    Option(
        "max_request_body_bytes",
        Kind.INT,
        "Largest request body accepted (413 above).",
        10 * 1024 * 1024,
        minimum=1024,
    ),
    Option(
        "client_header_timeout_s",
        Kind.FLOAT,
        "How long a client connection may take to send a request's headers, or stay idle "
        "between requests, before it is closed.",
        75.0,
        minimum=1,
    ),
    Option(
        "client_body_timeout_s",
        Kind.FLOAT,
        "How long a client may take to send a request body (400 request_timeout after it).",
        60.0,
        minimum=1,
    ),
    Option(
        "max_connections",
        Kind.INT,
        "Most client connections the public API holds open at once; a connection beyond it "
        "is answered 503 at once and closed. Lowered at start to what the open-files limit "
        "(RLIMIT_NOFILE) leaves room for.",
        1024,
        minimum=1,
    ),
    Option("request_timeout_s", Kind.FLOAT, "Whole-request deadline.", 600.0, minimum=1),
    Option(
        "stream_idle_timeout_s",
        Kind.FLOAT,
        "Longest silence tolerated from the upstream stream.",
        120.0,
        minimum=1,
    ),
    Option(
        "shutdown_drain_s",
        Kind.FLOAT,
        "How long in-flight requests may finish at shutdown.",
        10.0,
        minimum=0,
    ),
    Option(
        "websocket_idle_timeout_s",
        Kind.FLOAT,
        "How long a Responses WebSocket connection may stay open with no turn running or "
        "waiting before it is closed.",
        900.0,
        minimum=1,
    ),
    Option(
        "websocket_max_age_s",
        Kind.FLOAT,
        "How long a Responses WebSocket connection serves turns; after it the client is told "
        "to reconnect (websocket_connection_limit_reached).",
        3600.0,
        minimum=1,
    ),
    Option(
        "websocket_compression",
        Kind.BOOL,
        "Accept permessage-deflate on Responses WebSocket connections when the client offers "
        "it (off: on loopback compressing costs CPU and saves nothing).",
        False,
    ),
    Option(
        "lock_timeout_s",
        Kind.FLOAT,
        "How long to wait for another instance to release the lock (restarts while it drains).",
        20.0,
        minimum=0,
    ),
    Option(
        "account_inference_concurrency",
        Kind.INT,
        "Concurrent upstream requests per account.",
        10,
        minimum=1,
        maximum=10,
    ),
    Option(
        "account_selection_strategy",
        Kind.CHOICE,
        "How requests are spread over accounts: sticky (keep using one account while it can "
        "serve), round-robin (take turns), lowest-usage (most remaining credits first).",
        "sticky",
        choices=("sticky", "round-robin", "lowest-usage"),
    ),
    Option(
        "queue_timeout_s",
        Kind.FLOAT,
        "How long a request waits for a free account slot before it is answered 429.",
        60.0,
        minimum=0,
    ),
    Option(
        "account_rpm",
        Kind.FLOAT,
        "Requests per minute each account starts at most, spaced evenly; 0 turns pacing off. "
        "A request waits (up to queue_timeout_s) for its turn rather than failing.",
        0.0,
        minimum=0,
    ),
    Option(
        "account_min_interval_s",
        Kind.FLOAT,
        "Shortest time between two request starts on one account; 0 turns it off.",
        0.0,
        minimum=0,
    ),
    Option(
        "max_account_attempts",
        Kind.INT,
        "Accounts one request may try when upstream failures happen before any output.",
        3,
        minimum=1,
        maximum=10,
    ),
    Option(
        "breaker_consecutive_failures",
        Kind.INT,
        "Consecutive transient upstream failures (server error, broken stream, network, "
        "overload without Retry-After) that take an account out for a cool-down; failures "
        "that are the account's own (throttling, quota, suspension, rejected login) act at once.",
        3,
        minimum=1,
        maximum=100,
    ),
    Option(
        "affinity_ttl_s",
        Kind.FLOAT,
        "How long an idle conversation stays bound to its account and Kiro conversation.",
        24 * 3600.0,
        minimum=0,
    ),
    Option(
        "maintenance_interval_s",
        Kind.FLOAT,
        "Time between maintenance passes (token refresh, usage probes, pruning).",
        60.0,
        minimum=1,
    ),
    Option(
        "usage_refresh_interval_s",
        Kind.FLOAT,
        "Re-read an account's usage limits when the last reading is this old.",
        600.0,
        minimum=1,
    ),
    Option(
        "oplog_retention_s",
        Kind.FLOAT,
        "How long operation-log rows (kiroctl stats) are kept.",
        30 * 24 * 3600.0,
        minimum=0,
    ),
    Option(
        "oplog_max_rows",
        Kind.INT,
        "Most operation-log rows kept; the oldest are dropped beyond it.",
        200_000,
        minimum=0,
    ),
    Option(
        "refresh_window_s",
        Kind.FLOAT,
        "Refresh an access token this long before it expires.",
        600.0,
        minimum=0,
    ),
    Option(
        "import_max_bytes",
        Kind.INT,
        "Largest credentials file `kiroctl accounts import` may upload (an SQLite store; JSON "
        "files and keys are held to 4 MiB).",
        32 * 1024 * 1024,
        minimum=1024,
    ),
    Option(
        "import_timeout_s",
        Kind.FLOAT,
        "How long reading one uploaded SQLite store may take before the import is refused.",
        5.0,
        minimum=0.1,
    ),
    Option(
        "parameter_policy",
        Kind.CHOICE,
        "What to do with sampling parameters Kiro cannot honour (temperature, top_p, top_k, "
        "stop sequences): drop them (logged) or answer 400.",
        "drop",
        choices=("drop", "error"),
    ),
    Option(
        "prompt_cache_points",
        Kind.BOOL,
        "Experiment: mark message-level cachePoints in Kiro requests (on models whose catalog "
        "lists promptCaching, within its checkpoint limit). Off: conversation id reuse alone.",
        False,
    ),
    Option(
        "tool_input_delivery",
        Kind.CHOICE,
        "When a tool call reaches the client: whole, once Kiro has sent all of its input "
        "(complete: a call Kiro cuts off is never handed out), or fragment by fragment as it "
        "arrives (live: no truncation recovery).",
        "complete",
        choices=("complete", "live"),
    ),
    Option(
        "truncation_recovery",
        Kind.BOOL,
        "When Kiro cuts a tool call off, continue the turn once, telling the model in an error "
        "tool result that the call was cut and not executed (needs tool_input_delivery = "
        "complete).",
        True,
    ),
    Option(
        "model_fallback",
        Kind.CHOICE,
        "How a model id no account offers is served (claude-opus-5-5, fable, gpt-6.2-sol): by "
        "the newest offered model of its Claude line, or of its GPT tier, else the newest GPT "
        "(family), or answered with 404 (strict).",
        "family",
        choices=("family", "strict"),
    ),
    Option(
        "model_aliases",
        Kind.MAP,
        "Client model ids served by a model of your choice, before any fallback: a TOML table "
        '("claude-opus-5-5" = "claude-opus-4.7"), or id=model pairs separated by commas in '
        "the environment and on the command line.",
        {},
    ),
    Option(
        "upstream_keep_alive",
        Kind.BOOL,
        "Reuse upstream connections, each account its own (off: a new connection per request). "
        "A request whose reused connection the server had just closed is sent once more on a "
        "new one, never once an answer began.",
        True,
    ),
    Option(
        "upstream_keep_alive_timeout_s",
        Kind.FLOAT,
        "How long an idle upstream connection stays reusable. Keep it under the idle timeout of "
        "Kiro and of every proxy on the way (AWS load balancers: 60 s; many proxies: 30 s).",
        15.0,
        minimum=1,
        maximum=300,
    ),
    Option(
        "responses_retention_s",
        Kind.FLOAT,
        "How long stored OpenAI responses (for previous_response_id) are kept.",
        30 * 24 * 3600.0,
        minimum=0,
    ),
    Option(
        "responses_max_bytes",
        Kind.INT,
        "Total size of stored OpenAI responses; the oldest are dropped beyond it.",
        256 * 1024 * 1024,
        minimum=0,
    ),
    Option(
        "response_cache_ttl_s",
        Kind.FLOAT,
        "How long an answer stays in the opt-in response cache (keys created with cache).",
        3600.0,
        minimum=0,
    ),
    Option(
        "response_cache_max_bytes",
        Kind.INT,
        "Total size of the response cache; the oldest answers are dropped beyond it.",
        64 * 1024 * 1024,
        minimum=0,
    ),
    Option(
        "enable_chat_completions",
        Kind.BOOL,
        "Serve the legacy /v1/chat/completions route.",
        False,
    ),
    Option(
        "enable_ollama_api",
        Kind.BOOL,
        "Serve Ollama's API under /api/ (version, tags, show, chat) for clients that speak "
        "only Ollama, such as VS Code Copilot's Ollama provider.",
        False,
    ),
    Option(
        "ollama_keyless_loopback",
        Kind.BOOL,
        "Let a local client in without an API key (VS Code's Ollama provider sends an empty "
        "Bearer header) on /api/* and /v1/chat/completions: only from a loopback address, "
        "naming a loopback Host, with no Origin header; needs enable_ollama_api. Such "
        "requests are logged under the tenant keyless-loopback.",
        False,
    ),
    Option(
        "proxy_url",
        Kind.URL,
        "HTTP(S) proxy for every upstream call.",
        None,
        optional=True,
        secret=True,
    ),
    Option(
        "ca_file",
        Kind.PATH,
        "PEM file of extra CA certificates to trust for Kiro and HTTPS proxies (a company CA, "
        "a TLS-inspecting proxy), besides the system's.",
        None,
        optional=True,
    ),
    Option(
        "allow_remote",
        Kind.BOOL,
        "Allow a non-loopback host (exposes your accounts to the network).",
        False,
    ),
    Option(
        "cors_origins",
        Kind.ORIGINS,
        "Web pages allowed to call the API (/v1/..., /api/...) from the browser, as LobeChat's "
        "client-side mode does, by their origin: their CORS preflights are answered and their "
        "answers carry CORS headers. Exact origins only: '*' is refused, since requests carry "
        "API keys. Empty: CORS off.",
        (),
    ),
    Option(
        "console",
        Kind.BOOL,
        "Serve the web console under /console/ (entered with `kiroctl console`).",
        True,
    ),
    Option(
        "console_remote",
        Kind.BOOL,
        "Also serve the console when allow_remote binds a non-loopback host (it then answers "
        "on that host's address too).",
        False,
    ),
    Option(
        "console_idle_s",
        Kind.FLOAT,
        "A console session ends after this long without a request (or a live page).",
        1800.0,
        minimum=60,
        maximum=86400,
    ),
    Option(
        "alerts_webhooks",
        Kind.WEBHOOKS,
        "Webhooks told when an account needs a person (suspended, needs login or a profile, "
        "disabled, exhausted), when no account is usable, and when that is over: "
        "[[alerts.webhook]] tables with a url and an optional secret (the body's HMAC-SHA256 "
        "in X-Kirod-Signature), or a JSON list of such objects in the environment and on the "
        "command line.",
        (),
        secret=True,
    ),
    Option(
        "alerts_desktop",
        Kind.BOOL,
        "Also show those alerts as desktop notifications (notify-send on Linux, osascript on "
        "macOS) when kirod runs in a desktop session.",
        False,
    ),
    Option(
        "extensions",
        Kind.EXTENSIONS,
        "Extensions to enable, by their entry-point name (group kirod.extensions): one "
        "[extensions.NAME] table each, holding that extension's own options and an optional "
        "timeout_s for each hook call; a JSON object of such tables in the environment and on "
        "the command line.",
        {},
        secret=True,
    ),
    Option(
        "kiro_endpoint",
        Kind.STR,
        "Kiro API endpoint template.",
        "https://q.{region}.amazonaws.com",
    ),
    Option(
        "kiro_auth_endpoint",
        Kind.STR,
        "Kiro social-login auth endpoint template.",
        "https://prod.{region}.auth.desktop.kiro.dev",
    ),
    Option(
        "oidc_endpoint",
        Kind.STR,
        "AWS SSO OIDC endpoint template.",
        "https://oidc.{region}.amazonaws.com",
    ),
)

OPTIONS_BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}

# Options that existed once, with the instruction that replaces them.
REMOVED: dict[str, str] = {
    "listen": "use `host` and `port` instead",
}


@dataclass(frozen=True)
class Settings:
    host: str
    port: int
    socket_path: Path
    state_dir: Path
    log_level: str
    log_format: str
    api_key_file: Path
    api_keys: tuple[str, ...] = dataclasses.field(repr=False)
    max_request_body_bytes: int
    client_header_timeout_s: float
    client_body_timeout_s: float
    max_connections: int
    request_timeout_s: float
    stream_idle_timeout_s: float
    shutdown_drain_s: float
    websocket_idle_timeout_s: float
    websocket_max_age_s: float
    websocket_compression: bool
    lock_timeout_s: float
    account_inference_concurrency: int
    account_selection_strategy: str
    queue_timeout_s: float
    account_rpm: float
    account_min_interval_s: float
    max_account_attempts: int
    breaker_consecutive_failures: int
    affinity_ttl_s: float
    maintenance_interval_s: float
    usage_refresh_interval_s: float
    oplog_retention_s: float
    oplog_max_rows: int
    refresh_window_s: float
    import_max_bytes: int
    import_timeout_s: float
    parameter_policy: str
    prompt_cache_points: bool
    tool_input_delivery: Literal["complete", "live"]
    truncation_recovery: bool
    model_fallback: Literal["family", "strict"]
    model_aliases: Mapping[str, str]
    upstream_keep_alive: bool
    upstream_keep_alive_timeout_s: float
    responses_retention_s: float
    responses_max_bytes: int
    response_cache_ttl_s: float
    response_cache_max_bytes: int
    enable_chat_completions: bool
    enable_ollama_api: bool
    ollama_keyless_loopback: bool
    proxy_url: str | None = dataclasses.field(repr=False)
    ca_file: Path | None
    allow_remote: bool
    cors_origins: tuple[str, ...]
    console: bool
    console_remote: bool
    console_idle_s: float
    alerts_webhooks: tuple[Webhook, ...] = dataclasses.field(repr=False)
    alerts_desktop: bool
    extensions: Mapping[str, Mapping[str, Any]] = dataclasses.field(repr=False)
    kiro_endpoint: str
    kiro_auth_endpoint: str
    oidc_endpoint: str
    config_path: Path | None = None

    @property
    def state(self) -> paths.StatePaths:
        return paths.StatePaths(self.state_dir)

    def redacted(self) -> dict[str, Any]:
        """The effective settings as plain JSON values, secrets replaced by a marker."""
        out: dict[str, Any] = {}
        for option in OPTIONS:
            value = getattr(self, option.name)
            if option.kind is Kind.WEBHOOKS:
                value = [
                    {"url": hook.shown, "secret": "<redacted>" if hook.secret else None}
                    for hook in value
                ]
            elif option.kind is Kind.EXTENSIONS:
                # Which extensions and which of their options: values may be secrets, and only
                # an extension's own schema says which (`kiroctl extensions` shows the others).
                value = {name: dict.fromkeys(table, "<redacted>") for name, table in value.items()}
            elif option.secret and value:
                value = (
                    "<redacted>" if not isinstance(value, tuple) else ["<redacted>"] * len(value)
                )
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[option.name] = value
        return out


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


def default_value(
    option: Option, env: Mapping[str, str] | None = None, platform: str = sys.platform
) -> Any:
    """What `option` is when nothing sets it (for the factories: here, now)."""
    if option.default_factory is not None:
        return option.default_factory(os.environ if env is None else env, platform)
    return option.default


def default_config_file(env: Mapping[str, str] | None = None, platform: str = sys.platform) -> Path:
    """The config file read when neither --config nor KIROD_CONFIG names one."""
    return paths.config_file(os.environ if env is None else env, platform)


# KIROD_* variables that are not options but are still read.
OTHER_ENV = (CONFIG_ENV,)


def unknown_env(env: Mapping[str, str] | None = None) -> list[tuple[str, str | None]]:
    """Each `KIROD_*` variable that sets nothing, with the option it most looks like."""
    env = os.environ if env is None else env
    known = {option.env for option in OPTIONS} | set(OTHER_ENV)
    found: list[tuple[str, str | None]] = []
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            found.append((name, close[0] if close else None))
    return found


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
    (`kirod.accounts.extensions`). Errors name the table and key, never a value.
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


# The file's `[alerts]` table holds options by their short names.
_ALERTS_TABLE = {"webhook": "alerts_webhooks", "desktop": "alerts_desktop"}


def _flatten_alerts(data: dict[str, Any], source: str) -> None:
    """`[[alerts.webhook]]` and `[alerts] desktop` as the `alerts_*` options they set."""
    table = data.pop("alerts", None)
    if table is None:
        return
    if not isinstance(table, dict):
        raise ConfigError(f"'alerts' in {source} must be a table ([alerts] or [[alerts.webhook]])")
    for key, item in table.items():
        name = _ALERTS_TABLE.get(key)
        if name is None:
            raise ConfigError(f"unknown option 'alerts.{key}' in {source}")
        if name in data:
            raise ConfigError(f"{source} sets both 'alerts.{key}' and {name!r}")
        data[name] = item


def _check_known(keys: Sequence[str], source: str) -> None:
    for key in keys:
        if key in OPTIONS_BY_NAME:
            continue
        if key in REMOVED:
            raise ConfigError(f"option {key!r} in {source} was removed: {REMOVED[key]}")
        raise ConfigError(f"unknown option {key!r} in {source}")


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    _flatten_alerts(data, str(path))
    _check_known(list(data), str(path))
    return data


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _config_file(
    env: Mapping[str, str], config_path: Path | None, platform: str
) -> tuple[Path, dict[str, Any] | None]:
    """The config file to read and its values; None when the default file does not exist."""
    explicit = config_path or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None)
    file_path = explicit or paths.config_file(env, platform)
    if explicit is None and not file_path.exists():
        return file_path, None
    return file_path, read_config_file(file_path)


def _value(
    option: Option,
    flags: Mapping[str, object],
    env: Mapping[str, str],
    file_path: Path,
    file_values: Mapping[str, Any],
    platform: str,
) -> Any:
    """One option's value: flag > environment > config file > default."""
    if flags.get(option.name) is not None:
        return coerce(option, flags[option.name], option.flag)
    if option.env in env:
        return coerce(option, env[option.env], option.env)
    if option.name in file_values:
        return coerce(option, file_values[option.name], str(file_path))
    return default_value(option, env, platform)


def load_option(
    name: str,
    flags: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    config_path: Path | None = None,
    platform: str = sys.platform,
) -> Any:
    """One option resolved as `load_settings` resolves it, the others left unchecked: for
    `kirod demo`, which runs its own kirod and takes only a setting or two from the user's."""
    env = os.environ if env is None else env
    file_path, file_values = _config_file(env, config_path, platform)
    return _value(OPTIONS_BY_NAME[name], flags or {}, env, file_path, file_values or {}, platform)


def load_settings(
    flags: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    config_path: Path | None = None,
    platform: str = sys.platform,
) -> Settings:
    """Resolve every option. `flags` maps option names to raw command-line values."""
    env = dict(os.environ) if env is None else dict(env)
    flags = dict(flags or {})
    _check_known(list(flags), "command-line flags")
    file_path, file_values = _config_file(env, config_path, platform)
    values = {
        option.name: _value(option, flags, env, file_path, file_values or {}, platform)
        for option in OPTIONS
    }
    settings = Settings(**values, config_path=file_path if file_values is not None else None)
    if not settings.allow_remote and not is_loopback(settings.host):
        raise ConfigError(
            f"host {settings.host!r} is not a loopback address; set allow_remote = true to expose "
            "the API to the network"
        )
    for name in ("kiro_endpoint", "kiro_auth_endpoint", "oidc_endpoint"):
        template = getattr(settings, name)
        if not urlsplit(template.replace("{region}", "r")).scheme.startswith("http"):
            raise ConfigError(f"invalid value for {name!r}: {template!r} (expected an http(s) URL)")
    if settings.ca_file is not None:
        check_ca_file(settings.ca_file)
    return settings


def check_ca_file(path: Path) -> None:
    """Refuse a `ca_file` that TLS could not load: checked at start, not at the first request."""
    try:
        ssl.create_default_context().load_verify_locations(cafile=path)
    except ssl.SSLError:
        # before OSError: SSLError is one (ssl.SSLError's text is OpenSSL's, not useful here)
        raise ConfigError(
            f"invalid value for 'ca_file': {str(path)!r} holds no PEM certificate"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"invalid value for 'ca_file': cannot read {str(path)!r} ({exc.strerror})"
        ) from None


@dataclass(frozen=True)
class ServiceEnv:
    """What the service manager told us through the environment."""

    watchdog_interval_s: float | None
    systemd: bool = False  # started by systemd (INVOCATION_ID is set for every unit it runs)
    launchd_label: str | None = None  # the launchd job's label (XPC_SERVICE_NAME)
    desktop: Literal["notify-send", "osascript"] | None = None  # how to notify the session


def desktop_notifier(
    env: Mapping[str, str], platform: str
) -> Literal["notify-send", "osascript"] | None:
    """The program that shows a desktop notification in this session, if there is a session."""
    if platform == "darwin":
        return "osascript"
    if any(env.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS")):
        return "notify-send"
    return None


def load_service_env(
    env: Mapping[str, str] | None = None, platform: str = sys.platform
) -> ServiceEnv:
    """Read systemd's watchdog request (pings go out at half the configured interval) and
    which service manager, if any, started us."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    interval: float | None = None
    if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
        interval = int(usec) / 1_000_000 / 2
    label = env.get("XPC_SERVICE_NAME", "")
    return ServiceEnv(
        watchdog_interval_s=interval,
        systemd=bool(env.get("INVOCATION_ID")),
        # Apps started from a terminal on macOS carry "0" or "application.…" here.
        launchd_label=label if label and label != "0" and "application." not in label else None,
        desktop=desktop_notifier(env, platform),
    )
