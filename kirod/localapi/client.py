"""A stdlib HTTP client for the control API over its Unix socket (kiroctl's only transport).

It imports nothing of the server stack, so `kiroctl` starts fast. For the same reason it speaks
HTTP on a plain socket rather than through `http.client`, which imports `email` and `ssl` (some
20 ms of kiroctl's start-up): one HTTP/1.0 request per connection, so that the daemon's answer
has a Content-Length or ends with the connection, never a chunked body.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from kirod.errors import ControlError, DaemonUnreachable
from kirod.localapi.wire import API_HEADER, API_REVISION, PREFIX, VERSION_HEADER
from kirod.report_types import (
    Account,
    AlertTest,
    ApiKey,
    CacheStats,
    Config,
    ConsoleLink,
    CreatedKey,
    DatabaseBackup,
    DatabaseCheck,
    Doctor,
    ExtensionList,
    Imported,
    Login,
    LogLines,
    Models,
    Pool,
    Spend,
    Stats,
    Status,
    Trace,
    Traffic,
)
from kirod.report_types.live import LivePlan, LiveReport

# The errors live in kirod.errors and the revision in kirod.localapi.wire; kiroctl takes them here.
__all__ = ["API_REVISION", "ControlError", "DaemonRelease", "DaemonUnreachable", "LocalClient"]

DEFAULT_TIMEOUT_S = 10.0
UPSTREAM_TIMEOUT_S = 120.0  # a refresh or a usage probe waits on Kiro
MODELS_TIMEOUT_S = 60.0  # the first listing asks each account's catalog from Kiro
DOCTOR_TIMEOUT_S = 30.0  # the reachability checks are bounded to a few seconds
LIVE_TIMEOUT_S = 180.0  # the live checks end within 150 s (kirod.control.live_check)
# The full check and a backup read the whole file: seconds at the sizes retention allows.
DATABASE_TIMEOUT_S = 600.0
MAX_LINE = 65536  # the longest status or header line taken, as in http.client
MAX_HEADERS = 100


class _NotHttp(Exception):
    """What answered on the socket is not an HTTP answer kiroctl can read."""


@dataclass(frozen=True)
class DaemonRelease:
    """What the daemon's last answer said of itself (docs/RELEASING.md §4)."""

    version: str | None  # None: a kirod that does not state it in its headers
    api: int  # its control API's revision; 0: a kirod that does not state it (before 0.47.0)

    @classmethod
    def of(cls, headers: dict[bytes, bytes]) -> DaemonRelease:
        version = headers.get(VERSION_HEADER.lower().encode())
        api = headers.get(API_HEADER.lower().encode(), b"0")
        return cls(
            version.decode("ascii", "replace") if version else None,
            int(api) if api.isdigit() else 0,
        )


def _message(method: str, target: str, payload: bytes | None) -> bytes:
    if any(char <= " " or char == "\x7f" for char in target):
        raise ValueError(
            f"a request target cannot contain spaces or control characters: {target!r}"
        )
    head = [f"{method} {target} HTTP/1.0", "Host: localhost", "Accept-Encoding: identity"]
    if payload is not None:
        head.append("Content-Type: application/json")
    if payload is not None or method in ("POST", "PUT", "PATCH"):
        head.append(f"Content-Length: {len(payload or b'')}")
    return "\r\n".join([*head, "", ""]).encode("ascii") + (payload or b"")


def _line(answer: BinaryIO) -> bytes:
    line = answer.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise _NotHttp("an answer line is too long")
    return line


def _read_answer(answer: BinaryIO) -> tuple[int, dict[bytes, bytes], bytes]:
    """The status, headers (their names in lower case) and body of the answer on `answer`."""
    status_line = _line(answer)
    if not status_line:  # the daemon went away: an OSError, worded as http.client words it
        raise ConnectionResetError("Remote end closed connection without response")
    version, _, rest = status_line.partition(b" ")
    code = rest[:3]
    if not version.startswith(b"HTTP/") or not code.isdigit():
        raise _NotHttp(f"not an HTTP status line: {status_line[:80]!r}")
    headers: dict[bytes, bytes] = {}
    for _ in range(MAX_HEADERS + 1):  # the headers, then the empty line ending them
        line = _line(answer)
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    else:
        raise _NotHttp(f"more than {MAX_HEADERS} headers")
    length = headers.get(b"content-length")
    if length is None:
        return int(code), headers, answer.read()
    if not length.isdigit():
        raise _NotHttp(f"bad Content-Length: {length[:80]!r}")
    body = answer.read(int(length))
    if len(body) < int(length):
        raise _NotHttp(f"the answer ended after {len(body)} of {int(length)} bytes")
    return int(code), headers, body


def _exchange(
    socket_path: Path, timeout: float, message: bytes
) -> tuple[int, dict[bytes, bytes], bytes]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(socket_path))
        sock.sendall(message)
        with sock.makefile("rb") as answer:
            return _read_answer(answer)


def trace_path(
    request_id: str | None = None, *, last: int | None = None, after: int | None = None
) -> str:
    """The route of the operation log's rows of `request_id`, the `last` N, or after a cursor."""
    from urllib.parse import urlencode

    query = {"request_id": request_id, "last": last, "after": after}
    given = {key: value for key, value in query.items() if value is not None}
    return "/trace" + (f"?{urlencode(given)}" if given else "")


def logs_path(after: int | None = None, *, lines: int | None = None) -> str:
    """The route of the daemon log's lines after line `after`, or of its newest `lines`."""
    if after is not None:
        return f"/logs?after={after}"
    return "/logs" if lines is None else f"/logs?lines={lines}"


def stats_path(since: float | None) -> str:
    """The route of the operation log's summary from `since` (None: all it keeps)."""
    return "/stats" if since is None else f"/stats?since={since:.3f}"


def drift_path(since: float | None) -> str:
    """The route of the drift records last seen from `since` (None: the daemon's week)."""
    return "/drift" if since is None else f"/drift?since={since:.3f}"


def traffic_path(window: str) -> str:
    """The route of the operation log in buckets over `window` (hour, day or month)."""
    from urllib.parse import quote  # lazily, as in trace_path: kiroctl's start-up

    return f"/traffic?window={quote(window, safe='')}"


class LocalClient:
    def __init__(self, socket_path: Path, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.release: DaemonRelease | None = None  # as its last answer stated it

    def request(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> Any:
        """Call `PREFIX + path`; returns the decoded JSON body or raises `ControlError`.

        `timeout` overrides the client's for calls that wait on purpose (a login poll) or on Kiro
        (a refresh, a usage probe).
        """
        payload = None if body is None else json.dumps(body).encode()
        message = _message(method, PREFIX + path, payload)
        try:
            status, headers, raw = _exchange(self.socket_path, timeout or self.timeout, message)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonUnreachable(
                f"kirod is not running (no answer on {self.socket_path})"
            ) from exc
        except (OSError, _NotHttp) as exc:
            raise DaemonUnreachable(f"cannot reach kirod on {self.socket_path}: {exc}") from exc
        self.release = DaemonRelease.of(headers)
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            raise ControlError(status, "bad_response", "kirod sent a non-JSON answer") from None
        if status >= 400:
            error = (data or {}).get("error", {}) if isinstance(data, dict) else {}
            raise ControlError(
                status,
                str(error.get("code", "error")),
                str(error.get("message", f"HTTP {status}")),
            )
        return data

    # One typed method per control route, named after it; each returns the report type of its
    # answer. The routes that answer only an acknowledgement return None.

    def status(self) -> Status:
        return Status.from_json(self.request("GET", "/status"))

    def config(self) -> Config:
        return Config.from_json(self.request("GET", "/config"))

    def stats(self, since: float | None = None) -> Stats:
        return Stats.from_json(self.request("GET", stats_path(since)))

    def traffic(self, window: str = "hour") -> Traffic:
        """The operation log over the last `hour`, `day` or `month`, in buckets."""
        return Traffic.from_json(self.request("GET", traffic_path(window)))

    def doctor(self) -> Doctor:
        """The daemon's checks: settings, and each Kiro endpoint in use (a few seconds)."""
        return Doctor.from_json(self.request("GET", "/doctor", timeout=DOCTOR_TIMEOUT_S))

    def pool(self) -> Pool:
        return Pool.from_json(self.request("GET", "/pool"))

    def trace(
        self, request_id: str | None = None, *, last: int | None = None, after: int | None = None
    ) -> Trace:
        """The rows of `request_id`; else those after cursor `after`; else the `last` ones."""
        return Trace.from_json(self.request("GET", trace_path(request_id, last=last, after=after)))

    def logs(self, after: int | None = None, *, lines: int | None = None) -> LogLines:
        """The daemon log's lines after line `after`; else its newest `lines` (default 100)."""
        return LogLines.from_json(self.request("GET", logs_path(after, lines=lines)))

    def models(self) -> Models:
        return Models.from_json(self.request("GET", "/models", timeout=MODELS_TIMEOUT_S))

    def shutdown(self) -> None:
        self.request("POST", "/shutdown")

    def console_link(self) -> ConsoleLink:
        return ConsoleLink.from_json(self.request("POST", "/console"))

    def alerts_test(self) -> AlertTest:
        """Send one test alert to every webhook; waits up to their timeout (5 s)."""
        return AlertTest.from_json(self.request("POST", "/alerts/test"))

    def extensions(self) -> ExtensionList:
        return ExtensionList.from_json(self.request("GET", "/extensions"))

    def accounts(self) -> list[Account]:
        return [Account.from_json(item) for item in self.request("GET", "/accounts")["accounts"]]

    def account(self, account_id: str) -> Account:
        return Account.from_json(self.request("GET", f"/accounts/{account_id}"))

    def import_accounts(
        self,
        *,
        content: str | None = None,
        companion: str | None = None,
        api_key: str | None = None,
        label: str | None = None,
    ) -> list[Imported]:
        """Import a file (`content`, base64, with an IdC `companion`) or a Kiro `api_key`."""
        fields = (
            ("content_b64", content),
            ("companion_b64", companion),
            ("api_key", api_key),
            ("label", label),
        )
        body = {key: value for key, value in fields if value is not None}
        answer = self.request("POST", "/accounts/import", body)
        return [Imported.from_json(item) for item in answer["accounts"]]

    def remove_account(self, account_id: str) -> None:
        self.request("DELETE", f"/accounts/{account_id}")

    def enable_account(self, account_id: str) -> Account:
        return self._act(account_id, "enable")

    def disable_account(self, account_id: str) -> Account:
        return self._act(account_id, "disable")

    def set_account_proxy(self, account_id: str, proxy_url: str | None) -> Account:
        """Route the account through `proxy_url`: a proxy URL, `direct` (no proxy even when a
        global one is set), or None (the global `proxy_url` setting)."""
        answer = self.request("POST", f"/accounts/{account_id}/proxy", {"proxy_url": proxy_url})
        return Account.from_json(answer)

    def set_account_profile(self, account_id: str, profile_arn: str) -> Account:
        """Make the account use the Kiro profile `profile_arn` (and that profile's region)."""
        answer = self.request(
            "POST", f"/accounts/{account_id}/profile", {"profile_arn": profile_arn}
        )
        return Account.from_json(answer)

    def refresh_account(self, account_id: str) -> Account:
        return self._act(account_id, "refresh", UPSTREAM_TIMEOUT_S)

    def probe_account(self, account_id: str) -> Account:
        return self._act(account_id, "probe", UPSTREAM_TIMEOUT_S)

    def set_account_overage(self, account_id: str, enabled: bool) -> Account:
        """Turn the account's overage on or off at Kiro; the account as probed right after."""
        answer = self.request(
            "POST",
            f"/accounts/{account_id}/overage",
            {"enabled": enabled},
            timeout=UPSTREAM_TIMEOUT_S,
        )
        return Account.from_json(answer)

    def _act(self, account_id: str, action: str, timeout: float | None = None) -> Account:
        answer = self.request("POST", f"/accounts/{account_id}/{action}", timeout=timeout)
        return Account.from_json(answer)

    def start_login(
        self,
        *,
        start_url: str | None = None,
        region: str | None = None,
        proxy_url: str | None = None,
    ) -> Login:
        """A device-code login with IAM Identity Center at `start_url`, else AWS Builder ID;
        `proxy_url` (a URL or `direct`) is the new account's own proxy, the login's too."""
        target = (("start_url", start_url), ("region", region), ("proxy_url", proxy_url))
        body = {key: value for key, value in target if value}
        return Login.from_json(self.request("POST", "/logins", body))

    def login(self, login_id: str, *, wait_s: float = 0.0) -> Login:
        """The login now, or as soon as it ends within `wait_s` (the daemon holds the answer)."""
        if not wait_s:
            return Login.from_json(self.request("GET", f"/logins/{login_id}"))
        answer = self.request("GET", f"/logins/{login_id}?wait={wait_s:g}", timeout=wait_s + 10)
        return Login.from_json(answer)

    def cancel_login(self, login_id: str, *, timeout: float | None = None) -> Login:
        return Login.from_json(self.request("DELETE", f"/logins/{login_id}", timeout=timeout))

    def keys(self) -> list[ApiKey]:
        return [ApiKey.from_json(item) for item in self.request("GET", "/keys")["keys"]]

    def create_key(
        self,
        name: str,
        *,
        models: list[str] | tuple[str, ...] = (),
        rpm: int | None = None,
        cache: bool = False,
        credits_per_day: float | None = None,
        credits_per_month: float | None = None,
        tokens_per_minute: int | None = None,
    ) -> CreatedKey:
        """A key for the model patterns `models` (empty: any) and `rpm` requests a minute;
        `cache`: its requests may ask for cached answers; the budgets (None: none)."""
        body: dict[str, Any] = {"name": name, "models": list(models)}
        if rpm is not None:
            body["rpm"] = rpm
        if cache:
            body["cache"] = True
        budgets = {
            "credits_per_day": credits_per_day,
            "credits_per_month": credits_per_month,
            "tokens_per_minute": tokens_per_minute,
        }
        body.update({name: value for name, value in budgets.items() if value is not None})
        return CreatedKey.from_json(self.request("POST", "/keys", body))

    def set_key_budget(
        self,
        key_id: str,
        *,
        credits_per_day: float | None,
        credits_per_month: float | None,
        tokens_per_minute: int | None,
    ) -> ApiKey:
        """Replace the key's budgets (None: no limit on that)."""
        body = {
            "credits_per_day": credits_per_day,
            "credits_per_month": credits_per_month,
            "tokens_per_minute": tokens_per_minute,
        }
        return ApiKey.from_json(self.request("PUT", f"/keys/{key_id}/budget", body))

    def set_account_budget(
        self,
        account_id: str,
        *,
        credits_per_day: float | None,
        credits_per_month: float | None,
        allow_overage: bool,
    ) -> Account:
        """Replace the account's credit ceilings and its overage permission."""
        body = {
            "credits_per_day": credits_per_day,
            "credits_per_month": credits_per_month,
            "allow_overage": allow_overage,
        }
        return Account.from_json(self.request("PUT", f"/accounts/{account_id}/budget", body))

    def spend(self, scope: str, id_: str, *, days: int = 30) -> Spend:
        """A key's or account's spend per UTC day over the last `days` days."""
        from urllib.parse import urlencode  # kiroctl's start stays light: only here and above

        query = urlencode({"scope": scope, "id": id_, "days": days})
        return Spend.from_json(self.request("GET", f"/spend?{query}"))

    def doctor_live_plan(self, account_id: str | None) -> LivePlan:
        """What `kiroctl doctor --live` would send on the account (None: the first usable one),
        and what it may cost; nothing that costs credits is sent."""
        answer = self.request(
            "POST", "/doctor/live", {"account": account_id}, timeout=UPSTREAM_TIMEOUT_S
        )
        return LivePlan.from_json(answer["plan"])

    def doctor_live(self, plan: LivePlan, *, effort: bool = True) -> LiveReport:
        """Run the checks of `plan` as shown (`effort` False: without the effort chat)."""
        body = {
            "account": plan.account_id,
            "confirm": True,
            "model": plan.model,
            "effort_model": plan.effort_model,
            "effort": effort,
        }
        answer = self.request("POST", "/doctor/live", body, timeout=LIVE_TIMEOUT_S)
        return LiveReport.from_json(answer)

    def cache_stats(self) -> CacheStats:
        return CacheStats.from_json(self.request("GET", "/cache"))

    def check_database(self) -> DatabaseCheck:
        """SQLite's full integrity check; it reads the whole file, so it may take a while."""
        return DatabaseCheck.from_json(self.request("GET", "/db/check", timeout=DATABASE_TIMEOUT_S))

    def backup_database(self, path: str) -> DatabaseBackup:
        body = self.request("POST", "/db/backup", {"path": path}, timeout=DATABASE_TIMEOUT_S)
        return DatabaseBackup.from_json(body)

    def clear_cache(self) -> int:
        """Empty the response cache; the number of answers dropped."""
        return int(self.request("DELETE", "/cache")["cleared"])

    def revoke_key(self, key_id: str) -> None:
        self.request("DELETE", f"/keys/{key_id}")
