"""SVG charts for the console, rendered by the daemon: pure functions from numbers to markup.

The console's CSP allows no inline script or style, so a chart is plain SVG to inline in a page:
no `style` attribute, no script, no event handler. Colours come only from CSS classes, for the
stylesheet to follow light and dark mode: `series-0` … `series-5` (a line is also `line`, a bar
`bar`), `axis`, `grid`, `muted` (tick labels), `title`, and `mark` / `mark-label` (a level drawn
across bars, such as a budget). Every chart is `role="img"` with a
`<title>` and an `aria-label` that summarise it (largest and latest value) for screen readers;
times are UTC. Output stays small whatever the input: lines are downsampled to `MAX_POINTS`, bars
merged to `MAX_BARS`, stacks to `SERIES` keys, and coordinates are written with one decimal.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from html import escape

WIDTH = 360
HEIGHT = 180
LEFT, RIGHT, TOP, BOTTOM = 40, WIDTH - 16, 24, HEIGHT - 24  # the plot area
LEGEND_ROW = 16
MAX_POINTS = 240  # per line: more than the plot's pixels would not show
MAX_BARS = 120
MAX_LABEL_CHARS = 16
SERIES = 6  # colour classes series-0 … series-5
EMPTY = "no requests in this window"

Point = tuple[float, float | None]


def line_chart(title: str, points: Sequence[Point], *, unit: str, series_label: str) -> str:
    """One line over time: x in epoch seconds, y the value, None for a gap."""
    return lines_chart(title, {series_label: points}, unit=unit)


def lines_chart(
    title: str, series: Mapping[str, Sequence[Point]], unit: str, *, empty: str = EMPTY
) -> str:
    """Lines over time sharing one axis (e.g. TTFB p50 and p95); None values break a line."""
    shown = {label: _downsample(points) for label, points in list(series.items())[:SERIES]}
    values = [y for points in shown.values() for _, y in points if y is not None]
    if not values:
        return _empty(title, empty)
    xs = [x for points in shown.values() for x, _ in points]
    x0, x1 = min(xs), max(xs)
    top, ticks = _value_ticks(max(values))
    body = [*_y_axis(ticks, top), *_time_axis(x0, x1)]
    summaries = []
    for index, (label, points) in enumerate(shown.items()):
        for run in _runs(points):
            coords = [(_x(x, x0, x1), _y(y, top)) for x, y in run]
            if len(coords) == 1:  # a lone value between gaps would draw nothing as a path
                cx, cy = coords[0]
                body.append(f'<circle class="series-{index}" cx="{_n(cx)}" cy="{_n(cy)}" r="2"/>')
            else:
                path = "M" + "L".join(f"{_n(x)} {_n(y)}" for x, y in coords)
                body.append(f'<path class="series-{index} line" d="{path}"/>')
        present = [y for _, y in points if y is not None]
        latest = present[-1] if present else None
        summaries.append(
            f"{label}: max {_value(max(present), unit)}, latest {_value(latest, unit)}"
            if present
            else f"{label}: none"
        )
    legend, extra = _legend(list(shown)) if len(shown) > 1 else ([], 0)
    return _svg(title, "; ".join(summaries), [*body, *legend], extra)


def bar_chart(
    title: str,
    bars: Sequence[tuple[str, float]],
    *,
    unit: str,
    empty: str = EMPTY,
    mark: tuple[str, float] | None = None,
) -> str:
    """One bar per label (a time bucket, an error class); beyond `MAX_BARS`, neighbours add up.

    `mark`: a named level drawn across the bars (a day's budget), within the scale."""
    merged = _merge_bars(bars)
    if not any(value for _, value in merged):
        return _empty(title, empty)
    peak = max(value for _, value in merged)
    top, ticks = _value_ticks(max(peak, mark[1]) if mark else peak)
    slot = (RIGHT - LEFT) / len(merged)
    body = _y_axis(ticks, top)
    for index, (label, value) in enumerate(merged):
        y = _y(value, top)
        body.append(
            f'<rect class="series-0 bar" x="{_n(LEFT + index * slot + slot * 0.1)}" y="{_n(y)}"'
            f' width="{_n(slot * 0.8)}" height="{_n(BOTTOM - y)}">'
            f"<title>{escape(label)}: {escape(_value(value, unit))}</title></rect>"
        )
    body.extend(_bar_labels([label for label, _ in merged], slot))
    peak_label, peak = max(merged, key=lambda bar: bar[1])
    summary = (
        f"max {_value(peak, unit)} ({peak_label}), latest {_value(merged[-1][1], unit)},"
        f" total {_value(sum(value for _, value in merged), unit)}"
    )
    if mark:
        body.extend(_mark(*mark, top))
        summary += f", {mark[0]} {_value(mark[1], unit)}"
    return _svg(title, summary, body)


def stacked_bars(
    title: str,
    columns: Sequence[tuple[str, Mapping[str, float]]],
    unit: str,
    *,
    empty: str = EMPTY,
) -> str:
    """A bar per label split by key (e.g. credits per day per account), largest keys first.

    Keys beyond the colour classes are summed as "other".
    """
    columns = list(columns)[-MAX_BARS:]  # the newest columns when there are too many
    totals: dict[str, float] = {}
    for _, parts in columns:
        for key, value in parts.items():
            totals[key] = totals.get(key, 0.0) + value
    if not any(totals.values()):
        return _empty(title, empty)
    keys = sorted(totals, key=lambda key: (-totals[key], key))
    if len(keys) > SERIES:
        keys = [*keys[: SERIES - 1], "other"]
    folded = [(label, _fold(parts, keys)) for label, parts in columns]
    top, ticks = _value_ticks(max(sum(parts.values()) for _, parts in folded))
    slot = (RIGHT - LEFT) / len(folded)
    body = _y_axis(ticks, top)
    for index, (label, parts) in enumerate(folded):
        base = 0.0
        for series, key in enumerate(keys):
            value = parts.get(key, 0.0)
            if value <= 0:
                continue
            y0, y1 = _y(base, top), _y(base + value, top)
            base += value
            body.append(
                f'<rect class="series-{series} bar" x="{_n(LEFT + index * slot + slot * 0.1)}"'
                f' y="{_n(y1)}" width="{_n(slot * 0.8)}" height="{_n(y0 - y1)}">'
                f"<title>{escape(label)} {escape(key)}: {escape(_value(value, unit))}</title>"
                "</rect>"
            )
    body.extend(_bar_labels([label for label, _ in folded], slot))
    legend, extra = _legend(keys)
    shares = ", ".join(
        f"{key} {_value(sum(parts.get(key, 0.0) for _, parts in folded), unit)}" for key in keys
    )
    summary = f"total {_value(sum(totals.values()), unit)}: {shares}"
    return _svg(title, summary, [*body, *legend], extra)


def time_label(at: float, *, span_s: float) -> str:
    """A UTC time as HH:MM, or as MM-DD when the labels it sits among are a day or more apart."""
    return time.strftime("%m-%d" if span_s >= 86400 else "%H:%M", time.gmtime(at))


# -- the pieces -----------------------------------------------------------------------------


def _svg(title: str, summary: str, body: Sequence[str], extra: int = 0) -> str:
    """The chart's frame; `extra` pixels below the axis labels hold a legend."""
    label = escape(f"{title}: {summary}")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT + extra}"'
        ' width="100%"'
        f' role="img" aria-label="{label}" class="chart">'
        f"<title>{label}</title>"
        f'<text class="title" x="0" y="12">{escape(title)}</text>' + "".join(body) + "</svg>"
    )


def _empty(title: str, text: str) -> str:
    middle = (TOP + BOTTOM) // 2
    return _svg(
        title,
        text,
        [
            f'<line class="axis" x1="{LEFT}" y1="{BOTTOM}" x2="{RIGHT}" y2="{BOTTOM}"/>',
            f'<text class="muted" x="{(LEFT + RIGHT) // 2}" y="{middle}" text-anchor="middle">'
            f"{escape(text)}</text>",
        ],
    )


def _y_axis(ticks: Sequence[float], top: float) -> list[str]:
    """Grid lines and labels at `ticks`, and the baseline."""
    parts = []
    for tick in ticks:
        y = _n(_y(tick, top))
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{y}" x2="{RIGHT}" y2="{y}"/>')
        parts.append(
            f'<text class="muted" x="{LEFT - 4}" y="{y}" text-anchor="end"'
            f' dominant-baseline="middle">{_compact(tick)}</text>'
        )
    parts.append(f'<line class="axis" x1="{LEFT}" y1="{BOTTOM}" x2="{RIGHT}" y2="{BOTTOM}"/>')
    return parts


def _mark(name: str, value: float, top: float) -> list[str]:
    """A dashed level across the plot, named at its right end."""
    y = _n(_y(value, top))
    return [
        f'<line class="mark" x1="{LEFT}" y1="{y}" x2="{RIGHT}" y2="{y}"/>',
        f'<text class="mark-label" x="{RIGHT}" y="{_n(_y(value, top) - 3)}" text-anchor="end">'
        f"{escape(name)}</text>",
    ]


def _time_axis(x0: float, x1: float) -> list[str]:
    """Labels at round UTC times (whole minutes, hours; days from the first), at most five."""
    span = x1 - x0
    step = next((step for step in _TIME_STEPS if span / step <= 5), _TIME_STEPS[-1])
    parts = []
    whole = min(step, 86400)  # steps of days start at the first midnight, not at the epoch's
    tick = math.ceil(x0 / whole) * whole
    while tick <= x1:
        parts.append(
            f'<text class="muted" x="{_n(_x(tick, x0, x1))}" y="{BOTTOM + 14}"'
            f' text-anchor="middle">{time_label(tick, span_s=step)}</text>'
        )
        tick += step
    return parts


_TIME_STEPS = tuple(
    minutes * 60
    for minutes in (1, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 7 * 1440, 30 * 1440)
)


def _bar_labels(labels: Sequence[str], slot: float) -> list[str]:
    """About five labels under the bars, evenly spaced, each cut to `MAX_LABEL_CHARS`."""
    every = max(1, math.ceil(len(labels) / 5))
    parts = []
    for index in range(0, len(labels), every):
        label = labels[index]
        if len(label) > MAX_LABEL_CHARS:
            label = label[: MAX_LABEL_CHARS - 1] + "…"
        parts.append(
            f'<text class="muted" x="{_n(LEFT + (index + 0.5) * slot)}" y="{BOTTOM + 14}"'
            f' text-anchor="middle">{escape(label)}</text>'
        )
    return parts


def _legend(keys: Sequence[str]) -> tuple[list[str], int]:
    """A swatch and name per series under the chart, in rows; and the height they take."""
    parts = []
    x, row = 0, 0
    for index, key in enumerate(keys):
        name = key if len(key) <= MAX_LABEL_CHARS else key[: MAX_LABEL_CHARS - 1] + "…"
        width = 12 + 7 * len(name) + 12  # swatch, text at about 7 px a character, gap
        if x and x + width > WIDTH:
            x, row = 0, row + 1
        y = HEIGHT + row * LEGEND_ROW
        parts.append(f'<rect class="series-{index}" x="{x}" y="{y + 2}" width="8" height="8"/>')
        parts.append(f'<text class="muted" x="{x + 12}" y="{y + 10}">{escape(name)}</text>')
        x += width
    return parts, (row + 1) * LEGEND_ROW


def _downsample(points: Sequence[Point]) -> list[Point]:
    """At most `MAX_POINTS`: each run of neighbours becomes its first x and its largest y."""
    if len(points) <= MAX_POINTS:
        return list(points)
    size = math.ceil(len(points) / MAX_POINTS)
    out: list[Point] = []
    for start in range(0, len(points), size):
        group = points[start : start + size]
        present = [y for _, y in group if y is not None]
        out.append((group[0][0], max(present) if present else None))
    return out


def _runs(points: Sequence[Point]) -> list[list[tuple[float, float]]]:
    """The stretches of a line between its gaps."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if y is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((x, y))
    return [run for run in runs if run]


def _merge_bars(bars: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """At most `MAX_BARS`: neighbours summed under the first one's label."""
    if len(bars) <= MAX_BARS:
        return list(bars)
    size = math.ceil(len(bars) / MAX_BARS)
    return [
        (bars[start][0], sum(value for _, value in bars[start : start + size]))
        for start in range(0, len(bars), size)
    ]


def _fold(parts: Mapping[str, float], keys: Sequence[str]) -> dict[str, float]:
    """A column's parts under `keys`, those of no other key summed as "other"."""
    folded = {key: value for key, value in parts.items() if key in keys and key != "other"}
    rest = sum(value for key, value in parts.items() if key not in folded)
    if rest:
        folded["other"] = rest
    return folded


def _value_ticks(peak: float) -> tuple[float, list[float]]:
    """A round top for the axis at or above `peak`, and ticks from 0 in steps of 1, 2, 2.5 or 5
    times a power of ten, at most four of them above zero."""
    if peak <= 0:
        return 1.0, [0.0, 1.0]
    raw = peak / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    count = math.ceil(peak / step - 1e-9)
    return count * step, [n * step for n in range(count + 1)]


def _x(x: float, x0: float, x1: float) -> float:
    return (LEFT + RIGHT) / 2 if x1 == x0 else LEFT + (x - x0) / (x1 - x0) * (RIGHT - LEFT)


def _y(y: float, top: float) -> float:
    return BOTTOM - max(0.0, min(y, top)) / top * (BOTTOM - TOP)


def _n(value: float) -> str:
    """A coordinate with one decimal at most: `12`, `12.5`."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _compact(value: float) -> str:
    """A value in at most three significant digits, with k, M or G: `950`, `1.5k`, `2.5M`."""
    for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= threshold * 0.9995:  # what would round up to 1000 takes the next suffix
            return f"{value / threshold:.3g}{suffix}"
    if value and abs(value) < 0.01:
        return f"{value:.1g}"
    return f"{value:.3g}"


def _value(value: float | None, unit: str) -> str:
    return "none" if value is None else f"{_compact(value)} {unit}".rstrip()
