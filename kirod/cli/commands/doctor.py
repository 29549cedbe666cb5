"""`kiroctl doctor`: what a person runs when something looks wrong.

It gathers, in one document: kiroctl's, Python's and the platform's versions; whether kirod runs
and which version (and when it is not the one installed next to kiroctl); what kirod knows is
wrong with its settings; each account's state with its reason and what to do; whether each Kiro
endpoint in use answers through its proxy (checked by kirod, `GET /doctor`); what Kiro answered
that kirod does not know (`GET /drift`); and the errors by class (`GET /stats`, from the
operation log's rollups). Each item that needs attention is listed with what to do.

Exit 0 when nothing needs attention, 4 when something does, 3 when kirod is not running (after
what kiroctl can say alone). `--report FILE` also writes the redacted bundle of
`kirod.cli.commands.report`.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kirod import __version__
from kirod.cli import exits, render
from kirod.cli.commands import live_check
from kirod.cli.commands.reports import parse_since
from kirod.cli.context import App, json_option, pass_app, yes_option
from kirod.localapi.client import (
    DOCTOR_TIMEOUT_S,
    ControlError,
    DaemonUnreachable,
    LocalClient,
    drift_path,
    stats_path,
)
from kirod.report_types import Drift, DriftSummary

# What to do about an account in each state (kirod.storage.accounts.Status); None: nothing.
ADVICE: dict[str, str | None] = {
    "active": None,
    "cooling_down": "kirod tries it again when the cool-down ends; nothing to do unless it repeats",
    "exhausted": "its credits are used up until they reset: wait, add an account, or turn "
    "overage on (`kiroctl accounts overage ACCOUNT on`)",
    "suspended": "Kiro suspended it: open Kiro IDE with this account to see why",
    "needs_login": "sign in again: `kiroctl accounts login` (or import it again)",
    "needs_profile": "choose its Kiro profile: `kiroctl accounts set-profile ACCOUNT ARN`",
    "disabled": "you disabled it; `kiroctl accounts enable ACCOUNT` uses it again",
}
# States that are someone's choice, not a problem.
CHOSEN = frozenset({"active", "disabled"})


def _local() -> dict[str, str]:
    return {
        "version": __version__,
        "python": platform.python_version(),
        "platform": f"{sys.platform} {platform.machine()}",
    }


def _attention(doc: dict[str, Any], text: str, hint: str | None = None) -> None:
    doc["attention"].append({"text": text, "hint": hint})


def _optional(app: App, doc: dict[str, Any], use: Callable[[LocalClient], Any], what: str) -> Any:
    """`app.call(use)`; when kirod cannot answer it (too old a kirod), that is noted, None
    returned, and the doctor goes on."""
    try:
        return app.call(use)
    except exits.CliError as exc:
        if exc.code == exits.DOWN:
            raise
        _attention(doc, f"{what}: {exc.message}", exc.hint)
        return None


def gather(app: App, since: float) -> dict[str, Any]:
    """The doctor's document (kiroctl(1) documents it); `exit` is the code to end with."""
    doc: dict[str, Any] = {
        "kiroctl": _local(),
        "kirod": {"running": False, "version": None, "socket": str(app.socket)},
        "config": None,
        "accounts": [],
        "reach": None,
        "drift": None,
        "errors": None,
        "attention": [],
        "exit": exits.OK,
    }
    try:
        status = app.call(lambda kirod: kirod.request("GET", "/status"))
    except exits.CliError as exc:
        if exc.code != exits.DOWN:
            raise
        _attention(doc, exc.message, exc.hint)
        doc["exit"] = exits.DOWN
        return doc
    version = str(status.get("version"))
    kirod = doc["kirod"]
    kirod.update(
        running=True,
        version=version,
        health=status.get("health"),
        problems=list(status.get("problems") or []),
    )
    if version != __version__:
        _attention(
            doc,
            f"kiroctl {__version__}, but the running kirod is {version}: restart kirod",
            exits.restart_hint(),
        )
    for problem in kirod["problems"]:
        _attention(doc, problem)
    checks = _doctor(app, doc, version)
    if checks is not None:
        kirod.update(python=checks["python"], platform=checks["platform"])
        doc["config"] = checks["config"]
        doc["reach"] = checks["reach"]
        for problem in checks["config"]:
            _attention(doc, f"config: {problem}")
        for item in checks["reach"]:
            if not item["ok"]:
                where = f"{item['target']} {item['region']} ({item['url']})"
                _attention(doc, f"Kiro unreachable: {where}: {item['error']}")
    for account in app.call(lambda kirod: kirod.accounts()):
        advice = ADVICE.get(account.status, "see `kiroctl accounts list` and `kiroctl trace`")
        doc["accounts"].append(
            {
                "id": account.id,
                "label": account.label,
                "status": account.status,
                "reason": account.status_reason,
                "until": account.status_until,
                "last_error": account.last_error,
                "advice": advice,
            }
        )
        if account.status not in CHOSEN:
            why = f" ({account.status_reason})" if account.status_reason else ""
            _attention(doc, f"account {account.label} is {account.status}{why}", advice)
    drift = _optional(app, doc, lambda kirod: kirod.request("GET", drift_path(since)), "drift")
    if drift is not None:
        doc["drift"] = drift
        summary = DriftSummary.of(Drift.from_json(drift).records)
        if summary is not None:
            counted = "1 way" if summary.ways == 1 else f"{summary.ways} ways"
            first = render.moment(summary.since)
            _attention(
                doc,
                f"Kiro answered in {counted} kirod does not know since {first}",
                "file them: `kiroctl doctor --report kirod-report.json` and attach the file",
            )
    stats = app.call(lambda kirod: kirod.request("GET", stats_path(since)))
    doc["errors"] = {"since": since, "requests": stats["requests"], "by_class": stats["errors"]}
    doc["exit"] = exits.DEGRADED if doc["attention"] else exits.OK
    return doc


def _doctor(app: App, doc: dict[str, Any], version: str) -> dict[str, Any] | None:
    """kirod's own checks; None, with the sentence to restart it, from a kirod without them."""
    try:
        answer: dict[str, Any] = LocalClient(app.socket).request(
            "GET", "/doctor", timeout=DOCTOR_TIMEOUT_S
        )
    except ControlError as exc:
        if exits.missing_route(exc):
            older = exits.older(
                __version__, version, "the doctor's checks (settings, Kiro reachability)"
            )
            _attention(doc, older.message, older.hint)
        else:  # the rest of the doctor still says what it can
            refused = exits.refused(exc)
            _attention(doc, f"kirod's checks failed: {refused.message}", refused.hint)
        return None
    except DaemonUnreachable as exc:  # it went away meanwhile
        raise exits.unreachable(exc, app.socket) from None
    return answer


def _say(app: App, text: str, style: str = "") -> None:
    """One line; a leading newline is a blank line before it (a new section)."""
    from rich.text import Text

    if text.startswith("\n"):
        app.out.print()
        text = text[1:]
    app.out.print(Text(render.printable(text), style=style))


def show(app: App, doc: dict[str, Any]) -> None:
    """The document as text: a few lines a section, what needs attention last."""
    here, kirod = doc["kiroctl"], doc["kirod"]
    _say(app, f"kiroctl {here['version']} · Python {here['python']} · {here['platform']}")
    if not kirod["running"]:
        _say(app, f"kirod    not running (socket {kirod['socket']})", "bold red")
    else:
        extra = f" · Python {kirod['python']} · {kirod['platform']}" if "python" in kirod else ""
        _say(app, f"kirod    {kirod['version']}{extra} · {kirod['health']}")
    if doc["config"] is not None:
        _say(app, "\nSettings" + ("" if doc["config"] else ": no problem found"))
        for problem in doc["config"]:
            _say(app, f"  ! {problem}", "yellow")
    if doc["accounts"]:
        _say(app, "\nAccounts")
        for account in doc["accounts"]:
            why = f" ({account['reason']})" if account["reason"] else ""
            _say(app, f"  {account['label']}: {account['status']}{why}")
            if account["advice"]:
                _say(app, f"    → {account['advice']}")
    elif kirod["running"]:
        _say(app, "\nAccounts: none yet (`kiroctl accounts login` or `accounts import`)")
    if doc["reach"] is not None:
        _say(app, "\nKiro from here (checked by kirod)")
        for item in doc["reach"]:
            via = f" via {item['proxy']}" if item["proxy"] else ""
            if item["accounts"] > 1:
                via += f" ({item['accounts']} accounts)"
            head = f"  {item['target']:<4} {item['region']:<14} {item['url']}{via}"
            if item["ok"]:
                _say(app, f"{head}: answered {item['status']} in {item['ms']:.0f} ms")
            else:
                _say(app, f"{head}: {item['failed_at']}: {item['error']}", "red")
    if doc["drift"] is not None:
        records = doc["drift"]["records"]
        counted = "1 record" if len(records) == 1 else f"{len(records)} records"
        _say(app, f"\nDrift since {render.moment(doc['drift']['since'])}: {counted}")
        for record in records:
            facts = ", ".join(f"{name}={value}" for name, value in record["facts"])
            _say(
                app,
                f"  {record['kind']} at {record['where']}: {facts or '-'} "
                f"({record['count']}x, last {render.moment(record['last_seen'])})",
            )
    if doc["errors"] is not None:
        errors = doc["errors"]
        counts = ", ".join(f"{code} {n}" for code, n in errors["by_class"].items())
        _say(
            app,
            f"\nErrors since {render.moment(errors['since'])}: {counts or 'none'} "
            f"(of {errors['requests']} requests)",
        )
    if doc["attention"]:
        _say(app, "\nNeeds attention", "bold yellow")
        for item in doc["attention"]:
            _say(app, f"  ! {item['text']}", "yellow")
            if item["hint"]:
                _say(app, f"    → {item['hint']}")
    else:
        _say(app, "\nNothing needs attention.", "bold green")


@click.command()
@click.argument("account", required=False)
@click.option(
    "--since",
    metavar="WHEN",
    default="7d",
    show_default=True,
    help="Drift records and errors since WHEN: 30m, 12h, 7d, a date.",
)
@click.option(
    "--report",
    "report_file",
    metavar="FILE",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write a redacted JSON bundle to FILE to attach to a bug report.",
)
@click.option(
    "--live",
    is_flag=True,
    help="Check what kirod believes about Kiro on ACCOUNT (else the first usable one) with a "
    "few cheap requests; asks before anything costs credits.",
)
@click.option(
    "--no-effort",
    is_flag=True,
    help="With --live: leave out the second chat, which checks the root effort field.",
)
@yes_option
@json_option
@pass_app
def doctor(
    app: App,
    account: str | None,
    since: str,
    report_file: Path | None,
    live: bool,
    no_effort: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Check kirod, its settings, accounts and Kiro from here, and say what to do.

    Exits 0 when nothing needs attention, 4 when something does and 3 when kirod is down.

    With --live, kirod checks with your account (ACCOUNT, else the first usable one) what it
    believes about Kiro: the catalog, usage limits, profiles, web search, one minimal chat on
    the cheapest model (and, if you agree, a second one for the effort field) and the context
    window. It prints what it will send and the credits it may cost first, and asks; --yes goes
    ahead without asking. It exits 0 when every belief held (some may stay unknown), 4 when Kiro
    contradicted one, 1 when the checks could not run.
    """
    if live:
        live_check.run(
            app, account, yes=yes, effort=not no_effort, as_json=as_json, report=report_file
        )
        return
    if account is not None or no_effort:
        raise exits.CliError(
            exits.USAGE,
            "an account and --no-effort go with --live",
            "run `kiroctl doctor --live [ACCOUNT]`",
        )
    doc = gather(app, parse_since(since))
    if as_json:
        render.print_json(doc)
    else:
        show(app, doc)
    if report_file is not None:  # after the findings: a report that fails leaves them shown
        from kirod.cli.commands.report import write_report

        write_report(app, doc, report_file)
        if not as_json:
            _say(app, f"\nReport written to {report_file}: attach it to your bug report.")
    raise click.exceptions.Exit(doc["exit"])
