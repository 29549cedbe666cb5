"""`/health` while large requests arrive: how long a 10 MB body holds the daemon's event loop.

    python -m bench.health [--concurrency 4] [--seconds 10] [--mb 10] [--shape NAME ...]

The fake and the daemon of the main plan (`bench/env.py`, default 10 MiB body limit). Each phase
sends one body shape from C clients, back to back, for `--seconds`; meanwhile one more client
asks `GET /health` every 10 ms on a kept-alive connection and records how long each answer took.
An idle phase (no large requests) comes first. Every client is a thread of this process with
`http.client`, so the harness's own event loop measures nothing.

Shapes, each about `--mb` MB of JSON (Messages API):

| shape | body | kirod's answer |
|---|---|---|
| `text` | one user message of prose | 413: above Kiro's payload limit (a sum of lengths) |
| `history` | 4 KB messages, alternating roles | 413 the same way, decoded off the loop |
| `images` | old turns with 250 KB images, a short current turn | 200: old images are placeholders |
| `schema` | one tool whose schema is the whole body | 413 before the schema is cleaned |
| `messages` | hundreds of thousands of "hi" messages | 400: more arrays and objects than allowed |

Figures per phase: `/health` p50 / p99 / max, the large requests answered and their statuses, the
daemon's CPU time and peak RSS. Exits non-zero if `/health` failed or a large request got a 5xx.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import statistics
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import payloads, procstat
from bench.env import Bench
from bench.harness import LATENCY, compile_kirod

MODEL = "claude-sonnet-4-6"
PROBE_INTERVAL_S = 0.01
SHAPES = ("text", "history", "images", "schema", "messages")


def _png(size: int, seed: int) -> str:
    """A real PNG header and `size` bytes of (incompressible) base64 in all."""
    header = b"\x89PNG\r\n\x1a\n" + (13).to_bytes(4, "big") + b"IHDR"
    header += (64).to_bytes(4, "big") * 2 + b"\x08\x02\x00\x00\x00"
    header += zlib.crc32(header[12:29]).to_bytes(4, "big")
    filler = bytes((seed * 31 + index * 7) % 256 for index in range(size * 3 // 4))
    return base64.b64encode(header + filler).decode()[:size]


def body(shape: str, size: int) -> bytes:
    """About `size` bytes of a Messages body of `shape`."""
    document: dict[str, Any] = {"model": MODEL, "max_tokens": 64}
    if shape == "text":
        document["messages"] = [{"role": "user", "content": payloads.prose(size)}]
    elif shape == "history":
        turn = payloads.prose(4_000)
        count = size // 4_040
        document["messages"] = [
            {"role": "user" if index % 2 == 0 else "assistant", "content": turn}
            for index in range(count - 1 + count % 2)
        ]
    elif shape == "images":
        messages: list[dict[str, Any]] = []
        for index in range(size // 250_100):
            source = {"type": "base64", "media_type": "image/png", "data": _png(250_000, index)}
            messages.append(
                {
                    "role": "user",
                    "content": [{"type": "image", "source": source}, {"type": "text", "text": "?"}],
                }
            )
            messages.append({"role": "assistant", "content": "a picture"})
        messages += [
            {"role": "user", "content": "and?"},
            {"role": "assistant", "content": "ok"},
        ] * 3
        messages.append({"role": "user", "content": "describe the first picture"})
        document["messages"] = messages
    elif shape == "schema":
        properties = {
            f"p{index}": {"type": "string", "description": f"property {index} " * 4}
            for index in range(size // 120)
        }
        document["messages"] = [{"role": "user", "content": "hi"}]
        document["tools"] = [
            {"name": "wide", "input_schema": {"type": "object", "properties": properties}}
        ]
    elif shape == "messages":
        hi = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hi"}]
        document["messages"] = hi * (size // 72) + hi[:1]
    else:
        raise ValueError(f"unknown shape {shape!r}")
    return json.dumps(document).encode()


class Probe(threading.Thread):
    """`GET /health` every PROBE_INTERVAL_S until `stop` (or `limit_s`), latencies kept."""

    def __init__(self, address: tuple[str, int], limit_s: float) -> None:
        super().__init__(daemon=True)
        self._address = address
        self._limit_s = limit_s
        self._stop_event = threading.Event()
        self.latencies: list[float] = []
        self.failures = 0

    def run(self) -> None:
        connection = http.client.HTTPConnection(*self._address, timeout=30)
        deadline = time.monotonic() + self._limit_s
        while not self._stop_event.is_set() and time.monotonic() < deadline:
            started = time.monotonic()
            try:
                connection.request("GET", "/health")
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    self.failures += 1
            except (OSError, http.client.HTTPException):
                self.failures += 1
                connection.close()
                connection = http.client.HTTPConnection(*self._address, timeout=30)
                continue
            self.latencies.append(time.monotonic() - started)
            self._stop_event.wait(PROBE_INTERVAL_S)
        connection.close()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=40)


def _sender(
    address: tuple[str, int], api_key: str, raw: bytes, until: float, statuses: Counter[int]
) -> None:
    headers = {"x-api-key": api_key, "Content-Type": "application/json"}
    while time.monotonic() < until:
        connection = http.client.HTTPConnection(*address, timeout=60)
        try:
            connection.request("POST", "/v1/messages", body=raw, headers=headers)
            response = connection.getresponse()
            response.read()
            statuses[response.status] += 1
        except (OSError, http.client.HTTPException):
            statuses[0] += 1
        finally:
            connection.close()


def _ms(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def phase(
    bench: Bench, shape: str | None, *, concurrency: int, seconds: float, size: int
) -> dict[str, Any]:
    daemon = bench.daemon_process
    host, port = daemon.address.rsplit(":", 1)
    address = (host, int(port))
    raw = body(shape, size) if shape else b""
    statuses: Counter[int] = Counter()
    pid = daemon.proc.pid
    procstat.reset_peak(pid)
    cpu = procstat.cpu_seconds(pid)
    probe = Probe(address, limit_s=seconds + 60)
    probe.start()
    until = time.monotonic() + seconds
    senders = [
        threading.Thread(target=_sender, args=(address, daemon.api_key, raw, until, statuses))
        for _ in range(concurrency if shape else 0)
    ]
    for sender in senders:
        sender.start()
    if not senders:
        time.sleep(seconds)
    for sender in senders:
        sender.join(timeout=seconds + 120)
    probe.stop()
    latencies = probe.latencies or [0.0]
    return {
        "shape": shape or "idle",
        "body_mb": round(len(raw) / 1e6, 2),
        "concurrency": len(senders),
        "large_requests": sum(statuses.values()),
        "statuses": {str(status): count for status, count in sorted(statuses.items())},
        "health_answers": len(probe.latencies),
        "health_failures": probe.failures,
        "health_ms": {
            "p50": round(1000 * statistics.median(latencies), 2),
            "p99": round(_ms(latencies, 0.99), 2),
            "max": round(1000 * max(latencies), 2),
        },
        "daemon_cpu_s": round(procstat.cpu_seconds(pid) - cpu, 2),
        "peak_rss_mb": round(procstat.memory(pid).peak_kb / 1024, 1),
        "rss_after_mb": round(procstat.memory(pid).rss_kb / 1024, 1),
    }


def render(results: dict[str, Any]) -> str:
    lines = [
        f"/health under concurrent large requests ({results['concurrency']} clients, "
        f"{results['seconds']} s a phase)",
        "",
        "| shape | body MB | large requests (status: count) | /health p50 / p99 / max ms "
        "| daemon CPU s | peak RSS MB |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for row in results["phases"]:
        health = row["health_ms"]
        statuses = ", ".join(f"{status}: {count}" for status, count in row["statuses"].items())
        lines.append(
            f"| {row['shape']} | {row['body_mb']} | {statuses or '-'} | "
            f"{health['p50']} / {health['p99']} / {health['max']} | {row['daemon_cpu_s']} | "
            f"{row['peak_rss_mb']} |"
        )
    return "\n".join(lines) + "\n"


def run(
    *, shapes: list[str], concurrency: int, seconds: float, size: int, log: Callable[[str], None]
) -> dict[str, Any]:
    if not procstat.available():
        raise RuntimeError("the benchmark reads /proc: it runs on Linux only")
    compile_kirod()
    results: dict[str, Any] = {
        "concurrency": concurrency,
        "seconds": seconds,
        "body_bytes": size,
        "phases": [],
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with Bench(latency=LATENCY, accounts=1) as bench:
        for shape in [None, *shapes]:
            row = phase(bench, shape, concurrency=concurrency, seconds=seconds, size=size)
            log(f"  {row['shape']}: /health {row['health_ms']}, {row['statuses']}")
            results["phases"].append(row)
        results["daemon_log_errors"] = [
            line
            for line in bench.daemon_process.log().splitlines()
            if " ERROR " in line or "Traceback" in line
        ][:10]
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.health", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--concurrency", type=int, default=4, help="clients sending large bodies")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase")
    parser.add_argument("--mb", type=float, default=10.0, help="size of each body, in MB")
    parser.add_argument("--shape", action="append", choices=SHAPES, help="default: all")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the raw results here")
    args = parser.parse_args(argv)
    results = run(
        shapes=args.shape or list(SHAPES),
        concurrency=args.concurrency,
        seconds=args.seconds,
        size=int(args.mb * 1e6),
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    sys.stdout.write(render(results))
    failed = any(
        row["health_failures"]
        or any(int(status) >= 500 or status == "0" for status in row["statuses"])
        for row in results["phases"]
    )
    return 1 if failed or results["daemon_log_errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
