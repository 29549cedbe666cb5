"""The account pool's options: how requests are spread over accounts, paced and retried, and
the accounts' upkeep (token refresh, usage probes, imports)."""

from __future__ import annotations

from kirod.config.option import Kind, Option

POOL: tuple[Option, ...] = (
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
        "Accounts one request may try when upstream failures happen before its client was sent "
        "anything (a stream's first event, a whole answer's end).",
        3,
        minimum=1,
        maximum=10,
    ),
    Option(
        "breaker_consecutive_failures",
        Kind.INT,
        "Consecutive transient upstream failures (server error, broken stream, network) that "
        "take an account out for a cool-down; failures that are the account's own (throttling, "
        "quota, suspension, rejected login) act at once.",
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
)

UPKEEP: tuple[Option, ...] = (
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
)

TOKENS: tuple[Option, ...] = (
    Option(
        "refresh_window_s",
        Kind.FLOAT,
        "Refresh an access token this long before it expires.",
        600.0,
        minimum=0,
    ),
)

IMPORT: tuple[Option, ...] = (
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
)
