"""What the extension runner costs a request, in process: no daemon, no network.

    python -m bench.extensions [--count 3000] [--repeat 5]

One request is `on_request` and a 20-event answer in 10 batches (one text block of 16 deltas)
through `Extensions.events`, with no extension, with one that has only a trivial `on_request`,
and with one whose `on_request` and `on_stream_event` both pass their input on. The figure is
the best of `--repeat` runs, in µs per request, the bare iteration of the batches included. The
targets (issue 21): no cost with none (the stream is not wrapped at all), at most 50 µs with one.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator

from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    MessageStart,
    MessageStop,
    StopReason,
    TextDelta,
    Usage,
)
from kirod.canonical.request import CanonicalRequest, ClientProtocol, Message, Role, TextBlock
from kirod.dispatch.extensions import Extensions, Loaded
from kirod.extension import Extension, Produced

REQUEST = CanonicalRequest(
    "req_bench",
    ClientProtocol.ANTHROPIC_MESSAGES,
    "claude-sonnet-4-6",
    (Message(Role.USER, (TextBlock("hi"),)),),
)
EVENTS: list[CanonicalEvent] = [
    MessageStart("msg_bench", "claude-sonnet-4-6", 3),
    BlockStart(0, BlockKind.TEXT),
    *[TextDelta(0, "word ") for _ in range(16)],
    BlockStop(0),
    Usage(3, 16),
    MessageStop(StopReason.END_TURN),
]
BATCHES = [EVENTS[i : i + 2] for i in range(0, len(EVENTS), 2)]


class RequestOnly(Extension):
    def on_request(self, request: CanonicalRequest) -> CanonicalRequest:
        return request


class PassesAll(RequestOnly):
    def on_stream_event(self, event: CanonicalEvent) -> Produced:
        return event


class WaitsOnEvents(Extension):
    """Hooks written as coroutines: each call runs under the extension's timer."""

    async def on_request(self, request: CanonicalRequest) -> CanonicalRequest:
        return request

    async def on_stream_event(self, event: CanonicalEvent) -> Produced:
        return event


async def _batches() -> AsyncIterator[list[CanonicalEvent]]:
    for batch in BATCHES:
        yield batch


async def _request(runner: Extensions) -> None:
    if runner:  # as the dispatcher asks
        await runner.request(REQUEST)
    async for _ in runner.events(_batches()):
        pass


async def measure(count: int, repeat: int) -> dict[str, float]:
    variants = {
        "none": Extensions(),
        "one, on_request only": Extensions([Loaded("bench", "0", RequestOnly({}))]),
        "one, every event too": Extensions([Loaded("bench", "0", PassesAll({}))]),
        "one, every event too, as coroutines": Extensions(
            [Loaded("bench", "0", WaitsOnEvents({}))]
        ),
    }
    figures: dict[str, float] = {}
    for name, runner in variants.items():
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            for _ in range(count):
                await _request(runner)
            best = min(best, (time.perf_counter() - started) / count)
        figures[name] = round(best * 1e6, 1)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.extensions")
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.count, args.repeat))
    print("| extensions | µs/request (20 events, 10 batches) | added |")
    print("|---|---:|---:|")
    for name, micros in figures.items():
        print(f"| {name} | {micros:.1f} | {micros - figures['none']:+.1f} |")


if __name__ == "__main__":
    main()
