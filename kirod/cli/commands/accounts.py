"""`kiroctl accounts …`: list, login, import, remove, enable, disable, refresh, probe.

An ACCOUNT argument is an account's id or label, or the start of just one account's id (as
`accounts list` shows it) or label.
"""

from __future__ import annotations

from typing import Any

import click

from kirod.cli import exits, render
from kirod.cli.commands import importing, login
from kirod.cli.context import App, json_option, pass_app

UPSTREAM_TIMEOUT_S = 120.0  # refresh and probe wait on Kiro


@click.group()
def accounts() -> None:
    """Manage the Kiro accounts kirod serves from."""


accounts.add_command(login.login)
accounts.add_command(importing.import_)


def resolve(app: App, ref: str) -> dict[str, Any]:
    """The account `ref` names: its id or label, else the only one whose id or label (in any
    case) starts with `ref`."""
    listed: list[dict[str, Any]] = app.call("GET", "/accounts")["accounts"]
    folded = ref.casefold()
    matches = [a for a in listed if ref in (a["id"], a["label"])] or [
        a for a in listed if a["id"].startswith(ref) or a["label"].casefold().startswith(folded)
    ]
    if not matches:
        raise exits.CliError(
            exits.NOT_FOUND, f"no account matches {ref!r}", "see `kiroctl accounts list`"
        )
    if len(matches) > 1:
        names = ", ".join(f"{render.short_id(a['id'])} ({a['label']})" for a in matches)
        raise exits.CliError(
            exits.USAGE, f"{ref!r} matches several accounts: {names}", "give more of the id"
        )
    return matches[0]


@accounts.command("list")
@json_option
@pass_app
def list_(app: App, as_json: bool) -> None:
    """List the accounts with their state, credits and token expiry."""
    listed = app.call("GET", "/accounts")["accounts"]
    if as_json:
        render.print_json({"accounts": listed})
        return
    if not listed:
        app.out.print(
            "No accounts yet: add one with `kiroctl accounts login` or `accounts import`."
        )
        return
    grid = render.Grid("ID", "LABEL", "KIND", "STATE", "CREDITS LEFT", "TOKEN EXPIRES")
    for account in listed:
        grid.add_row(
            render.short_id(account["id"]),
            account["label"],
            account["auth_kind"].replace("_", " "),
            render.state(account["status"]),
            render.credits_bar(account.get("usage")),
            render.ago(account.get("expires_at")),
        )
    app.out.print(grid)


def _act(app: App, ref: str, action: str, done: str, timeout: float | None = None) -> None:
    account = resolve(app, ref)
    updated = app.call("POST", f"/accounts/{account['id']}/{action}", timeout=timeout)
    app.out.print(f"{done} {updated['label']} ({render.short_id(updated['id'])}): ", end="")
    app.out.print(render.state(updated["status"]))


@accounts.command()
@click.argument("account")
@pass_app
def enable(app: App, account: str) -> None:
    """Put ACCOUNT back in service, whatever its state."""
    _act(app, account, "enable", "Enabled")


@accounts.command()
@click.argument("account")
@pass_app
def disable(app: App, account: str) -> None:
    """Stop using ACCOUNT for new requests (in-flight ones finish)."""
    _act(app, account, "disable", "Disabled")


@accounts.command()
@click.argument("account")
@pass_app
def refresh(app: App, account: str) -> None:
    """Refresh ACCOUNT's access token now."""
    _act(app, account, "refresh", "Refreshed", UPSTREAM_TIMEOUT_S)


@accounts.command()
@click.argument("account")
@pass_app
def probe(app: App, account: str) -> None:
    """Ask Kiro for ACCOUNT's usage limits now."""
    target = resolve(app, account)
    updated = app.call("POST", f"/accounts/{target['id']}/probe", timeout=UPSTREAM_TIMEOUT_S)
    usage = updated.get("usage") or {}
    app.out.print(f"{updated['label']}: ", render.credits_bar(usage), end="")
    app.out.print(f", resets {render.date(usage.get('resets_at'))}")


@accounts.command()
@click.argument("account")
@pass_app
def remove(app: App, account: str) -> None:
    """Remove ACCOUNT; its credentials are wiped from kirod's store."""
    target = resolve(app, account)
    app.call("DELETE", f"/accounts/{target['id']}")
    app.out.print(f"Removed {target['label']} ({render.short_id(target['id'])}).")
