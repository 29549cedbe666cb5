"""The load generator: a closed loop of concurrent requests, each timed to its first byte,
first content event and last byte.

It runs in the harness process, never in the daemon's. Every run is bounded twice: by a request
count and by a deadline, after which workers start no new request and stragglers are cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import aiohttp

from bench.payloads import numbered

Framing = Literal["sse", "eventstream", "json"]
CARRY_BYTES = 256
GRACE_S = 30.0
"""How long requests already started may run past a phase's deadline before being cancelled."""


@dataclass(frozen=True)
class Target:
    """One kind of request: where it goes and how to recognise its content and its end."""

    name: str
    url: str
    headers: Mapping[str, str]
    body: bytes
    framing: Framing
    content_marker: bytes  # the first occurrence marks the first content event
    end_marker: bytes  # a successful answer contains it (its terminal event)


@dataclass(frozen=True)
class Sample:
    ok: bool
    status: int
    first_byte_s: float
    first_content_s: float
    total_s: float
    events: int
    size: int
    error: str | None = None


@dataclass
class Phase:
    concurrency: int
    elapsed_s: float = 0.0
    time_bounded: bool = False
    samples: list[Sample] = field(default_factory=list)

    @property
    def completed(self) -> int:
        return sum(1 for sample in self.samples if sample.ok)

    @property
    def errors(self) -> int:
        return sum(1 for sample in self.samples if not sample.ok)

    @property
    def rate(self) -> float:
        return self.completed / self.elapsed_s if self.elapsed_s else 0.0

    def first_errors(self, limit: int = 3) -> list[str]:
        return [f"{s.status} {s.error}" for s in self.samples if not s.ok][:limit]


class _EventCounter:
    """Counts SSE events (blank-line terminated) or event-stream frames (length-prefixed)."""

    def __init__(self, framing: Framing) -> None:
        self._framing = framing
        self.count = 0
        self._last = b""
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> None:
        if self._framing == "sse":
            self.count += chunk.count(b"\n\n")
            if self._last == b"\n" and chunk[:1] == b"\n":
                self.count += 1
            self._last = chunk[-1:]
        elif self._framing == "eventstream":
            self._pending += chunk
            while len(self._pending) >= 4:
                size = int.from_bytes(self._pending[:4], "big")
                if size < 16 or len(self._pending) < size:
                    break
                del self._pending[:size]
                self.count += 1


def new_session(limit: int = 0) -> aiohttp.ClientSession:
    """A keep-alive client session with no connection cap (`limit` 0)."""
    connector = aiohttp.TCPConnector(limit=limit, limit_per_host=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=60)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False)


async def request_once(session: aiohttp.ClientSession, target: Target, seq: int = 0) -> Sample:
    body = numbered(target.body, seq)
    started = time.perf_counter()
    first_byte = first_content = 0.0
    ended_well = False
    counter = _EventCounter(target.framing)
    carry = b""  # the last bytes seen, so a marker split across two chunks is still found
    size = 0
    status = 0
    try:
        async with session.post(target.url, data=body, headers=target.headers) as response:
            status = response.status
            async for chunk in response.content.iter_any():
                now = time.perf_counter()
                if not first_byte:
                    first_byte = now
                window = carry + chunk
                if not first_content and target.content_marker in window:
                    first_content = now
                if target.end_marker in window:
                    ended_well = True
                counter.feed(chunk)
                size += len(chunk)
                carry = window[-CARRY_BYTES:]
    except (aiohttp.ClientError, TimeoutError) as exc:
        elapsed = time.perf_counter() - started
        return Sample(False, status, 0.0, 0.0, elapsed, counter.count, size, type(exc).__name__)
    ended = time.perf_counter()
    ok = status == 200 and ended_well and bool(first_content)
    error = None if ok else carry.decode("utf-8", "replace")
    return Sample(
        ok=ok,
        status=status,
        first_byte_s=(first_byte or ended) - started,
        first_content_s=(first_content or ended) - started,
        total_s=ended - started,
        events=counter.count,
        size=size,
        error=error,
    )


async def run_phase(
    session: aiohttp.ClientSession,
    target: Target,
    *,
    concurrency: int,
    count: int,
    time_limit_s: float,
    first_seq: int = 0,
    ramp_s: float = 0.0,
    on_tick: Callable[[], Awaitable[None]] | None = None,
) -> Phase:
    """`count` requests from `concurrency` workers, starting none after `time_limit_s`.

    Requests are numbered from `first_seq`; with `ramp_s` the workers start spread over that
    many seconds instead of all at once (a thousand simultaneous connects overflow a listen
    backlog and measure the kernel's SYN retry instead of the server).
    """
    phase = Phase(concurrency=concurrency)
    issued = 0
    started = time.perf_counter()
    deadline = started + time_limit_s

    async def worker(number: int) -> None:
        nonlocal issued
        if ramp_s:
            await asyncio.sleep(ramp_s * number / concurrency)
        while issued < count:
            if time.perf_counter() >= deadline:
                phase.time_bounded = True
                return
            issued += 1
            phase.samples.append(await request_once(session, target, first_seq + issued))

    workers = [asyncio.ensure_future(worker(n)) for n in range(min(concurrency, count))]
    ticker = asyncio.ensure_future(_tick(on_tick)) if on_tick is not None else None
    try:
        async with asyncio.timeout(time_limit_s + GRACE_S):
            await asyncio.gather(*workers)
    except TimeoutError:
        phase.time_bounded = True
    finally:
        for task in [*workers, *([ticker] if ticker else [])]:
            task.cancel()
        for task in [*workers, *([ticker] if ticker else [])]:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    phase.elapsed_s = time.perf_counter() - started
    return phase


async def _tick(callback: Callable[[], Awaitable[None]]) -> None:
    while True:
        await callback()
        await asyncio.sleep(0.02)


def percentile(values: list[float], fraction: float) -> float:
    """Linear interpolation between closest ranks; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
