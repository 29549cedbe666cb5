"""Rendering for kiroctl: consoles that drop colour off a terminal or under NO_COLOR, JSON output,
and the small formats tables share (times, durations, credit bars, the overage switch).

rich is imported by the functions that make its objects, so a command that prints only JSON
starts without it (rich takes some 25 ms to import).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.text import Text

    from kirod.report_types import Account, PacedAccount, Usage

BAR_WIDTH = 12
DASH = "—"


PIPE_WIDTH = 200  # off a terminal, wide enough that table rows stay on one line


def consoles() -> tuple[Console, Console]:
    """stdout and stderr. rich itself honours NO_COLOR and leaves colour off when not a TTY; then,
    and under TERM=dumb, the text is plain ASCII too (bars of # and ., - for a dash).

    Lines are never broken (soft wrap), so paths and commands stay whole for copy and paste.
    """
    from rich.console import Console

    out_file, err_file = (
        cast("TextIO", Ascii(stream)) if plain(stream) else stream
        for stream in (sys.stdout, sys.stderr)
    )
    out = Console(file=out_file, highlight=False, soft_wrap=True)
    if not out.is_terminal:
        out = Console(file=out_file, highlight=False, soft_wrap=True, width=PIPE_WIDTH)
    # rich exits 1 on EPIPE; kiroctl's root command ends with the shell's code for it instead.
    out.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]
    return out, Console(file=err_file, highlight=False, soft_wrap=True)


def _broken_pipe() -> None:
    raise BrokenPipeError


def plain(stream: TextIO) -> bool:
    """Whether `stream` gets plain ASCII: not a terminal, or NO_COLOR or TERM=dumb set."""
    try:
        terminal = stream.isatty()
    except ValueError:  # closed
        terminal = False
    return not terminal or bool(os.environ.get("NO_COLOR")) or os.environ.get("TERM") == "dumb"


ASCII = str.maketrans({"—": "-", "█": "#", "░": ".", "…": "...", "·": "-", "≥": ">=", "→": "->"})


class Ascii:
    """A text stream that writes what it is given with the few non-ASCII characters kiroctl
    draws (dashes, bars, ellipses, dots, arrows) replaced by ASCII."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(text.translate(ASCII))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


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
        from rich.cells import cell_len
        from rich.text import Text

        header = tuple(Text(name, style="bold") for name in self._headers)
        rows = [header, *(tuple(_text(cell) for cell in row) for row in self._rows)]
        # Measured as written: off a terminal, `Ascii` turns one `…` into three dots.
        ascii_out = isinstance(console.file, Ascii)
        lengths = [
            [cell_len(cell.plain.translate(ASCII)) if ascii_out else cell.cell_len for cell in row]
            for row in rows
        ]
        widths = [max(row[i] for row in lengths) for i in range(len(header))]
        for row, sizes in zip(rows, lengths, strict=True):
            line = Text()
            for i, cell in enumerate(row):
                line.append_text(cell)
                if i < len(row) - 1:
                    line.append(" " * (widths[i] - sizes[i]) + self.GAP)
            yield line


def _text(cell: str | Text) -> Text:
    from rich.text import Text

    return cell if isinstance(cell, Text) else Text(printable(cell))


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with control characters shown as escapes: a label or an error from the daemon
    must not move the cursor, ring the bell or rewrite the terminal's title."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def shown(text: str) -> str:
    """Text from the daemon for a console line: printable, and no rich markup of its own."""
    from rich.markup import escape

    return escape(printable(text))


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


def until(epoch: float | None, now: float | None = None) -> str:
    """When a state ends, relative then absolute: `in 42s (14:03:10)`."""
    if epoch is None:
        return DASH
    current = time.time() if now is None else now
    shape = "%H:%M:%S" if abs(epoch - current) < 86400 else "%Y-%m-%d %H:%M"
    return f"{ago(epoch, current)} ({datetime.fromtimestamp(epoch).strftime(shape)})"


def why_and_until(account: Account, paced: PacedAccount | None) -> tuple[str, str]:
    """A non-active account's reason and until-time; for an active one, what holds it from
    starting a request now (`paced`) or dashes (a reason left from a cool-down whose time is up
    says nothing)."""
    if account.status == "active":
        if paced is None:
            return DASH, DASH
        why = "held: shared back-off" if paced.held_until is not None else "paced"
        return why, until(paced.next_start_at)
    return account.status_reason or DASH, until(account.status_until)


def credits_bar(usage: Usage | None) -> Text:
    """`██████░░░░░░ 310/500`: the share of this period's credits left."""
    from rich.text import Text

    if usage is None or not usage.limit:
        return Text(DASH)
    remaining, limit = usage.remaining or 0.0, usage.limit
    share = max(0.0, min(1.0, remaining / limit))
    filled = round(share * BAR_WIDTH)
    style = "green" if share > 0.3 else "yellow" if share > 0.1 else "red"
    bar = Text("█" * filled, style=style)
    bar.append("░" * (BAR_WIDTH - filled), style="dim")
    bar.append(f" {remaining:g}/{limit:g}")
    return bar


def overage(account: Account) -> str:
    """Whether kirod's requests past the plan's credits would be billed: `on: billed` (on in
    Kiro and allowed), `on: guarded` (on in Kiro, kirod stops at the plan's end), `off`, `n/a`
    (the plan cannot use it), or a dash before Kiro has said."""
    usage = account.usage
    if usage is not None and usage.overage_capable is False:
        return "n/a"
    if usage is None or usage.overage not in ("enabled", "disabled"):
        return DASH
    if usage.overage == "disabled":
        return "off"
    return "on: billed" if account.bills_overage else "on: guarded"


STATE_STYLES = {
    "active": "green",
    "cooling_down": "yellow",
    "exhausted": "red",
    "suspended": "red",
    "needs_login": "red",
    "needs_profile": "red",
    "disabled": "dim",
}


def state(name: str) -> Text:
    from rich.text import Text

    return Text(name.replace("_", " "), style=STATE_STYLES.get(name, ""))


def short_id(identifier: str) -> str:
    return identifier[:8]
