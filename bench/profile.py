"""`python -m bench.profile`: one scenario through a daemon under a profiler.

Prints the daemon's hottest functions (own time and inclusive) after a bounded load, so a figure
in the README can be traced to the code that costs it. `--sampler py-spy` (the `bench` extra)
samples the unmodified daemon; `--sampler cprofile` runs it under cProfile, which is exact about
call counts but roughly doubles the cost of Python code.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import procstat
from bench.env import Bench
from bench.harness import LATENCY, Runner, capture_upstream_bodies
from bench.loadgen import new_session, run_phase
from bench.scenarios import PLANS, SCENARIOS


async def _load(
    bench: Bench, scenario: str, concurrency: int, count: int, sampler_out: Path | None
) -> None:
    daemon = bench.daemon_process
    target = SCENARIOS[scenario].kirod_target(daemon.base_url, daemon.api_key)
    async with new_session() as session:
        runner = Runner(bench, session, PLANS["quick"], lambda line: print(line, file=sys.stderr))
        runner.set_reply()
        await capture_upstream_bodies(runner, {scenario: target})
        spy = _start_py_spy(runner.daemon_pid, sampler_out) if sampler_out else None
        cpu = procstat.cpu_seconds(runner.daemon_pid)
        try:
            phase = await run_phase(
                session, target, concurrency=concurrency, count=count, time_limit_s=120.0
            )
        finally:
            used = procstat.cpu_seconds(runner.daemon_pid) - cpu
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                try:
                    spy.wait(30)
                except subprocess.TimeoutExpired:
                    spy.kill()
                    spy.wait()
        print(
            f"{phase.completed} requests, {phase.errors} errors, {phase.rate:.0f} req/s, "
            f"daemon CPU {1000 * used / max(1, phase.completed):.2f} ms/request",
            file=sys.stderr,
        )


def _start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen(
        [exe, "record", "--pid", str(pid), "--rate", "250", "--format", "raw", "-o", str(out)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _print_folded(path: Path, top: int) -> None:
    """Own and inclusive sample shares per function, from py-spy's folded stacks."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    for title, counter in (("own", own), ("inclusive", inclusive)):
        print(f"-- {title} time, {total} samples")
        for frame, count in counter.most_common(top):
            print(f"{100 * count / max(1, total):6.2f}%  {frame}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="messages-stream-small")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--accounts", type=int, default=7, help="Kiro accounts to import")
    parser.add_argument("--sampler", choices=("py-spy", "cprofile"), default="py-spy")
    parser.add_argument("--out", type=Path, help="keep the raw profile here")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="kb-prof-")) / "daemon.prof"
    if args.sampler == "cprofile":
        command = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "kirod"]
        with Bench(latency=LATENCY, accounts=args.accounts, daemon_command=command) as bench:
            asyncio.run(_load(bench, args.scenario, args.concurrency, args.count, None))
        stats = pstats.Stats(str(out))
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)
        return 0
    with Bench(latency=LATENCY, accounts=args.accounts) as bench:
        asyncio.run(_load(bench, args.scenario, args.concurrency, args.count, out))
    _print_folded(out, args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
