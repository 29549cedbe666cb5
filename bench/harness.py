"""Runs a plan: start-up and CLI timings, then every scenario against the fake and through kirod.

Each latency phase runs twice back to back, straight to the fake (the baseline: the zero-gateway
limit) and through kirod, with the same request count and concurrency, so every figure can be
reported as what kirod adds and as a ratio. For messages-stream-small a third phase runs between
them through a bare aiohttp relay (`bench.floor`): what any aiohttp relay adds on this machine.
The daemon's (or the relay's) CPU time and memory come from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from bench import procstat
from bench.env import START_TIMEOUT_S, Bench, NotifyListener
from bench.floor import RELAY_PATH, FloorProcess
from bench.loadgen import Phase, Target, new_session, percentile, run_phase
from bench.scenarios import REPLY_CHUNK, REPLY_TEXT, SCENARIOS, Plan, baseline_target
from kirod import __version__
from kirod.localapi.client import LocalClient
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import Latency, Reply, Script

LATENCY = Latency(first_s=0.020, between_s=0.002)
"""The fake's profile: 20 ms to the first frame, then 2 ms between frames."""
FLOOR_SCENARIO = "messages-stream-small"
"""The scenario also sent through the bare aiohttp relay: the one the CPU and rate targets name."""
ACCOUNTS_PER_CONCURRENCY = 10  # account_inference_concurrency's default (and maximum)
MIN_ACCOUNTS = 4
FD_HEADROOM = 4096

Log = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    model = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory_kb = 0
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        memory_kb = int(meminfo.read_text().split()[1])
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "aiohttp": aiohttp.__version__,
        "kirod": __version__,
        "event_loop": _loop_name(),
    }


def _loop_name() -> str:
    """The daemon runs on asyncio's loop; whether uvloop is installed is noted, not used."""
    return "asyncio (uvloop installed)" if importlib.util.find_spec("uvloop") else "asyncio"


def raise_fd_limit(wanted: int) -> None:
    """Children inherit the limit; a thousand streams need two thousand sockets in the daemon."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(hard, max(soft, wanted))
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


# -- start-up and CLI ------------------------------------------------------------------------


def compile_kirod() -> None:
    """Compile kirod's modules to bytecode (`__pycache__`, ignored by git) as an install does.

    Under PYTHONDONTWRITEBYTECODE (set on some machines) an editable install is otherwise
    recompiled in every process, and kiroctl and start-up would time the compiler.
    """
    spec = importlib.util.find_spec("kirod")
    assert spec is not None
    assert spec.origin is not None
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(spec.origin).parent)],
        check=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def measure_startup(runs: int, log: Log) -> dict[str, Any]:
    """Process start → READY=1 on NOTIFY_SOCKET, for a first start and for a restart."""
    first: list[float] = []
    restart: list[float] = []
    stop: list[float] = []
    for run in range(runs):
        root = Path(tempfile.mkdtemp(prefix="kb-start-"))
        listener = NotifyListener(root)
        try:
            for bucket in (first, restart):
                started = time.monotonic()
                daemon = DaemonProcess(
                    root / "daemon",
                    env={
                        "NOTIFY_SOCKET": str(listener.path),
                        "KIROD_KIRO_ENDPOINT": "http://127.0.0.1:9",
                    },
                )
                try:
                    bucket.append(listener.wait_ready(START_TIMEOUT_S) - started)
                    stopping = time.monotonic()
                    daemon.stop(timeout_s=10.0)
                    stop.append(time.monotonic() - stopping)
                finally:
                    daemon.kill()
        finally:
            listener.close()
            shutil.rmtree(root, ignore_errors=True)
        log(
            f"  start-up run {run + 1}: first {first[-1] * 1000:.0f} ms, "
            f"restart {restart[-1] * 1000:.0f} ms"
        )
    return {
        "ready_first_s": _summary(first),
        "ready_restart_s": _summary(restart),
        "stop_s": _summary(stop),
    }


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": len(values),
    }


def _wall(command: Sequence[str], runs: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    times: list[float] = []
    code = 0
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            command, capture_output=True, timeout=30, env=env, check=False, stdin=subprocess.DEVNULL
        )
        times.append(time.perf_counter() - started)
        code = done.returncode
    return {**_summary(times), "exit_code": code}


def kiroctl_command() -> list[str]:
    beside = Path(sys.executable).parent / "kiroctl"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("kiroctl")
    return [found] if found else [sys.executable, "-m", "kirod.cli.main"]


def measure_cli(daemon: DaemonProcess, runs: int) -> dict[str, Any]:
    """`kiroctl --help`, `--version` and `status` wall time; the LocalAPI status round trip.

    While `kiroctl status` does not exist, its stand-in is a fresh interpreter importing the
    control client and calling status once: what the command will cost, less click and rich.
    """
    kiroctl = kiroctl_command()
    env = dict(daemon.env)
    results: dict[str, Any] = {
        "kiroctl --help": _wall([*kiroctl, "--help"], runs, env),
        "kiroctl --version": _wall([*kiroctl, "--version"], runs, env),
    }
    has_status = (
        subprocess.run(
            [*kiroctl, "status", "--help"], capture_output=True, timeout=30, env=env, check=False
        ).returncode
        == 0
    )
    if has_status:
        results["kiroctl status"] = _wall([*kiroctl, "status"], runs, env)
    probe = (
        "import sys; from pathlib import Path; from kirod.localapi.client import LocalClient; "
        "LocalClient(Path(sys.argv[1])).status()"
    )
    results["python -c LocalClient.status() (kiroctl status stand-in)"] = _wall(
        [sys.executable, "-c", probe, str(daemon.socket_path)], runs, env
    )
    client = LocalClient(daemon.socket_path)
    round_trips: list[float] = []
    for _ in range(max(runs, 20)):
        started = time.perf_counter()
        client.status()
        round_trips.append(time.perf_counter() - started)
    results["LocalAPI status round trip (in process)"] = _summary(round_trips)
    return results


# -- load phases ----------------------------------------------------------------------------


class Runner:
    """Holds the running processes and a request sequence shared by every phase."""

    def __init__(self, bench: Bench, session: aiohttp.ClientSession, plan: Plan, log: Log) -> None:
        self.bench = bench
        self.session = session
        self.plan = plan
        self.log = log
        self.seq = 0
        self.daemon_pid = bench.daemon_process.proc.pid
        self.fake_pid = bench.fake_process.pid

    def set_reply(self, frames: int = 0, between_s: float | None = None) -> None:
        text = (
            REPLY_TEXT if not frames else (REPLY_TEXT * (frames // 18 + 1))[: frames * REPLY_CHUNK]
        )
        script = Script(
            reply=Reply(text=text),
            chunk_size=REPLY_CHUNK,
            delay_first_s=None if between_s is None else LATENCY.first_s,
            delay_between_s=between_s,
        )
        self.bench.fake_process.remote.set_default_script(script)

    async def phase(
        self,
        target: Target,
        *,
        concurrency: int,
        count: int,
        ramp_s: float = 0.0,
        sample_memory: bool = False,
        pid: int | None = None,
    ) -> dict[str, Any]:
        """One measured phase; the fake's request log is cleared after it (it keeps bodies).

        `pid` is the process whose CPU, memory and descriptors are read: the daemon by default,
        the floor relay for its phase. Its figures keep the `daemon_` keys whichever it is, so
        every phase has the same shape.
        """
        relay_pid = self.daemon_pid if pid is None else pid
        peak_rss = 0
        peak_fds = 0

        async def sample() -> None:
            nonlocal peak_rss, peak_fds
            peak_rss = max(peak_rss, procstat.memory(relay_pid).rss_kb)
            peak_fds = max(peak_fds, procstat.open_fds(relay_pid))

        peak_reset = procstat.reset_peak(relay_pid)
        cpu = (procstat.cpu_seconds(relay_pid), procstat.cpu_seconds(self.fake_pid))
        own = resource.getrusage(resource.RUSAGE_SELF)
        machine_busy = procstat.machine_busy_seconds()
        result = await run_phase(
            self.session,
            target,
            concurrency=concurrency,
            count=count,
            time_limit_s=self.plan.phase_time_s,
            first_seq=self.seq,
            ramp_s=ramp_s,
            on_tick=sample if sample_memory else None,
        )
        self.seq += count
        own_after = resource.getrusage(resource.RUSAGE_SELF)
        daemon_cpu = procstat.cpu_seconds(relay_pid) - cpu[0]
        fake_cpu = procstat.cpu_seconds(self.fake_pid) - cpu[1]
        machine_busy = procstat.machine_busy_seconds() - machine_busy
        memory = procstat.memory(relay_pid)
        self.bench.fake_process.remote.clear_requests()
        loadgen_cpu = (own_after.ru_utime + own_after.ru_stime) - (own.ru_utime + own.ru_stime)
        return {
            **summarize(result),
            "daemon_cpu_s": daemon_cpu,
            "fake_cpu_s": fake_cpu,
            "loadgen_cpu_s": loadgen_cpu,
            # What other processes on the machine took meanwhile: a busy neighbour skews a run.
            "other_cpu_s": max(0.0, machine_busy - daemon_cpu - fake_cpu - loadgen_cpu),
            "daemon_cpu_ms_per_request": 1000 * daemon_cpu / max(1, result.completed),
            "daemon_peak_rss_kb": max(memory.peak_kb, peak_rss) if peak_reset else peak_rss,
            "daemon_peak_fds": peak_fds,
        }

    async def warm(self, target: Target, concurrency: int) -> None:
        await run_phase(
            self.session,
            target,
            concurrency=concurrency,
            count=concurrency,
            time_limit_s=self.plan.phase_time_s,
            first_seq=self.seq,
        )
        self.seq += concurrency


def summarize(phase: Phase) -> dict[str, Any]:
    ok = [s for s in phase.samples if s.ok]
    stats: dict[str, Any] = {
        "concurrency": phase.concurrency,
        "requests": len(phase.samples),
        "completed": phase.completed,
        "errors": phase.errors,
        "error_examples": phase.first_errors(),
        "elapsed_s": phase.elapsed_s,
        "time_bounded": phase.time_bounded,
        "rate_rps": phase.rate,
        "events": sum(s.events for s in ok),
        "events_per_s": sum(s.events for s in ok) / phase.elapsed_s if phase.elapsed_s else 0.0,
        "bytes": sum(s.size for s in ok),
    }
    for key, values in (
        ("first_byte_s", [s.first_byte_s for s in ok]),
        ("first_content_s", [s.first_content_s for s in ok]),
        ("total_s", [s.total_s for s in ok]),
    ):
        stats[key] = {
            "p50": percentile(values, 0.50),
            "p95": percentile(values, 0.95),
            "p99": percentile(values, 0.99),
        }
    return stats


async def capture_upstream_bodies(
    runner: Runner, targets: dict[str, Target]
) -> dict[str, tuple[bytes, str]]:
    """Send each scenario once through kirod; keep the body the fake received and the token.

    The token is the one kirod used: the body carries that account's profile ARN, which the fake
    checks against the bearer, and the pool may pick any of the imported accounts.
    """
    remote = runner.bench.fake_process.remote
    bodies: dict[str, tuple[bytes, str]] = {}
    for name, target in targets.items():
        remote.clear_requests()
        sample = await _one(runner, target)
        if not sample.ok:
            raise RuntimeError(f"{name}: kirod answered {sample.status}: {sample.error}")
        chats = remote.requests("chat")
        if len(chats) != 1:
            raise RuntimeError(f"{name}: expected one upstream chat, the fake saw {len(chats)}")
        token = str(chats[0]["headers"]["authorization"]).removeprefix("Bearer ")
        bodies[name] = (chats[0]["body"].encode(), token)
    remote.clear_requests()
    return bodies


async def _one(runner: Runner, target: Target) -> Any:
    phase = await run_phase(
        runner.session, target, concurrency=1, count=1, time_limit_s=30.0, first_seq=runner.seq
    )
    runner.seq += 1
    return phase.samples[0]


async def latency_matrix(runner: Runner, floor: FloorProcess | None) -> list[dict[str, Any]]:
    """Every scenario and concurrency: baseline, then the floor relay (if any), then kirod."""
    bench, plan = runner.bench, runner.plan
    daemon = bench.daemon_process
    kirod_targets = {
        name: SCENARIOS[name].kirod_target(daemon.base_url, daemon.api_key)
        for name in plan.scenarios
    }
    bodies = await capture_upstream_bodies(runner, kirod_targets)
    rows: list[dict[str, Any]] = []
    for name in plan.scenarios:
        scenario = SCENARIOS[name]
        body, token = bodies[name]
        baseline = baseline_target(scenario, bench.fake_process.url, token, body)
        # (label, target, the relay whose CPU is measured: None for the daemon)
        phases: list[tuple[str, Target, int | None]] = [("baseline", baseline, None)]
        if floor is not None and name == FLOOR_SCENARIO:
            floor_target = dataclasses.replace(baseline, url=floor.url + RELAY_PATH)
            phases.append(("floor", floor_target, floor.pid))
        phases.append(("kirod", kirod_targets[name], None))
        for concurrency in plan.concurrencies:
            count = plan.counts[concurrency]
            row: dict[str, Any] = {
                "scenario": name,
                "request_bytes": len(kirod_targets[name].body),
                "upstream_bytes": len(body),
                "concurrency": concurrency,
            }
            for label, target, pid in phases:
                if plan.warmup:
                    await runner.warm(target, concurrency)
                row[label] = await runner.phase(
                    target, concurrency=concurrency, count=count, pid=pid
                )
            rows.append(row)
            runner.log(_row_line(row))
    return rows


def _row_line(row: dict[str, Any]) -> str:
    base, kirod, floor = row["baseline"], row["kirod"], row.get("floor")
    line = (
        f"  {row['scenario']:<24} c={row['concurrency']:<4} "
        f"ttfb p50 {base['first_content_s']['p50'] * 1000:6.1f} → "
        f"{kirod['first_content_s']['p50'] * 1000:6.1f} ms, "
        f"total p50 {base['total_s']['p50'] * 1000:6.1f} → "
        f"{kirod['total_s']['p50'] * 1000:6.1f} ms, "
        f"{base['rate_rps']:6.0f} → {kirod['rate_rps']:6.0f} req/s, "
        f"cpu {kirod['daemon_cpu_ms_per_request']:.2f} ms/req, "
        f"errors {base['errors']}/{kirod['errors']}"
    )
    if floor is not None:
        line += (
            f"; floor: ttfb p50 {floor['first_content_s']['p50'] * 1000:.1f} ms, "
            f"{floor['rate_rps']:.0f} req/s, cpu {floor['daemon_cpu_ms_per_request']:.2f} ms/req, "
            f"errors {floor['errors']}"
        )
    return line


async def relay(runner: Runner) -> dict[str, Any]:
    """Long answers with no delays: how many events per second kirod relays."""
    plan, bench = runner.plan, runner.bench
    daemon = bench.daemon_process
    scenario = SCENARIOS["messages-stream-small"]
    target = scenario.kirod_target(daemon.base_url, daemon.api_key)
    runner.set_reply(frames=plan.relay_frames, between_s=0.0)
    try:
        bodies = await capture_upstream_bodies(runner, {scenario.name: target})
        body, token = bodies[scenario.name]
        baseline = baseline_target(scenario, bench.fake_process.url, token, body)
        result: dict[str, Any] = {"frames_per_answer": plan.relay_frames + 2}
        for label, phase_target in (("baseline", baseline), ("kirod", target)):
            result[label] = await runner.phase(
                phase_target, concurrency=plan.relay_concurrency, count=plan.relay_count
            )
    finally:
        runner.set_reply()
    upstream_frames = result["kirod"]["completed"] * result["frames_per_answer"]
    result["kirod_upstream_frames_per_s"] = upstream_frames / result["kirod"]["elapsed_s"]
    runner.log(
        f"  relay: baseline {result['baseline']['events_per_s']:.0f} frames/s; kirod "
        f"{result['kirod_upstream_frames_per_s']:.0f} frames/s in, "
        f"{result['kirod']['events_per_s']:.0f} SSE events/s out"
    )
    return result


async def memory_phases(runner: Runner) -> list[dict[str, Any]]:
    """Hold N streams open at once (slow answers) and read the daemon's peak RSS."""
    plan, bench = runner.plan, runner.bench
    daemon = bench.daemon_process
    target = SCENARIOS["messages-stream-small"].kirod_target(daemon.base_url, daemon.api_key)
    between = plan.rss_stream_s / 20
    results: list[dict[str, Any]] = []
    runner.set_reply(between_s=between)
    try:
        for streams in plan.rss_streams:
            ramp = min(1.0, plan.rss_stream_s / 3)
            phase = await runner.phase(
                target, concurrency=streams, count=streams, ramp_s=ramp, sample_memory=True
            )
            phase["streams"] = streams
            phase["idle_rss_kb"] = procstat.memory(runner.daemon_pid).rss_kb
            results.append(phase)
            runner.log(
                f"  {streams} streams: peak RSS {phase['daemon_peak_rss_kb'] / 1024:.1f} MB, "
                f"peak fds {phase['daemon_peak_fds']}, errors {phase['errors']}"
            )
    finally:
        runner.set_reply()
    return results


# Budgets the bench's traffic never reaches: what is measured is holding and settling them.
UNREACHED_CREDITS = 1e9
UNREACHED_TOKENS = 1_000_000_000


def set_budgets(daemon: DaemonProcess) -> None:
    """Give the bench's key and every account budgets, so each request is held and settled
    against its key and its account (issue 48's admission), without one being refused."""
    client = daemon.client
    for key in client.request("GET", "/keys")["keys"]:
        budget = {
            "credits_per_day": UNREACHED_CREDITS,
            "credits_per_month": UNREACHED_CREDITS,
            "tokens_per_minute": UNREACHED_TOKENS,
        }
        client.request("PUT", f"/keys/{key['id']}/budget", budget)
    for account in client.request("GET", "/accounts")["accounts"]:
        budget = {
            "credits_per_day": UNREACHED_CREDITS,
            "credits_per_month": UNREACHED_CREDITS,
            "allow_overage": False,
        }
        client.request("PUT", f"/accounts/{account['id']}/budget", budget)


async def run_plan(
    plan: Plan,
    *,
    log: Log = _stderr,
    keep_alive: bool = True,
    accounts: int | None = None,
    budgets: bool = False,
) -> dict[str, Any]:
    """Run `plan`; `accounts` defaults to enough for the top concurrency at 10 per account;
    `budgets`: with budgets on the key and the accounts (`set_budgets`)."""
    if not procstat.available():
        raise RuntimeError("the benchmark reads /proc: it runs on Linux only")
    top = max((*plan.concurrencies, *plan.rss_streams, plan.relay_concurrency))
    raise_fd_limit(3 * top + FD_HEADROOM)
    results: dict[str, Any] = {
        "plan": plan.name,
        "machine": machine(),
        "latency_profile": {"first_s": LATENCY.first_s, "between_s": LATENCY.between_s},
        "upstream_keep_alive": keep_alive,
        "budgets": budgets,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    log(f"kirod benchmark, plan {plan.name}")
    compile_kirod()
    results["startup"] = measure_startup(plan.startup_runs, log)
    if accounts is None:
        accounts = max(MIN_ACCOUNTS, -(-top // ACCOUNTS_PER_CONCURRENCY))
    extra = {"KIROD_UPSTREAM_KEEP_ALIVE": "true" if keep_alive else "false"}
    with Bench(latency=LATENCY, accounts=accounts, daemon_extra_env=extra) as bench:
        results["accounts"] = accounts
        if budgets:
            set_budgets(bench.daemon_process)
        results["cli"] = measure_cli(bench.daemon_process, plan.cli_runs)
        log(f"  kiroctl --help {results['cli']['kiroctl --help']['median'] * 1000:.0f} ms")
        async with new_session() as session:
            runner = Runner(bench, session, plan, log)
            runner.set_reply()
            idle = procstat.memory(runner.daemon_pid)
            results["idle_rss_kb"] = idle.rss_kb
            # Memory first, on a fresh daemon: CPython keeps the arenas a busier phase grew.
            results["memory"] = await memory_phases(runner)
            with contextlib.ExitStack() as stack:
                floor = None
                if FLOOR_SCENARIO in plan.scenarios:
                    floor = stack.enter_context(
                        FloorProcess(
                            bench.fake_process.url,
                            keep_alive=keep_alive,
                            log_path=bench.root / "floor.log",
                        )
                    )
                results["latency"] = await latency_matrix(runner, floor)
            results["relay"] = await relay(runner)
            results["final_rss_kb"] = procstat.memory(runner.daemon_pid).rss_kb
        results["daemon_log_errors"] = _log_errors(bench.daemon_process.log())
    results["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return results


def _log_errors(log_text: str) -> list[str]:
    bad = [line for line in log_text.splitlines() if " ERROR " in line or "Traceback" in line]
    return bad[:10]


def run(
    plan: Plan,
    *,
    log: Log = _stderr,
    keep_alive: bool = True,
    accounts: int | None = None,
    budgets: bool = False,
) -> dict[str, Any]:
    return asyncio.run(
        run_plan(plan, log=log, keep_alive=keep_alive, accounts=accounts, budgets=budgets)
    )
