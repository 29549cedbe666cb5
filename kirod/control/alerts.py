"""Alerts: webhooks (and desktop notifications) when an account needs a person, and on recovery.

The store tells `Alerts.changed` each committed status change (`AccountStore.observe`); this
module decides which changes alert, keeps whether any account is still usable, and queues the
alerts for one owned task, so that no request ever waits on a webhook. Events:

- `account_suspended`, `account_needs_login`, `account_needs_profile`, `account_disabled`
  (by kirod or by a person: the reason says which), `account_exhausted`;
- `account_flagged`: Kiro flagged suspicious activity and limits the account, which rests for
  hours (`cooling_down`, with `until`); not told again when a trial after the rest finds it
  still flagged;
- `account_recovered`: an account back to `active` from one of those;
- `all_accounts_down`: no account left that serves or will by itself (a cool-down ends alone,
  so it is usable here and never alerts); `accounts_recovered`: one serves again;
- `budget_warning` (80 %) and `budget_spent` (100 %): a key's or an account's credit budget for
  its UTC day or month, once each per period (`kirod.budgets`); the body carries `"budget":
  {"scope", "id", "period", "share", "spent", "limit", "renews_at"}` and `account` null;
- `test`: sent by `kiroctl alerts test`.

A webhook gets `{"event", "account": {"id", "label", "status", "reason", "until"} | null, "at",
"kirod": {"version"}}` as JSON, signed when it has a secret: `X-Kirod-Signature: sha256=<hex>`,
the HMAC-SHA256 of `"<X-Kirod-Timestamp>.<body>"`. Network errors, 5xx and 429 are retried with
exponential back-off; the queue is bounded (the oldest alert goes first); at shutdown what is
queued has `drain_s` to go out.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import hmac
import json
import logging
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp

from kirod import __version__, log
from kirod.accounts.health import is_flagged
from kirod.budgets.budgets import Crossing
from kirod.config import Webhook
from kirod.report_types import AlertDelivery, AlertTest
from kirod.storage.accounts import AccountRecord, StatusChange
from kirod.tasks import TaskOwner

logger = logging.getLogger(__name__)

# Statuses that need a person (or a long wait) before the account serves again.
ALERTING: dict[str, str] = {
    "suspended": "account_suspended",
    "needs_login": "account_needs_login",
    "needs_profile": "account_needs_profile",
    "disabled": "account_disabled",
    "exhausted": "account_exhausted",
}
USABLE = frozenset({"active", "cooling_down"})

QUEUE_SIZE = 100
TIMEOUT_S = 5.0
TRIES = 5
BACKOFF_S = 1.0  # doubled after each failed try: 1, 2, 4, 8 s
DRAIN_S = 2.0
DESKTOP_TIMEOUT_S = 5.0
# AppleScript reads title and text from argv, so a label is never parsed as script.
_OSASCRIPT = (
    "-e",
    "on run argv",
    "-e",
    "display notification (item 2 of argv) with title (item 1 of argv)",
    "-e",
    "end run",
)


@dataclass(frozen=True)
class Alert:
    event: str
    account: dict[str, Any] | None
    at: float
    budget: dict[str, Any] | None = None

    def body(self) -> bytes:
        document = {
            "event": self.event,
            "account": self.account,
            "at": self.at,
            "kirod": {"version": __version__},
        }
        if self.budget is not None:
            document["budget"] = self.budget
        return json.dumps(document, separators=(",", ":")).encode()

    def text(self) -> str:
        """One line for a desktop notification."""
        if self.budget is not None:
            b = self.budget
            return (
                f"{b['scope']} {b['id']}: {b['spent']:g} of {b['limit']:g} credits of its "
                f"{b['period']}'s budget spent ({b['share']})"
            )
        if self.account is None:
            return self.event.replace("_", " ")
        status = str(self.account["status"]).replace("_", " ")
        reason = f": {self.account['reason']}" if self.account.get("reason") else ""
        return f"{self.account['label']} is {status}{reason}"


def signed_headers(hook: Webhook, body: bytes, now: float) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "User-Agent": f"kirod/{__version__}"}
    if hook.secret:
        stamp = str(int(now))
        digest = hmac.new(hook.secret.encode(), stamp.encode() + b"." + body, hashlib.sha256)
        headers["X-Kirod-Timestamp"] = stamp
        headers["X-Kirod-Signature"] = "sha256=" + digest.hexdigest()
    return headers


def _retryable(status: int) -> bool:
    return status >= 500 or status == 429


class Alerts:
    """Decides, queues and delivers alerts; an async context manager owning its session and
    its one delivery task."""

    def __init__(
        self,
        webhooks: Sequence[Webhook],
        *,
        desktop: str | None = None,
        queue_size: int = QUEUE_SIZE,
        timeout_s: float = TIMEOUT_S,
        tries: int = TRIES,
        backoff_s: float = BACKOFF_S,
        drain_s: float = DRAIN_S,
    ) -> None:
        self._webhooks = tuple(webhooks)
        self._desktop = desktop  # "notify-send", "osascript", or None: off
        self._queue: collections.deque[Alert] = collections.deque()
        self._queue_size = queue_size
        self._timeout_s = timeout_s
        self._tries = tries
        self._backoff_s = backoff_s
        self._drain_s = drain_s
        self._wake = asyncio.Event()
        self._closing = False
        self._statuses: dict[str, str] = {}
        self._down = False
        self._tasks = TaskOwner("alerts")
        self._session: aiohttp.ClientSession | None = None
        self._worker: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        return bool(self._webhooks) or self._desktop is not None

    async def __aenter__(self) -> Alerts:
        if self.enabled:
            # A connection per delivery: alerts are rare, so kirod holds no idle socket to a
            # webhook host (and a receiver never sees one linger after its answer).
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True),
                timeout=aiohttp.ClientTimeout(total=self._timeout_s),
            )
            self._worker = self._tasks.spawn(self._deliver_queued(), name="deliver")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Give what is queued `drain_s` to go out, then drop the rest (logged)."""
        self._closing = True
        self._wake.set()
        if self._worker is not None:
            await asyncio.wait({self._worker}, timeout=self._drain_s)
        await self._tasks.close()
        if self._queue:
            log.event(
                logger,
                "alerts_undelivered",
                level=logging.WARNING,
                count=len(self._queue),
                events=sorted({alert.event for alert in self._queue}),
            )
            self._queue.clear()
        if self._session is not None:
            await self._session.close()

    def seed(self, records: Iterable[AccountRecord]) -> None:
        """Learn the accounts' statuses at start, alerting nothing."""
        for record in records:
            self._statuses.setdefault(record.id, record.status)
        self._down = bool(self._statuses) and not self._any_usable()

    def changed(self, change: StatusChange) -> None:
        """The store's observer: called after each committed status change, on the loop."""
        if change.after is None:
            self._statuses.pop(change.account_id, None)
        else:
            self._statuses[change.account_id] = change.after
        account = self._account(change)
        if change.after in ALERTING and change.after != change.before:
            self._put(ALERTING[change.after], account)
        elif change.after == "cooling_down" and is_flagged(change.reason):
            self._put("account_flagged", account)
        elif change.after == "active" and change.before in ALERTING:
            self._put("account_recovered", account)
        if not self._statuses:
            self._down = False  # no account at all is no outage to report
        elif self._down and change.after in USABLE:
            self._down = False
            self._put("accounts_recovered", account)
        elif not self._down and not self._any_usable():
            self._down = True
            self._put("all_accounts_down", None)

    def budget_crossed(self, crossing: Crossing) -> None:
        """A budget passed 80 % or 100 % (`kirod.budgets` tells each once per period)."""
        event = "budget_spent" if crossing.threshold >= 1.0 else "budget_warning"
        self._put(
            event,
            None,
            budget={
                "scope": crossing.scope,
                "id": crossing.id,
                "period": crossing.period,
                "share": f"{crossing.threshold:.0%}",
                "spent": crossing.spent,
                "limit": crossing.limit,
                "renews_at": crossing.renews_at,
            },
        )

    async def test(self) -> AlertTest:
        """Send one `test` alert to every webhook now (one try each); what each answered."""
        alert = Alert("test", None, time.time())
        hooks = asyncio.gather(*(self._try(hook, alert) for hook in self._webhooks))
        if self._desktop is None:
            return AlertTest(webhooks=tuple(await hooks))
        # At once with the webhooks: kiroctl waits for both within one timeout.
        why, results = await asyncio.gather(self._notify_desktop(alert), hooks)
        return AlertTest(webhooks=tuple(results), desktop=why or "shown")

    def _any_usable(self) -> bool:
        return any(status in USABLE for status in self._statuses.values())

    @staticmethod
    def _account(change: StatusChange) -> dict[str, Any]:
        return {
            "id": change.account_id,
            "label": change.label,
            "status": change.after,
            "reason": change.reason,
            "until": change.until,
        }

    def _put(
        self,
        event: str,
        account: dict[str, Any] | None,
        *,
        budget: dict[str, Any] | None = None,
    ) -> None:
        if not self.enabled or self._closing:
            return
        if len(self._queue) >= self._queue_size:
            dropped = self._queue.popleft()
            log.event(
                logger,
                "alert_dropped",
                level=logging.WARNING,
                event=dropped.event,
                queued=len(self._queue),
                why="the alert queue is full",
            )
        self._queue.append(Alert(event, account, time.time(), budget))
        self._wake.set()

    async def _deliver_queued(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            alert = self._queue.popleft()
            if self._desktop is not None:
                await self._notify_desktop(alert)
            await asyncio.gather(*(self._deliver(hook, alert) for hook in self._webhooks))

    async def _deliver(self, hook: Webhook, alert: Alert) -> None:
        """Try `alert` on `hook` up to `tries` times, backing off after each failure."""
        for attempt in range(1, self._tries + 1):
            result = await self._try(hook, alert)
            if result.delivered:
                log.event(
                    logger,
                    "alert_delivered",
                    event=alert.event,
                    webhook=hook.shown,
                    status=result.status,
                    attempts=attempt,
                )
                return
            retry = result.status is None or _retryable(result.status)
            if not retry or attempt == self._tries:
                log.event(
                    logger,
                    "alert_failed",
                    level=logging.WARNING,
                    event=alert.event,
                    webhook=hook.shown,
                    status=result.status,
                    error=result.error,
                    attempts=attempt,
                )
                return
            await asyncio.sleep(self._backoff_s * 2 ** (attempt - 1))

    async def _try(self, hook: Webhook, alert: Alert) -> AlertDelivery:
        assert self._session is not None  # built on entry whenever a webhook is configured
        body = alert.body()
        try:
            async with self._session.post(
                hook.url,
                data=body,
                headers=signed_headers(hook, body, time.time()),
                allow_redirects=False,
            ) as response:
                await response.read()
        except TimeoutError:
            return AlertDelivery(hook.shown, False, None, f"no answer in {self._timeout_s:g} s")
        except (aiohttp.ClientError, OSError) as exc:
            return AlertDelivery(hook.shown, False, None, type(exc).__name__)
        ok = 200 <= response.status < 300
        return AlertDelivery(
            hook.shown, ok, response.status, None if ok else f"HTTP {response.status}"
        )

    async def _notify_desktop(self, alert: Alert) -> str | None:
        """Show `alert` on the desktop; None when shown, else why not (also logged)."""
        program = self._desktop
        assert program is not None
        if program == "osascript":
            args: tuple[str, ...] = (*_OSASCRIPT, "kirod", alert.text())
        else:
            args = ("--app-name=kirod", "--", "kirod", alert.text())
        why: str | None = None
        try:
            process = await asyncio.create_subprocess_exec(
                program,
                *args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            why = f"cannot run {program}: {exc.strerror or type(exc).__name__}"
        else:
            try:
                code = await asyncio.wait_for(process.wait(), DESKTOP_TIMEOUT_S)
                why = None if code == 0 else f"{program} exited with {code}"
            except TimeoutError:
                why = f"{program} did not finish in {DESKTOP_TIMEOUT_S:g} s"
            finally:
                if process.returncode is None:  # timed out, or cancelled at shutdown
                    process.kill()
                    await process.wait()
        if why is not None:
            log.event(logger, "desktop_notification_failed", level=logging.WARNING, why=why)
        return why
