"""CPU per request and the control plane as stored Responses accumulate (issue 47).

    python -m bench.store [--stored 0,30000,120000] [--oplog-rows 1000000] [--seconds 20]

1. The fake and the daemon start (`bench/env.py`); `--accounts` accounts are imported and three
   API keys made. The daemon stops and its operation log gets `--oplog-rows` rows through kirod's
   own `OpLog`, as `bench.oplog` fills it.
2. For each count of `--stored`, ascending, with the daemon stopped, the `responses` table is
   topped up to that count directly with SQLite: rows as kirod writes them (a Response object,
   its input items and the conversation so far, over the last day, the bench's keys as tenants),
   sized so that `--cap-rows` of them come just under the default `responses_max_bytes` (256 MB;
   at 120,000 the store holds 266 MB of its 268). Then, in this process, `--lock-puts` stores go
   through kirod's own `ResponseStore` on that file while a reader takes the store's lock again
   and again (as a control-plane read does): how long a put holds the lock, and the reader's wait.
   The daemon starts again on the file.
3. `--concurrency` clients send non-streamed Responses turns back to back (responses-json-small,
   every other one `store: true`) for `WARM_S`, then `--seconds`; meanwhile a second process (its
   own interpreter) runs `kiroctl --version` (the process start alone, the floor), `kiroctl
   stats` and `kiroctl trace` in turn, `--samples` times each.

Figures per count: kirod's CPU per request (its CPU time over the phase, over the turns
answered), the turns' rate and errors, each probe's p50 / p95 / max (process start included),
the stored rows after, and the load average. Exits non-zero if a turn or probe failed.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import multiprocessing
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import aiohttp

from bench import payloads, procstat
from bench.env import Bench
from bench.harness import LATENCY, compile_kirod, kiroctl_command
from bench.loadgen import Sample, Target, new_session, percentile, request_once
from bench.oplog import Names, fill
from bench.oplog import _names as make_keys
from bench.scenarios import SCENARIOS
from kirod.storage.db import Database
from kirod.storage.responses import ResponseStore, StoredResponse

SCENARIO: Final = "responses-json-small"
DEFAULT_CAP: Final = 256 * 1024 * 1024  # responses_max_bytes' default (kirod/config)
WARM_S: Final = 3.0
PROBE_PAUSE_S: Final = 0.1
PROBE_TIMEOUT_S: Final = 60.0
PROBES: Final = ("--version", "stats", "trace")  # the first: the process start alone
FILL_BATCH: Final = 2_000
LOCK_PUTS: Final = 200  # puts timed in-process, a reader's lock wait measured meanwhile
LOCK_READ_PAUSE_S: Final = 0.005


def _loadavg() -> list[float]:
    return [float(value) for value in Path("/proc/loadavg").read_text().split()[:3]]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- the stored responses, written directly ---------------------------------------------------


def _stored_row(
    rng: random.Random, number: int, tenants: tuple[str, ...], at: float, size: int
) -> tuple[Any, ...]:
    """One row of `responses` as kirod's ResponseStore writes it, its JSON `size` bytes."""
    rid = f"resp_{number:08x}{rng.getrandbits(96):024x}"
    question = payloads.prose(120, seed=number % 97)
    message = {"type": "message", "role": "user", "content": question}
    answer_text = payloads.prose(240, seed=number % 89)
    output = {
        "type": "message",
        "id": f"msg_{rng.getrandbits(64):016x}",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": answer_text, "annotations": []}],
    }
    response = {
        "id": rid,
        "object": "response",
        "created_at": int(at),
        "status": "completed",
        "model": "gpt-5-codex",
        "output": [output],
        "usage": {"input_tokens": 900, "output_tokens": 60, "total_tokens": 960},
    }
    history = [message, output]
    # Earlier turns of the conversation, as the history carries them, make up the size.
    earlier = {"type": "message", "role": "user", "content": ""}
    history.insert(0, earlier)
    texts = [_json(value) for value in (response, [message], history)]
    earlier["content"] = payloads.prose(max(0, size - sum(map(len, texts))), seed=3)
    texts[2] = _json(history)
    return (
        rid,
        rng.choice(tenants),
        at,
        "gpt-5-codex",
        None,
        texts[0],
        texts[1],
        texts[2],
        sum(len(text) for text in texts),
    )


def top_up(path: Path, count: int, tenants: tuple[str, ...], *, row_bytes: int) -> dict[str, Any]:
    """Add rows to `responses` until it holds `count`, created over the last day."""
    started = time.perf_counter()
    with contextlib.closing(sqlite3.connect(path)) as db:
        have = int(db.execute("SELECT count(*) FROM responses").fetchone()[0])
        rng = random.Random(have)  # noqa: S311 - repeatable rows, not secrets
        now = time.time()
        for first in range(have, count, FILL_BATCH):
            rows = [
                _stored_row(rng, n, tenants, now - 86_400 + 80_000 * n / max(count, 1), row_bytes)
                for n in range(first, min(first + FILL_BATCH, count))
            ]
            with db:
                db.executemany(
                    "INSERT INTO responses (id, tenant, created_at, model, previous_id,"
                    " response, input_items, history, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        stored, size = db.execute(
            "SELECT count(*), COALESCE(SUM(size), 0) FROM responses"
        ).fetchone()
    return {"rows": stored, "bytes": size, "seconds": time.perf_counter() - started}


async def lock_wait(path: Path, tenant: str, *, puts: int, row_bytes: int) -> dict[str, Any]:
    """`puts` stores through kirod's own ResponseStore on the filled file, back to back, while a
    reader (as a control-plane read does) takes the store's lock again and again: how long each
    put holds it, and how long the reader waits for it."""
    held: list[float] = []
    waited: list[float] = []
    rng = random.Random(puts)  # noqa: S311 - repeatable rows, not secrets
    async with Database(path) as db:
        store = ResponseStore(db, max_age_s=30 * 86_400, max_bytes=DEFAULT_CAP)
        done = asyncio.Event()

        async def reader() -> None:
            while not done.is_set():
                began = time.perf_counter()
                await db.read("SELECT 1")
                waited.append(time.perf_counter() - began)
                await asyncio.sleep(LOCK_READ_PAUSE_S)

        reading = asyncio.ensure_future(reader())
        for number in range(puts):
            row = _stored_row(rng, 10**9 + number, (tenant,), time.time(), row_bytes)
            stored = StoredResponse(
                id=row[0],
                tenant=tenant,
                created_at=row[2],
                model=row[3],
                previous_id=None,
                response=json.loads(row[5]),
                input_items=json.loads(row[6]),
                history=json.loads(row[7]),
            )
            began = time.perf_counter()
            await store.put(stored)
            held.append(time.perf_counter() - began)
        done.set()
        await reading
    return {
        name: {
            "p50_ms": 1000 * percentile(values, 0.50),
            "p95_ms": 1000 * percentile(values, 0.95),
            "max_ms": 1000 * max(values, default=0.0),
        }
        for name, values in (("put", held), ("reader_wait", waited))
    }


# -- the probes, in their own process --------------------------------------------------------


@dataclass(frozen=True)
class ProbeSetup:
    kiroctl: tuple[str, ...]
    env: dict[str, str]
    samples: int
    max_s: float  # no round starts after this


def probe(setup: ProbeSetup) -> dict[str, Any]:
    """`kiroctl stats` and `kiroctl trace` in turn, `samples` times each after one uncounted,
    while rounds start within `max_s`."""
    times: dict[str, list[float]] = {name: [] for name in PROBES}
    failures: dict[str, list[str]] = {name: [] for name in PROBES}
    started = time.monotonic()
    for sample in range(setup.samples + 1):
        if time.monotonic() - started > setup.max_s:
            break
        for name in PROBES:
            began = time.perf_counter()
            try:
                done = subprocess.run(
                    [*setup.kiroctl, name],
                    env=setup.env,
                    capture_output=True,
                    timeout=PROBE_TIMEOUT_S,
                    check=False,
                    stdin=subprocess.DEVNULL,
                )
                if done.returncode != 0:
                    failures[name].append(f"exit {done.returncode}: {done.stderr[-200:]!r}")
                    continue
            except subprocess.TimeoutExpired:
                failures[name].append("timed out")
                continue
            if sample:
                times[name].append(time.perf_counter() - began)
            time.sleep(PROBE_PAUSE_S)
    return {
        name: {
            "samples": len(values),
            "p50_s": percentile(values, 0.50),
            "p95_s": percentile(values, 0.95),
            "max_s": max(values, default=0.0),
            "failed": len(failures[name]),
            "failures": failures[name][:3],
        }
        for name, values in times.items()
    }


# -- the load --------------------------------------------------------------------------------


def targets(base_url: str, api_key: str) -> tuple[Target, Target]:
    """The scenario's turn with `store: false`, and the same with `store: true`."""
    plain = SCENARIOS[SCENARIO].kirod_target(base_url, api_key)
    body = payloads.responses_small(stream=False) | {"store": True}
    return plain, replace(plain, body=payloads.body_bytes(body))


async def measure(
    bench: Bench, *, concurrency: int, seconds: float, samples: int
) -> dict[str, Any]:
    daemon = bench.daemon_process
    plain, stored = targets(daemon.base_url, daemon.api_key)
    done: list[Sample] = []
    counting = False
    stop = asyncio.Event()
    seq = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal seq
        while not stop.is_set():
            seq += 1
            sample = await request_once(session, stored if seq % 2 else plain, seq)
            if counting:
                done.append(sample)

    setup = ProbeSetup(tuple(kiroctl_command()), dict(daemon.env), samples, max(seconds, 60.0))
    context = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        async with new_session() as session:
            workers = [asyncio.ensure_future(worker(session)) for _ in range(concurrency)]
            try:
                await asyncio.sleep(WARM_S)
                pid = daemon.proc.pid
                cpu = procstat.cpu_seconds(pid)
                started, counting = time.perf_counter(), True
                probing = loop.run_in_executor(pool, probe, setup)
                await asyncio.sleep(seconds)
                probed = await probing
                counting = False
                elapsed = time.perf_counter() - started
                daemon_cpu = procstat.cpu_seconds(pid) - cpu
            finally:
                stop.set()
                await asyncio.gather(*workers)
    ok = [sample for sample in done if sample.ok]
    return {
        "probes": probed,
        "turns": {
            "concurrency": concurrency,
            "seconds": elapsed,
            "completed": len(ok),
            "errors": len(done) - len(ok),
            "error_examples": [f"{s.status} {s.error}" for s in done if not s.ok][:3],
            "rate_rps": len(ok) / elapsed if elapsed else 0.0,
            "latency_p50_ms": 1000 * percentile([s.total_s for s in ok], 0.50),
        },
        "cpu_ms_per_request": 1000 * daemon_cpu / len(ok) if ok else 0.0,
    }


def run(
    *,
    stored: list[int],
    oplog_rows: int,
    cap_rows: int,
    concurrency: int,
    seconds: float,
    samples: int,
    accounts: int,
    lock_puts: int,
    log: Callable[[str], None],
    keep: Callable[[dict[str, Any]], None] = lambda results: None,
) -> dict[str, Any]:
    """The run; `keep` gets the results so far after each count."""
    if not procstat.available():
        raise RuntimeError("the benchmark reads /proc: it runs on Linux only")
    compile_kirod()
    extra = {"KIROD_MAINTENANCE_INTERVAL_S": "60", "KIROD_OPLOG_MAX_ROWS": str(2 * oplog_rows + 1)}
    row_bytes = DEFAULT_CAP // max(cap_rows, 1) - 1
    results: dict[str, Any] = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "loadavg_before": _loadavg(),
        "row_bytes": row_bytes,
        "levels": [],
    }
    with Bench(latency=LATENCY, accounts=accounts, daemon_extra_env=extra) as bench:
        names: Names = make_keys(bench)
        with bench.daemon_stopped() as path:
            log(f"  filling the operation log with {oplog_rows:,} rows")
            filled = asyncio.run(fill(path, oplog_rows, names, days=29.0, sampled=1))
            filled.pop("request_ids")
            results["oplog"] = filled
        for count in sorted(stored):
            with bench.daemon_stopped() as path:
                log(f"  topping the stored responses up to {count:,}")
                topped = top_up(path, count, names.keys, row_bytes=row_bytes)
                locked = asyncio.run(
                    lock_wait(path, names.keys[0], puts=lock_puts, row_bytes=row_bytes)
                )
            log(f"  {topped['rows']:,} stored ({topped['bytes'] / 1e6:.0f} MB); measuring")
            measured = asyncio.run(
                measure(bench, concurrency=concurrency, seconds=seconds, samples=samples)
            )
            with contextlib.closing(
                sqlite3.connect(bench.daemon_process.state_dir / "kirod.db")
            ) as db:
                after = db.execute(
                    "SELECT count(*), COALESCE(SUM(size), 0) FROM responses"
                ).fetchone()
            results["levels"].append(
                {
                    "stored": count,
                    "fill": topped,
                    "lock": locked,
                    **measured,
                    "stored_after": after[0],
                    "bytes_after": after[1],
                    "loadavg": _loadavg(),
                }
            )
            keep(results)
        results["daemon_log_errors"] = [
            line
            for line in bench.daemon_process.log().splitlines()
            if " ERROR " in line or "Traceback" in line
        ][:10]
    results["loadavg_after"] = _loadavg()
    return results


def render(results: dict[str, Any]) -> str:
    lines = [
        f"#### Stored responses and {results['oplog']['rows']:,} operation-log rows "
        f"({SCENARIO}, every other turn `store: true`)",
        "",
        f"Load average {results['loadavg_before'][0]:.2f} before, "
        f"{results['loadavg_after'][0]:.2f} after; stored rows of {results['row_bytes']:,} B.",
        "",
        "| stored | kirod CPU / request | turns/s | errors | `kiroctl stats` p50 / p95 / max"
        " | `kiroctl trace` p50 / p95 / max | `kiroctl --version` p50 / p95 / max"
        " | put holds the lock p50 / max"
        " | a read waits p95 / max | stored after |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level in results["levels"]:
        cells = []
        for name in PROBES:
            row = level["probes"][name]
            failed = f" ({row['failed']} failed)" if row["failed"] else ""
            cells.append(
                f"{1000 * row['p50_s']:.0f} / {1000 * row['p95_s']:.0f} / "
                f"{1000 * row['max_s']:.0f} ms{failed}"
            )
        turns, lock = level["turns"], level["lock"]
        lines.append(
            f"| {level['stored']:,} | {level['cpu_ms_per_request']:.2f} ms "
            f"| {turns['rate_rps']:.0f} | {turns['errors']} | {cells[1]} | {cells[2]} | {cells[0]} "
            f"| {lock['put']['p50_ms']:.1f} / {lock['put']['max_ms']:.1f} ms "
            f"| {lock['reader_wait']['p95_ms']:.1f} / {lock['reader_wait']['max_ms']:.1f} ms "
            f"| {level['stored_after']:,} |"
        )
    return "\n".join([*lines, ""])


def _write(path: Path | None, results: dict[str, Any]) -> None:
    if path is not None:
        path.write_text(json.dumps(results, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.store", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--stored", default="0,30000,120000", help="stored responses, comma-separated"
    )
    parser.add_argument("--oplog-rows", type=int, default=1_000_000)
    parser.add_argument(
        "--cap-rows", type=int, default=120_000, help="stored rows that fill the 256 MB cap"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="clients sending turns")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured per count")
    parser.add_argument("--samples", type=int, default=10, help="timings of each probe")
    parser.add_argument("--accounts", type=int, default=2)
    parser.add_argument(
        "--lock-puts", type=int, default=LOCK_PUTS, help="puts timed in-process per count"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the raw results here")
    args = parser.parse_args(argv)
    results = run(
        stored=[int(part) for part in args.stored.split(",")],
        oplog_rows=args.oplog_rows,
        cap_rows=args.cap_rows,
        concurrency=args.concurrency,
        seconds=args.seconds,
        samples=args.samples,
        accounts=args.accounts,
        lock_puts=args.lock_puts,
        log=lambda line: print(line, file=sys.stderr, flush=True),
        keep=lambda so_far: _write(args.json, so_far),
    )
    _write(args.json, results)
    sys.stdout.write(render(results))
    failed = any(
        level["turns"]["errors"] or any(row["failed"] for row in level["probes"].values())
        for level in results["levels"]
    )
    return 1 if failed or results["daemon_log_errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
