"""The API's figures with web consoles open beside it, against the same API alone, on one daemon.

    python -m bench.console [--rounds 5] [--count 200] [--concurrency 4] [--viewers 3]

Variants alternate in each round so the machine's drift hits them alike:

- `api`: `messages-stream-small` requests, nothing else.
- `api+console`: the same, while `--viewers` signed-in consoles each hold the overview's live
  stream open and reload the overview every 2 s and the traffic page every 10 s (far busier
  than a person looking at it).

The figures are the daemon's CPU time per API request (the consoles' own work included) and the
time to the first byte of each API answer, medians over the rounds; the target is no change
beyond the rounds' spread. Exits non-zero if any API or console request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

import aiohttp

from bench import procstat
from bench.env import Bench
from bench.harness import LATENCY, Runner, compile_kirod
from bench.loadgen import new_session
from bench.scenarios import QUICK, SCENARIOS
from kirod.testing.daemon import DaemonProcess

VARIANTS: Final = ("api", "api+console")
SCENARIO: Final = "messages-stream-small"
OVERVIEW_EVERY_S: Final = 2.0
TRAFFIC_EVERY_S: Final = 10.0


class Viewer:
    """One signed-in console: its live stream, and page loads on a timer."""

    def __init__(self, http: aiohttp.ClientSession, daemon: DaemonProcess) -> None:
        self.http = http
        self.daemon = daemon
        self.cookie = ""
        self.pages = 0
        self.failures = 0
        self.update_bytes = 0

    async def sign_in(self) -> None:
        link = self.daemon.client.console_link()
        base, token = link.url.split("/console/#t=")
        async with self.http.post(
            f"{base}/console/session", json={"token": token}, headers={"Origin": base}
        ) as answer:
            answer.raise_for_status()
            self.cookie = answer.headers["Set-Cookie"].split(";", 1)[0]

    async def _load(self, path: str) -> None:
        async with self.http.get(
            self.daemon.base_url + path, headers={"Cookie": self.cookie}
        ) as page:
            await page.read()
            self.pages += 1
            self.failures += page.status != 200

    async def _follow(self) -> None:
        async with self.http.get(
            self.daemon.base_url + "/console/events", headers={"Cookie": self.cookie}
        ) as stream:
            self.failures += stream.status != 200
            async for chunk in stream.content.iter_any():
                self.update_bytes += len(chunk)

    async def _browse(self) -> None:
        started = time.monotonic()
        last_traffic = -TRAFFIC_EVERY_S
        while True:
            await self._load("/console/")
            if time.monotonic() - started - last_traffic >= TRAFFIC_EVERY_S:
                last_traffic = time.monotonic() - started
                await self._load("/console/traffic")
            await asyncio.sleep(OVERVIEW_EVERY_S)

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(self._follow()), group.create_task(self._browse())]
            try:
                yield
            finally:
                for task in tasks:
                    task.cancel()


async def compare(
    *,
    rounds: int,
    count: int,
    concurrency: int,
    viewers: int,
    accounts: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    if not procstat.available():
        raise RuntimeError("the benchmark reads /proc: it runs on Linux only")
    compile_kirod()
    results: dict[str, Any] = {
        "scenario": SCENARIO,
        "count": count,
        "concurrency": concurrency,
        "viewers": viewers,
        "accounts": accounts,
        "rounds": [],
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with Bench(latency=LATENCY, accounts=accounts) as bench:
        daemon = bench.daemon_process
        target = SCENARIOS[SCENARIO].kirod_target(daemon.base_url, daemon.api_key)
        async with (
            new_session() as session,
            aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http,
        ):
            runner = Runner(bench, session, QUICK, log)
            runner.set_reply()
            await runner.warm(target, concurrency)
            consoles = [Viewer(http, daemon) for _ in range(viewers)]
            for viewer in consoles:
                await viewer.sign_in()
            for number in range(rounds):
                row: dict[str, Any] = {}
                row["api"] = await runner.phase(target, concurrency=concurrency, count=count)
                async with contextlib.AsyncExitStack() as stack:
                    for viewer in consoles:
                        await stack.enter_async_context(viewer.open())
                    row["api+console"] = await runner.phase(
                        target, concurrency=concurrency, count=count
                    )
                results["rounds"].append(row)
                log(
                    f"  round {number + 1}: "
                    + ", ".join(
                        f"{v} {row[v]['daemon_cpu_ms_per_request']:.3f} ms CPU, "
                        f"TTFB {1000 * row[v]['first_byte_s']['p50']:.2f} ms"
                        for v in VARIANTS
                    )
                )
            results["console_pages"] = sum(viewer.pages for viewer in consoles)
            results["console_failures"] = sum(viewer.failures for viewer in consoles)
            results["console_update_bytes"] = sum(viewer.update_bytes for viewer in consoles)
    results["median"] = {
        variant: {
            "cpu_ms": statistics.median(
                row[variant]["daemon_cpu_ms_per_request"] for row in results["rounds"]
            ),
            "ttfb_ms": statistics.median(
                1000 * row[variant]["first_byte_s"]["p50"] for row in results["rounds"]
            ),
        }
        for variant in VARIANTS
    }
    return results


def render(results: dict[str, Any]) -> str:
    lines = [
        f"#### The API with {results['viewers']} consoles open ({results['scenario']}, "
        f"{results['count']} requests a phase, concurrency {results['concurrency']}, "
        f"{len(results['rounds'])} rounds; {results['console_pages']} console pages loaded)",
        "",
        "| variant | CPU ms/request, median (per round) | TTFB p50 ms, median (per round) |",
        "|---|---|---|",
    ]
    for variant in VARIANTS:
        rows = results["rounds"]
        cpu = [row[variant]["daemon_cpu_ms_per_request"] for row in rows]
        ttfb = [1000 * row[variant]["first_byte_s"]["p50"] for row in rows]
        median = results["median"][variant]
        lines.append(
            f"| {variant} | {median['cpu_ms']:.3f} ({', '.join(f'{c:.2f}' for c in cpu)}) "
            f"| {median['ttfb_ms']:.2f} ({', '.join(f'{t:.2f}' for t in ttfb)}) |"
        )
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.console", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=200, help="API requests per phase")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--viewers", type=int, default=3, help="consoles open at once")
    parser.add_argument("--accounts", type=int, default=4)
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the raw results here")
    args = parser.parse_args(argv)
    results = asyncio.run(
        compare(
            rounds=args.rounds,
            count=args.count,
            concurrency=args.concurrency,
            viewers=args.viewers,
            accounts=args.accounts,
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    sys.stdout.write(render(results))
    failed = results["console_failures"] or any(
        row[v]["errors"] for row in results["rounds"] for v in VARIANTS
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
