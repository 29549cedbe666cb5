"""The daemon process's options: where it keeps its control socket and state, how it logs, and
how it stops and hands over to a restarted instance."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kirod import paths
from kirod.config.option import Kind, Option


def _socket_default(env: Mapping[str, str], platform: str) -> Path:
    return paths.socket_path(env, platform)


def _state_default(env: Mapping[str, str], platform: str) -> Path:
    return paths.state_dir(env, platform)


PLACES: tuple[Option, ...] = (
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
)

LOG: tuple[Option, ...] = (
    Option(
        "log_level",
        Kind.CHOICE,
        "Log verbosity.",
        "info",
        choices=("debug", "info", "warning", "error"),
    ),
    Option("log_format", Kind.CHOICE, "Log line format.", "text", choices=("text", "json")),
)

SHUTDOWN: tuple[Option, ...] = (
    Option(
        "shutdown_drain_s",
        Kind.FLOAT,
        "How long in-flight requests may finish at shutdown.",
        10.0,
        minimum=0,
    ),
)

LOCK: tuple[Option, ...] = (
    Option(
        "lock_timeout_s",
        Kind.FLOAT,
        "How long to wait for another instance to release the lock (restarts while it drains).",
        20.0,
        minimum=0,
    ),
)
