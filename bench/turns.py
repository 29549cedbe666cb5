"""Turns kirod completes with more than one upstream call, against a plain turn, on one daemon.

    python -m bench.turns [--rounds 5] [--count 200] [--concurrency 1]

Variants, all `POST /v1/messages` without streaming, alternating in each round so the
machine's drift hits them alike:

- `plain`: the `messages-json-small` body; one chat.
- `search-side-call`: Claude Code's WebSearch side call; one MCP search, no chat.
- `search-in-turn`: the small body with the `web_search` server tool; the fake model calls it
  first, so: a chat, an MCP search, a second chat.
- `write-whole`: the small body with a `Write` tool, which the fake model calls with `CUT_AFTER`
  characters of input, whole: one chat that ends for the client's call.
- `truncation-recovered`: the same, but the call is cut off after those characters, so kirod
  continues once: two chats.

The figure is the daemon's CPU time per request (medians over the rounds). Each variant's
upstream calls would cost what the variants making just those calls cost (`BASELINE`: a `plain`
request per chat or search, a `write-whole` for a chat streaming the same tool input); what
kirod adds beyond them is `(CPU(variant) - CPU(baseline)) / CPU(plain)`, in plain round trips,
and the target is at most 1.
Exits non-zero if any request failed or made another number of upstream calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from bench import payloads, procstat
from bench.env import Bench
from bench.harness import LATENCY, Runner, compile_kirod
from bench.loadgen import Target, new_session
from bench.scenarios import ANTHROPIC_VERSION, QUICK, REPLY_CHUNK, REPLY_TEXT
from kirod.testing.fake_kiro import Reply, Script, ToolCall, ToolCut

SEARCH_TOOL: Final = {"type": "web_search_20250305", "name": "web_search", "max_uses": 8}
WRITE_TOOL: Final = {
    "name": "Write",
    "description": "Writes a file.",
    "input_schema": {"type": "object", "properties": {"content": {"type": "string"}}},
}
CUT_AFTER: Final = 5_000
"""Characters of the Write call's input Kiro sends before the cut, within the sizes reported for
real cut writes (docs/UPSTREAM.md §3.1: a 4,775-byte stream, "~9 KB")."""
VARIANTS: Final = (
    "plain",
    "search-side-call",
    "search-in-turn",
    "write-whole",
    "truncation-recovered",
)
CALLS: Final = {
    "plain": 1,
    "search-side-call": 1,
    "search-in-turn": 3,
    "write-whole": 1,
    "truncation-recovered": 2,
}
"""Upstream calls per request: chats and MCP searches."""
BASELINE: Final = {
    "plain": ("plain",),
    "search-side-call": ("plain",),
    "search-in-turn": ("plain", "plain", "plain"),
    "write-whole": ("write-whole",),
    "truncation-recovered": ("write-whole", "plain"),
}
"""What each variant's upstream calls cost kirod by themselves: the variants that make just those
calls. A cut write's first chat streams as much tool input as a whole one (`write-whole`), the
continuation is a plain chat; what the variant costs beyond their sum is what recovery adds."""


def body(variant: str) -> bytes:
    document = payloads.messages_small(stream=False)
    if variant == "search-side-call":
        query = f"[{payloads.SEQ}] loopback sockets"
        document["messages"] = [
            {"role": "user", "content": f"Perform a web search for the query: {query}"}
        ]
    if variant in ("search-side-call", "search-in-turn"):
        document["tools"] = [SEARCH_TOOL]
    elif variant in ("write-whole", "truncation-recovered"):
        document["tools"] = [WRITE_TOOL]
    return payloads.body_bytes(document)


def script(variant: str) -> Script:
    first = {
        "search-in-turn": ToolCall("web_search", {"query": "loopback sockets"}),
        "write-whole": ToolCall("Write", {"content": payloads.prose(CUT_AFTER)}),
        "truncation-recovered": ToolCall(
            "Write",
            {"content": payloads.prose(CUT_AFTER + 1_000)},
            cut=ToolCut.END,
            cut_after=CUT_AFTER,
        ),
    }
    return Script(
        reply=Reply(text=REPLY_TEXT), chunk_size=REPLY_CHUNK, call_first=first.get(variant)
    )


def target(runner: Runner, variant: str) -> Target:
    daemon = runner.bench.daemon_process
    return Target(
        name=variant,
        url=daemon.base_url + "/v1/messages",
        headers={
            "Content-Type": "application/json",
            "x-api-key": daemon.api_key,
            "anthropic-version": ANTHROPIC_VERSION,
        },
        body=body(variant),
        framing="json",
        content_marker=b'"tool_use"' if variant == "write-whole" else b'"text"',
        end_marker=b'"stop_reason": "tool_use"' if variant == "write-whole" else b"end_turn",
    )


async def phase(runner: Runner, variant: str, *, count: int, concurrency: int) -> dict[str, Any]:
    """One measured phase, with the upstream calls it made per request (the fake's counts)."""
    remote = runner.bench.fake_process.remote
    remote.set_default_script(script(variant))
    before = remote.counters()
    result = await runner.phase(target(runner, variant), concurrency=concurrency, count=count)
    after = remote.counters()
    calls = sum(after.get(k, 0) - before.get(k, 0) for k in ("requests:chat", "requests:mcp"))
    return {**result, "upstream_calls_per_request": calls / max(1, result["completed"])}


async def compare(
    *, rounds: int, count: int, concurrency: int, accounts: int, log: Callable[[str], None]
) -> dict[str, Any]:
    if not procstat.available():
        raise RuntimeError("the benchmark reads /proc: it runs on Linux only")
    compile_kirod()
    results: dict[str, Any] = {
        "count": count,
        "concurrency": concurrency,
        "accounts": accounts,
        "rounds": [],
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with Bench(latency=LATENCY, accounts=accounts) as bench:
        async with new_session() as session:
            runner = Runner(bench, session, QUICK, log)
            for variant in VARIANTS:  # warm every path: imports, catalogs, connections
                await phase(runner, variant, count=max(8, concurrency), concurrency=concurrency)
            for number in range(rounds):
                row = {
                    variant: await phase(runner, variant, count=count, concurrency=concurrency)
                    for variant in VARIANTS
                }
                results["rounds"].append(row)
                log(
                    f"  round {number + 1}: "
                    + ", ".join(
                        f"{variant} {row[variant]['daemon_cpu_ms_per_request']:.3f} ms "
                        f"({row[variant]['errors']} errors)"
                        for variant in VARIANTS
                    )
                )
    results["median_cpu_ms"] = {
        variant: statistics.median(
            row[variant]["daemon_cpu_ms_per_request"] for row in results["rounds"]
        )
        for variant in VARIANTS
    }
    return results


def render(results: dict[str, Any]) -> str:
    medians = results["median_cpu_ms"]
    plain = medians["plain"]
    lines = [
        f"#### Multi-call turns ({results['count']} requests a phase, concurrency "
        f"{results['concurrency']}, {len(results['rounds'])} rounds)",
        "",
        "| variant | upstream calls | CPU ms/request, median (per round) | added beyond the "
        "calls, in plain round trips |",
        "|---|---:|---|---:|",
    ]
    for variant in VARIANTS:
        per_round = [row[variant]["daemon_cpu_ms_per_request"] for row in results["rounds"]]
        added = (medians[variant] - sum(medians[b] for b in BASELINE[variant])) / plain
        lines.append(
            f"| {variant} | {CALLS[variant]} | {medians[variant]:.3f} "
            f"({', '.join(f'{c:.2f}' for c in per_round)}) | {added:+.2f} |"
        )
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.turns", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=200, help="requests per phase")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--accounts", type=int, default=4)
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the raw results here")
    args = parser.parse_args(argv)
    results = asyncio.run(
        compare(
            rounds=args.rounds,
            count=args.count,
            concurrency=args.concurrency,
            accounts=args.accounts,
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    sys.stdout.write(render(results))
    failed = any(
        row[v]["errors"] or row[v]["upstream_calls_per_request"] != CALLS[v]
        for row in results["rounds"]
        for v in VARIANTS
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
