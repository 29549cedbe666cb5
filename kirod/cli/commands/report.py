"""`kiroctl doctor --report FILE`: the bundle a person attaches to a bug report.

It holds the doctor's document, the options (as `GET /config` gives them: secrets already
marked), and the shapes of the last `TRACE_LAST` requests (routes, models, statuses, durations,
error classes, token counts), redacted further: no request or key ids, account labels and ids
replaced by `account-1`, `account-2`, …, no user part in any URL (a proxy's credentials), and the
home directory written `~`. Written with mode 0600 and atomically (a temporary file renamed over
FILE), so a reader never sees half a report.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from kirod.cli import exits
from kirod.cli.context import App

REPORT_FORMAT = 1
TRACE_LAST = 50
# scheme://user[:password]@ : the user part goes, whatever it holds.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s\"]*@")
_ATTEMPT_FIELDS = (
    "outcome", "region", "model", "upstream_status", "upstream_reason", "ended_ms", "frames",
    "failover_reason",
)  # fmt: skip
_REQUEST_FIELDS = (
    "protocol", "model", "stream", "status", "error", "stop_reason", "ttfb_ms", "total_ms",
    "input_tokens", "output_tokens", "credits", "truncations", "continuations", "cuts", "cache",
    "dropped",
)  # fmt: skip


class Redactor:
    """Replaces what names a person, an account or a machine in every string of a document."""

    def __init__(self, accounts: list[tuple[str, str]], home: str) -> None:
        self.names: dict[str, str] = {}
        for number, (account_id, label) in enumerate(accounts, 1):
            self.names[account_id] = self.names[label] = f"account-{number}"
        # Whole names only (a label `work` leaves `network` alone), the longest first, so that a
        # label containing another is replaced whole.
        names = sorted(self.names, key=len, reverse=True)
        self._names = re.compile(
            "|".join(rf"(?<![\w.@-]){re.escape(name)}(?![\w@-]|\.\w)" for name in names)
            if names
            else r"(?!)"
        )
        home = home.rstrip("/")
        self._home = re.compile(rf"{re.escape(home)}(?=/|\b|$)" if len(home) > 1 else r"(?!)")

    def account(self, account_id: str | None) -> str | None:
        return None if account_id is None else self.names.get(account_id, "account-?")

    def text(self, value: str) -> str:
        value = _USERINFO.sub(r"\1", value)
        value = self._names.sub(lambda match: self.names[match[0]], value)
        return self._home.sub("~", value)

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(key)): self(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self(item) for item in value]
        return value


def trace_shapes(trace: dict[str, Any], redact: Redactor) -> list[dict[str, Any]]:
    """Each request as its shape: no request id, no key id, accounts by number."""
    shapes = []
    for request in trace.get("requests", []):
        shape = {name: request.get(name) for name in _REQUEST_FIELDS}
        shape["account"] = redact.account(request.get("account_id"))
        shape["attempts"] = [
            {
                "account": redact.account(attempt.get("account_id")),
                **{name: attempt.get(name) for name in _ATTEMPT_FIELDS},
            }
            for attempt in request.get("attempts", [])
        ]
        shapes.append(shape)
    return shapes


def build_report(app: App, doc: dict[str, Any]) -> dict[str, Any]:
    """The bundle, redacted; what kirod cannot give (it is down) is null."""
    accounts = [(account["id"], account["label"]) for account in doc["accounts"]]
    redact = Redactor(accounts, str(Path.home()))
    config: Any = None
    shapes: list[dict[str, Any]] | None = None
    if doc["kirod"]["running"]:
        config = app.call(lambda kirod: kirod.request("GET", "/config"))
        trace = app.call(lambda kirod: kirod.request("GET", f"/trace?last={TRACE_LAST}"))
        shapes = trace_shapes(trace, redact)
    doctor = dict(doc)
    doctor["accounts"] = [
        {key: value for key, value in account.items() if key not in ("id", "label")}
        | {"account": redact.account(account["id"])}
        for account in doc["accounts"]
    ]
    bundle = {
        "kirod_report": REPORT_FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "doctor": doctor,
        "config": config,
        "trace": shapes,
    }
    redacted: dict[str, Any] = redact(bundle)
    return redacted


def write_report(app: App, doc: dict[str, Any], path: Path) -> None:
    """Write the bundle to `path`, mode 0600, atomically; a failure is a sentence and exit 1."""
    data = (json.dumps(build_report(app, doc), indent=2, ensure_ascii=False) + "\n").encode()
    temporary: str | None = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(handle, "wb") as out:  # mkstemp makes it 0600
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
        temporary = None
    except OSError as exc:
        raise exits.CliError(
            exits.FAILED,
            f"cannot write the report to {path}: {exc.strerror or type(exc).__name__}",
            "give a file in a directory you can write to, on a disk with free space",
        ) from None
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
