"""`kiroctl models` and `kiroctl stats`: what kirod can serve, and what it has served."""

from __future__ import annotations

import re
import time
from collections import Counter
from datetime import datetime

import click

from kirod.cli import budgets, render
from kirod.cli.context import App, json_option, pass_app
from kirod.localapi.client import stats_path
from kirod.report_types import ModelRow, Models, Stats, StatsGroup

_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@click.command()
@json_option
@pass_app
def models(app: App, as_json: bool) -> None:
    """List the models your accounts offer, and which accounts offer each.

    LISTED is the window the catalog lists; LEARNED, the windows Kiro really measures on some
    accounts (kirod learns them from its context usage); CONTEXT, the prompt limit clients are
    told."""
    listing = app.call(lambda kirod: kirod.models())
    if as_json:
        render.print_json(listing.to_json())
        return
    grid = render.Grid("MODEL", "KIRO ID", "LISTED", "LEARNED", "CONTEXT", "MAX OUTPUT", "ACCOUNTS")
    for row in listing.models:
        grid.add_row(
            row.id,
            row.kiro_id,
            f"{row.listed_window:,}",
            _learned(row),
            f"{row.context_window:,}",
            f"{row.max_output_tokens:,}",
            str(len(row.accounts)) if listing.source == "accounts" else render.DASH,
        )
    app.out.print(grid)
    if listing.source == "static":
        app.out.print("(no active account yet: this is kirod's built-in list)")
    _substitutes(app, listing)


def _learned(row: ModelRow) -> str:
    """Each learned window, and on how many of the model's accounts."""
    if not row.learned:
        return render.DASH
    counts = Counter(w.window for w in row.learned)
    return ", ".join(f"{window:,} ({n}/{len(row.accounts)})" for window, n in counts.items())


def _substitutes(app: App, listing: Models) -> None:
    """Which names are served by another model: aliases, family fallback, what was substituted."""
    rows = [(name, target, "alias") for name, target in listing.aliases.items()]
    rows += [(word, kiro_id, "family") for word, kiro_id in listing.families.items()]
    rows += [(s.requested, s.served, f"{s.via}, served") for s in listing.substitutions]
    if listing.fallback == "family":
        app.out.print(
            "\nIds no account offers are served by the newest model of their Claude line, or "
            'of their GPT tier, else the newest GPT (model_fallback = "family").'
        )
    else:
        app.out.print('\nIds no account offers are answered 404 (model_fallback = "strict").')
    if rows:
        grid = render.Grid("REQUESTED", "SERVED BY", "HOW")
        for row in rows:
            grid.add_row(*row)
        app.out.print(grid)
    if listing.clients:
        app.out.print("\nWhat the clients send by default, and what serves it now:")
        clients = render.Grid("CLIENT", "AS", "ASKS FOR", "SERVED BY", "WHY")
        for client in listing.clients:
            served = client.served or "404"
            clients.add_row(client.client, client.role, client.id, served, client.why)
        app.out.print(clients)


def parse_since(value: str, now: float | None = None) -> float:
    """`90m`, `12h`, `7d`, `2w` ago; an ISO date or date-time; or epoch seconds."""
    now = time.time() if now is None else now
    text = value.strip().lower()
    if match := _RELATIVE.fullmatch(text):
        return now - float(match[1]) * _UNITS[match[2]]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value.strip()).timestamp()
    except ValueError:
        raise click.BadParameter(
            "use a duration (30m, 12h, 7d), a date (2025-06-01[T10:00]) or epoch seconds"
        ) from None


def _milliseconds(value: float) -> str:
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.2f} s"


# `--by`: the breakdown's title and the member of `Stats` that holds it.
BREAKDOWNS = {
    "key": ("KEY", "keys"),
    "account": ("ACCOUNT", "accounts"),
    "model": ("MODEL", "models"),
    "day": ("DAY (UTC)", "days"),
}


@click.command()
@click.option("--since", metavar="WHEN", help="Only requests since WHEN: 30m, 12h, 7d, a date.")
@click.option(
    "--by",
    type=click.Choice(sorted(BREAKDOWNS)),
    help="Show only the requests and credits of each key, account, model or UTC day.",
)
@json_option
@pass_app
def stats(app: App, since: str | None, by: str | None, as_json: bool) -> None:
    """Summarize the requests kirod served: success, first byte, accounts, models, keys, days.

    Keys are named as `kiroctl keys list` names them; days are UTC dates, each with its
    requests, errors and Kiro credits, to the sixth decimal kirod keeps. With --by and --json,
    the one breakdown: {"since", "by", "groups": [{"key", "name", "requests", "errors",
    "credits"}]}."""
    start = parse_since(since) if since else None
    if as_json and by is None:
        # The document as kirod sent it: `Stats.to_json()` could write 0 as 0.0.
        render.print_json(app.call(lambda kirod: kirod.request("GET", stats_path(start))))
        return
    report = app.call(lambda kirod: kirod.stats(start))
    if by is not None:
        _breakdown(app, report, by, as_json)
        return
    labels = _names(app, "account")
    out = app.out
    out.print(f"since {render.moment(report.since) if report.since else 'the log began'}")
    rate = f"{report.success_rate:.1%}" if report.success_rate is not None else render.DASH
    out.print(f"  requests   {report.requests:,}  (succeeded {rate})")
    if report.ttfb_ms is not None:
        p = report.ttfb_ms
        out.print(
            f"  first byte p50 {_milliseconds(p.p50)} · p95 {_milliseconds(p.p95)} · "
            f"p99 {_milliseconds(p.p99)}"
        )
    out.print(f"  tokens     {report.input_tokens:,} in · {report.output_tokens:,} out")
    out.print(f"  credits    {budgets.credits(report.credits)}")
    if report.truncated:  # requests in which Kiro cut a tool call off, and how many were saved
        cut, saved = report.truncation_rate or 0.0, report.recovery_rate or 0.0
        out.print(
            f"  cut calls  {report.truncated:,} requests ({cut:.1%}) · "
            f"recovered {report.recovered:,} ({saved:.1%})"
        )
    _groups(app, "ACCOUNT", report.accounts, labels)
    _groups(app, "MODEL", report.models, {})
    if report.keys:
        _groups(app, "KEY", report.keys, _names(app, "key"))
    _groups(app, "DAY (UTC)", report.days, {})
    if report.errors:
        grid = render.Grid("ERROR", "COUNT")
        for code, count in report.errors.items():
            grid.add_row(code, f"{count:,}")
        out.print()
        out.print(grid)


def _names(app: App, by: str) -> dict[str, str]:
    """How `keys list` or `accounts list` names each key or account id; none for the others."""
    if by == "key":
        return {key.id: key.name for key in app.call(lambda kirod: kirod.keys())}
    if by == "account":
        return {account.id: account.label for account in app.call(lambda kirod: kirod.accounts())}
    return {}


def _breakdown(app: App, report: Stats, by: str, as_json: bool) -> None:
    title, member = BREAKDOWNS[by]
    groups: tuple[StatsGroup, ...] = getattr(report, member)
    names = _names(app, by) if groups else {}
    if as_json:
        rows = [
            {
                "key": group.key,
                "name": names.get(group.key, group.key),
                "requests": group.requests,
                "errors": group.errors,
                "credits": group.credits,
            }
            for group in groups
        ]
        render.print_json({"since": report.since, "by": by, "groups": rows})
        return
    since = render.moment(report.since) if report.since else "the log began"
    app.out.print(f"since {since}: {report.requests:,} requests, ", end="")
    app.out.print(f"{budgets.credits(report.credits)} credits")
    if not groups:
        app.out.print(f"No requests by {by} yet.")
        return
    _groups(app, title, groups, names)


def _groups(app: App, title: str, groups: tuple[StatsGroup, ...], names: dict[str, str]) -> None:
    if not groups:
        return
    grid = render.Grid(title, "REQUESTS", "ERRORS", "CREDITS")
    for group in groups:
        grid.add_row(
            names.get(group.key, group.key),
            f"{group.requests:,}",
            f"{group.errors:,}",
            budgets.credits(group.credits),
        )
    app.out.print()
    app.out.print(grid)
