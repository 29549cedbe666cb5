"""`kiroctl accounts …`: list, login, import, remove, enable, disable, set-proxy, refresh, probe,
overage, set-budget.

An ACCOUNT argument is an account's id or label, or at least 4 leading characters of just one
account's id (as `accounts list` shows it) or label, in any case.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from kirod.cli import budgets, render
from kirod.cli.budgets import Limit
from kirod.cli.commands import importing, login
from kirod.cli.context import App, confirm, json_option, matching, pass_app, yes_option
from kirod.localapi.client import LocalClient
from kirod.report_types import Account


@click.group()
def accounts() -> None:
    """Manage the Kiro accounts kirod serves from."""


accounts.add_command(login.login)
accounts.add_command(importing.import_)


def resolve(app: App, ref: str) -> Account:
    """The account `ref` names: its id or label exactly, else the only one whose id or label (in
    any case) starts with `ref`, if `ref` has at least `MIN_PREFIX` characters."""
    return matching(
        ref,
        app.call(lambda kirod: kirod.accounts()),
        names=lambda a: (a.id, a.label),
        what="account",
        show=lambda a: f"{render.short_id(a.id)} ({a.label})",
        listing="kiroctl accounts list",
    )


@accounts.command("list")
@json_option
@pass_app
def list_(app: App, as_json: bool) -> None:
    """List the accounts with their state, credits, overage, budget and token expiry.

    OVERAGE says whether kirod's requests would be billed past the plan's credits: `on: billed`
    (on in Kiro and allowed with `set-budget --allow-overage`), `on: guarded` (on in Kiro, but
    kirod stops at the plan's end), `off`, or `n/a` (the plan has none)."""
    listed = app.call(lambda kirod: kirod.accounts())
    if as_json:
        render.print_json({"accounts": [account.to_json() for account in listed]})
        return
    if not listed:
        app.out.print(
            "No accounts yet: add one with `kiroctl accounts login` or `accounts import`."
        )
        return
    proxies = any(account.proxy_url for account in listed)  # the column only when one is set
    pacing = app.call(lambda kirod: kirod.status()).pacing  # held or paced accounts: in WHY
    grid = render.Grid(
        "ID",
        "LABEL",
        "KIND",
        "STATE",
        "WHY",
        "UNTIL",
        "CREDITS LEFT",
        "OVERAGE",
        "TODAY (CREDITS)",
        "MONTH (CREDITS)",
        "TOKEN EXPIRES",
        *(("PROXY",) if proxies else ()),
    )
    for account in listed:
        budget = account.budget
        grid.add_row(
            render.short_id(account.id),
            account.label,
            account.auth_kind.replace("_", " "),
            render.state(account.status),
            *render.why_and_until(account, pacing.of(account.id)),
            render.credits_bar(account.usage),
            render.overage(account),
            budgets.today(budget),
            budgets.month(budget),
            render.ago(account.expires_at),
            # The daemon masks a proxy's password before the URL leaves it.
            *((render.printable(account.proxy_url or "global"),) if proxies else ()),
        )
    app.out.print(grid)


def _act(app: App, ref: str, action: Callable[[LocalClient, str], Account], done: str) -> None:
    account_id = resolve(app, ref).id
    updated = app.call(lambda kirod: action(kirod, account_id))
    name = render.shown(updated.label)
    app.out.print(f"{done} {name} ({render.short_id(updated.id)}): ", end="")
    app.out.print(render.state(updated.status))


@accounts.command()
@click.argument("account")
@pass_app
def enable(app: App, account: str) -> None:
    """Put ACCOUNT back in service, whatever its state."""
    _act(app, account, LocalClient.enable_account, "Enabled")


@accounts.command()
@click.argument("account")
@pass_app
def disable(app: App, account: str) -> None:
    """Stop using ACCOUNT for new requests (in-flight ones finish)."""
    _act(app, account, LocalClient.disable_account, "Disabled")


@accounts.command("set-proxy")
@click.argument("account")
@click.argument("proxy", metavar="URL|direct|none")
@pass_app
def set_proxy(app: App, account: str, proxy: str) -> None:
    """Send ACCOUNT's traffic to Kiro through its own proxy.

    URL is http://, https://, socks5:// or socks5h:// (the proxy resolves names) with a host
    and a port, e.g. socks5h://user:pass@127.0.0.1:1080. `direct` bypasses the global
    proxy_url setting; `none` goes back to it. Chat, token refresh, usage, models and web
    search of ACCOUNT all take it from their next call on.
    """
    account_id = resolve(app, account).id
    wanted = None if proxy.strip().lower() == "none" else proxy
    updated = app.call(lambda kirod: kirod.set_account_proxy(account_id, wanted))
    name = f"{render.shown(updated.label)} ({render.short_id(updated.id)})"
    shown_proxy = updated.proxy_url
    if shown_proxy is None:
        app.out.print(f"{name} now uses the global proxy_url setting, if any.")
    elif shown_proxy == "direct":
        app.out.print(f"{name} now connects directly, bypassing any global proxy_url.")
    else:
        app.out.print(f"{name} now connects through {render.shown(shown_proxy)}.")


@accounts.command("set-profile")
@click.argument("account")
@click.argument("profile_arn", metavar="ARN")
@pass_app
def set_profile(app: App, account: str, profile_arn: str) -> None:
    """Make ACCOUNT use the Kiro profile ARN (arn:aws:codewhisperer:REGION:…:profile/…).

    Needed when Kiro offers an account several profiles (state `needs_profile`); the account
    then calls Kiro in the profile's region (us-east-1 or eu-central-1).
    """
    account_id = resolve(app, account).id
    updated = app.call(lambda kirod: kirod.set_account_profile(account_id, profile_arn))
    name = f"{render.shown(updated.label)} ({render.short_id(updated.id)})"
    app.out.print(f"{name} now uses {render.shown(updated.profile_arn or profile_arn)} ", end="")
    app.out.print(f"in {render.shown(updated.region or '?')}: ", render.state(updated.status))


@accounts.command()
@click.argument("account")
@pass_app
def refresh(app: App, account: str) -> None:
    """Refresh ACCOUNT's access token now."""
    _act(app, account, LocalClient.refresh_account, "Refreshed")


@accounts.command()
@click.argument("account")
@pass_app
def probe(app: App, account: str) -> None:
    """Ask Kiro for ACCOUNT's usage limits now."""
    account_id = resolve(app, account).id
    updated = app.call(lambda kirod: kirod.probe_account(account_id))
    usage = updated.usage
    app.out.print(f"{render.shown(updated.label)}: ", render.credits_bar(usage), end="")
    app.out.print(f", resets {render.date(usage.resets_at if usage else None)}")


@accounts.command()
@click.argument("account")
@click.argument("switch", metavar="on|off", type=click.Choice(["on", "off"], case_sensitive=False))
@pass_app
def overage(app: App, account: str, switch: str) -> None:
    """Let Kiro go on serving ACCOUNT past its plan's credits, billing the overage (on), or not.

    The same switch as Kiro IDE's settings; plans without overage (Free) are refused.
    """
    account_id = resolve(app, account).id
    enabled = switch.lower() == "on"
    updated = app.call(lambda kirod: kirod.set_account_overage(account_id, enabled))
    name = f"{render.shown(updated.label)} ({render.short_id(updated.id)})"
    said = updated.usage.overage if updated.usage else None
    confirmed = said == ("enabled" if enabled else "disabled")
    note = "" if confirmed else " (Kiro accepted it; its usage does not show it yet)"
    app.out.print(f"Overage {switch.lower()} for {name}{note}.")


@accounts.command("set-budget")
@click.argument("account")
@click.option(
    "--credits-per-day",
    type=budgets.CREDITS,
    help="Spend at most N of ACCOUNT's credits a UTC day, then rest it; `none`: no limit.",
)
@click.option(
    "--credits-per-month",
    type=budgets.CREDITS,
    help="Spend at most N of ACCOUNT's credits a UTC calendar month; `none`: no limit.",
)
@click.option(
    "--allow-overage/--no-allow-overage",
    default=None,
    help="Let kirod spend into overage once the plan's credits are used up (overage on in "
    "Kiro), or not [default for imported accounts: not].",
)
@json_option
@pass_app
def set_budget(
    app: App,
    account: str,
    credits_per_day: Limit | None,
    credits_per_month: Limit | None,
    allow_overage: bool | None,
    as_json: bool,
) -> None:
    """Change ACCOUNT's credit ceilings and whether kirod may spend into its overage.

    What is not given stays as it is; `none` lifts a ceiling. Past a ceiling the account rests
    until its day or month turns (UTC) and the others serve; raising it puts the account back
    at once. Kiro's own overage switch is `kiroctl accounts overage`.
    """
    if credits_per_day is None and credits_per_month is None and allow_overage is None:
        raise click.UsageError(
            "give at least one of --credits-per-day, --credits-per-month, "
            "--allow-overage or --no-allow-overage"
        )
    target = resolve(app, account)
    now = target.budget
    updated = app.call(
        lambda kirod: kirod.set_account_budget(
            target.id,
            credits_per_day=budgets.chosen(credits_per_day, now.credits_per_day),
            credits_per_month=budgets.chosen(credits_per_month, now.credits_per_month),
            allow_overage=target.allow_overage if allow_overage is None else allow_overage,
        )
    )
    if as_json:
        render.print_json(updated.to_json())
        return
    name = f"{render.shown(updated.label)} ({render.short_id(updated.id)})"
    app.out.print(f"{name}: {budgets.described(updated.budget)}; ", end="")
    app.out.print(budgets.overage_sentence(updated), end="")
    app.out.print(" Now ", render.state(updated.status), ".", sep="")


@accounts.command()
@click.argument("account")
@yes_option
@pass_app
def remove(app: App, account: str, yes: bool) -> None:
    """Remove ACCOUNT; its credentials are wiped from kirod's store.

    Asks first on a terminal; elsewhere it needs --yes.
    """
    target = resolve(app, account)
    name = f"{render.printable(target.label)} ({render.short_id(target.id)})"
    confirm(f"Remove {name} and wipe its credentials?", yes)
    app.call(lambda kirod: kirod.remove_account(target.id))
    app.out.print(f"Removed {render.shown(target.label)} ({render.short_id(target.id)}).")
