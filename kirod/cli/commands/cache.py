"""`kiroctl cache …`: the opt-in response cache (keys created with --cache)."""

from __future__ import annotations

import click

from kirod.cli import render
from kirod.cli.context import App, json_option, pass_app


@click.group()
def cache() -> None:
    """Show or empty the response cache.

    Only keys created with `kiroctl keys create --cache` are answered from it, and only their
    requests that send 'x-kirod-cache: use'.
    """


@cache.command()
@json_option
@pass_app
def stats(app: App, as_json: bool) -> None:
    """Show the cached answers, their size, and the hits and misses since kirod started."""
    answer = app.call(lambda kirod: kirod.cache_stats())
    if as_json:
        render.print_json(answer.to_json())
        return
    grid = render.Grid("ENTRIES", "SIZE", "LIMIT", "TTL", "OLDEST", "HITS", "MISSES")
    grid.add_row(
        str(answer.entries),
        f"{answer.bytes} B",
        f"{answer.max_bytes} B",
        f"{answer.ttl_s:g} s",
        render.ago(answer.oldest_at),
        str(answer.hits),
        str(answer.misses),
    )
    app.out.print(grid)


@cache.command()
@pass_app
def clear(app: App) -> None:
    """Drop every cached answer."""
    cleared = app.call(lambda kirod: kirod.clear_cache())
    app.out.print(f"Dropped {cleared} cached answer{'' if cleared == 1 else 's'}.")
