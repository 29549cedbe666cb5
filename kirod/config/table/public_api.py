"""The public API's options: where it listens, who may call it and from where, what each client
may ask of it, and which optional APIs it serves."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kirod import paths
from kirod.config.option import Kind, Option

DEFAULT_PORT = 5476  # "KIRO" on a phone keypad; below the ephemeral range, not a registered service


def _api_key_file_default(env: Mapping[str, str], platform: str) -> Path:
    return paths.config_dir(env, platform) / paths.API_KEY_FILE


ADDRESS: tuple[Option, ...] = (
    Option("host", Kind.STR, "Address of the public API listener.", "127.0.0.1"),
    Option(
        "port",
        Kind.INT,
        "TCP port of the public API listener (0 picks a free port).",
        DEFAULT_PORT,
        minimum=0,
        maximum=65535,
    ),
)

KEYS: tuple[Option, ...] = (
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
)

CLIENT_LIMITS: tuple[Option, ...] = (
    Option(
        "max_request_body_bytes",
        Kind.INT,
        "Largest request body accepted (413 above).",
        10 * 1024 * 1024,
        minimum=1024,
    ),
    Option(
        "client_first_byte_timeout_s",
        Kind.FLOAT,
        "How long a new client connection may stay silent before it is closed: a client "
        "sends its request as soon as it connects, and a silent connection holds a slot of "
        "max_connections.",
        5.0,
        minimum=0.5,
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
        "Most client connections the public API holds open at once. At the cap a new "
        "connection takes the place of the one idle longest (one that has not sent a whole "
        "request head, or waits between requests); when every one has a request in flight, "
        "it is answered 503 at once and closed. Lowered at start to what the open-files "
        "limit (RLIMIT_NOFILE) leaves room for.",
        1024,
        minimum=1,
    ),
    Option("request_timeout_s", Kind.FLOAT, "Whole-request deadline.", 600.0, minimum=1),
)

WEBSOCKETS: tuple[Option, ...] = (
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
)

OPTIONAL_APIS: tuple[Option, ...] = (
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
        "enable_gemini_api",
        Kind.BOOL,
        "Serve the Gemini API under /v1beta/models/ (and POST /v1/models/MODEL:METHOD): "
        "generateContent, streamGenerateContent, countTokens and the model list, for Gemini CLI "
        "and the google-genai SDKs. The key comes as x-goog-api-key or Bearer, never from the "
        "URL.",
        False,
    ),
    Option(
        "gemini_models",
        Kind.MAP,
        "Gemini model classes served by a kirod model: the class is the word after a Gemini "
        "name's version (gemini-3.1-pro-preview is pro, gemini-2.5-flash-lite is flash-lite); a "
        "name in model_aliases wins, and any other name passes as is. A table replaces the "
        "whole default.",
        {"pro": "opus", "flash": "sonnet", "flash-lite": "haiku"},
    ),
)

EXPOSURE: tuple[Option, ...] = (
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
        "allowed_hosts",
        Kind.HOSTS,
        "Host names the API answers to besides loopback (127.0.0.1, localhost, [::1]) and the "
        "address it listens on, such as host.docker.internal for a client in a container; any "
        "port. Other Host headers get 403 host_not_allowed, which defeats DNS rebinding. '*' "
        "turns the check off.",
        (),
    ),
)
