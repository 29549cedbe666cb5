"""`kiroctl doctor --live`: the plan shown and agreed to, then each belief with its verdict."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kirod.cli import exits, render
from kirod.cli.context import App
from kirod.errors import ControlError
from kirod.report_types.live import LivePlan, LiveReport, LiveStep

if TYPE_CHECKING:
    from rich.console import Console

    from kirod.localapi.client import LocalClient

MARKS = {"confirmed": "ok", "contradicted": "CONTRADICTED", "unknown": "unknown"}


def run(
    app: App, ref: str | None, *, yes: bool, effort: bool, as_json: bool, report: Path | None
) -> None:
    """Plan, ask, run, show; exit 4 when a belief was contradicted, 1 when none could be
    checked."""
    from kirod.cli.commands.accounts import resolve

    account_id = resolve(app, ref).id if ref is not None else None
    plan = app.call(lambda kirod: _planned(kirod, account_id))
    shown = app.err if as_json else app.out  # --json: stdout carries the report alone
    _show_plan(shown, plan)
    optional = next((step for step in plan.steps if step.optional), None)
    effort = effort and optional is not None
    if not yes:
        _ask(plan, optional, effort)
        effort = effort and _agrees(optional)
    elif optional is not None:
        shown.print(f"--yes: {'with' if effort else 'without'} the effort chat.", markup=False)
    answer = app.call(lambda kirod: kirod.doctor_live(plan, effort=effort))
    if report is not None:
        _write(report, answer)
    if as_json:
        render.print_json(answer.to_json())
    else:
        _show_beliefs(app, answer)
    counts = answer.verdicts()
    if counts["contradicted"]:
        raise exits.CliError(
            exits.DEGRADED,
            f"Kiro contradicted {counts['contradicted']} of kirod's beliefs",
            "Kiro may have changed: attach the report (--report FILE) to a kirod issue",
        )
    if not counts["confirmed"]:
        raise exits.CliError(exits.FAILED, "no belief could be checked: see the reasons above")


def _planned(kirod: LocalClient, account_id: str | None) -> LivePlan:
    try:
        return kirod.doctor_live_plan(account_id)
    except ControlError as exc:
        if exc.status == 404 and exc.message.startswith("no such control route"):
            raise exits.CliError(
                exits.FAILED,
                "the running kirod has no live checks: it is older than this kiroctl",
                "restart kirod to run the version installed with this kiroctl",
            ) from None
        raise


def _show_plan(out: Console, plan: LivePlan) -> None:
    label = render.printable(plan.account_label)
    out.print(f"Live checks on {label} ({render.short_id(plan.account_id)}):", markup=False)
    for step in plan.steps:
        cost = f"at most {step.credits:g} credits" if step.credits else "no credits"
        extra = ", asked separately" if step.optional else ""
        out.print(f"  {step.name:<11} {step.sends} [{cost}{extra}]", markup=False)
    if plan.model is None:
        out.print("  (no chat: the catalog lists no model with a rate multiplier)", markup=False)
    out.print(f"Expected cost: at most {plan.credits():g} credits in all.", markup=False)


def _ask(plan: LivePlan, optional: LiveStep | None, effort: bool) -> None:
    """The question before anything costs credits; off a terminal only --yes goes ahead."""
    if not sys.stdin.isatty():
        raise exits.CliError(
            exits.USAGE,
            "refusing to spend credits without asking: standard input is not a terminal",
            "add --yes to run the checks as planned above",
        )
    cost = plan.credits(effort=False)
    if not click.confirm(f"Run these checks (at most {cost:g} credits)?", err=True):
        raise exits.CliError(exits.FAILED, "nothing was sent")


def _agrees(optional: LiveStep | None) -> bool:
    if optional is None:
        return False
    return click.confirm(
        f"Also send the effort chat (at most {optional.credits:g} credits more)?", err=True
    )


def _show_beliefs(app: App, answer: LiveReport) -> None:
    out = app.out
    for belief in answer.beliefs:
        out.print(f"{MARKS[belief.verdict]:<12}  {belief.name:<11} {belief.belief}", markup=False)
        out.print(f"{'':14}{belief.why}", markup=False)
    counts = answer.verdicts()
    metered = "none metered" if answer.credits is None else f"{answer.credits:g} metered"
    out.print(
        f"{counts['confirmed']} confirmed, {counts['contradicted']} contradicted, "
        f"{counts['unknown']} unknown; credits: {metered}.",
        markup=False,
    )


def _write(path: Path, answer: LiveReport) -> None:
    try:
        path.write_text(json.dumps(answer.redacted(), indent=2) + "\n")
    except OSError as exc:
        raise exits.CliError(
            exits.FAILED, f"cannot write the report to {path}: {exc.strerror}"
        ) from None
