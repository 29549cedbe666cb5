"""`kiroctl console`: the web console, entered with a one-time link."""

from __future__ import annotations

import os
import sys
import webbrowser

import click

from kirod.cli import render
from kirod.cli.context import App, json_option, pass_app


def _has_desktop() -> bool:
    """A graphical session to open a browser in; without one, `webbrowser` may start a text
    browser on this very terminal, so the link is only printed."""
    if sys.platform == "darwin":
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


@click.command()
@click.option("--no-browser", is_flag=True, help="Print the link; do not open a browser.")
@json_option
@pass_app
def console(app: App, no_browser: bool, as_json: bool) -> None:
    """Open the web console in a browser with a one-time link.

    The link signs in one browser, once, within a minute; the session it opens ends after
    console_idle_s without use, or when kirod restarts.
    """
    link = app.call(lambda kirod: kirod.console_link())
    if as_json:
        render.print_json(link.to_json())
        return
    opened = not no_browser and _has_desktop() and webbrowser.open(link.url)
    lead = "Opened the console in your browser; if it did not appear, open" if opened else "Open"
    app.out.print(f"{lead} this link within {link.expires_in_s:.0f} s (it works once):")
    app.out.print(link.url, soft_wrap=True, highlight=False)
