"""`Settings`: every option's resolved value, one field per option of the table, and the
effective settings as `kiroctl config` shows them (secrets redacted)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kirod import paths
from kirod.config.option import Kind
from kirod.config.table import OPTIONS
from kirod.config.values import Webhook


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
    client_first_byte_timeout_s: float
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
    kiro_max_body_bytes: int
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
    enable_gemini_api: bool
    gemini_models: Mapping[str, str]
    proxy_url: str | None = dataclasses.field(repr=False)
    ca_file: Path | None
    allow_remote: bool
    cors_origins: tuple[str, ...]
    allowed_hosts: tuple[str, ...]
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
