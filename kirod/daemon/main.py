"""`kirod`: the daemon's command line. One flag per declared option, plus --config."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from kirod import __version__, log
from kirod.config import OPTIONS, Kind, load_service_env, load_settings
from kirod.daemon import lifecycle
from kirod.daemon.logging import configure
from kirod.errors import ConfigError, KirodError

EXIT_USAGE = 2

logger = logging.getLogger("kirod.daemon")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kirod",
        description="Serve your Kiro accounts as local Anthropic and OpenAI APIs.",
        epilog="Each option can also be set with its KIROD_* variable or in the config file.",
    )
    parser.add_argument("--version", action="version", version=f"kirod {__version__}")
    parser.add_argument("--config", type=Path, metavar="PATH", help="config file (TOML)")
    for option in OPTIONS:
        help_text = f"{option.help} [{option.env}]"
        if option.kind is Kind.BOOL:
            parser.add_argument(
                option.flag,
                dest=option.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        else:
            parser.add_argument(
                option.flag, dest=option.name, default=None, metavar="VALUE", help=help_text
            )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = vars(build_parser().parse_args(argv))
    config_path = args.pop("config")
    flags = {name: value for name, value in args.items() if value is not None}
    try:
        settings = load_settings(flags, config_path=config_path)
    except ConfigError as exc:
        print(f"kirod: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    configure(settings.log_level, settings.log_format)
    for option in OPTIONS:
        if option.secret and flags.get(option.name):
            # Any local user can read a process's arguments in /proc/PID/cmdline.
            log.event(
                logger,
                "secret_on_command_line",
                level=logging.WARNING,
                option=option.flag,
                instead=f"{option.env} or {option.name} in the config file",
            )
    try:
        return asyncio.run(lifecycle.run(settings, load_service_env()))
    except ConfigError as exc:  # a configured path that cannot be used, found at start
        print(f"kirod: cannot start: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KirodError as exc:
        print(f"kirod: cannot start: {exc}", file=sys.stderr)
        return lifecycle.EXIT_FAILURE
    except KeyboardInterrupt:
        return lifecycle.EXIT_OK
