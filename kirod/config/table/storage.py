"""What the store keeps and for how long: the operation log, stored OpenAI responses, the
response cache."""

from __future__ import annotations

from kirod.config.option import Kind, Option

OPLOG: tuple[Option, ...] = (
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
)

STORED_RESPONSES: tuple[Option, ...] = (
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
)

RESPONSE_CACHE: tuple[Option, ...] = (
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
)
