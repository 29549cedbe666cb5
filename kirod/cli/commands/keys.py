"""`kiroctl keys …`: the API keys clients use on kirod's public API.

A KEY argument is a key's id or name, or at least 4 leading characters of just one key's id or
name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from kirod.cli import budgets, render
from kirod.cli.budgets import Limit
from kirod.cli.context import App, confirm, json_option, matching, pass_app, yes_option
from kirod.report_types import ApiKey

F = TypeVar("F", bound=Callable[..., Any])


@click.group()
def keys() -> None:
    """Manage the API keys of kirod's public API."""


def _listed(app: App) -> list[ApiKey]:
    return app.call(lambda kirod: kirod.keys())


@keys.command("list")
@json_option
@pass_app
def list_(app: App, as_json: bool) -> None:
    """List the keys (never the keys themselves: they are stored hashed)."""
    listed = _listed(app)
    if as_json:
        render.print_json({"keys": [key.to_json() for key in listed]})
        return
    grid = render.Grid(
        "ID",
        "NAME",
        "KEY",
        "MODELS",
        "RPM",
        "TOKENS/MIN",
        "TODAY (CREDITS)",
        "MONTH (CREDITS)",
        "CACHE",
        "CREATED",
        "LAST USED",
    )
    for key in listed:
        budget = key.budget
        grid.add_row(
            render.short_id(key.id),
            key.name,
            key.prefix + "…",
            ", ".join(key.models) or "any",
            str(key.rpm) if key.rpm else "unlimited",
            f"{budget.tokens_per_minute:,}" if budget.tokens_per_minute else "unlimited",
            budgets.today(budget),
            budgets.month(budget),
            "yes" if key.cache else "no",
            render.date(key.created_at),
            render.ago(key.last_used_at),
        )
    app.out.print(grid)


def _patterns(values: tuple[str, ...]) -> list[str]:
    """`--models a,b --models c` → [a, b, c]."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def budget_options(function: F) -> F:
    """--credits-per-day, --credits-per-month and --tokens-per-minute, each N or `none`."""
    for option in reversed(
        (
            click.option(
                "--credits-per-day",
                type=budgets.CREDITS,
                help="Spend at most N Kiro credits a UTC day; `none`: no limit.",
            ),
            click.option(
                "--credits-per-month",
                type=budgets.CREDITS,
                help="Spend at most N Kiro credits a UTC calendar month; `none`: no limit.",
            ),
            click.option(
                "--tokens-per-minute",
                type=budgets.TOKENS,
                help="Send at most N tokens (input and output) a minute; `none`: no limit.",
            ),
        )
    ):
        function = option(function)
    return function


@keys.command()
@click.argument("name")
@click.option(
    "--models",
    multiple=True,
    metavar="PATTERN",
    help="Allow only models matching PATTERN (glob, e.g. 'claude-sonnet-*'); repeat or "
    "separate with commas [default: any model].",
)
@click.option(
    "--rpm", type=click.IntRange(min=1), help="Allow at most this many requests a minute."
)
@click.option(
    "--cache",
    is_flag=True,
    help="Let requests that send 'x-kirod-cache: use' be answered from the response cache.",
)
@budget_options
@json_option
@pass_app
def create(
    app: App,
    name: str,
    models: tuple[str, ...],
    rpm: int | None,
    cache: bool,
    credits_per_day: Limit | None,
    credits_per_month: Limit | None,
    tokens_per_minute: Limit | None,
    as_json: bool,
) -> None:
    """Create a key called NAME; it is shown this once only.

    Requests past its budgets are refused (429) before they reach Kiro; `keys list` shows what
    is used and left."""
    created = app.call(
        lambda kirod: kirod.create_key(
            name,
            models=_patterns(models),
            rpm=rpm,
            cache=cache,
            credits_per_day=budgets.chosen(credits_per_day, None),
            credits_per_month=budgets.chosen(credits_per_month, None),
            tokens_per_minute=budgets.whole(budgets.chosen(tokens_per_minute, None)),
        )
    )
    if as_json:
        render.print_json(created.to_json())
        return
    key = created.key
    app.err.print(f"Created key {key.name} ({render.short_id(key.id)}). It is shown only now:")
    app.out.print(created.secret, markup=False, highlight=False)


def _named(app: App, key: str) -> ApiKey:
    return matching(
        key,
        _listed(app),
        names=lambda item: (item.id, item.name),
        what="key",
        show=lambda item: f"{render.short_id(item.id)} ({item.name})",
        listing="kiroctl keys list",
    )


@keys.command("set")
@click.argument("key")
@budget_options
@json_option
@pass_app
def set_(
    app: App,
    key: str,
    credits_per_day: Limit | None,
    credits_per_month: Limit | None,
    tokens_per_minute: Limit | None,
    as_json: bool,
) -> None:
    """Change KEY's budgets; the ones not given stay as they are, `none` lifts one.

    A lower budget holds from the next request on; what was spent this day and month counts."""
    if credits_per_day is credits_per_month is tokens_per_minute is None:
        raise click.UsageError(
            "give at least one of --credits-per-day, --credits-per-month, --tokens-per-minute"
        )
    target = _named(app, key)
    now = target.budget
    tokens = budgets.chosen(tokens_per_minute, now.tokens_per_minute)
    updated = app.call(
        lambda kirod: kirod.set_key_budget(
            target.id,
            credits_per_day=budgets.chosen(credits_per_day, now.credits_per_day),
            credits_per_month=budgets.chosen(credits_per_month, now.credits_per_month),
            tokens_per_minute=budgets.whole(tokens),
        )
    )
    if as_json:
        render.print_json(updated.to_json())
        return
    name = f"{render.shown(updated.name)} ({render.short_id(updated.id)})"
    app.out.print(f"{name}: {budgets.described(updated.budget)}.")


DEFAULT_KEY = "default"  # the key kirod writes to `api_key_file` on first start


@keys.command()
@click.argument("key")
@yes_option
@pass_app
def revoke(app: App, key: str, yes: bool) -> None:
    """Revoke KEY: requests using it are refused from now on.

    Asks first on a terminal; elsewhere it needs --yes.
    """
    target = _named(app, key)
    confirm(f"Revoke {render.printable(target.name)} ({render.short_id(target.id)})?", yes)
    app.call(lambda kirod: kirod.revoke_key(target.id))
    app.out.print(f"Revoked {render.shown(target.name)} ({render.short_id(target.id)}).")
    if target.name == DEFAULT_KEY:
        path = app.call(lambda kirod: kirod.config()).settings.get("api_key_file")
        app.err.print(
            f"The key in {render.shown(str(path))} no longer works. Make a new one with "
            "`kiroctl keys create NAME` and give it to your clients in its place.",
            style="yellow",
        )
