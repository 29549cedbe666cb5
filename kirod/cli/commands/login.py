"""`kiroctl accounts login`: a device-code login kirod drives; kiroctl shows the code and waits.

The browser opens on the verification page when this looks like a desktop session. Ctrl-C,
SIGTERM and SIGHUP (a closed terminal) cancel the login on the daemon's side too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Iterator

import click

from kirod.cli import exits, render
from kirod.cli.context import App, json_option, pass_app
from kirod.report_types import Login

POLL_WAIT_S = 5.0  # each poll returns as soon as the login ends, or after this long
EXPIRY_GRACE_S = 30.0


def _desktop() -> bool:
    """Whether a browser would open where the user sits (not over SSH, not on a bare console)."""
    if "SSH_CONNECTION" in os.environ or "SSH_TTY" in os.environ:
        return False
    return sys.platform == "darwin" or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )


@click.command()
@click.option(
    "--start-url",
    metavar="URL",
    help="IAM Identity Center start URL (https://d-…awsapps.com/start); default: AWS Builder ID.",
)
@click.option("--region", metavar="REGION", help="The Identity Center region [default: us-east-1].")
@click.option(
    "--proxy",
    "proxy_url",
    metavar="URL|direct",
    help="The new account's own proxy, the login's too (see `accounts set-proxy`).",
)
@click.option("--no-browser", is_flag=True, help="Only print the URL; do not open a browser.")
@json_option
@pass_app
def login(
    app: App,
    start_url: str | None,
    region: str | None,
    proxy_url: str | None,
    no_browser: bool,
    as_json: bool,
) -> None:
    """Sign in with AWS Builder ID or IAM Identity Center and add the account.

    With --json, prints one JSON line when the code is ready and one when the login ends
    (state approved, denied, expired, failed or cancelled). Ctrl-C, SIGTERM and SIGHUP cancel
    the login in kirod too.
    """
    pending = app.call(
        lambda kirod: kirod.start_login(start_url=start_url, region=region, proxy_url=proxy_url)
    )
    if as_json:
        render.print_json_line(pending.to_json())
    else:
        app.out.print(f"Open  {pending.verification_uri_complete}")
        app.out.print(f"and confirm the code  [bold]{pending.user_code}[/bold]")
    if not no_browser and _desktop():
        import webbrowser  # here: it loads subprocess and shutil, which only this needs

        with contextlib.suppress(webbrowser.Error):
            webbrowser.open(pending.verification_uri_complete, new=2)
    try:
        with _signals_interrupt():
            final = _wait(app, pending, show_spinner=not as_json)
    except (KeyboardInterrupt, click.Abort):
        cancelled = _cancel(app, pending)
        if as_json:
            render.print_json_line(cancelled.to_json())
        raise
    except exits.CliError:
        if as_json:  # the last line still says how it ended
            render.print_json_line(_ended(pending, "expired").to_json())
        raise
    if as_json:
        render.print_json_line(final.to_json())
    _report(app, final, quiet=as_json)


# A kiroctl that is told to stop (its terminal closed, a service manager, `kill`) cancels the
# login as Ctrl-C does, so that no login kirod drives outlives the kiroctl that showed the code.
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    previous = [(sig, signal.signal(sig, _raise_interrupt)) for sig in _STOP_SIGNALS]
    try:
        yield
    finally:
        for sig, handler in previous:
            signal.signal(sig, handler)


def _cancel(app: App, pending: Login) -> Login:
    """Cancel the login in kirod; the login as kirod reports it then, or as cancelled."""
    with _signals_ignored(), contextlib.suppress(exits.CliError):
        return app.call(lambda kirod: kirod.cancel_login(pending.id, timeout=5.0))
    return _ended(pending, "cancelled")


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """A second signal does not interrupt the cancellation."""
    previous = [(sig, signal.signal(sig, signal.SIG_IGN)) for sig in _STOP_SIGNALS]
    try:
        yield
    finally:
        for sig, handler in previous:
            signal.signal(sig, handler)


def _ended(pending: Login, state: str) -> Login:
    return dataclasses.replace(pending, state=state)


def _wait(app: App, pending: Login, *, show_spinner: bool) -> Login:
    """Poll until the login ends; bounded by the code's expiry."""
    deadline = pending.expires_at + EXPIRY_GRACE_S
    current = pending
    status = app.err.status("Waiting for you to approve in the browser…") if show_spinner else None
    with status or contextlib.nullcontext():
        while not current.finished:
            if time.time() > deadline:
                raise exits.CliError(
                    exits.LOGIN_FAILED,
                    "kirod did not report the end of the login",
                    "run `kiroctl accounts login` again",
                )
            current = app.call(lambda kirod: kirod.login(pending.id, wait_s=POLL_WAIT_S))
    return current


def _report(app: App, final: Login, *, quiet: bool) -> None:
    if final.state == "approved":
        added = final.added
        if not quiet:
            label, account_id = (added.label, added.id) if added else (None, None)
            app.out.print(
                f"Added {label}, id {render.short_id(str(account_id))}; it serves requests now."
            )
        return
    again = "run `kiroctl accounts login` again"
    hints = {
        "denied": f"the sign-in was denied in the browser; {again} and choose Allow",
        "expired": f"the code expired before it was approved; {again} and approve within "
        "the time shown on the page",
        "cancelled": again,
    }
    message = final.error_message or f"the login ended: {final.state}"
    code = exits.LOGIN_FAILED if final.state in hints else exits.FAILED
    raise exits.CliError(code, message, hints.get(final.state, "check your network and retry"))
