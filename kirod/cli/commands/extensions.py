"""`kiroctl extensions`: the extensions kirod loaded, in the order their hooks run."""

from __future__ import annotations

import json

import click

from kirod.cli import render
from kirod.cli.context import App, json_option, pass_app


@click.command()
@json_option
@pass_app
def extensions(app: App, as_json: bool) -> None:
    """List the loaded extensions: version, priority, failure policy and options.

    Options the extension marks secret show as <redacted>. Extensions are enabled with
    [extensions.NAME] tables in the config file.
    """
    listing = app.call(lambda kirod: kirod.extensions())
    if as_json:
        render.print_json(listing.to_json())
        return
    if not listing.extensions:
        app.out.print(
            "No extension is loaded: add an [extensions.NAME] table to the config file and "
            "restart kirod.",
            highlight=False,
            markup=False,
        )
        return
    grid = render.Grid("NAME", "VERSION", "PRIORITY", "ON FAILURE", "TIMEOUT", "HOOKS", "OPTIONS")
    for item in listing.extensions:
        grid.add_row(
            item.name,
            item.version,
            str(item.priority),
            item.on_failure,
            f"{item.timeout_s:g} s",
            ", ".join(hook.removeprefix("on_") for hook in item.hooks),
            " ".join(f"{key}={json.dumps(value)}" for key, value in item.options.items())
            or render.DASH,
        )
    app.out.print(grid)
