"""`kirod`: the daemon's command line. One flag per declared option, plus --config."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kirod import __version__, log
from kirod.config import (
    CONFIG_ENV,
    OPTIONS,
    OPTIONS_BY_NAME,
    Kind,
    Option,
    default_config_file,
    default_value,
    load_service_env,
    load_settings,
    unknown_env,
)
from kirod.daemon import collector, lifecycle
from kirod.daemon.logging import configure
from kirod.errors import ConfigError, KirodError

EXIT_USAGE = 2

logger = logging.getLogger(__name__)


_METAVARS = {
    Kind.STR: "TEXT",
    Kind.INT: "INT",
    Kind.FLOAT: "NUMBER",
    Kind.BOOL: "BOOL",
    Kind.PATH: "PATH",
    Kind.LIST: "KEY,...",
    Kind.ORIGINS: "ORIGIN,...",
    Kind.HOSTS: "HOST,...",
    Kind.URL: "URL",
    Kind.MAP: "ID=MODEL,...",
    Kind.WEBHOOKS: "JSON",
    Kind.EXTENSIONS: "JSON",
}


def metavar(option: Option) -> str:
    """How the flag's value is shown: its type, or its allowed values."""
    if option.kind is Kind.CHOICE:
        return "{" + ",".join(option.choices) + "}"
    if option.kind is Kind.FLOAT and option.name.endswith("_s"):
        return "SECONDS"
    return _METAVARS[option.kind]


def _shown_default(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ", ".join(value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def option_help(option: Option) -> str:
    """The help of one flag, from its declaration: what it does, its type, default, env var and
    config key."""
    text = (
        f"{option.help} Type: {option.describe_type()}; default: "
        f"{_shown_default(default_value(option))}; env: {option.env}; config: {option.name}."
    )
    return text.replace("%", "%%")  # argparse formats help strings with %


DEMO = "demo"
DEMO_FLAGS = ("config", "enable_chat_completions", "enable_gemini_api")
"""What `kirod` reads before `demo`: the demo runs its own kirod on temporary paths and a free port,
so it takes only the settings it shares with a real one."""


class _Paragraphs(argparse.HelpFormatter):
    """argparse's help, with the description's blank lines kept between its paragraphs."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        fill = super()._fill_text
        return "\n\n".join(fill(part, width, indent) for part in text.split("\n\n"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kirod",
        usage="%(prog)s [--config PATH] [OPTION ...]\n"
        "       %(prog)s [--enable-chat-completions] demo [--chat-completions] [--check]\n"
        "       %(prog)s [--enable-gemini-api] demo [--gemini] [--check]",
        description="Serve your Kiro accounts as local Anthropic and OpenAI APIs.\n\n"
        "kirod demo: no Kiro account needed. It runs a fake Kiro service and a kirod on "
        "temporary paths, and prints the settings for curl, the SDKs, Claude Code, Codex, "
        "opencode, OpenAI-compatible IDEs (--chat-completions) and Gemini CLI (--gemini); "
        "`kirod demo --check` "
        "answers one request and exits. See `kirod demo --help`.",
        epilog="Precedence: flag > KIROD_* environment variable > config file > default. "
        "A boolean takes 1, true, yes, on or 0, false, no, off (any case) everywhere; "
        "--no-FLAG is false. See kirod(8) and kirod.toml(5).",
        formatter_class=_Paragraphs,
    )
    parser.add_argument("--version", action="version", version=f"kirod {__version__}")
    parser.add_argument(
        "--config",
        type=Path,
        metavar="PATH",
        help=f"Config file (TOML). env: {CONFIG_ENV}; default: {default_config_file()} "
        "(read if it exists).",
    )
    for option in OPTIONS:
        if option.kind is Kind.BOOL:
            # `--flag` alone is true; `--flag=no` works as the same spellings do in the
            # environment and the config file.
            parser.add_argument(
                option.flag,
                dest=option.name,
                nargs="?",
                const="true",
                default=None,
                metavar=metavar(option),
                help=option_help(option),
            )
            parser.add_argument(
                "--no-" + option.flag[2:],
                dest=option.name,
                action="store_const",
                const="false",
                help=argparse.SUPPRESS,
            )
        else:
            parser.add_argument(
                option.flag,
                dest=option.name,
                default=None,
                metavar=metavar(option),
                help=option_help(option),
            )
    return parser


def _demo_at(arguments: Sequence[str]) -> int | None:
    """Where the `demo` command is: the first `demo` that is not the value of a flag."""
    takes_value = {"--config"} | {o.flag for o in OPTIONS if o.kind is not Kind.BOOL}
    index = 0
    while index < len(arguments):
        if arguments[index] == DEMO:
            return index
        if arguments[index] == "--":
            return None
        index += 2 if arguments[index] in takes_value else 1
    return None


def _demo(parser: argparse.ArgumentParser, before: list[str], after: list[str]) -> int:
    args = vars(parser.parse_args(before))
    given = {name: value for name, value in args.items() if value is not None}
    unused = [name for name in given if name not in DEMO_FLAGS]
    if unused:
        flags = ", ".join(OPTIONS_BY_NAME[name].flag for name in unused)
        parser.error(
            f"kirod demo runs its own kirod on temporary paths and a free port: {flags} would "
            "not reach it. Before `demo` it reads only --enable-chat-completions and "
            "--enable-gemini-api (and --config for those settings); after it, --chat-completions, "
            "--gemini and --check (see `kirod demo --help`)"
        )
    # The fake Kiro and a kirod on temporary paths; imported only here, so that the daemon itself
    # never loads the testing package.
    from kirod.testing.demo import main as demo_main

    config_path = given.pop("config", None)
    return demo_main(after, flags=given, config_path=config_path)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    demo = _demo_at(arguments)
    if demo is not None:
        return _demo(parser, arguments[:demo], arguments[demo + 1 :])
    args = vars(parser.parse_args(arguments))
    config_path = args.pop("config")
    flags = {name: value for name, value in args.items() if value is not None}
    try:
        settings = load_settings(flags, config_path=config_path)
    except ConfigError as exc:
        print(f"kirod: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    configure(settings.log_level, settings.log_format)
    for name, closest in unknown_env():
        log.event(
            logger,
            "unknown_environment_variable",
            level=logging.WARNING,
            variable=name,
            hint=f"did you mean {closest}?" if closest else "no kirod option reads it",
        )
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
    collector.settle()  # every module is imported by now
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
