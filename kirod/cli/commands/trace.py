"""`kiroctl trace` and `kiroctl logs`: what happened to a request, and what the daemon logged.

`trace` reads the operation log through GET /trace: per request, each account tried with its
region, the Kiro model, how the attempt ended (Kiro's status and reason code when it answered an
error) and why the request moved on, the frames and bytes Kiro's answer took, then the answer's
time to first event, credits, stop reason and cut-off tool calls. The operation log holds no
prompt, output or tool content, so neither does a trace. `logs` reads the daemon's in-memory
log tail through GET /logs. With `--follow`, both poll the control API every `--interval`
seconds until Ctrl-C.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import click

from kirod.cli import exits, render
from kirod.cli.context import App, json_option, pass_app
from kirod.localapi.client import trace_path
from kirod.report_types import LogLines, Trace, TraceAttempt, TraceRequest

MAX_LAST = 200  # as the control API answers at most
MAX_LOG_PAGES = 64  # pages of log lines read back to back before the next wait

interval_option = click.option(
    "--interval",
    type=click.FloatRange(min=0.2, max=60.0),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="With --follow: seconds between polls (0.2 to 60).",
)
max_seconds_option = click.option(
    "--max-seconds",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="With --follow: stop after SECONDS.",
)


def _ms(value: float | None) -> str:
    if value is None:
        return render.DASH
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.2f} s"


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    return f"{count / 1024:.1f} KiB" if count < 1024 * 1024 else f"{count / 1024**2:.1f} MiB"


def _attempt_line(number: int, attempt: TraceAttempt, labels: dict[str, str]) -> str:
    account = labels.get(attempt.account_id, attempt.account_id)
    parts = [f"  {number}. {account}", attempt.region or render.DASH, attempt.model or render.DASH]
    outcome = attempt.outcome
    if attempt.upstream_status is not None:
        outcome += f" (HTTP {attempt.upstream_status}"
        outcome += f" {attempt.upstream_reason})" if attempt.upstream_reason else ")"
    parts.append(outcome)
    if attempt.frames is not None:
        parts.append(f"{attempt.frames} frames")
    if attempt.bytes_read is not None:
        parts.append(_size(attempt.bytes_read))
    if attempt.ended_ms is not None:
        parts.append(f"at {_ms(attempt.ended_ms)}")
    if attempt.failover_reason:
        parts.append(f"after {attempt.failover_reason}")
    return " · ".join(parts)


def request_lines(row: TraceRequest, labels: dict[str, str], keys: dict[str, str]) -> list[str]:
    """One request as text lines: a headline, its attempts, then what happened to its answer.

    `labels` names accounts and `keys` API keys by id, as `accounts list` and `keys list` do; an
    id neither knows (a removed account or key) is shown as it is."""
    result = f"{row.status}" + (f" {row.error}" if row.error else "")
    head = [
        render.moment(row.at),
        row.request_id,
        row.protocol,
        row.model,
        "stream" if row.stream else "whole",
        f"key {keys.get(row.key_id, row.key_id)}",
        result,
    ]
    lines = [" · ".join(head)]
    lines += [_attempt_line(i, a, labels) for i, a in enumerate(row.attempts, 1)]
    if row.cache == "hit":
        lines.append("  (answered from the response cache: no account, no credits)")
    elif not row.attempts:
        lines.append("  (no account was tried)")
    answer = [
        f"first event {_ms(row.ttfb_ms)}",
        f"total {_ms(row.total_ms)}",
        f"stop {row.stop_reason or render.DASH}",
    ]
    if row.input_tokens is not None or row.output_tokens is not None:
        answer.append(f"tokens {row.input_tokens or 0} in / {row.output_tokens or 0} out")
    if row.credits is not None:
        answer.append(f"credits {row.credits:g}")
    lines.append("  → " + " · ".join(answer))
    if row.truncations:
        saved = "recovered" if row.recovered else "not recovered"
        lines.append(
            f"  → Kiro cut {row.truncations} tool call(s) off · "
            f"continued {row.continuations} · {saved}"
        )
    if row.cuts:
        lines.append(
            f"  → Kiro cut {row.cuts} answer(s) off (no tail frames) · ended as max_tokens"
        )
    if row.dropped:
        lines.append(f"  → dropped parameters: {', '.join(row.dropped)}")
    if row.extensions:
        lines.append(f"  → changed by extensions: {', '.join(row.extensions)}")
    if row.cache == "miss":
        lines.append("  → response cache: miss")
    return lines


class _Labels:
    """Account labels and key names by id, asked again when a trace names one not seen yet."""

    def __init__(self, app: App) -> None:
        self._app = app
        self.accounts: dict[str, str] = {}
        self.keys: dict[str, str] = {}

    def learn(self, rows: tuple[TraceRequest, ...]) -> None:
        ids = {attempt.account_id for row in rows for attempt in row.attempts}
        if ids - set(self.accounts):
            accounts = self._app.call(lambda kirod: kirod.accounts())
            self.accounts = {account.id: account.label for account in accounts}
        if {row.key_id for row in rows} - set(self.keys):
            self.keys = {key.id: key.name for key in self._app.call(lambda kirod: kirod.keys())}


def _show(app: App, rows: tuple[TraceRequest, ...], labels: _Labels) -> None:
    if not rows:
        return
    labels.learn(rows)
    for row in rows:
        for line in request_lines(row, labels.accounts, labels.keys):
            app.out.print(render.printable(line), markup=False, highlight=False)


def _poll(
    step: Callable[[], None], interval: float, max_seconds: float | None, app: App | None = None
) -> None:
    """Run `step` every `interval` seconds until Ctrl-C or `max_seconds` (None: forever)."""
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    try:
        while deadline is None or time.monotonic() < deadline:
            wait = interval if deadline is None else min(interval, deadline - time.monotonic())
            time.sleep(max(0.0, wait))
            step()
    except KeyboardInterrupt:
        return  # Ctrl-C ends the follow as it ends `tail -f`


@click.command()
@click.argument("request_id", required=False)
@click.option(
    "--last",
    type=click.IntRange(0, MAX_LAST),
    metavar="N",
    help=f"The last N requests (at most {MAX_LAST}) [default: 10, or 0 with --follow].",
)
@click.option("--follow", "-f", is_flag=True, help="Then print each new request as it ends.")
@interval_option
@max_seconds_option
@json_option
@pass_app
def trace(
    app: App,
    request_id: str | None,
    last: int | None,
    follow: bool,
    interval: float,
    max_seconds: float | None,
    as_json: bool,
) -> None:
    """Explain requests: each account tried, how it ended, and why kirod moved on.

    Give a REQUEST_ID (the x-request-id header of an answer), or --last N, or --follow. A trace
    shows accounts, regions, models, statuses, timings, credits and stop reasons, never prompt or
    tool content. With --follow and --json it prints one JSON object per request and line.
    """
    if request_id is not None and (last is not None or follow):
        raise exits.CliError(exits.USAGE, "give a REQUEST_ID, or --last / --follow, not both")
    labels = _Labels(app)
    if request_id is not None:
        path = trace_path(request_id)
        doc = app.call(lambda kirod: kirod.request("GET", path))
        found = Trace.from_json(doc)
        if not found.requests:
            raise exits.CliError(
                exits.NOT_FOUND,
                f"no request {request_id!r} in the operation log",
                "see `kiroctl trace --last 10`; older rows are pruned (oplog_retention_s, "
                "oplog_max_rows)",
            )
        if as_json:
            render.print_json(doc)
        else:
            _show(app, found.requests, labels)
        return
    count = last if last is not None else (0 if follow else 10)
    start_path = trace_path(last=count)
    doc = app.call(lambda kirod: kirod.request("GET", start_path))
    current = Trace.from_json(doc)
    if not follow:
        if as_json:
            render.print_json(doc)
        elif current.requests:
            _show(app, current.requests, labels)
        elif count:  # `--last 0` asked for none
            app.out.print("No requests in the operation log yet.")
        return
    if as_json:
        for row in doc["requests"]:
            render.print_json_line(row)
    else:
        _show(app, current.requests, labels)
    cursor = current.cursor

    def step() -> None:
        nonlocal cursor
        path = trace_path(after=cursor)
        answer = app.call(lambda kirod: kirod.request("GET", path))
        cursor = int(answer["cursor"])
        if as_json:
            for row in answer["requests"]:
                render.print_json_line(row)
        else:
            _show(app, Trace.from_json(answer).requests, labels)

    _poll(step, interval, max_seconds)


@click.command()
@click.option(
    "--lines",
    "-n",
    type=click.IntRange(0, 1000),
    default=100,
    show_default=True,
    metavar="N",
    help="Start with the newest N lines the daemon keeps.",
)
@click.option("--follow", "-f", is_flag=True, help="Then print new lines as kirod logs them.")
@interval_option
@max_seconds_option
@json_option
@pass_app
def logs(
    app: App,
    lines: int,
    follow: bool,
    interval: float,
    max_seconds: float | None,
    as_json: bool,
) -> None:
    """Print kirod's newest log lines (its in-memory tail), and with --follow the new ones.

    The lines are those kirod writes to stderr, as its service manager keeps them, for as long as
    the daemon runs (the tail holds about 1 MiB). Add `log_level = "debug"` for request shapes.
    --json prints them as one JSON document; with --follow, one compact document a line for
    each batch of new lines.
    """
    write = _write_json_line if follow and as_json else _write_json if as_json else _write
    first = _page(app, None, lines)
    write(app, first)
    if not follow:
        return
    position = first.next

    def step() -> None:
        nonlocal position
        for _ in range(MAX_LOG_PAGES):  # the byte bound splits a burst into pages
            page = _page(app, position)
            if page.lines or page.missed:
                write(app, page)
            position = page.next
            if not page.more:
                return

    _poll(step, interval, max_seconds)


def _page(app: App, after: int | None, lines: int | None = None) -> LogLines:
    return app.call(lambda kirod: kirod.logs(after, lines=lines))


def _write_json(app: App, page: LogLines) -> None:
    render.print_json(page.to_json())


def _write_json_line(app: App, page: LogLines) -> None:
    render.print_json_line(page.to_json())


def _write(app: App, page: LogLines) -> None:
    if page.missed:
        app.err.print(
            f"({page.missed} lines left kirod's log tail before they could be read)",
            markup=False,
            highlight=False,
        )
    for line in page.lines:
        click.echo(render.printable(line))
