"""`kiroctl keys …`: the API keys clients use on kirod's public API.

A KEY argument is a key's id or name, or at least 4 leading characters of just one key's id or
name.
"""

from __future__ import annotations

import click

from kirod.cli import render
from kirod.cli.context import App, confirm, json_option, matching, pass_app, yes_option
from kirod.report_types import ApiKey


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
    grid = render.Grid("ID", "NAME", "KEY", "MODELS", "RPM", "CACHE", "CREATED", "LAST USED")
    for key in listed:
        grid.add_row(
            render.short_id(key.id),
            key.name,
            key.prefix + "…",
            ", ".join(key.models) or "any",
            str(key.rpm) if key.rpm else "unlimited",
            "yes" if key.cache else "no",
            render.date(key.created_at),
            render.ago(key.last_used_at),
        )
    app.out.print(grid)


def _patterns(values: tuple[str, ...]) -> list[str]:
    """`--models a,b --models c` → [a, b, c]."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


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
@json_option
@pass_app
def create(
    app: App, name: str, models: tuple[str, ...], rpm: int | None, cache: bool, as_json: bool
) -> None:
    """Create a key called NAME; it is shown this once only."""
    created = app.call(
        lambda kirod: kirod.create_key(name, models=_patterns(models), rpm=rpm, cache=cache)
    )
    if as_json:
        render.print_json(created.to_json())
        return
    key = created.key
    app.err.print(f"Created key {key.name} ({render.short_id(key.id)}). It is shown only now:")
    app.out.print(created.secret, markup=False, highlight=False)


DEFAULT_KEY = "default"  # the key kirod writes to `api_key_file` on first start


@keys.command()
@click.argument("key")
@yes_option
@pass_app
def revoke(app: App, key: str, yes: bool) -> None:
    """Revoke KEY: requests using it are refused from now on.

    Asks first on a terminal; elsewhere it needs --yes.
    """
    target = matching(
        key,
        _listed(app),
        names=lambda item: (item.id, item.name),
        what="key",
        show=lambda item: f"{render.short_id(item.id)} ({item.name})",
        listing="kiroctl keys list",
    )
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
