"""The option table: every option kirod has, each declared once in the module of its concern.

This is the one source of the daemon's flags, its `KIROD_*` environment variables, `Settings`'
fields and `kiroctl config`; tests hold the guide's option table, kirod(8), kirod.toml(5) and
contrib/kirod.toml to it. A new option is declared in its concern's module, in a group the
table below includes, and gets a `Settings` field of the same name.
"""

from __future__ import annotations

from kirod.config.option import Option
from kirod.config.table import (
    accounts,
    alerts,
    console,
    extensions,
    process,
    public_api,
    storage,
    translation,
    upstream,
)

# The concerns' groups interleaved in the order options had before they were split by concern:
# the order `kirod --help` lists them in and `kiroctl config` shows them in.
OPTIONS: tuple[Option, ...] = (
    *public_api.ADDRESS,
    *process.PLACES,
    *process.LOG,
    *public_api.KEYS,
    *public_api.CLIENT_LIMITS,
    *upstream.STREAM,
    *process.SHUTDOWN,
    *public_api.WEBSOCKETS,
    *process.LOCK,
    *accounts.POOL,
    *accounts.UPKEEP,
    *storage.OPLOG,
    *accounts.TOKENS,
    *accounts.IMPORT,
    *translation.TRANSLATION,
    *upstream.KEEP_ALIVE,
    *storage.STORED_RESPONSES,
    *storage.RESPONSE_CACHE,
    *public_api.OPTIONAL_APIS,
    *upstream.ROUTE,
    *public_api.EXPOSURE,
    *console.CONSOLE,
    *alerts.ALERTS,
    *extensions.EXTENSIONS,
    *upstream.ENDPOINTS,
)

OPTIONS_BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}

# Options that existed once, with the instruction that replaces them.
REMOVED: dict[str, str] = {
    "listen": "use `host` and `port` instead",
}
