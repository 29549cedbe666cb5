"""The control plane over a large operation log, timed while the daemon serves streams (issue 41).

    python -m bench.oplog [--rows 1000000] [--streams 64] [--samples 20] [--max-minutes 20]

1. The fake and the daemon start (`bench/env.py`, `oplog_max_rows` above `--rows` so that
   retention keeps them all); `--accounts` accounts are imported and three API keys made.
2. The daemon stops (SIGTERM) and its database gets `--rows` operation-log rows spread over the
   last `--days` days, oldest first, as the daemon writes them: through kirod's own `OpLog`, one
   write-behind batch (`FLUSH_ROWS`) per transaction. The rows mix the three protocols, five
   models and a few invented names, the accounts and keys, streamed and not, 4 % failures of
   several kinds, retries, log-normal first-byte times and token counts. Its size is read before
   and after (after a checkpoint): the bytes per 100,000 rows.
3. The daemon starts again on that database and `--streams` concurrent messages-stream-small
   requests run on it without pause, from this process. Meanwhile a second process (its own
   interpreter, so the load generator's loop does not share its time) takes, in turn and
   `--samples` times each, every probe below, one at a time; no round starts after
   `--max-minutes`:

| probe | what it times |
|---|---|
| `kiroctl --version`, `GET /status` | the floor: a process start; a call that reads no database |
| `kiroctl stats`, `trace`, `trace ID`, `top --once` | the real commands, process start included |
| `GET /stats`, `/stats?since=now-60`, `/trace?last=10` | their control-API calls |
| `GET /trace?request_id=ID` | one request's rows (a row of the fill, a different one each time) |
| `GET /traffic?window=hour|day|month` | the call behind the console's charts (not cached) |
| `console /traffic?window=…`, `console /` | the pages as a signed-in browser loads them |

`top` reads the last minute (`/stats?since=now-60`); the console's traffic page reuses a window's
figures for `TRAFFIC_TTL_S`, so most of its loads are cache hits: `GET /traffic` is a miss.

Figures: p50 / p95 / max of each probe, the streams' rate, errors and TTFB during the probes, the
fill's time and size, the daemon's start-up on the filled database, and the machine's load
(`/proc/loadavg`, and how busy its cores were). Exits non-zero if a stream or probe failed.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import functools
import http.client
import itertools
import json
import multiprocessing
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp

from bench import procstat
from bench.env import Bench
from bench.harness import LATENCY, compile_kirod, kiroctl_command
from bench.loadgen import Sample, Target, new_session, percentile, request_once
from bench.scenarios import SCENARIOS
from kirod.localapi.client import LocalClient, stats_path, trace_path
from kirod.storage.db import Database
from kirod.storage.oplog import FLUSH_ROWS, Attempt, OpEntry, OpLog

SCENARIO: Final = "messages-stream-small"
KEYS: Final = ("claude-code", "codex", "ci")
MODELS: Final = (  # (name, Kiro id, share)
    ("claude-sonnet-4-6", "claude-sonnet-4.6", 0.55),
    ("claude-opus-4-6", "claude-opus-4.6", 0.2),
    ("claude-haiku-4-5", "claude-haiku-4.5", 0.15),
    ("gpt-5", "claude-sonnet-4.6", 0.06),
    ("gpt-5-codex", "claude-sonnet-4.6", 0.04),
)
PROTOCOLS: Final = (("anthropic_messages", 0.6), ("openai_responses", 0.3), ("openai_chat", 0.1))
FAILURES: Final = (  # (status, error, share): 4 % of requests, as a busy day's log has them
    (429, "accounts_cooling_down", 0.012),
    (200, "upstream_protocol", 0.008),  # a stream an upstream fault ended after its first event
    (499, "client_closed", 0.008),
    (502, "upstream_error", 0.005),
    (529, "upstream_overloaded", 0.004),
    (404, "model_not_found", 0.002),
    (400, "invalid_request", 0.001),
)
REGIONS: Final = ("us-east-1", "eu-central-1")
PROBE_PAUSE_S: Final = 0.1
PROBE_TIMEOUT_S: Final = 120.0
WARM_S: Final = 3.0  # the streams run this long before the first probe
DAEMON_ENV: Final = {"KIROD_MAINTENANCE_INTERVAL_S": "60"}


@dataclass(frozen=True)
class Names:
    """Who the rows name: the daemon's accounts and API keys, by id."""

    accounts: tuple[str, ...]
    keys: tuple[str, ...]


def _pick(rng: random.Random, weighted: tuple[tuple[Any, ...], ...]) -> tuple[Any, ...]:
    point = rng.random() * sum(row[-1] for row in weighted)
    for row in weighted:
        point -= row[-1]
        if point <= 0:
            return row
    return weighted[-1]


def entries(
    rows: int, names: Names, *, until: float, days: float, seed: int = 41
) -> Iterator[OpEntry]:
    """`rows` operation-log rows, oldest first, evenly over the `days` before `until`."""
    rng = random.Random(seed)  # noqa: S311 - repeatable rows, not secrets
    step = days * 86400 / rows
    first = until - days * 86400
    for number in range(rows):
        at = first + number * step + rng.random() * step
        model, kiro_model, _ = _pick(rng, MODELS)
        protocol = _pick(rng, PROTOCOLS)[0]
        status, error = 200, None
        point = rng.random()
        for failure_status, code, share in FAILURES:
            point -= share
            if point < 0:
                status, error = failure_status, code
                break
        if error == "model_not_found":
            model = f"claude-{rng.choice(('sonet', 'opus-9', 'next'))}-{rng.randrange(100)}"
        attempts: list[Attempt] = []
        tried = list(names.accounts)
        rng.shuffle(tried)
        if rng.random() < 0.03:  # a throttled or overloaded first account, then the next
            outcome = rng.choice(("throttled", "capacity", "server"))
            attempts.append(Attempt(tried[0], outcome, REGIONS[0], kiro_model, 429, None, 40.0))
        answered = error not in ("model_not_found", "invalid_request")
        ttfb = rng.lognormvariate(6.6, 0.5) if answered and status < 400 else None
        total = (ttfb or 30.0) + rng.lognormvariate(8.3, 0.8)
        frames = rng.randrange(20, 2000)
        if answered:
            attempts.append(
                Attempt(
                    tried[len(attempts) % len(tried)],  # the next account, if there is one
                    "ok" if status < 400 else error or "server",
                    rng.choice(REGIONS),
                    kiro_model,
                    ms=round(total, 1),
                    frames=frames,
                    bytes_read=frames * 140,
                )
            )
        output = int(rng.lognormvariate(6.0, 1.0)) if ttfb is not None else None
        yield OpEntry(
            at=at,
            request_id=f"req_{int(at):08x}{rng.getrandbits(64):016x}",  # as kirod makes them
            key_id=rng.choice(names.keys),
            protocol=protocol,
            model=model,
            stream=rng.random() < 0.85,
            account_id=attempts[-1].account_id if attempts else None,
            attempts=tuple(attempts),
            stop_reason=rng.choice(("end_turn", "tool_use", "tool_use", "max_tokens"))
            if output is not None
            else None,
            input_tokens=int(rng.lognormvariate(9.5, 1.0)) if output is not None else None,
            output_tokens=output,
            credits=round(rng.lognormvariate(-2.0, 0.8), 4) if output is not None else None,
            ttfb_ms=None if ttfb is None else round(ttfb, 3),
            total_ms=round(total, 3),
            status=status,
            error=error,
            dropped=("temperature",) if rng.random() < 0.1 else (),
            truncations=1 if rng.random() < 0.002 else 0,
        )


def _size(path: Path) -> int:
    return sum(
        os.stat(f"{path}{suffix}").st_size
        for suffix in ("", "-wal")
        if os.path.exists(f"{path}{suffix}")
    )


def _checkpoint(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def fill(path: Path, rows: int, names: Names, *, days: float, sampled: int) -> dict[str, Any]:
    """Write `rows` rows with kirod's `OpLog`, one batch of `FLUSH_ROWS` per transaction; keep
    the request ids of `sampled` of them, spread over the log."""
    _checkpoint(path)
    before = _size(path)
    started = time.perf_counter()
    every = max(1, rows // max(1, sampled))
    request_ids: list[str] = []
    async with Database(path) as db:
        log = OpLog(db)
        for number, entry in enumerate(entries(rows, names, until=time.time(), days=days), 1):
            log.append(entry)
            if number % every == 0:
                request_ids.append(entry.request_id)
            if number % FLUSH_ROWS == 0:
                await log.flush()
        await log.close()
    elapsed = time.perf_counter() - started
    _checkpoint(path)
    after = _size(path)
    return {
        "rows": rows,
        "days": days,
        "seconds": elapsed,
        "rows_per_s": rows / elapsed,
        "bytes_before": before,
        "bytes_after": after,
        "bytes_per_100k_rows": (after - before) * 100_000 / rows,
        "request_ids": request_ids,
    }


# -- the probes, run in their own process ----------------------------------------------------


@dataclass(frozen=True)
class ProbeSetup:
    socket_path: Path
    base_url: str
    kiroctl: tuple[str, ...]
    env: dict[str, str]
    samples: int
    max_s: float
    request_ids: tuple[str, ...]  # rows of the fill, to look up by id


class Console:
    """A signed-in console session, with `http.client` (one kept-alive connection)."""

    def __init__(self, setup: ProbeSetup) -> None:
        host, port = setup.base_url.removeprefix("http://").rsplit(":", 1)
        self._connection = http.client.HTTPConnection(host, int(port), timeout=PROBE_TIMEOUT_S)
        link = LocalClient(setup.socket_path).console_link()
        base, token = link.url.split("/console/#t=")
        status, headers, _ = self._exchange(
            "POST",
            "/console/session",
            json.dumps({"token": token}).encode(),
            {"Origin": base, "Content-Type": "application/json"},
        )
        if status != 200:
            raise RuntimeError(f"console sign-in answered {status}")
        self._cookie = headers["set-cookie"].split(";", 1)[0]

    def _exchange(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        self._connection.request(method, path, body=body, headers=headers)
        answer = self._connection.getresponse()
        content = answer.read()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, content

    def get(self, path: str) -> None:
        status, _, _ = self._exchange("GET", path, None, {"Cookie": self._cookie})
        if status != 200:
            raise RuntimeError(f"console {path} answered {status}")


def _probes(setup: ProbeSetup) -> dict[str, Callable[[], None]]:
    client = LocalClient(setup.socket_path, timeout=PROBE_TIMEOUT_S)
    console = Console(setup)

    def kiroctl(*args: str) -> Callable[[], None]:
        def run() -> None:
            done = subprocess.run(
                [*setup.kiroctl, *args],
                env=setup.env,
                capture_output=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
            )
            if done.returncode != 0:
                raise RuntimeError(f"kiroctl {' '.join(args)} exited {done.returncode}")

        return run

    def control(path: Callable[[], str]) -> Callable[[], None]:
        return lambda: client.request("GET", path())

    ids = itertools.cycle(setup.request_ids)

    def one_request() -> None:
        if not client.request("GET", trace_path(request_id=next(ids)))["requests"]:
            raise RuntimeError("a request of the fill was not found")

    probes: dict[str, Callable[[], None]] = {
        "kiroctl --version": kiroctl("--version"),
        "GET /status": control(lambda: "/status"),
        "kiroctl stats": kiroctl("stats"),
        "kiroctl trace": kiroctl("trace"),
        "kiroctl trace ID": lambda: kiroctl("trace", next(ids))(),
        "kiroctl top --once": kiroctl("top", "--once"),
        "GET /stats": control(lambda: stats_path(None)),
        "GET /stats?since=now-60": control(lambda: stats_path(time.time() - 60)),
        "GET /trace?last=10": control(lambda: "/trace?last=10"),
        "GET /trace?request_id=ID": one_request,
    }
    for window in ("hour", "day", "month"):
        probes[f"GET /traffic?window={window}"] = control(functools.partial(_traffic_path, window))
        probes[f"console /traffic?window={window}"] = functools.partial(
            console.get, f"/console/traffic?window={window}"
        )
    probes["console /"] = lambda: console.get("/console/")
    return probes


def _traffic_path(window: str) -> str:
    return f"/traffic?window={window}"


def probe(setup: ProbeSetup) -> dict[str, Any]:
    """Each probe `samples` times, in turn, one at a time; a first round is not counted, and no
    round starts after `max_s`."""
    probes = _probes(setup)
    times: dict[str, list[float]] = {name: [] for name in probes}
    failures: dict[str, list[str]] = {name: [] for name in probes}
    started = time.time()
    for sample in range(setup.samples + 1):
        if time.time() - started > setup.max_s:
            break
        for name, run in probes.items():
            began = time.perf_counter()
            try:
                run()
            except Exception as exc:
                failures[name].append(f"{type(exc).__name__}: {exc}")
                continue
            if sample:
                times[name].append(time.perf_counter() - began)
            time.sleep(PROBE_PAUSE_S)
        slowest = max(times, key=lambda name: times[name][-1] if times[name] else 0.0)
        if times[slowest]:
            print(
                f"  round {sample}: slowest {slowest} {times[slowest][-1]:.2f} s",
                file=sys.stderr,
                flush=True,
            )
    return {
        "probes_started_at": started,
        "probes_ended_at": time.time(),
        "probes": {
            name: {
                "samples": len(values),
                "p50_s": percentile(values, 0.50),
                "p95_s": percentile(values, 0.95),
                "max_s": max(values, default=0.0),
                "failures": failures[name][:3],
                "failed": len(failures[name]),
            }
            for name, values in times.items()
        },
    }


# -- the load --------------------------------------------------------------------------------


@dataclass
class Load:
    samples: list[Sample]
    started: float = 0.0
    ended: float = 0.0


async def streams(
    session: aiohttp.ClientSession, target: Target, count: int, stop: asyncio.Event, load: Load
) -> None:
    """`count` concurrent requests back to back until `stop` is set."""
    seq = 0

    async def worker() -> None:
        nonlocal seq
        while not stop.is_set():
            seq += 1
            sample = await request_once(session, target, seq)
            if load.started:
                load.samples.append(sample)

    async with asyncio.TaskGroup() as group:
        for _ in range(count):
            group.create_task(worker())


def _loadavg() -> list[float]:
    return [float(value) for value in Path("/proc/loadavg").read_text().split()[:3]]


async def measure(
    bench: Bench, setup: ProbeSetup, count: int, log: Callable[[str], None]
) -> dict[str, Any]:
    daemon = bench.daemon_process
    target = SCENARIOS[SCENARIO].kirod_target(daemon.base_url, daemon.api_key)
    load = Load(samples=[])
    stop = asyncio.Event()
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        async with new_session() as session:
            running = asyncio.ensure_future(streams(session, target, count, stop, load))
            try:
                await asyncio.sleep(WARM_S)
                log(f"  {count} streams running; probing")
                pid = daemon.proc.pid
                cpu = (procstat.cpu_seconds(pid), procstat.machine_busy_seconds())
                load.started = time.perf_counter()
                probed = await asyncio.get_running_loop().run_in_executor(pool, probe, setup)
                load.ended = time.perf_counter()
                daemon_cpu = procstat.cpu_seconds(pid) - cpu[0]
                busy = procstat.machine_busy_seconds() - cpu[1]
            finally:
                stop.set()
                await running
    elapsed = load.ended - load.started
    ok = [sample for sample in load.samples if sample.ok]
    ttfb = [sample.first_content_s for sample in ok]
    return {
        **probed,
        "streams": {
            "concurrency": count,
            "seconds": elapsed,
            "completed": len(ok),
            "errors": len(load.samples) - len(ok),
            "error_examples": [f"{s.status} {s.error}" for s in load.samples if not s.ok][:3],
            "rate_rps": len(ok) / elapsed if elapsed else 0.0,
            "ttfb_p50_ms": 1000 * percentile(ttfb, 0.50),
            "ttfb_p95_ms": 1000 * percentile(ttfb, 0.95),
        },
        "daemon_cpu_share": daemon_cpu / elapsed if elapsed else 0.0,
        "machine_busy_share": busy / elapsed / (os.cpu_count() or 1) if elapsed else 0.0,
    }


def _names(bench: Bench) -> Names:
    client = bench.daemon_process.client
    for name in KEYS:
        client.create_key(name)
    return Names(
        accounts=tuple(account.id for account in client.accounts()),
        keys=tuple(item.id for item in client.keys()),  # noqa: SIM118 - not a dict
    )


def run(
    *,
    rows: int,
    days: float,
    count: int,
    samples: int,
    max_s: float,
    accounts: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    if not procstat.available():
        raise RuntimeError("the benchmark reads /proc: it runs on Linux only")
    compile_kirod()
    extra = {**DAEMON_ENV, "KIROD_OPLOG_MAX_ROWS": str(2 * rows + 1_000_000)}
    results: dict[str, Any] = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "loadavg_before": _loadavg(),
    }
    with Bench(latency=LATENCY, accounts=accounts, daemon_extra_env=extra) as bench:
        names = _names(bench)
        with bench.daemon_stopped() as path:
            log(f"  filling {path} with {rows:,} rows")
            results["fill"] = asyncio.run(fill(path, rows, names, days=days, sampled=samples))
            log(
                f"  {rows:,} rows in {results['fill']['seconds']:.1f} s, "
                f"{results['fill']['bytes_per_100k_rows'] / 1e6:.1f} MB per 100k rows"
            )
            restarted = time.monotonic()
        results["restart_s"] = time.monotonic() - restarted
        daemon = bench.daemon_process
        setup = ProbeSetup(
            socket_path=daemon.socket_path,
            base_url=daemon.base_url,
            kiroctl=tuple(kiroctl_command()),
            env=dict(daemon.env),
            samples=samples,
            max_s=max_s,
            request_ids=tuple(results["fill"].pop("request_ids")),
        )
        results.update(asyncio.run(measure(bench, setup, count, log)))
        results["loadavg_after"] = _loadavg()
        results["daemon_log_errors"] = [
            line for line in daemon.log().splitlines() if " ERROR " in line or "Traceback" in line
        ][:10]
    return results


def render(results: dict[str, Any]) -> str:
    fill_ = results["fill"]
    load = results["streams"]
    lines = [
        f"#### The control plane at {fill_['rows']:,} operation-log rows under "
        f"{load['concurrency']} streams ({SCENARIO})",
        "",
        f"Filled in {fill_['seconds']:.1f} s ({fill_['rows_per_s']:,.0f} rows/s through "
        f"`OpLog`); {fill_['bytes_per_100k_rows'] / 1e6:.1f} MB per 100,000 rows; restart on it "
        f"{results['restart_s']:.2f} s. Streams meanwhile: {load['rate_rps']:.0f} req/s, "
        f"TTFB p50 {load['ttfb_p50_ms']:.1f} ms / p95 {load['ttfb_p95_ms']:.1f} ms, "
        f"{load['errors']} errors; daemon CPU {100 * results['daemon_cpu_share']:.0f} % of a "
        f"core, machine {100 * results['machine_busy_share']:.0f} % busy; load average "
        f"{results['loadavg_before'][0]:.2f} before, {results['loadavg_after'][0]:.2f} after.",
        "",
        "| probe | samples | p50 | p95 | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in results["probes"].items():
        failed = f" ({row['failed']} failed)" if row["failed"] else ""
        lines.append(
            f"| `{name}`{failed} | {row['samples']} | {1000 * row['p50_s']:.0f} ms "
            f"| {1000 * row['p95_s']:.0f} ms | {1000 * row['max_s']:.0f} ms |"
        )
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.oplog", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="operation-log rows")
    parser.add_argument("--days", type=float, default=29.0, help="the days the rows span")
    parser.add_argument("--streams", type=int, default=64, help="concurrent streams meanwhile")
    parser.add_argument("--samples", type=int, default=20, help="timings of each probe")
    parser.add_argument(
        "--max-minutes", type=float, default=20.0, help="no round of probes starts after this"
    )
    parser.add_argument("--accounts", type=int, default=4)
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the raw results here")
    args = parser.parse_args(argv)
    results = run(
        rows=args.rows,
        days=args.days,
        count=args.streams,
        samples=args.samples,
        max_s=60 * args.max_minutes,
        accounts=args.accounts,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    sys.stdout.write(render(results))
    failed = results["streams"]["errors"] or any(
        row["failed"] for row in results["probes"].values()
    )
    return 1 if failed or results["daemon_log_errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
