"""`kiroctl`, the root command group: a thin client of kirod's control API on its Unix socket.

Each command calls the control API once or twice and renders the answer; `--json` prints it in a
stable shape instead. Failures exit with the codes in `kirod.cli.exits`, with a hint on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kirod import __version__
from kirod.cli import exits
from kirod.cli.commands import accounts, completion, daemon, keys, reports, service
from kirod.cli.context import App
from kirod.cli.render import consoles
from kirod.paths import client_socket_path


class Root(click.Group):
    """Turns `CliError` and Ctrl-C into a message and an exit code, never a traceback."""

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
    out, err = consoles()
    ctx.obj = App(socket=socket or client_socket_path(), out=out, err=err)


for command in (
    daemon.status,
    daemon.config,
    daemon.version,
    daemon.shutdown,
    accounts.accounts,
    keys.keys,
    reports.models,
    reports.stats,
    service.service,
    completion.completion,
):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="kiroctl")
