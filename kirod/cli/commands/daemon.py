"""`kiroctl status`, `config`, `version` and `shutdown`: the daemon itself."""

from __future__ import annotations

import click

from kirod import __version__
from kirod.cli import exits, render
from kirod.cli.context import App, json_option, pass_app
from kirod.report_types import DEGRADED, DOWN, HEALTHY, Account, Status
from kirod.report_types.status import NOT_JUDGED

HEALTH_STYLES = {HEALTHY: "bold green", DEGRADED: "bold yellow", DOWN: "bold red"}


@click.command()
@json_option
@pass_app
def status(app: App, as_json: bool) -> None:
    """Show whether kirod serves, and each account's state and credits.

    Exits 0 when healthy, 4 when degraded and 3 when kirod is down.
    """
    try:
        # The document as kirod sent it, for --json: `Status.to_json()` would drop the fields
        # this kiroctl does not know and could write 300 as 300.0.
        doc = app.call(lambda kirod: kirod.request("GET", "/status"))
    except exits.CliError as exc:
        if exc.code != exits.DOWN or not as_json:
            raise
        render.print_json({"kiroctl": __version__, "health": DOWN, "status": None, "accounts": []})
        raise click.exceptions.Exit(exits.DOWN) from None
    current = app.call(lambda _: Status.from_json(doc))  # an unreadable one: which is older
    # The first kirods had no accounts route; their status says so among its problems.
    judged = NOT_JUDGED not in current.problems
    accounts = app.call(lambda kirod: kirod.accounts()) if judged else []
    if as_json:
        listed = [account.to_json() for account in accounts]
        render.print_json(
            {"kiroctl": __version__, "health": current.health, "status": doc, "accounts": listed}
        )
    else:
        _print_status(app, current, accounts)
    raise click.exceptions.Exit(exits.OK if current.health == HEALTHY else exits.DEGRADED)


def _print_status(app: App, current: Status, accounts: list[Account]) -> None:
    from rich.text import Text  # here: `status --json` needs no rich

    out = app.out
    headline = Text(f"kirod {current.version} · {current.state} · up ")
    headline.append(render.duration(current.uptime_s))
    headline.append(" · ")
    headline.append(current.health, style=HEALTH_STYLES.get(current.health, ""))
    out.print(headline)
    for listener in current.listeners:
        where = f"http://{listener.address}" if listener.kind == "tcp" else listener.address
        label = "public API" if listener.kind == "tcp" else "control"
        out.print(f"  {label:<12} {where}")
    mine = f"  {'kiroctl':<12} {__version__}"
    if current.version != __version__:
        mine += f", not the running kirod's {current.version}: restart kirod to run one version"
    out.print(mine)
    loop = current.maintenance
    passes = (
        "a pass is running" if loop.running else f"last pass {render.ago(loop.last_pass_finished)}"
    )
    out.print(f"  {'maintenance':<12} {passes}, next {render.ago(loop.next_pass_at)}")
    pacing = current.pacing
    if pacing.on:
        spacing = pacing.spacing_s
        every = render.duration(spacing) if spacing >= 60 else f"{spacing:.3g}s"
        limits = f"account_rpm {pacing.account_rpm:g}, "
        limits += f"account_min_interval_s {pacing.account_min_interval_s:g}"
        out.print(f"  {'pacing':<12} one start per account every {every} ({limits})")
    for problem in current.problems:
        out.print(Text(f"  ! {render.printable(problem)}", style="yellow"))
    if current.drift is not None:
        out.print(Text(f"  ! {current.drift.sentence()}", style="yellow"))
    if not accounts:
        out.print("\nNo accounts yet: add one with `kiroctl accounts login` or `accounts import`.")
        return
    grid = render.Grid(
        "ACCOUNT", "STATE", "REASON", "UNTIL", "CREDITS LEFT", "RESETS", "LAST ERROR"
    )
    for account in accounts:
        usage = account.usage
        grid.add_row(
            account.label,
            render.state(account.status),
            *render.why_and_until(account, pacing.of(account.id)),
            render.credits_bar(usage),
            render.date(usage.resets_at if usage else None),
            account.last_error or render.DASH,
        )
    out.print()
    out.print(grid)


@click.command()
@json_option
@pass_app
def config(app: App, as_json: bool) -> None:
    """Show kirod's effective settings (secrets are redacted)."""
    current = app.call(lambda kirod: kirod.config())
    if as_json:
        render.print_json(current.to_json())
        return
    app.out.print(f"config file: {current.config_path or '(none: defaults and environment)'}")
    grid = render.Grid("OPTION", "VALUE")
    for name, value in current.settings.items():
        shown = ", ".join(value) if isinstance(value, list) else value
        grid.add_row(name, render.DASH if shown in (None, "") else str(shown))
    app.out.print(grid)


@click.command()
@json_option
@pass_app
def version(app: App, as_json: bool) -> None:
    """Show the versions of kiroctl and of the running kirod."""
    app.warned = True  # this command says itself what to do when they differ
    try:
        daemon: str | None = app.call(lambda kirod: kirod.status()).version
    except exits.CliError:
        daemon = None
    if as_json:
        render.print_json({"kiroctl": __version__, "kirod": daemon})
        return
    app.out.print(f"kiroctl {__version__}")
    app.out.print(f"kirod   {daemon or 'not running'}")
    if daemon is not None and daemon != __version__:
        app.out.print(f"kiroctl {__version__}, but the running kirod is {daemon}: restart kirod")
        app.out.print(exits.restart_hint())


@click.command()
@pass_app
def shutdown(app: App) -> None:
    """Stop kirod: in-flight requests drain first, then it exits 0.

    A service manager set to restart on failure leaves it stopped.
    """
    app.call(lambda kirod: kirod.shutdown())
    app.out.print("kirod is shutting down.")
