"""`kiroctl doctor`: what to look at when something seems wrong with kirod or Kiro."""

from __future__ import annotations

from pathlib import Path

import click

from kirod.cli import exits
from kirod.cli.commands import live_check
from kirod.cli.context import App, json_option, pass_app, yes_option


@click.command()
@click.argument("account", required=False)
@click.option(
    "--live",
    is_flag=True,
    help="Check what kirod believes about Kiro on ACCOUNT (else the first usable one) with a "
    "few cheap requests; asks before anything costs credits.",
)
@click.option(
    "--no-effort",
    is_flag=True,
    help="With --live: leave out the second chat, which checks the root effort field.",
)
@click.option(
    "--report",
    type=click.Path(path_type=Path, dir_okay=False, writable=True),
    metavar="FILE",
    help="Also write the results, redacted (no account, token, id or prompt), to FILE.",
)
@yes_option
@json_option
@pass_app
def doctor(
    app: App,
    account: str | None,
    live: bool,
    no_effort: bool,
    report: Path | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Check kirod and what it believes about Kiro.

    With --live, kirod checks with your account what it believes about Kiro: the catalog,
    usage limits, profiles, web search, one minimal chat on the cheapest model (and, if you
    agree, a second one for the effort field), and the context window. It prints what it will
    send and the credits it may cost first, and asks; --yes goes ahead without asking.
    Exits 0 when every belief held (some may stay unknown), 4 when Kiro contradicted one, 1
    when the checks could not run.
    """
    if not live:
        raise exits.CliError(
            exits.USAGE,
            "this kiroctl checks only with --live",
            "run `kiroctl doctor --live`",
        )
    live_check.run(app, account, yes=yes, effort=not no_effort, as_json=as_json, report=report)
