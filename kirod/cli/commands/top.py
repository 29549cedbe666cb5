"""`kiroctl top`: a live view of kirod's pool, refreshed from the control API.

Each refresh makes two calls, GET /pool (each account's slots in use, the queue) and
GET /stats?since=now-60 (the last minute of the operation log). On a terminal the view is redrawn
in place (rich `Live`) and keys are read without blocking, the terminal in cbreak mode until the
command ends; anywhere else, or with `--once` or `--json`, it prints one snapshot.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from kirod.cli import exits, render
from kirod.cli.context import App, json_option, pass_app
from kirod.localapi.client import stats_path
from kirod.report_types import (
    ATTENTION_STATES,
    DEGRADED,
    DOWN,
    HEALTHY,
    Pool,
    PoolAccount,
    Stats,
)

if TYPE_CHECKING:
    from rich.console import Group

WINDOW_S = 60.0  # "the last minute": its totals are the rates per minute
QUIT_KEYS = frozenset(b"qQ\x03\x04")  # q, Ctrl-C and Ctrl-D (should the terminal pass them on)
HEALTH_STYLES = {HEALTHY: "bold green", DEGRADED: "bold yellow", DOWN: "bold red"}


class _Stop(Exception):
    """SIGTERM or SIGHUP arrived while the view was live."""


@dataclass(frozen=True)
class Snapshot:
    """The pool and the last minute of the operation log, as of `at`."""

    at: float
    pool: Pool
    last_minute: Stats
    last_minute_doc: dict[str, Any]  # as kirod sent it, for --json (see `kiroctl stats`)

    @property
    def health(self) -> str:
        """As the pool shows it: healthy with an active account and none needing attention."""
        states = {account.status for account in self.pool.accounts}
        return HEALTHY if "active" in states and not states & ATTENTION_STATES else DEGRADED

    @property
    def in_flight(self) -> int:
        return sum(account.in_flight for account in self.pool.accounts)

    @property
    def capacity(self) -> int:
        return sum(account.capacity for account in self.pool.accounts)

    def to_json(self) -> dict[str, Any]:
        """The shape `kiroctl top --json` prints."""
        return {
            "at": self.at,
            "health": self.health,
            "in_flight": self.in_flight,
            "capacity": self.capacity,
            "queued": self.pool.queued,
            "window_s": WINDOW_S,
            "pool": self.pool.to_json(),
            "last_minute": self.last_minute_doc,
        }


def snapshot(app: App, now: float | None = None) -> Snapshot:
    """The pool now and the minute before `now`."""
    pool = app.call(lambda kirod: kirod.pool())
    at = time.time() if now is None else now
    path = stats_path(at - WINDOW_S)
    last_minute: dict[str, Any] = app.call(lambda kirod: kirod.request("GET", path))
    return Snapshot(at, pool, Stats.from_json(last_minute), last_minute)


@click.command()
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between refreshes (0.2 or more).",
)
@click.option("--once", is_flag=True, help="Print one snapshot and exit, even on a terminal.")
@click.option(
    "--max-seconds",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Stop the live view after SECONDS.",
)
@json_option
@pass_app
def top(app: App, interval: float, once: bool, max_seconds: float | None, as_json: bool) -> None:
    """Watch kirod live: requests in flight, account slots, the last minute, errors.

    Press q (or Ctrl-C) to quit. Off a terminal, or with --once or --json, it prints one snapshot.
    """
    if once or as_json or not (sys.stdin.isatty() and sys.stdout.isatty()):
        current = snapshot(app)  # kirod down: exits 3 with the usual message
        if as_json:
            render.print_json(current.to_json())
        else:
            app.out.print(view(current))
        return
    _live(app, interval, max_seconds)


def _live(app: App, interval: float, max_seconds: float | None) -> None:
    from rich.live import Live

    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    fd = sys.stdin.fileno()
    with _cbreak(fd), _stop_on_signals():
        try:
            with Live(console=app.out, auto_refresh=False, redirect_stdout=False) as live:
                while True:  # until q, Ctrl-C, a signal or --max-seconds
                    live.update(_frame(app, interval), refresh=True)
                    if _wait_for_quit(fd, interval, deadline):
                        return
        except KeyboardInterrupt:
            return  # Ctrl-C quits as q does
        except _Stop:
            raise click.exceptions.Exit(exits.INTERRUPTED) from None


def _frame(app: App, interval: float) -> Group:
    try:
        return view(snapshot(app), live=True)
    except exits.CliError as exc:
        return _unreachable(exc, interval)


def _wait_for_quit(fd: int, interval: float, deadline: float | None) -> bool:
    """Wait `interval` for a key: True when it is time to quit (q, or the deadline passed)."""
    next_at = time.monotonic() + interval
    for _ in range(1000):  # each pass reads one burst of keys; a refresh comes first
        until = next_at if deadline is None else min(next_at, deadline)
        wait = until - time.monotonic()
        if wait <= 0:
            break
        if select.select([fd], [], [], wait)[0]:
            keys = os.read(fd, 64)
            if not keys or QUIT_KEYS.intersection(keys):  # no bytes: the terminal went away
                return True
    return deadline is not None and time.monotonic() >= deadline


@contextlib.contextmanager
def _cbreak(fd: int) -> Iterator[None]:
    """Keys as they are typed, unechoed; the terminal's settings back as they were at the end."""
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd, termios.TCSANOW)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP end the view through the `finally`s that restore the terminal."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Stop

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _unreachable(exc: exits.CliError, interval: float) -> Group:
    from rich.console import Group
    from rich.text import Text

    headline = Text("kirod · ")
    headline.append(DOWN, style=HEALTH_STYLES[DOWN])
    headline.append(f" · {time.strftime('%H:%M:%S')}")
    lines = [headline, Text(render.printable(exc.message), style="red")]
    if exc.hint:
        lines.append(Text(f"hint: {render.printable(exc.hint)}", style="dim"))
    lines.append(Text(f"\nretrying every {interval:g}s · q quits", style="dim"))
    return Group(*lines)


def view(current: Snapshot, *, live: bool = False) -> Group:
    """The snapshot as the header, the accounts, the last minute and its errors."""
    from rich.console import Group
    from rich.text import Text

    now = current.at
    pool = current.pool
    minute = current.last_minute
    headline = Text("kirod · ")
    headline.append(current.health, style=HEALTH_STYLES.get(current.health, ""))
    headline.append(
        f" · {current.in_flight}/{current.capacity} in flight · {pool.queued} queued"
        f" · {pool.strategy} · {time.strftime('%H:%M:%S', time.localtime(now))}"
    )
    parts: list[Any] = [headline]

    by_account = {group.key: group for group in minute.accounts}
    if pool.accounts:
        grid = render.Grid(
            "ACCOUNT", "STATE", "SLOTS", "REQ/MIN", "ERR/MIN", "REASON", "UNTIL", "LAST ERROR"
        )
        for account in pool.accounts:
            group = by_account.get(account.id)
            active = account.status == "active"
            grid.add_row(
                account.label,
                render.state(account.status),
                f"{account.in_flight}/{account.capacity}",
                f"{group.requests:,}" if group else "0",
                f"{group.errors:,}" if group else "0",
                render.DASH if active else account.reason or render.DASH,
                render.DASH if active else render.until(account.until, now),
                _last_error(account, now),
            )
        parts += [Text(), grid]
    else:
        parts += [Text("\nNo accounts yet: add one with `kiroctl accounts login`.")]

    rate = f"{minute.success_rate:.1%}" if minute.success_rate is not None else render.DASH
    ttfb = f"{minute.ttfb_ms.p50:.0f} ms" if minute.ttfb_ms else render.DASH
    parts += [
        Text(),
        Text("last minute", style="bold"),
        Text(f"  requests   {minute.requests:,}  (succeeded {rate}) · first byte p50 {ttfb}"),
        Text(f"  tokens     {minute.input_tokens:,} in · {minute.output_tokens:,} out"),
        Text(f"  credits    {minute.credits:g}/min"),
    ]
    if minute.errors:
        errors = render.Grid("ERROR", "LAST MIN")
        for code, count in sorted(minute.errors.items(), key=lambda item: -item[1]):
            errors.add_row(code, f"{count:,}")
        parts += [Text(), errors]
    else:
        parts += [Text("  errors     none")]
    if live:
        parts += [Text("\nq quits", style="dim")]
    return Group(*parts)


def _last_error(account: PoolAccount, now: float) -> str:
    if not account.last_error:
        return render.DASH
    return f"{account.last_error} ({render.ago(account.last_error_at, now)})"
