"""The console's pages, rendered whole on the server: each reads without JavaScript, and the
page script only adds actions, countdowns and live updates. Every value is escaped here."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from html import escape

from kirod.http.console import budgets, charts
from kirod.http.console.overview import (
    Card,
    Overview,
    card_fields,
    credits_text,
)
from kirod.report_types import (
    TRAFFIC_WINDOWS,
    Account,
    ApiKey,
    Budget,
    Models,
    Spend,
    Trace,
    TraceRequest,
    Traffic,
)

NAV = (
    ("overview", "/console/", "Overview"),
    ("accounts", "/console/accounts", "Accounts"),
    ("traffic", "/console/traffic", "Traffic"),
    ("models", "/console/models", "Models"),
    ("keys", "/console/keys", "Keys"),
    ("add", "/console/add", "Add account"),
)


def layout(title: str, active: str, body: str, *, csrf: str | None) -> str:
    current = ' aria-current="page"'
    links = "".join(
        f'<a href="{href}"{current if name == active else ""}>{label}</a>'
        for name, href, label in NAV
    )
    meta = f'<meta name="kirod-csrf" content="{escape(csrf)}">' if csrf else ""
    signout = (
        '<button type="button" class="quiet" data-act="signout">Sign out</button>' if csrf else ""
    )
    return (
        "<!doctype html>"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{meta}<title>{escape(title)} · kirod</title>"
        '<link rel="stylesheet" href="/console/static/console.css">'
        '<script src="/console/static/console.js" defer></script>'
        "</head><body>"
        '<header class="top"><span class="brand">kirod</span>'
        f'<nav aria-label="Console">{links}</nav>{signout}</header>'
        f'<main id="main"><h1>{escape(title)}</h1>'
        '<p id="notice" role="status" aria-live="polite"></p>'
        f"{body}</main></body></html>"
    )


def signin_page(reason: str) -> str:
    body = (
        f'<p id="signin" data-signin>{escape(reason)}</p>'
        "<p>Open the console with <code>kiroctl console</code>: it prints a one-time link, good "
        "for one minute.</p>"
    )
    return layout("Sign in", "", body, csrf=None)


def when(epoch: float | None, now: float | None = None) -> str:
    """A time as people read it next to a countdown: in 4m 10s, 3h 5m ago."""
    if epoch is None:
        return "—"
    delta = epoch - (time.time() if now is None else now)
    span = abs(delta)
    if span < 60:
        text = f"{span:.0f}s"
    elif span < 3600:
        text = f"{span // 60:.0f}m {span % 60:.0f}s"
    elif span < 86400:
        text = f"{span // 3600:.0f}h {span % 3600 // 60:.0f}m"
    else:
        text = f"{span // 86400:.0f}d {span % 86400 // 3600:.0f}h"
    return f"in {text}" if delta >= 0 else f"{text} ago"


def utc(epoch: float | None) -> str:
    if epoch is None:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def _field(key: str, value: str, *, tag: str = "span") -> str:
    return f'<{tag} data-k="{escape(key)}">{escape(value)}</{tag}>'


def _countdown(key: str, value: str) -> str:
    epoch = float(value) if value else None
    title = f' title="{utc(epoch)}"' if epoch is not None else ""
    return (
        f'<span data-k="{escape(key)}" data-kind="until" data-until="{escape(value)}"{title}>'
        f"{escape(when(epoch))}</span>"
    )


def _rows(pairs: Iterable[tuple[str, str]]) -> str:
    return "".join(f"<dt>{escape(name)}</dt><dd>{html}</dd>" for name, html in pairs)


def _actions(card: Card) -> str:
    account = card.account
    toggle = ("enable", "Enable") if account.status == "disabled" else ("disable", "Disable")
    buttons = [toggle, ("refresh", "Refresh token"), ("probe", "Probe usage"), ("remove", "Remove")]
    label = escape(account.label)
    danger = ' class="danger"'
    return "".join(
        f'<button type="button" data-act="{act}" data-id="{escape(account.id)}" '
        f'aria-label="{text} {label}"{danger if act == "remove" else ""}>{text}</button>'
        for act, text in buttons
    )


def account_card(card: Card) -> str:
    account = card.account
    values = card_fields(card)
    key = f"a.{account.id}."
    status_value = card.pool.status if card.pool else account.status
    rows = _rows(
        [
            ("Id", f"<code>{escape(account.id[:8])}</code>"),
            ("Login", escape(account.auth_kind.replace("_", " "))),
            ("Region", escape(account.region or "—")),
            ("Why", _field(key + "reason", values[key + "reason"])),
            ("Until", _countdown(key + "until", values[key + "until"])),
            ("Slots in use", _field(key + "slots", values[key + "slots"])),
            (
                "Usage",
                f'<progress max="100" value="{values[key + "usage_pct"]}" '
                f'data-k="{escape(key)}usage_pct" aria-label="usage of {escape(account.label)}">'
                f"</progress> {_field(key + 'usage', values[key + 'usage'])}"
                f" · resets {_countdown(key + 'resets', values[key + 'resets'])}",
            ),
            ("Overage", _field(key + "overage", values[key + "overage"])),
            ("Budget", _field(key + "budget", values[key + "budget"])),
            ("Today", _field(key + "today", values[key + "today"])),
            ("Last error", _field(key + "error", values[key + "error"])),
        ]
    )
    return (
        f'<article class="card" data-status="{escape(status_value)}" '
        f'id="account-{escape(account.id)}" aria-labelledby="label-{escape(account.id)}">'
        f'<header><h3 id="label-{escape(account.id)}">{escape(account.label)}</h3>'
        f'<span class="badge">{_field(key + "status", values[key + "status"])}</span></header>'
        f'<dl>{rows}</dl><div class="actions">{_actions(card)}</div></article>'
    )


def overview_page(overview: Overview, csrf: str) -> str:
    values = overview.fields()
    summary = _rows(
        [
            ("Health", _field("health", values["health"])),
            ("Problems", _field("problems", values["problems"])),
            *(
                [("Kiro changes", _field("drift", values["drift"]))]
                if overview.status.drift is not None
                else []
            ),
            ("Readiness", _field("ready", values["ready"])),
            (
                "Accounts",
                f"{_field('t.usable', values['t.usable'])} usable of "
                f"{_field('t.accounts', values['t.accounts'])}",
            ),
            (
                "In flight",
                f"{_field('t.in_flight', values['t.in_flight'])} · queued "
                f"{_field('t.queued', values['t.queued'])}",
            ),
            (
                "Today (UTC)",
                f"{_field('t.requests', values['t.requests'])} requests · "
                f"{_field('t.credits', values['t.credits'])} credits",
            ),
            ("Strategy", escape(overview.strategy.replace("_", " "))),
        ]
    )
    cards = "".join(account_card(card) for card in overview.cards) or (
        '<p>No account yet. <a href="/console/add">Add one</a>.</p>'
    )
    body = (
        f'<section aria-label="Summary" data-live="{escape(",".join(overview.account_ids))}">'
        f'<dl class="summary" data-health="{escape(values["health"])}">{summary}</dl></section>'
        f'<section aria-labelledby="accounts-h"><h2 id="accounts-h">Accounts</h2>'
        f'<div class="cards">{cards}</div></section>'
    )
    return layout("Overview", "overview", body, csrf=csrf)


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], *, caption: str) -> str:
    """`rows` hold HTML already escaped."""
    header = "".join(f'<th scope="col">{escape(name)}</th>' for name in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    body = body or f'<tr><td colspan="{len(head)}" class="none">none</td></tr>'

    return (
        f'<div class="scroll"><table><caption>{escape(caption)}</caption>'
        f"<thead><tr>{header}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f} ms"


def account_names(accounts: Iterable[Mapping[str, object]]) -> dict[str, str]:
    """Account id → its label, with the start of its id where two accounts share a label."""
    listed = [(str(doc["id"]), str(doc["label"])) for doc in accounts]
    taken = Counter(label for _, label in listed)
    return {
        account_id: label if taken[label] == 1 else f"{label} {account_id[:4]}"
        for account_id, label in listed
    }


def recent_table(trace: Trace, names: Mapping[str, str]) -> str:
    rows = [
        (
            f'<a href="/console/requests/{escape(row.request_id)}">{escape(utc(row.at))}</a>',
            escape(row.model),
            escape(row.protocol),
            escape(names.get(row.account_id, row.account_id) if row.account_id else "—"),
            escape(str(row.status) + (f" {row.error}" if row.error else "")),
            escape(_ms(row.ttfb_ms)),
            escape(credits_text(row.credits)),
            escape(str(len(row.attempts))),
        )
        for row in reversed(trace.requests)
    ]
    if not rows:
        return "<p>No request yet.</p>"
    head = ("When", "Model", "API", "Account", "Status", "TTFB", "Credits", "Attempts")
    return _table(head, rows, caption="Recent requests, newest first; a time opens its trace")


def _request(row: TraceRequest) -> str:
    facts = _rows(
        [
            ("When", escape(utc(row.at))),
            ("API", escape(f"{row.protocol}{' (stream)' if row.stream else ''}")),
            ("Model asked", escape(row.model)),
            ("Status", escape(str(row.status) + (f" {row.error}" if row.error else ""))),
            ("Stop reason", escape(row.stop_reason or "—")),
            ("Time to first byte", escape(_ms(row.ttfb_ms))),
            ("Total", escape(_ms(row.total_ms))),
            ("Tokens in / out", escape(f"{row.input_tokens or 0} / {row.output_tokens or 0}")),
            ("Credits", escape(credits_text(row.credits))),
            ("Held by budgets", escape(_reserved(row))),
            (
                "Tool calls cut off",
                escape(f"{row.truncations} ({row.continuations} continued)"),
            ),
            ("Dropped parameters", escape(", ".join(row.dropped) or "none")),
        ]
    )
    attempts = _table(
        ("#", "Account", "Outcome", "Region", "Kiro model", "Kiro status", "Ended", "Why next"),
        (
            (
                str(number),
                escape(item.account_id),
                escape(item.outcome),
                escape(item.region or "—"),
                escape(item.model or "—"),
                escape(
                    " ".join(
                        str(part)
                        for part in (item.upstream_status, item.upstream_reason)
                        if part is not None
                    )
                    or "—"
                ),
                escape(_ms(item.ended_ms)),
                escape(item.failover_reason or "—"),
            )
            for number, item in enumerate(row.attempts, 1)
        ),
        caption="Attempts, in order: each account tried, and why the request moved on",
    )
    return f'<section class="trace"><dl>{facts}</dl>{attempts}</section>'


def _reserved(row: TraceRequest) -> str:
    """What the budgets held for the request before routing; it settled to its credits."""
    if row.reserved_credits is None and row.reserved_tokens is None:
        return "none (no budget applied)"
    parts = []
    if row.reserved_credits is not None:
        parts.append(f"{credits_text(row.reserved_credits)} credits")
    if row.reserved_tokens is not None:
        parts.append(f"{row.reserved_tokens:,} tokens")
    return " · ".join(parts) + ", settled to the credits above"


def request_page(request_id: str, trace: Trace, csrf: str) -> str:
    body = "".join(_request(row) for row in trace.requests) or "<p>No such request in the log.</p>"
    return layout(f"Request {request_id}", "traffic", body, csrf=csrf)


def models_page(models: Models, names: Mapping[str, str], csrf: str) -> str:
    """`names`: account id → the name to show."""
    rows = (
        (
            escape(row.id),
            escape(row.kiro_id),
            escape(f"{row.context_window:,}"),
            escape(
                ", ".join(f"{w.window:,} ({names.get(w.account, w.account)})" for w in row.learned)
                or f"{row.listed_window:,} (listed)"
            ),
            escape(f"{row.max_output_tokens:,}"),
            escape(", ".join(names.get(account, account) for account in row.accounts) or "—"),
        )
        for row in models.models
    )
    table = _table(
        ("Model", "Kiro id", "Context", "Window", "Max output", "Accounts"),
        rows,
        caption="Models served, from the accounts' catalogs"
        if models.source == "accounts"
        else "Models served (built-in list: no account catalog is known yet)",
    )
    aliases = _table(
        ("Name", "Served as"),
        ((escape(name), escape(target)) for name, target in sorted(models.aliases.items())),
        caption="Aliases from the configuration",
    )
    families = _table(
        ("Family word", "Resolves to"),
        ((escape(name), escape(target)) for name, target in sorted(models.families.items())),
        caption=f"Family words (fallback: {models.fallback})",
    )
    substitutions = _table(
        ("Asked", "Served", "Via"),
        ((escape(s.requested), escape(s.served), escape(s.via)) for s in models.substitutions),
        caption="Substitutions since start",
    )
    return layout("Models", "models", table + aliases + families + substitutions, csrf=csrf)


def _spend_section(charted: tuple[list[str], int], *, what: str) -> str:
    drawn, more = charted
    if not drawn:
        return (
            f'<section class="spend" aria-labelledby="spend-h"><h2 id="spend-h">Spend, last '
            f"{budgets.SPEND_DAYS} days</h2><p>No {what} spent credits in the last "
            f"{budgets.SPEND_DAYS} days.</p></section>"
        )
    rest = (
        f"<p>{more} more spent less; <code>kiroctl spend</code> shows any {what}.</p>"
        if more
        else ""
    )
    return (
        f'<section class="spend" aria-labelledby="spend-h"><h2 id="spend-h">Spend, last '
        f"{budgets.SPEND_DAYS} days (UTC)</h2>"
        '<div class="charts">' + "".join(f"<figure>{svg}</figure>" for svg in drawn) + "</div>"
        f"{rest}</section>"
    )


def _budget_cells(budget: Budget) -> tuple[str, str, str, str]:
    return (
        escape(budgets.limits_text(budget)),
        escape(budgets.spent_text(budget.spent_today, budget.held)),
        escape(budgets.spent_text(budget.spent_month, 0.0)),
        escape(budgets.left_text(budget)),
    )


def _limit_value(value: float | None) -> str:
    return "" if value is None else credits_text(value)


def _budget_inputs(day: float | None, month: float | None) -> str:
    return (
        '<label>Credits per day (empty: no limit) <input name="credits_per_day" type="number" '
        f'min="0.000001" step="any" value="{escape(_limit_value(day))}"></label>'
        '<label>Credits per month, UTC (empty: no limit) <input name="credits_per_month" '
        f'type="number" min="0.000001" step="any" value="{escape(_limit_value(month))}"></label>'
    )


def _key_option(key: ApiKey) -> str:
    budget = key.budget
    tokens = "" if budget.tokens_per_minute is None else str(budget.tokens_per_minute)
    return (
        f'<option value="{escape(key.id)}" data-credits_per_day="'
        f'{escape(_limit_value(budget.credits_per_day))}" data-credits_per_month="'
        f'{escape(_limit_value(budget.credits_per_month))}" data-tokens_per_minute="{tokens}">'
        f"{escape(key.name)}</option>"
    )


def _key_budget_form(keys: Sequence[ApiKey]) -> str:
    if not keys:
        return ""
    first = keys[0].budget
    tokens = "" if first.tokens_per_minute is None else str(first.tokens_per_minute)
    return (
        '<form id="key-budget" data-form="key-budget"><h2>Set a key\'s budget</h2>'
        "<p>Replaces all three; they hold from the key's next request.</p>"
        '<label>Key <select name="key" data-fill>'
        + "".join(_key_option(key) for key in keys)
        + "</select></label>"
        + _budget_inputs(first.credits_per_day, first.credits_per_month)
        + "<label>Tokens per minute, input and output (empty: no limit) <input "
        f'name="tokens_per_minute" type="number" min="1" step="1" value="{tokens}"></label>'
        '<button type="submit">Set budget</button></form>'
    )


def keys_page(keys: Sequence[ApiKey], spend: Mapping[str, Spend], csrf: str) -> str:
    """`spend`: key id → its spend per day (keys that spent in the last days)."""
    rows = (
        (
            escape(key.name),
            f"<code>{escape(key.prefix)}…</code>",
            escape(", ".join(key.models) or "any"),
            escape(str(key.rpm) if key.rpm else "unlimited"),
            escape(utc(key.created_at)),
            escape(utc(key.last_used_at) if key.last_used_at else "never"),
            f'<button type="button" class="danger" data-act="revoke" data-id="{escape(key.id)}" '
            f'aria-label="Revoke {escape(key.name)}">Revoke</button>',
        )
        for key in keys
    )
    table = _table(
        ("Name", "Prefix", "Models", "Requests/min", "Created", "Last used", ""),
        rows,
        caption="API keys (the key itself is shown once, when it is created)",
    )
    budget_table = _table(
        ("Key", "Budget", "Spent today", "Spent this month", "Left"),
        ((escape(key.name), *_budget_cells(key.budget)) for key in keys),
        caption="Credits in UTC days; a request in flight holds its estimate until it ends",
    )
    form = (
        '<form id="new-key" data-form="key"><h2>New key</h2>'
        '<label>Name <input name="name" required maxlength="64"></label>'
        '<label>Models (comma-separated patterns, empty: any) <input name="models" '
        'placeholder="claude-sonnet-*"></label>'
        '<label>Requests per minute (empty: unlimited) <input name="rpm" type="number" min="1">'
        "</label>"
        + _budget_inputs(None, None)
        + "<label>Tokens per minute, input and output (empty: no limit) <input "
        'name="tokens_per_minute" type="number" min="1" step="1"></label>'
        '<button type="submit">Create key</button></form>'
        '<section id="secret" hidden><h2>Your new key</h2><p>Copy it now: it is not shown '
        'again.</p><p><code id="secret-value"></code></p></section>'
    )
    names = {key.id: key.name for key in keys}
    charted = budgets.spend_charts(spend, names, {key.id: key.budget for key in keys})
    body = (
        table
        + '<section id="key-budgets" aria-labelledby="key-budgets-h">'
        + '<h2 id="key-budgets-h">Budgets</h2>'
        + budget_table
        + "</section>"
        + _spend_section(charted, what="key")
        + form
        + _key_budget_form(keys)
    )
    return layout("Keys", "keys", body, csrf=csrf)


def _account_option(account: Account, name: str) -> str:
    budget = account.budget
    return (
        f'<option value="{escape(account.id)}" data-credits_per_day="'
        f'{escape(_limit_value(budget.credits_per_day))}" data-credits_per_month="'
        f'{escape(_limit_value(budget.credits_per_month))}" data-allow_overage="'
        f'{"true" if account.allow_overage else ""}">{escape(name)}</option>'
    )


def _account_budget_form(accounts: Sequence[Account], names: Mapping[str, str]) -> str:
    if not accounts:
        return ""
    first = accounts[0]
    checked = " checked" if first.allow_overage else ""
    return (
        '<form id="account-budget" data-form="account-budget"><h2>Set an account\'s budget</h2>'
        "<p>Past a ceiling the account rests until its day or month turns (UTC), and the pool "
        "serves from the others. Replaces all three.</p>"
        '<label>Account <select name="account" data-fill>'
        + "".join(_account_option(account, names[account.id]) for account in accounts)
        + "</select></label>"
        + _budget_inputs(first.budget.credits_per_day, first.budget.credits_per_month)
        + '<label class="check"><input name="allow_overage" type="checkbox"'
        f"{checked}> Allow overage: once its plan credits are used up, kirod may spend into "
        "overage where Kiro's overage switch is on (billed to the account)</label>"
        '<button type="submit">Set budget</button></form>'
    )


def accounts_page(accounts: Sequence[Account], spend: Mapping[str, Spend], csrf: str) -> str:
    """`spend`: account id → its spend per day (accounts that spent in the last days)."""
    names = account_names(account.document for account in accounts)
    rows = (
        (
            escape(names[account.id]),
            escape(
                account.status.replace("_", " ")
                + (f": {account.status_reason}" if account.status_reason else "")
            ),
            escape(budgets.overage_text(account)),
            *_budget_cells(account.budget),
        )
        for account in accounts
    )
    table = _table(
        ("Account", "State", "Overage", "Budget", "Spent today", "Spent this month", "Left"),
        rows,
        caption="Accounts: credit ceilings and spend in UTC days, and whether kirod would bill "
        "overage",
    )
    if not accounts:
        table += '<p>No account yet. <a href="/console/add">Add one</a>.</p>'
    budgets_of = {account.id: account.budget for account in accounts}
    charted = budgets.spend_charts(spend, names, budgets_of)
    body = table + _spend_section(charted, what="account") + _account_budget_form(accounts, names)
    return layout("Accounts", "accounts", body, csrf=csrf)


def add_page(csrf: str) -> str:
    login = (
        '<form id="login" data-form="login"><h2>Log in with AWS Builder ID or IAM Identity '
        "Center</h2><p>Leave both empty for Builder ID.</p>"
        '<label>Start URL <input name="start_url" type="url" '
        'placeholder="https://d-xxxxxxxxxx.awsapps.com/start"></label>'
        '<label>Region <input name="region" placeholder="us-east-1"></label>'
        '<button type="submit">Start login</button></form>'
        '<section id="device" hidden aria-live="polite"><p>Open <a id="device-link" '
        'target="_blank" rel="noopener noreferrer"></a> and enter the code '
        '<code id="device-code"></code>.</p><p id="device-state">Waiting for approval…</p>'
        '<button type="button" data-act="cancel-login">Cancel</button></section>'
    )
    upload = (
        '<form id="import" data-form="import"><h2>Import a token file</h2>'
        "<p>A Kiro IDE or kiro-cli token file (e.g. "
        "<code>~/.aws/sso/cache/kiro-auth-token.json</code>).</p>"
        '<label>File <input name="file" type="file" required></label>'
        '<label>Label (optional) <input name="label" maxlength="64"></label>'
        '<button type="submit">Import</button></form>'
    )
    return layout("Add account", "add", login + upload, csrf=csrf)


WINDOW_NAMES = {"hour": "Last hour", "day": "Last day", "month": "Last 30 days"}


def _per(bucket_s: int) -> str:
    return {60: "minute", 3600: "hour", 86400: "day"}.get(bucket_s, f"{bucket_s} s")


def traffic_page(traffic: Traffic, recent: Trace, labels: Mapping[str, str], csrf: str) -> str:
    """`labels`: account id → label, for the credits chart's legend."""
    current = ' aria-current="page"'
    windows = "".join(
        f'<a href="/console/traffic?window={name}"{current if name == traffic.window else ""}>'
        f"{text}</a>"
        for name, text in WINDOW_NAMES.items()
        if name in TRAFFIC_WINDOWS
    )
    span = traffic.bucket_s
    buckets = traffic.buckets
    per = _per(span)
    days: dict[str, dict[str, float]] = {}
    for row in traffic.credits_by_day:
        name = labels.get(row.account_id, row.account_id)
        days.setdefault(row.day[5:], {})[name] = row.credits
    figures = (
        charts.bar_chart(
            f"Requests per {per}",
            [(charts.time_label(b.start, span_s=span), float(b.requests)) for b in buckets],
            unit="requests",
        ),
        charts.lines_chart(
            "Time to first byte",
            {
                "p50": [(b.start, b.ttfb_p50_ms) for b in buckets],
                "p95": [(b.start, b.ttfb_p95_ms) for b in buckets],
            },
            unit="ms",
        ),
        charts.bar_chart(
            "Errors by class",
            sorted(
                ((code, float(count)) for code, count in traffic.errors.items()),
                key=lambda item: -item[1],
            ),
            unit="requests",
            empty="no errors in this window",
        ),
        charts.stacked_bars("Credits per day, by account", list(days.items()), unit="credits"),
    )
    body = (
        f'<nav class="windows" aria-label="Window">{windows}</nav>'
        '<div class="charts">'
        + "".join(f"<figure>{svg}</figure>" for svg in figures)
        + "</div><h2>Recent requests</h2>"
        + recent_table(recent, labels)
    )
    return layout("Traffic", "traffic", body, csrf=csrf)
