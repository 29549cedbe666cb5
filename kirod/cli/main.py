"""`kiroctl`, the root command group: a thin client of kirod's control API on its Unix socket.

Each command calls the control API once or twice and renders the answer; `--json` prints it in a
stable shape instead. Failures exit with the codes in `kirod.cli.exits`, with a hint on stderr.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import Any

import click

from kirod import __version__
from kirod.cli import exits
from kirod.cli.context import App
from kirod.cli.render import consoles
from kirod.paths import client_socket_path

# Each command: the module of `kirod.cli.commands` defining it, and its summary (its docstring's
# first sentence, which tests/cli/test_cli_root.py holds it to) for `kiroctl --help`. A module is
# imported only to run or describe its own commands, so that no command pays for the others.
COMMANDS = {
    "accounts": ("accounts", "Manage the Kiro accounts kirod serves from."),
    "alerts": ("alerts", "Check the alerts kirod sends when an account needs you."),
    "console": ("console", "Open the web console in a browser with a one-time link."),
    "cache": ("cache", "Show or empty the response cache."),
    "completion": ("completion", "Print the completion script for SHELL (bash, zsh or fish)."),
    "config": ("daemon", "Show kirod's effective settings (secrets are redacted)."),
    "db": ("db", "Check, back up or recover kirod's database."),
    "doctor": (
        "doctor",
        "Check kirod, its settings, accounts and Kiro from here, and say what to do.",
    ),
    "extensions": (
        "extensions",
        "List the loaded extensions: version, priority, failure policy and options.",
    ),
    "keys": ("keys", "Manage the API keys of kirod's public API."),
    "logs": (
        "trace",
        "Print kirod's newest log lines (its in-memory tail), and with --follow the new ones.",
    ),
    "models": ("reports", "List the models your accounts offer, and which accounts offer each."),
    "service": (
        "service",
        "Install kirod as a per-user service (systemd on Linux, launchd on macOS).",
    ),
    "shutdown": ("daemon", "Stop kirod: in-flight requests drain first, then it exits 0."),
    "spend": ("spend", "Show what a key or an account spent each UTC day, and its budget."),
    "stats": (
        "reports",
        "Summarize the requests kirod served: success, first byte, accounts, models, keys, days.",
    ),
    "status": ("daemon", "Show whether kirod serves, and each account's state and credits."),
    "top": ("top", "Watch kirod live: requests in flight, account slots, the last minute, errors."),
    "trace": (
        "trace",
        "Explain requests: each account tried, how it ended, and why kirod moved on.",
    ),
    "version": ("daemon", "Show the versions of kiroctl and of the running kirod."),
}


class Root(click.Group):
    """Loads commands from `COMMANDS` on demand, and turns `CliError` and Ctrl-C into a message
    and an exit code, never a traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(f"kirod.cli.commands.{COMMANDS[cmd_name][0]}")
        command: click.Command = getattr(module, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Lists the summaries, shortened as click shortens docstrings, without any import."""
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        rows = [
            (name, click.Command(name, help=summary).get_short_help_str(limit))
            for name, (_, summary) in sorted(COMMANDS.items())
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except exits.CliError as exc:
            _, err = consoles()
            err.print(f"[bold red]kiroctl: error:[/] {exc.message}", markup=True, highlight=False)
            if exc.hint:
                err.print(f"[dim]hint:[/] {exc.hint}", markup=True, highlight=False)
            ctx.exit(exc.code)
        except (KeyboardInterrupt, click.Abort):
            ctx.exit(exits.INTERRUPTED)
        except BrokenPipeError:  # `kiroctl status | head -1`: the reader left; end quietly
            _stdout_to_devnull()
            ctx.exit(exits.BROKEN_PIPE)
        except OSError as exc:
            if exc.errno not in exits.OUTPUT_ERRNOS:
                raise
            _stdout_to_devnull()  # `kiroctl status > /dev/full`
            sys.stderr.write(f"kiroctl: error: cannot write the output: {exc.strerror}\n")
            ctx.exit(exits.FAILED)


@click.group(cls=Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kiroctl")
@click.option(
    "--socket",
    type=click.Path(path_type=Path, dir_okay=False),
    help="kirod's control socket [default: KIROD_SOCKET_PATH, the config file's socket_path, "
    "or $XDG_RUNTIME_DIR/kirod/kirod.sock].",
)
@click.pass_context
def cli(ctx: click.Context, socket: Path | None) -> None:
    """Manage the kirod daemon and its Kiro accounts."""
    ctx.obj = App(socket=socket or client_socket_path())


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null, so that the flush at exit cannot fail a second time."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main() -> None:
    try:
        cli(prog_name="kiroctl")
    finally:
        # What was left in the buffer is written here; a reader gone by now is no error either.
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _stdout_to_devnull()
            raise SystemExit(exits.BROKEN_PIPE) from None
        except OSError as exc:
            _stdout_to_devnull()
            sys.stderr.write(f"kiroctl: error: cannot write the output: {exc.strerror}\n")
            raise SystemExit(exits.FAILED) from None
