"""What a new connection costs: `GET /health` on a fresh connection each time, and start-up.

    python -m bench.connections [--requests 400] [--rounds 4] [--startup-runs 3]

Sequential requests, one connection each (`http.client`, no keep-alive), to the real daemon and
to the aiohttp floor (`bench.floor`, whose 404 for `/health` is what any aiohttp server costs per
connection); the two alternate in `--rounds` rounds so that drift on the machine hits both. Then
process start → READY=1, as in the main plan. Figures: medians and p90 in milliseconds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from bench.env import Bench
from bench.floor import FloorProcess
from bench.harness import LATENCY, compile_kirod, measure_startup
from bench.loadgen import percentile

MS = 1000.0


def _fresh_connection_gets(host: str, port: int, count: int) -> list[float]:
    """`count` sequential GET /health, each on its own connection; seconds per request."""
    times: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        connection = http.client.HTTPConnection(host, port, timeout=10)
        try:
            connection.request("GET", "/health")
            connection.getresponse().read()
        finally:
            connection.close()
        times.append(time.perf_counter() - started)
    return times


def _summary_ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median_ms": statistics.median(ordered) * MS,
        "p90_ms": percentile(ordered, 0.9) * MS,
        "requests": len(ordered),
    }


def run(requests: int, rounds: int, startup_runs: int) -> dict[str, Any]:
    compile_kirod()
    samples: dict[str, list[float]] = {"kirod": [], "floor": []}
    with Bench(latency=LATENCY, accounts=1) as bench:
        daemon_host, daemon_port = bench.daemon_process.address.rsplit(":", 1)
        with FloorProcess(
            bench.fake_process.url, keep_alive=False, log_path=bench.root / "floor.log"
        ) as floor:
            floor_host, floor_port = urlsplit(floor.url).netloc.rsplit(":", 1)
            targets = {
                "kirod": (daemon_host, int(daemon_port)),
                "floor": (floor_host, int(floor_port)),
            }
            for host, port in targets.values():  # warm-up: imports, caches
                _fresh_connection_gets(host, port, 20)
            per_round = max(1, requests // rounds)
            for _ in range(rounds):
                for name, (host, port) in targets.items():
                    samples[name] += _fresh_connection_gets(host, port, per_round)
    startup = measure_startup(startup_runs, lambda line: print(line, file=sys.stderr))
    return {
        "new_connection_health": {name: _summary_ms(times) for name, times in samples.items()},
        "ready_first_ms": startup["ready_first_s"]["median"] * MS,
        "ready_restart_ms": startup["ready_restart_s"]["median"] * MS,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.connections", description=__doc__)
    parser.add_argument("--requests", type=int, default=400, help="per target, over all rounds")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--startup-runs", type=int, default=3)
    args = parser.parse_args(argv)
    results = run(args.requests, args.rounds, args.startup_runs)
    for name, figures in results["new_connection_health"].items():
        print(
            f"GET /health, new connection, {name}: median {figures['median_ms']:.3f} ms, "
            f"p90 {figures['p90_ms']:.3f} ms ({figures['requests']:.0f} requests)"
        )
    print(
        f"READY=1: {results['ready_first_ms']:.0f} ms (new state dir), "
        f"{results['ready_restart_ms']:.0f} ms (restart)"
    )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
