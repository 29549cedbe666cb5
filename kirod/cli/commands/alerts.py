"""`kiroctl alerts …`: the webhooks and desktop notifications kirod sends about its accounts."""

from __future__ import annotations

import click

from kirod.cli import exits, render
from kirod.cli.context import App, json_option, pass_app


@click.group()
def alerts() -> None:
    """Check the alerts kirod sends when an account needs you.

    kirod posts to each [[alerts.webhook]] of its config file when an account is suspended,
    needs a login or a profile, is disabled or exhausted, when no account is usable, and when
    that is over.
    """


@alerts.command("test")
@json_option
@pass_app
def test(app: App, as_json: bool) -> None:
    """Send one test alert to every webhook now, and show how each answered.

    Exits 1 if a webhook did not take it (no answer, or not a 2xx status).
    """
    answer = app.call(lambda kirod: kirod.alerts_test())
    if as_json:
        render.print_json(answer.to_json())
    elif not answer.webhooks:
        app.out.print(
            "No webhook is configured: add [[alerts.webhook]] tables (url, secret) to the "
            "config file and restart kirod.",
            markup=False,  # the brackets are TOML's, not rich markup
            highlight=False,
        )
    else:
        grid = render.Grid("WEBHOOK", "DELIVERED", "STATUS", "ERROR")
        for hook in answer.webhooks:
            grid.add_row(
                hook.webhook,
                "yes" if hook.delivered else "no",
                "" if hook.status is None else str(hook.status),
                hook.error or "",
            )
        app.out.print(grid)
    if answer.desktop is not None and not as_json:
        app.out.print(f"Desktop notification: {answer.desktop}", markup=False, highlight=False)
    if not all(hook.delivered for hook in answer.webhooks):
        raise exits.CliError(exits.FAILED, "a webhook did not take the test alert")
