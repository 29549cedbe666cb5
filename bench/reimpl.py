"""What each re-implementation buys over the library it replaces (issue 16, item 6).

    python -m bench.reimpl [--repeat 7]

In-process micro-benchmarks, each beside the library doing the same work: the event-stream
frame decoder and its header cache against botocore's `EventStreamBuffer`, `render.Grid` against
rich's `Table(box=None)`, kiroctl's control client's imports against `http.client`'s (the reason
it exists), and the two small module caches (`machine_id`, the log timestamp) against computing
each time. Medians of `--repeat` runs; each run is the mean of a timed loop.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from botocore.eventstream import EventStreamBuffer
from rich.console import Console
from rich.table import Table

from kirod.cli.render import Grid
from kirod.daemon import logging as daemon_logging
from kirod.testing.fake_kiro.eventstream import encode_event
from kirod.upstream import client, frames

ROWS = 100  # a large pool in `kiroctl accounts list`
HEADERS = ("ID", "LABEL", "STATE", "CREDITS", "SEEN")


def _answer() -> bytes:
    """A Kiro answer as the bench's fake sends it: 18 text deltas, metering, context usage."""
    events = [encode_event("assistantResponseEvent", {"content": "x" * 24}) for _ in range(18)]
    events.append(encode_event("meteringEvent", {"unit": "credit", "usage": 0.01}))
    events.append(encode_event("contextUsageEvent", {"contextUsagePercentage": 1.5}))
    return b"".join(events)


def _median_us(work: Callable[[], object], loops: int, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(loops):
            work()
        runs.append((time.perf_counter() - started) / loops * 1e6)
    return statistics.median(runs)


def _median_startup_ms(codes: tuple[str, str], repeat: int) -> tuple[float, float]:
    """Interpreter start-up with each import line, alternating so load drifts hit both alike."""
    runs: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for code, out in zip(codes, runs, strict=True):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            out.append((time.perf_counter() - started) * 1e3)
    return statistics.median(runs[0]), statistics.median(runs[1])


def _frames(repeat: int) -> list[tuple[str, float, float, str]]:
    answer = _answer()
    one = encode_event("assistantResponseEvent", {"content": "x" * 24})

    def ours() -> None:
        decoder = frames.FrameDecoder()
        decoder.feed(answer)
        decoder.finish()

    def botocore() -> None:
        # The same work: the decoder also parses each frame's JSON payload.
        buffer = EventStreamBuffer()
        buffer.add_data(answer)
        for message in buffer:
            json.loads(message.payload)

    def one_botocore() -> None:
        buffer = EventStreamBuffer()
        buffer.add_data(one)
        for message in buffer:
            json.loads(message.payload)

    def uncached() -> object:
        frames._KNOWN_KINDS.clear()
        return frames.FrameDecoder().feed(one)

    return [
        (
            "decode a 20-frame answer (µs)",
            _median_us(ours, 2000, repeat),
            _median_us(botocore, 2000, repeat),
            "botocore EventStreamBuffer",
        ),
        (
            "one frame, its header block known (µs)",
            _median_us(lambda: frames.FrameDecoder().feed(one), 20000, repeat),
            _median_us(one_botocore, 20000, repeat),
            "botocore",
        ),
        (
            "one frame, cache cleared (µs)",
            _median_us(uncached, 20000, repeat),
            _median_us(one_botocore, 20000, repeat),
            "botocore",
        ),
    ]


def _grid(repeat: int) -> tuple[str, float, float, str]:
    rows = [
        (f"id{n:04d}", f"label {n}", "active", f"{n % 100} %", "2 min ago") for n in range(ROWS)
    ]

    def draw(renderable: Grid | Table) -> None:
        console = Console(file=io.StringIO(), width=120, color_system=None)
        console.print(renderable)

    def ours() -> None:
        grid = Grid(*HEADERS)
        for row in rows:
            grid.add_row(*row)
        draw(grid)

    def rich_table() -> None:
        table = Table(box=None, pad_edge=False, header_style="bold")
        for header in HEADERS:
            table.add_column(header)
        for row in rows:
            table.add_row(*row)
        draw(table)

    return (
        f"draw {ROWS} rows (µs)",
        _median_us(ours, 20, repeat),
        _median_us(rich_table, 20, repeat),
        "rich Table(box=None)",
    )


def _control_client(repeat: int) -> tuple[str, float, float, str]:
    # The library side imports what the client needs besides its transport, as ours does.
    ours, library = _median_startup_ms(
        (
            "import kirod.localapi.client",
            "import http.client, json, socket, pathlib, typing, kirod.errors, "
            "kirod.report_types, kirod.localapi.wire",
        ),
        repeat * 3,
    )
    return ("interpreter start + client imports (ms)", ours, library, "http.client")


def _caches(repeat: int) -> list[tuple[str, float, float, str]]:
    now = int(time.time())
    return [
        (
            "machine_id (µs)",
            _median_us(lambda: client.machine_id("acct-0001"), 200000, repeat),
            _median_us(
                lambda: hashlib.sha256(b"kirod/acct-0001").hexdigest(),
                200000,
                repeat,
            ),
            "sha256 each time",
        ),
        (
            "log timestamp's second (µs)",
            _median_us(lambda: daemon_logging._second(now), 200000, repeat),
            _median_us(
                lambda: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)), 200000, repeat
            ),
            "strftime each time",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rows = [
        *_frames(args.repeat),
        _grid(args.repeat),
        _control_client(args.repeat),
        *_caches(args.repeat),
    ]
    print("| what | kirod | library | library used | gain |")
    print("|---|---:|---:|---|---:|")
    for what, ours, library, name in rows:
        print(f"| {what} | {ours:.2f} | {library:.2f} | {name} | {library / ours:.2f}x |")


if __name__ == "__main__":
    main()
