"""`python -m bench.soak`: steady mixed load for a while, then check nothing leaked.

Every scenario in turn (Messages and Responses, streaming and not, small and large), with every
`--abandon-every`-th streaming request dropped by the client after its first bytes, which is the
path most likely to leak: aiohttp cancels the handler, the upstream response must be aborted and
the account's capacity released. The daemon's RSS, open descriptors, threads and CPU are sampled
each second. It fails (exit 1) on any unexpected error, on descriptors not back to their level
after the load, on resident memory still growing after the warm-up, or on an ERROR in the
daemon's log. Bounded: it starts no request after `--duration` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench import procstat
from bench.env import Bench
from bench.harness import LATENCY, Runner, raise_fd_limit
from bench.loadgen import Target, new_session, request_once
from bench.payloads import numbered
from bench.scenarios import QUICK, SCENARIOS

SETTLE_S = 3.0
FD_SLACK = 8


@dataclass
class SoakReport:
    duration_s: float
    concurrency: int
    requests: int = 0
    completed: int = 0
    abandoned: int = 0
    errors: list[str] = field(default_factory=list)
    samples: list[dict[str, float]] = field(default_factory=list)
    fds_before: int = 0
    fds_after: int = 0
    rss_after_warmup_kb: int = 0
    rss_end_kb: int = 0
    rss_peak_kb: int = 0
    daemon_cpu_s: float = 0.0
    log_errors: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


async def _abandon(session: aiohttp.ClientSession, target: Target, seq: int) -> bool:
    """Start a streaming request, read its first bytes, and hang up."""
    async with session.post(
        target.url, data=numbered(target.body, seq), headers=target.headers
    ) as response:
        if response.status != 200:
            return False
        await response.content.readany()
        response.close()
    return True


async def _load(
    runner: Runner, report: SoakReport, targets: list[Target], abandon_every: int
) -> None:
    deadline = time.monotonic() + report.duration_s
    order = itertools.cycle(targets)
    counter = itertools.count(runner.seq)

    async def worker() -> None:
        while time.monotonic() < deadline:
            target = next(order)
            seq = next(counter)
            report.requests += 1
            if target.framing == "sse" and seq % abandon_every == 0:
                try:
                    if await _abandon(runner.session, target, seq):
                        report.abandoned += 1
                        continue
                except aiohttp.ClientError as exc:
                    report.errors.append(f"{target.name} (abandoned): {type(exc).__name__}")
                    continue
                report.errors.append(f"{target.name} (abandoned): not a 200")
                continue
            sample = await request_once(runner.session, target, seq)
            if sample.ok:
                report.completed += 1
            elif len(report.errors) < 20:
                report.errors.append(f"{target.name}: {sample.status} {sample.error}")

    async def sampler() -> None:
        started = time.monotonic()
        cpu = procstat.cpu_seconds(runner.daemon_pid)
        while True:
            await asyncio.sleep(1.0)
            memory = procstat.memory(runner.daemon_pid)
            report.samples.append(
                {
                    "t": round(time.monotonic() - started, 1),
                    "rss_kb": memory.rss_kb,
                    "fds": procstat.open_fds(runner.daemon_pid),
                    "threads": procstat.threads(runner.daemon_pid),
                    "cpu_s": round(procstat.cpu_seconds(runner.daemon_pid) - cpu, 2),
                    "requests": report.requests,
                }
            )

    sampling = asyncio.ensure_future(sampler())
    try:
        async with asyncio.timeout(report.duration_s + 60):
            await asyncio.gather(*(worker() for _ in range(report.concurrency)))
    finally:
        sampling.cancel()
        await asyncio.gather(sampling, return_exceptions=True)


async def soak(duration_s: float, concurrency: int, abandon_every: int) -> SoakReport:
    report = SoakReport(duration_s=duration_s, concurrency=concurrency)
    raise_fd_limit(4 * concurrency + 4096)
    with Bench(latency=LATENCY) as bench:
        daemon = bench.daemon_process
        targets = [s.kirod_target(daemon.base_url, daemon.api_key) for s in SCENARIOS.values()]
        async with new_session() as session:
            runner = Runner(bench, session, QUICK, lambda line: print(line, file=sys.stderr))
            runner.set_reply()
            for target in targets:  # warm every path once before the baseline is taken
                sample = await request_once(session, target, runner.seq)
                runner.seq += 1
                if not sample.ok:
                    report.failures.append(f"warm-up {target.name}: {sample.status}")
            await asyncio.sleep(0.5)
            pid = runner.daemon_pid
            report.fds_before = procstat.open_fds(pid)
            cpu = procstat.cpu_seconds(pid)
            await _load(runner, report, targets, abandon_every)
            report.daemon_cpu_s = procstat.cpu_seconds(pid) - cpu
        await asyncio.sleep(SETTLE_S)
        report.fds_after = procstat.open_fds(pid)
        report.rss_end_kb = procstat.memory(pid).rss_kb
        report.rss_peak_kb = procstat.memory(pid).peak_kb
        report.log_errors = [
            line for line in daemon.log().splitlines() if " ERROR " in line or "Traceback" in line
        ][:10]
    _judge(report)
    return report


def _judge(report: SoakReport) -> None:
    if report.errors:
        report.failures.append(f"{len(report.errors)} unexpected errors, first: {report.errors[0]}")
    if report.completed == 0:
        report.failures.append("no request completed")
    if report.fds_after > report.fds_before + FD_SLACK:
        report.failures.append(
            f"open descriptors {report.fds_before} before the load, {report.fds_after} after"
        )
    warm = [s for s in report.samples if s["t"] >= report.duration_s * 0.25]
    if warm:
        report.rss_after_warmup_kb = int(warm[0]["rss_kb"])
        growth = report.rss_end_kb - report.rss_after_warmup_kb
        allowed = max(16 * 1024, report.rss_after_warmup_kb // 4)
        if growth > allowed:
            report.failures.append(
                f"RSS grew {growth / 1024:.1f} MB after the warm-up (allowed {allowed / 1024:.0f})"
            )
    if report.log_errors:
        report.failures.append(f"daemon log errors, first: {report.log_errors[0]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--duration", type=float, default=60.0, metavar="S")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--abandon-every", type=int, default=7, metavar="N")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the report here")
    args = parser.parse_args(argv)
    report = asyncio.run(soak(args.duration, args.concurrency, args.abandon_every))
    if args.json:
        args.json.write_text(json.dumps(report.to_json(), indent=1) + "\n")
    rss_mb = report.rss_end_kb / 1024
    print(
        f"soak {report.duration_s:g} s at {report.concurrency} streams: {report.requests} requests,"
        f" {report.completed} completed, {report.abandoned} abandoned, {len(report.errors)} errors;"
        f" fds {report.fds_before} → {report.fds_after}; RSS after warm-up "
        f"{report.rss_after_warmup_kb / 1024:.1f} MB → end {rss_mb:.1f} MB (peak "
        f"{report.rss_peak_kb / 1024:.1f} MB); daemon CPU {report.daemon_cpu_s:.1f} s"
    )
    for failure in report.failures:
        print(f"FAIL: {failure}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
