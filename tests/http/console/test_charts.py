"""The console's SVG charts: well-formed, CSP-safe, escaped, summarised and bounded in size."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from kirod.http.console.charts import (
    EMPTY,
    MAX_BARS,
    MAX_POINTS,
    SERIES,
    bar_chart,
    line_chart,
    lines_chart,
    stacked_bars,
    time_label,
)

NS = "{http://www.w3.org/2000/svg}"
MIDNIGHT = 1_700_006_400.0  # 2023-11-15T00:00:00Z
HOSTILE = '<script>alert("x")</script> & "quotes"'


def hour(values: list[float | None]) -> list[tuple[float, float | None]]:
    return [(MIDNIGHT + n * 60, value) for n, value in enumerate(values)]


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # noqa: S314 - the chart functions' own output
    assert root.tag == f"{NS}svg"
    assert root.get("width") == "100%"
    assert root.get("viewBox", "").startswith("0 0 360 ")
    assert root.get("role") == "img"
    assert root[0].tag == f"{NS}title"
    assert root[0].text == root.get("aria-label")
    return root


def texts(root: ET.Element) -> list[str]:
    return [el.text or "" for el in root.iter(f"{NS}text")]


def every_chart(label: str) -> list[str]:
    return [
        line_chart(label, hour([1.0, 2.0]), unit=label, series_label=label),
        lines_chart(label, {label: hour([1.0]), "p95": hour([2.0])}, unit="ms"),
        bar_chart(label, [(label, 3.0)], unit=label),
        bar_chart(label, [(label, 3.0)], unit=label, mark=(label, 5.0)),
        stacked_bars(label, [(label, {label: 1.0, "b": 2.0})], unit=label),
        bar_chart(label, [], unit="requests", empty=label),
    ]


@pytest.mark.parametrize("svg", every_chart(HOSTILE))
def test_labels_stay_text_and_nothing_runs(svg: str) -> None:
    root = parse(svg)
    assert "<script" not in svg.lower()
    assert " style=" not in svg
    for element in root.iter():
        assert element.tag.removeprefix(NS) not in ("script", "style", "foreignObject")
        assert not [name for name in element.attrib if name.lower().startswith("on")]
        assert "style" not in element.attrib
    assert HOSTILE in root.get("aria-label", "")
    assert any(HOSTILE[:5] in text for text in texts(root))


def test_a_line_has_round_ticks_and_a_summary() -> None:
    svg = line_chart(
        "TTFB p50",
        hour([float(n) for n in range(1, 43)] + [None] * 17 + [17.5]),
        unit="ms",
        series_label="p50",
    )
    root = parse(svg)
    assert root.get("aria-label") == "TTFB p50: p50: max 42 ms, latest 17.5 ms"
    labels = texts(root)
    assert [t for t in labels if t.isdigit()] == ["0", "20", "40", "60"]
    assert [t for t in labels if ":" in t] == ["00:00", "00:15", "00:30", "00:45"]
    assert [el.get("class") for el in root.iter(f"{NS}path")] == ["series-0 line"]
    assert len(list(root.iter(f"{NS}circle"))) == 1  # the lone value after the gap


def test_gaps_break_a_line() -> None:
    root = parse(
        lines_chart("TTFB", {"p50": hour([1.0, 2.0, None, 3.0, 4.0, None, None, 5.0])}, unit="ms")
    )
    paths = [el.get("d", "") for el in root.iter(f"{NS}path")]
    assert [d.count("M") + d.count("L") for d in paths] == [2, 2]
    assert len(list(root.iter(f"{NS}circle"))) == 1


def test_two_series_have_their_classes_and_a_legend() -> None:
    root = parse(lines_chart("TTFB", {"p50": hour([1.0, 2.0]), "p95": hour([3.0, 9.0])}, "ms"))
    classes = {el.get("class") for el in root.iter(f"{NS}path")}
    assert classes == {"series-0 line", "series-1 line"}
    assert {"p50", "p95"} <= set(texts(root))
    assert "p95: max 9 ms, latest 9 ms" in root.get("aria-label", "")


def test_a_month_is_labelled_by_day() -> None:
    points = [(MIDNIGHT + n * 86400, float(n)) for n in range(30)]
    labels = [t for t in texts(parse(lines_chart("Requests", {"n": points}, unit=""))) if "-" in t]
    assert labels[0] == "11-15"  # UTC month-day
    assert 2 <= len(labels) <= 5


def test_time_labels_are_utc() -> None:
    assert time_label(MIDNIGHT + 13 * 3600 + 5 * 60, span_s=3600) == "13:05"
    assert time_label(MIDNIGHT + 13 * 3600, span_s=86400) == "11-15"


def test_bars_carry_their_values() -> None:
    root = parse(bar_chart("Errors", [("throttled", 1500.0), ("quota", 3.0)], unit="requests"))
    rects = list(root.iter(f"{NS}rect"))
    assert [rect.get("class") for rect in rects] == ["series-0 bar"] * 2
    assert [rect[0].text for rect in rects] == ["throttled: 1.5k requests", "quota: 3 requests"]
    assert root.get("aria-label") == (
        "Errors: max 1.5k requests (throttled), latest 3 requests, total 1.5k requests"
    )


def test_a_mark_above_the_bars_stretches_the_scale_and_is_named() -> None:
    days = [("12-05", 2.0), ("12-06", 4.0), ("12-07", 1.0)]
    root = parse(bar_chart("Credits", days, unit="credits", mark=("day budget", 10.0)))
    [line] = [el for el in root.iter(f"{NS}line") if el.get("class") == "mark"]
    assert line.get("y1") == line.get("y2") == "24"  # the scale's top, 10: the plot's top edge
    assert [t for t in texts(root) if t.isdigit()] == ["0", "5", "10"]
    assert "day budget" in texts(root)
    assert root.get("aria-label", "").endswith("total 7 credits, day budget 10 credits")
    tall = parse(bar_chart("Credits", [("12-07", 40.0)], unit="credits", mark=("day budget", 10)))
    [low] = [el for el in tall.iter(f"{NS}line") if el.get("class") == "mark"]
    assert 24 < float(low.get("y1", "0")) < 156  # under the bar's top, above the baseline
    unmarked = bar_chart("Credits", days, unit="credits")
    assert 'class="mark"' not in unmarked


def test_stacks_fold_keys_beyond_the_colours_into_other() -> None:
    accounts = {f"acc-{n}": float(n + 1) for n in range(SERIES + 2)}
    root = parse(stacked_bars("Credits", [("11-14", accounts), ("11-15", {"acc-0": 1.0})], "cr"))
    classes = {rect.get("class", "") for rect in root.iter(f"{NS}rect")}
    assert f"series-{SERIES}" not in " ".join(classes)
    assert "other" in texts(root)
    assert root.get("aria-label", "").startswith("Credits: total 37 cr: acc-7 8 cr, ")
    assert "other 7 cr" in root.get("aria-label", "")  # acc-0 (1 + 1), acc-1 (2), acc-2 (3)


@pytest.mark.parametrize(
    "svg",
    [
        line_chart("TTFB", [], unit="ms", series_label="p50"),
        line_chart("TTFB", hour([None, None]), unit="ms", series_label="p50"),
        bar_chart("Requests", [], unit="requests"),
        bar_chart("Requests", [("00:00", 0.0), ("00:01", 0.0)], unit="requests"),
        stacked_bars("Credits", [], unit="credits"),
    ],
)
def test_no_data_says_so(svg: str) -> None:
    root = parse(svg)
    assert EMPTY in texts(root)
    assert EMPTY in root.get("aria-label", "")


def test_ten_thousand_points_stay_small() -> None:
    many = [(MIDNIGHT + n, float(n % 500) + 0.123456789) for n in range(10_000)]
    svg = line_chart("TTFB", many, unit="ms", series_label="p50")
    root = parse(svg)
    [path] = root.iter(f"{NS}path")
    assert path.get("d", "").count("L") + 1 <= MAX_POINTS
    assert len(svg) < 10_000
    assert not re.search(r"\d\.\d{3,}", svg)  # compact numbers, no long floats
    bars = bar_chart("Requests", [(str(n), 1.0) for n in range(10_000)], unit="requests")
    assert len(list(parse(bars).iter(f"{NS}rect"))) <= MAX_BARS
    assert "total 10k requests" in bars
    assert len(bars) < 40_000


def test_coordinates_have_one_decimal_at_most() -> None:
    svg = lines_chart("TTFB", {"p50": hour([1 / 3, 2 / 3, 0.1, 1e-7])}, unit="ms")
    for element in list(parse(svg).iter())[1:]:  # the root's width is 100%
        for name in ("x", "y", "x1", "y1", "x2", "y2", "width", "height", "cx", "cy"):
            value = element.get(name)
            assert value is None or re.fullmatch(r"-?\d+(\.\d)?", value), (name, value)
