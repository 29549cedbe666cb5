"""Markdown tables from a results document, and the targets each figure is held to."""

from __future__ import annotations

import os
from typing import Any

MS = 1000.0
FLOOR = "bare aiohttp relay"


def _ms(seconds: float) -> str:
    return f"{seconds * MS:.1f}"


def _ratio(kirod: float, baseline: float) -> str:
    return f"{kirod / baseline:.2f}x" if baseline > 0 else "n/a"


def machine_line(results: dict[str, Any]) -> str:
    m = results["machine"]
    return (
        f"{m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Linux {m['kernel']}, "
        f"Python {m['python']}, aiohttp {m['aiohttp']}, kirod {m['kirod']}, {m['event_loop']}; "
        f"plan {results['plan']}, upstream keep-alive {results['upstream_keep_alive']}, "
        f"{results['accounts']} accounts, {results['started_at']}"
    )


def latency_table(results: dict[str, Any], metric: str, title: str) -> list[str]:
    lines = [
        f"#### {title}",
        "",
        "| scenario | streams | fake p50 / p95 / p99 ms | kirod p50 / p95 / p99 ms "
        "| added p50 / p95 / p99 ms | ratio p50 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in results["latency"]:
        if metric == "first_content_s" and "-json-" in row["scenario"]:
            continue
        base, kirod = row["baseline"][metric], row["kirod"][metric]
        added = [kirod[p] - base[p] for p in ("p50", "p95", "p99")]
        lines.append(
            f"| {row['scenario']} | {row['concurrency']} "
            f"| {_ms(base['p50'])} / {_ms(base['p95'])} / {_ms(base['p99'])} "
            f"| {_ms(kirod['p50'])} / {_ms(kirod['p95'])} / {_ms(kirod['p99'])} "
            f"| {' / '.join(f'{a * MS:+.1f}' for a in added)} "
            f"| {_ratio(kirod['p50'], base['p50'])} |"
        )
    return [*lines, ""]


def throughput_table(results: dict[str, Any]) -> list[str]:
    lines = [
        "#### Request rate and kirod CPU",
        "",
        "| scenario | streams | fake req/s | kirod req/s | ratio | kirod CPU ms/request "
        "| fake CPU ms/request | errors (fake / kirod) | other processes' CPU share |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["latency"]:
        base, kirod = row["baseline"], row["kirod"]
        fake_cpu = 1000 * kirod["fake_cpu_s"] / max(1, kirod["completed"])
        lines.append(
            f"| {row['scenario']} | {row['concurrency']} | {base['rate_rps']:.0f} "
            f"| {kirod['rate_rps']:.0f} | {_ratio(kirod['rate_rps'], base['rate_rps'])} "
            f"| {kirod['daemon_cpu_ms_per_request']:.2f} | {fake_cpu:.2f} "
            f"| {base['errors']} / {kirod['errors']} "
            f"| {_other_share(base)} / {_other_share(kirod)} |"
        )
    return [*lines, ""]


def floor_table(results: dict[str, Any]) -> list[str]:
    """kirod next to the bare aiohttp relay in the same run: which part of its cost is its own."""
    rows = [row for row in results["latency"] if "floor" in row]
    if not rows:
        return []
    connections = (
        "over kept-alive upstream connections"
        if results["upstream_keep_alive"]
        else "on a new upstream connection per request"
    )
    lines = [
        f"#### The aiohttp floor ({rows[0]['scenario']})",
        "",
        f"The same exchange as the fake's column through a {FLOOR} (`bench/floor.py`): the body "
        f"forwarded {connections}, the raw chunks passed back. What any aiohttp relay costs on "
        "this machine; added is over the fake alone.",
        "",
        "| streams | fake TTFB p50 ms | floor TTFB p50 ms | floor added ms | kirod TTFB p50 ms "
        "| kirod added ms | floor req/s | kirod req/s | floor CPU ms/request "
        "| kirod CPU ms/request | kirod CPU / floor |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        base, floor, kirod = row["baseline"], row["floor"], row["kirod"]
        fake_ttfb = base["first_content_s"]["p50"]
        floor_ttfb, kirod_ttfb = floor["first_content_s"]["p50"], kirod["first_content_s"]["p50"]
        floor_cpu = floor["daemon_cpu_ms_per_request"]
        kirod_cpu = kirod["daemon_cpu_ms_per_request"]
        lines.append(
            f"| {row['concurrency']} | {_ms(fake_ttfb)} "
            f"| {_ms(floor_ttfb)} | {(floor_ttfb - fake_ttfb) * MS:+.2f} "
            f"| {_ms(kirod_ttfb)} | {(kirod_ttfb - fake_ttfb) * MS:+.2f} "
            f"| {floor['rate_rps']:.0f} | {kirod['rate_rps']:.0f} "
            f"| {floor_cpu:.2f} | {kirod_cpu:.2f} | {_ratio(kirod_cpu, floor_cpu)} |"
        )
    return [*lines, ""]


def _other_share(phase: dict[str, Any]) -> str:
    """Other processes' CPU over the phase, as a share of the machine's cores (older runs: -)."""
    other = phase.get("other_cpu_s")
    cores = os.cpu_count() or 1
    if other is None or not phase["elapsed_s"]:
        return "-"
    return f"{100 * other / (phase['elapsed_s'] * cores):.0f}%"


def other_tables(results: dict[str, Any]) -> list[str]:
    relay = results["relay"]
    lines = [
        "#### Event relay (answers of "
        f"{relay['frames_per_answer']} frames, no delays, {relay['kirod']['concurrency']} streams)",
        "",
        "| | fake → client | through kirod |",
        "|---|---:|---:|",
        f"| upstream frames/s | {relay['baseline']['events_per_s']:.0f} "
        f"| {relay['kirod_upstream_frames_per_s']:.0f} |",
        f"| SSE events/s to the client | | {relay['kirod']['events_per_s']:.0f} |",
        f"| kirod CPU µs per upstream frame | | {_per_frame_us(relay):.0f} |",
        "",
        "#### Memory",
        "",
        f"Idle RSS after start-up and account import: {results['idle_rss_kb'] / 1024:.1f} MB; "
        f"after the whole run: {results.get('final_rss_kb', 0) / 1024:.1f} MB.",
        "",
        "| concurrent streams | peak RSS MB | peak open fds | errors |",
        "|---:|---:|---:|---:|",
    ]
    for phase in results["memory"]:
        lines.append(
            f"| {phase['streams']} | {phase['daemon_peak_rss_kb'] / 1024:.1f} "
            f"| {phase['daemon_peak_fds']} | {phase['errors']} |"
        )
    startup = results["startup"]
    lines += [
        "",
        "#### Start-up and CLI (medians)",
        "",
        "| what | median ms | min ms | max ms | runs |",
        "|---|---:|---:|---:|---:|",
        _timing_row("kirod start → READY=1 (new state dir)", startup["ready_first_s"]),
        _timing_row("kirod start → READY=1 (restart)", startup["ready_restart_s"]),
        _timing_row("SIGTERM → exit (idle)", startup["stop_s"]),
    ]
    for name, timing in results["cli"].items():
        lines.append(_timing_row(name, timing))
    return [*lines, ""]


def _per_frame_us(relay: dict[str, Any]) -> float:
    frames: int = relay["kirod"]["completed"] * relay["frames_per_answer"]
    return 1e6 * float(relay["kirod"]["daemon_cpu_s"]) / max(1, frames)


def _timing_row(name: str, timing: dict[str, Any]) -> str:
    return (
        f"| {name} | {_ms(timing['median'])} | {_ms(timing['min'])} | {_ms(timing['max'])} "
        f"| {timing['runs']} |"
    )


def _find(results: dict[str, Any], scenario: str, concurrency: int) -> dict[str, Any] | None:
    rows: list[dict[str, Any]] = results["latency"]
    for row in rows:
        if row["scenario"] == scenario and row["concurrency"] == concurrency:
            return row
    return None


def _added_ttfb_ms(row: dict[str, Any], side: str) -> float:
    """TTFB p50 of `side` (kirod or floor) minus the fake's alone, in ms."""
    added: float = row[side]["first_content_s"]["p50"] - row["baseline"]["first_content_s"]["p50"]
    return MS * added


def targets(results: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for each target whose figure this run has."""
    out: list[tuple[str, str, bool | None]] = []

    def added_ttfb(scenario: str, concurrency: int, limit_ms: float) -> None:
        row = _find(results, scenario, concurrency)
        if row is None:
            return
        added = _added_ttfb_ms(row, "kirod")
        measured = f"{added:+.2f} ms"
        if "floor" in row:
            measured += f" ({FLOOR}: {_added_ttfb_ms(row, 'floor'):+.2f} ms)"
        out.append(
            (
                f"added TTFB p50 ≤ {limit_ms:g} ms at {concurrency} stream(s) ({scenario})",
                measured,
                added <= limit_ms,
            )
        )

    for scenario in ("messages-stream-small", "messages-stream-large", "responses-stream-large"):
        added_ttfb(scenario, 1, 1.0)
        added_ttfb(scenario, 64, 10.0)
    for scenario, limit in (("messages-stream-small", 1.5), ("messages-stream-large", 5.0)):
        row = _find(results, scenario, 64)
        if row is not None:
            cpu = row["kirod"]["daemon_cpu_ms_per_request"]
            measured = f"{cpu:.2f} ms"
            if "floor" in row:
                measured += f" ({FLOOR}: {row['floor']['daemon_cpu_ms_per_request']:.2f} ms)"
            out.append(
                (f"CPU ≤ {limit:g} ms/request ({scenario}, 64 streams)", measured, cpu <= limit)
            )
    row = _find(results, "messages-stream-small", 64)
    if row is not None:
        rate, base = row["kirod"]["rate_rps"], row["baseline"]["rate_rps"]
        context = [f"fake alone: {base:.0f}"]
        if "floor" in row:
            context.append(f"{FLOOR}: {row['floor']['rate_rps']:.0f}")
        out.append(
            (
                "≥ 600 requests/s at 64 streams (messages-stream-small)",
                f"{rate:.0f} req/s ({'; '.join(context)})",
                rate >= 600 if base >= 600 else None,
            )
        )
    for phase in results["memory"]:
        rss_limit = {64: 80, 1000: 200}.get(phase["streams"])
        if rss_limit is not None:
            mb = phase["daemon_peak_rss_kb"] / 1024
            out.append(
                (
                    f"peak RSS ≤ {rss_limit} MB at {phase['streams']} streams, no errors",
                    f"{mb:.1f} MB, {phase['errors']} errors",
                    mb <= rss_limit and phase["errors"] == 0,
                )
            )
    ready = results["startup"]["ready_first_s"]["median"]
    out.append(("READY ≤ 1 s", f"{ready * MS:.0f} ms", ready <= 1.0))
    cli = results["cli"]
    status = (
        cli.get("kiroctl status") or cli["python -c LocalClient.status() (kiroctl status stand-in)"]
    )
    label = "kiroctl status" if "kiroctl status" in cli else "kiroctl status (stand-in)"
    out.append((f"{label} ≤ 150 ms", f"{status['median'] * MS:.0f} ms", status["median"] <= 0.150))
    return out


def render(results: dict[str, Any]) -> str:
    lines = [
        f"Machine: {machine_line(results)}",
        "",
        *latency_table(results, "first_content_s", "Time to first content event (TTFB)"),
        *latency_table(results, "total_s", "Total time"),
        *throughput_table(results),
        *floor_table(results),
        *other_tables(results),
        "#### Targets",
        "",
        "| target | measured | met |",
        "|---|---:|:---:|",
    ]
    for target, measured, met in targets(results):
        verdict = "n/a (fake-bound)" if met is None else ("yes" if met else "**no**")
        lines.append(f"| {target} | {measured} | {verdict} |")
    return "\n".join(lines) + "\n"
