"""Rendering for kiroctl: consoles that drop colour off a terminal or under NO_COLOR, JSON output,
and the small formats tables share (times, durations, credit bars).

rich is imported by the functions that make its objects, so a command that prints only JSON
starts without it (rich takes some 25 ms to import).
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.text import Text

BAR_WIDTH = 12
DASH = "—"


PIPE_WIDTH = 200  # off a terminal, wide enough that table rows stay on one line


def consoles() -> tuple[Console, Console]:
    """stdout and stderr. rich itself honours NO_COLOR and leaves colour off when not a TTY.

    Lines are never broken (soft wrap), so paths and commands stay whole for copy and paste.
    """
    from rich.console import Console

    out = Console(highlight=False, soft_wrap=True)
    if not out.is_terminal:
        out = Console(highlight=False, soft_wrap=True, width=PIPE_WIDTH)
    return out, Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    """One JSON document on stdout, never styled, so scripts can parse it."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
    sys.stdout.flush()


def print_json_line(data: Any) -> None:
    """One compact JSON document per line, for commands that report progress (JSON lines)."""
    sys.stdout.write(json.dumps(data, sort_keys=True) + "\n")
    sys.stdout.flush()


class Grid:
    """Borderless columns, left-aligned, two spaces apart, with a bold header row.

    What rich's `Table(box=None)` drew for kiroctl, at a sixth of its cost: rich measures and
    wraps every cell, some 0.5 ms per row, which made `kiroctl status` slow on a large pool.
    Cells are never wrapped; a line wider than the terminal wraps as the terminal does.
    """

    GAP = "  "

    def __init__(self, *headers: str) -> None:
        self._headers = headers
        self._rows: list[tuple[str | Text, ...]] = []

    def add_row(self, *cells: str | Text) -> None:
        self._rows.append(cells)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text

        header = tuple(Text(name, style="bold") for name in self._headers)
        rows = [header, *(tuple(_text(cell) for cell in row) for row in self._rows)]
        widths = [max(row[i].cell_len for row in rows) for i in range(len(header))]
        for row in rows:
            line = Text()
            for i, cell in enumerate(row):
                line.append_text(cell)
                if i < len(row) - 1:
                    line.append(" " * (widths[i] - cell.cell_len) + self.GAP)
            yield line


def _text(cell: str | Text) -> Text:
    from rich.text import Text

    return cell if isinstance(cell, Text) else Text(cell)


def ago(epoch: float | None, now: float | None = None) -> str:
    if epoch is None:
        return DASH
    delta = (now or time.time()) - epoch
    if delta < 0:
        return "in " + duration(-delta)
    return duration(delta) + " ago"


def duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    return f"{hours // 24}d"


def date(epoch: float | None) -> str:
    if epoch is None:
        return DASH
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d")


def moment(epoch: float | None) -> str:
    if epoch is None:
        return DASH
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M")


def credits_bar(usage: dict[str, Any] | None) -> Text:
    """`██████░░░░░░ 310/500`: the share of this period's credits left."""
    from rich.text import Text

    if not usage or not isinstance(usage.get("limit"), int | float) or not usage["limit"]:
        return Text(DASH)
    remaining, limit = float(usage.get("remaining") or 0), float(usage["limit"])
    share = max(0.0, min(1.0, remaining / limit))
    filled = round(share * BAR_WIDTH)
    style = "green" if share > 0.3 else "yellow" if share > 0.1 else "red"
    bar = Text("█" * filled, style=style)
    bar.append("░" * (BAR_WIDTH - filled), style="dim")
    bar.append(f" {remaining:g}/{limit:g}")
    return bar


STATE_STYLES = {
    "active": "green",
    "cooling_down": "yellow",
    "exhausted": "red",
    "suspended": "red",
    "needs_login": "red",
    "disabled": "dim",
}


def state(name: str) -> Text:
    from rich.text import Text

    return Text(name.replace("_", " "), style=STATE_STYLES.get(name, ""))


def short_id(identifier: str) -> str:
    return identifier[:8]
