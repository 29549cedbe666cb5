"""`python -m bench`: run a plan, print the tables, and optionally write the raw results."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.harness import run
from bench.report import render
from bench.scenarios import PLANS, SCENARIOS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--plan", choices=sorted(PLANS), default="full")
    parser.add_argument(
        "--scenario",
        action="append",
        choices=sorted(SCENARIOS),
        default=None,
        help="limit the latency matrix to these scenarios (repeatable)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the raw results here")
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write the tables here")
    parser.add_argument(
        "--upstream-keep-alive",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="kirod's upstream_keep_alive, its default on, and the bare aiohttp relay likewise "
        "(--no-upstream-keep-alive: a new upstream connection per request for both)",
    )
    parser.add_argument(
        "--accounts",
        type=int,
        default=None,
        help="Kiro accounts to import (default: enough for the top concurrency, 10 each)",
    )
    parser.add_argument(
        "--budgets",
        action="store_true",
        help="give the key and the accounts budgets the traffic never reaches, to measure "
        "holding and settling them",
    )
    args = parser.parse_args(argv)
    plan = PLANS[args.plan]
    if args.scenario:
        plan = plan.__class__(**{**plan.__dict__, "scenarios": tuple(args.scenario)})
    results = run(
        plan, keep_alive=args.upstream_keep_alive, accounts=args.accounts, budgets=args.budgets
    )
    text = render(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(text)
    sys.stdout.write(text)
    failed = [
        row
        for row in results["latency"]
        for side in ("baseline", "floor", "kirod")
        if side in row and row[side]["errors"]
    ]
    failed += [phase for phase in results["memory"] if phase["errors"]]
    return 1 if failed or results["daemon_log_errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
