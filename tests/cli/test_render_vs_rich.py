"""`render.Grid` draws what rich's `Table(box=None)` drew for kiroctl (its gain: bench/README)."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from kirod.cli.render import Grid

HEADERS = ("ID", "LABEL", "STATE", "CREDITS", "SEEN")
ROWS = [
    ("a1b2c3", "work", "active", "12 %", "2 min ago"),
    ("d4e5f6", "a much longer label than the others", "needs_login", "—", "never"),
    ("0ff1ce", "wide: 日本語", "exhausted", "100 %", "1 h ago"),
    ("", "", "", "", ""),
]


def drawn(renderable: RenderableType) -> list[str]:
    console = Console(file=io.StringIO(), width=200, color_system=None, force_terminal=False)
    console.print(renderable)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    # Table pads its last column to its width; a terminal shows no trailing spaces either way.
    return [line.rstrip() for line in out.splitlines()]


def table(rows: Sequence[tuple[str, ...]]) -> Table:
    reference = Table(box=None, pad_edge=False, header_style="bold")
    for header in HEADERS:
        reference.add_column(header)
    for row in rows:
        reference.add_row(*row)
    return reference


def grid(rows: Sequence[tuple[str, ...]]) -> Grid:
    ours = Grid(*HEADERS)
    for row in rows:
        ours.add_row(*row)
    return ours


def test_grid_draws_what_rich_table_draws() -> None:
    assert drawn(grid(ROWS)) == drawn(table(ROWS))


def test_grid_matches_rich_with_styled_cells_and_no_rows() -> None:
    styled = [("a1", "x", "active", "1 %", "now")]
    ours = Grid(*HEADERS)
    ours.add_row("a1", "x", Text("active", style="green"), "1 %", "now")
    assert drawn(ours) == drawn(table(styled))
    assert drawn(grid([])) == drawn(table([]))
