"""Responses turns over WebSocket against the same turns over HTTP, on one daemon.

    python -m bench.websocket [--rounds 5] [--concurrency 16] [--count 800] [--size small]

The fake, the daemon and the body are those of `responses-stream-<size>` (`bench/scenarios.py`).
Three kinds of phase alternate in each round, so the machine's drift hits them alike:

- `http`: `POST /v1/responses` with `stream: true`, C kept-alive connections (the harness's
  load generator, as in the main plan);
- `ws`: C WebSocket connections, opened before the phase, each sending its turns one after
  another as Codex does (`response.create`, read frames to `response.completed`), with
  permessage-deflate offered as Codex offers it, and accepted (`websocket_compression` on);
- `ws-plain`: the same without permessage-deflate, which is what kirod's default gives Codex.

The figure is the daemon's CPU time over the phase divided by the turns completed in it; the
medians over the rounds are compared. Exits non-zero if any turn failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import aiohttp

from bench import payloads, procstat
from bench.env import Bench
from bench.harness import LATENCY, Runner, compile_kirod, summarize
from bench.loadgen import GRACE_S, Phase, Sample, new_session
from bench.scenarios import QUICK, SCENARIOS

Variant = Literal["http", "ws", "ws-plain"]
VARIANTS: tuple[Variant, ...] = ("http", "ws", "ws-plain")
DEFLATE_WINDOW_BITS = 15
PHASE_TIME_S = 30.0
CONTENT = '{"type":"response.output_text.delta"'
DONE = '{"type":"response.completed"'
FAILED = ('{"type":"response.failed"', '{"type":"response.incomplete"', '{"type":"error"')


def create_frame(size: Literal["small", "large"]) -> bytes:
    """The scenario's body as a `response.create` event (`stream` dropped: it is implied)."""
    build = payloads.responses_small if size == "small" else payloads.responses_large
    body = build(stream=True)
    del body["stream"]
    return payloads.body_bytes({"type": "response.create", **body})


async def _turn(ws: aiohttp.ClientWebSocketResponse, frame: bytes) -> Sample:
    started = time.perf_counter()
    first_byte = first_content = 0.0
    events = size = 0
    await ws.send_frame(frame, aiohttp.WSMsgType.TEXT)
    while True:
        message = await ws.receive()
        now = time.perf_counter()
        if message.type is not aiohttp.WSMsgType.TEXT:
            return Sample(False, 0, 0.0, 0.0, now - started, events, size, str(message.type))
        text: str = message.data
        events += 1
        size += len(text)
        first_byte = first_byte or now
        if not first_content and text.startswith(CONTENT):
            first_content = now
        if text.startswith(DONE):
            return Sample(True, 200, first_byte - started, first_content - started, now - started,
                          events, size)  # fmt: skip
        if text.startswith(FAILED):
            return Sample(False, 200, 0.0, 0.0, now - started, events, size, text[:200])


async def ws_phase(
    sockets: list[aiohttp.ClientWebSocketResponse],
    frame: bytes,
    *,
    count: int,
    first_seq: int,
    time_limit_s: float = PHASE_TIME_S,
) -> Phase:
    """`count` turns over the open `sockets`, one at a time on each, none started after
    `time_limit_s`; the same bounds as the load generator's HTTP phases."""
    phase = Phase(concurrency=len(sockets))
    issued = 0
    started = time.perf_counter()
    deadline = started + time_limit_s

    async def worker(ws: aiohttp.ClientWebSocketResponse) -> None:
        nonlocal issued
        while issued < count:
            if time.perf_counter() >= deadline:
                phase.time_bounded = True
                return
            issued += 1
            body = payloads.numbered(frame, first_seq + issued)
            try:
                phase.samples.append(await _turn(ws, body))
            except (aiohttp.ClientError, ConnectionError) as exc:
                elapsed = time.perf_counter() - started
                phase.samples.append(Sample(False, 0, 0.0, 0.0, elapsed, 0, 0, type(exc).__name__))
                return

    workers = [asyncio.ensure_future(worker(ws)) for ws in sockets]
    try:
        async with asyncio.timeout(time_limit_s + GRACE_S):
            await asyncio.gather(*workers)
    except TimeoutError:
        phase.time_bounded = True
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    phase.elapsed_s = time.perf_counter() - started
    return phase


class Comparison:
    """Runs the phases of each variant against one daemon and keeps their figures."""

    def __init__(self, runner: Runner, size: Literal["small", "large"], concurrency: int) -> None:
        self.runner = runner
        self.concurrency = concurrency
        daemon = runner.bench.daemon_process
        self.url = daemon.base_url + "/v1/responses"
        self.headers = {
            "Authorization": f"Bearer {daemon.api_key}",
            "OpenAI-Beta": "responses_websockets=2026-02-06",
        }
        self.http = SCENARIOS[f"responses-stream-{size}"].kirod_target(
            daemon.base_url, daemon.api_key
        )
        self.frame = create_frame(size)

    async def phase(self, variant: Variant, count: int) -> dict[str, Any]:
        if variant == "http":
            return await self.runner.phase(self.http, concurrency=self.concurrency, count=count)
        compress = DEFLATE_WINDOW_BITS if variant == "ws" else 0
        runner = self.runner
        async with contextlib.AsyncExitStack() as stack:
            sockets = [
                await stack.enter_async_context(
                    runner.session.ws_connect(
                        self.url, headers=self.headers, compress=compress, max_msg_size=0
                    )
                )
                for _ in range(self.concurrency)
            ]
            if compress and not all(ws.compress for ws in sockets):
                raise RuntimeError("the daemon declined permessage-deflate")
            cpu = procstat.cpu_seconds(runner.daemon_pid)
            result = await ws_phase(sockets, self.frame, count=count, first_seq=runner.seq)
            daemon_cpu = procstat.cpu_seconds(runner.daemon_pid) - cpu
        runner.seq += count
        runner.bench.fake_process.remote.clear_requests()
        return {
            **summarize(result),
            "daemon_cpu_s": daemon_cpu,
            "daemon_cpu_ms_per_request": 1000 * daemon_cpu / max(1, result.completed),
        }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def render(results: dict[str, Any]) -> str:
    rounds: list[dict[str, Any]] = results["rounds"]
    lines = [
        f"#### Responses over WebSocket vs HTTP ({results['scenario']}, "
        f"{results['concurrency']} connections, {results['count']} turns a phase, "
        f"{len(rounds)} rounds)",
        "",
        "| variant | CPU ms/turn, median (per round) | turns/s, median | TTFB p50 ms, median "
        "| errors |",
        "|---|---|---:|---:|---:|",
    ]
    for variant in VARIANTS:
        phases = [row[variant] for row in rounds]
        cpu = [phase["daemon_cpu_ms_per_request"] for phase in phases]
        rate = statistics.median(phase["rate_rps"] for phase in phases)
        ttfb = statistics.median(phase["first_content_s"]["p50"] for phase in phases)
        errors = sum(phase["errors"] for phase in phases)
        lines.append(
            f"| {variant} | {statistics.median(cpu):.3f} ({', '.join(f'{c:.2f}' for c in cpu)}) "
            f"| {rate:.0f} | {_ms(ttfb)} | {errors} |"
        )
    medians = results["median_cpu_ms_per_turn"]
    lines += [
        "",
        f"ws / http CPU per turn: {medians['ws'] / medians['http']:.2f}x with permessage-deflate, "
        f"{medians['ws-plain'] / medians['http']:.2f}x without.",
        "",
    ]
    return "\n".join(lines)


async def compare(
    *,
    rounds: int,
    concurrency: int,
    count: int,
    size: Literal["small", "large"],
    accounts: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    if not procstat.available():
        raise RuntimeError("the benchmark reads /proc: it runs on Linux only")
    compile_kirod()
    results: dict[str, Any] = {
        "scenario": f"responses-stream-{size}",
        "concurrency": concurrency,
        "count": count,
        "accounts": accounts,
        "rounds": [],
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    extra = {"KIROD_WEBSOCKET_COMPRESSION": "true"}  # `ws` offers it, `ws-plain` does not
    with Bench(latency=LATENCY, accounts=accounts, daemon_extra_env=extra) as bench:
        async with new_session() as session:
            runner = Runner(bench, session, QUICK, log)
            runner.set_reply()
            comparison = Comparison(runner, size, concurrency)
            for variant in VARIANTS:  # warm every path: imports, catalogs, connections
                await comparison.phase(variant, concurrency)
            for number in range(rounds):
                row: dict[str, Any] = {}
                for variant in VARIANTS:
                    row[variant] = await comparison.phase(variant, count)
                results["rounds"].append(row)
                log(
                    f"  round {number + 1}: "
                    + ", ".join(
                        f"{variant} {row[variant]['daemon_cpu_ms_per_request']:.3f} ms/turn "
                        f"({row[variant]['rate_rps']:.0f}/s, {row[variant]['errors']} errors)"
                        for variant in VARIANTS
                    )
                )
        results["daemon_log_errors"] = [
            line
            for line in bench.daemon_process.log().splitlines()
            if " ERROR " in line or "Traceback" in line
        ][:10]
    results["median_cpu_ms_per_turn"] = {
        variant: statistics.median(
            row[variant]["daemon_cpu_ms_per_request"] for row in results["rounds"]
        )
        for variant in VARIANTS
    }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.websocket", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--count", type=int, default=800, help="turns per phase")
    parser.add_argument("--size", choices=("small", "large"), default="small")
    parser.add_argument("--accounts", type=int, default=4)
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the raw results here")
    args = parser.parse_args(argv)
    results = asyncio.run(
        compare(
            rounds=args.rounds,
            concurrency=args.concurrency,
            count=args.count,
            size=args.size,
            accounts=args.accounts,
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    sys.stdout.write(render(results))
    failed = any(row[variant]["errors"] for row in results["rounds"] for variant in VARIANTS)
    return 1 if failed or results["daemon_log_errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
