"""kiroctl's exit codes, and the failure each maps to with a hint on what to do next.

  0  success; `status`: healthy
  1  kirod refused the request or reported an error, or a local file could not be used
  2  usage error (bad arguments, an ambiguous account or key)
  3  kirod is not running or cannot be reached; `status`: down
  4  `status`: degraded (kirod serves, but something needs attention); `doctor --live`: Kiro
     contradicted one of kirod's beliefs
  5  no such account, key or login
  6  a login did not complete: denied, expired or cancelled
130  interrupted (Ctrl-C, SIGTERM, SIGHUP)
141  the reader of the output went away (EPIPE, as a shell reports SIGPIPE)
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kirod.paths import LAUNCHD_LABEL, SYSTEMD_UNIT

if TYPE_CHECKING:
    from kirod.localapi.client import ControlError, DaemonUnreachable

OK = 0
FAILED = 1
USAGE = 2
DOWN = 3
DEGRADED = 4
NOT_FOUND = 5
LOGIN_FAILED = 6
INTERRUPTED = 130
BROKEN_PIPE = 141  # 128 + SIGPIPE

# Errors writing the output that end a command with a message instead of a traceback.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG})


class CliError(Exception):
    """A failure to report on stderr with `hint`, exiting with `code`."""

    def __init__(self, code: int, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


def start_hint(platform: str = sys.platform) -> str:
    """How to start kirod here: the service manager's command, or the foreground daemon."""
    if platform == "darwin":
        return (
            f"start it with `launchctl kickstart gui/{os.getuid()}/{LAUNCHD_LABEL}` "
            "(set that up once with `kiroctl service install`), or run `kirod`"
        )
    if platform.startswith("linux") and Path("/run/systemd/system").is_dir():
        return (
            f"start it with `systemctl --user start {SYSTEMD_UNIT}` "
            "(set that up once with `kiroctl service install`), or run `kirod`"
        )
    return "start it with `kirod` (it runs in the foreground; add `&` to keep your shell)"


def restart_hint(platform: str = sys.platform) -> str:
    """How to restart kirod here, so that the kirod installed now is the one that runs."""
    if platform == "darwin":
        return (
            f"restart it with `launchctl kickstart -k gui/{os.getuid()}/{LAUNCHD_LABEL}`, or stop "
            "it (`kiroctl shutdown`) and run `kirod`"
        )
    if platform.startswith("linux") and Path("/run/systemd/system").is_dir():
        return (
            f"restart it with `systemctl --user restart {SYSTEMD_UNIT}`, or stop it "
            "(`kiroctl shutdown`) and run `kirod`"
        )
    return "stop it with `kiroctl shutdown` and start it again with `kirod`"


# What a daemon without a control route answers (kirod.localapi.server's guard).
MISSING_ROUTE = "no such control route"


def missing_route(exc: ControlError) -> bool:
    """Whether kirod answered that it has no such route: a kirod older than this kiroctl."""
    return exc.status == 404 and exc.code == "not_found" and exc.message.startswith(MISSING_ROUTE)


def older(kiroctl: str, kirod: str | None, what: str) -> CliError:
    """A kirod without `what`, which this kiroctl has: the running kirod is an older release."""
    running = f"this kirod (version {kirod})" if kirod else "the running kirod"
    if kirod == kiroctl:  # a build of the same version from before the route
        sentence = f"{running} does not have {what}, which kiroctl {kiroctl} uses"
    else:
        sentence = f"{running} is older than kiroctl {kiroctl} and does not have {what}"
    return CliError(
        FAILED,
        sentence,
        f"restart kirod to run the installed version; {restart_hint()}",
    )


def mismatch(kiroctl: str, api: int, kirod: str | None, kirod_api: int) -> CliError | None:
    """kiroctl and a kirod of another control API revision: which is older and what to run (None
    when both speak the same revision, whatever their versions: nothing kiroctl does differs)."""
    if kirod_api == api:
        return None
    if kirod_api < api:
        return older(kiroctl, kirod, f"revision {api} of the control API (it has {kirod_api})")
    running = f"this kirod (version {kirod})" if kirod else "the running kirod"
    return CliError(
        FAILED,
        f"{running} is newer than kiroctl {kiroctl} and speaks revision {kirod_api} of the "
        f"control API, which kiroctl knows up to {api}",
        "run the kiroctl installed with that kirod, or upgrade this one (`pipx upgrade kirod` or "
        f"`pip install -U kirod`); if you went back to {kiroctl} on purpose, {restart_hint()}",
    )


def unreadable(kiroctl: str, exc: Exception, *, told: bool = False) -> CliError:
    """An answer of kirod that this kiroctl cannot read: what was wrong with it. `told`: kiroctl
    already said that kirod is of another release (`mismatch`); else it is of the same one."""
    what = f"the field {exc} is missing" if isinstance(exc, KeyError) else "a field is malformed"
    hint = (
        "kirod and kiroctl are of different releases, as said above"
        if told
        else "kiroctl and kirod speak the same control API revision, so this is a bug: please "
        "report it with the command you ran"
    )
    return CliError(FAILED, f"kiroctl {kiroctl} cannot read kirod's answer: {what}", hint)


def log_hint(platform: str = sys.platform) -> str:
    if platform == "darwin":
        return "see ~/Library/Logs/kirod.log"
    return f"see `journalctl --user -u {SYSTEMD_UNIT}`"


def unreachable(exc: DaemonUnreachable, socket: Path) -> CliError:
    cause = exc.__cause__
    if isinstance(cause, PermissionError):
        return CliError(
            DOWN,
            f"cannot use the control socket {socket}: permission denied",
            "the socket belongs to the user running kirod; run kiroctl as that user",
        )
    if isinstance(cause, ConnectionRefusedError):
        return CliError(
            DOWN,
            f"kirod is not answering on {socket} (the socket is stale)",
            f"kirod may have crashed ({log_hint()}); {start_hint()}",
        )
    if isinstance(cause, TimeoutError) or getattr(cause, "errno", None) == errno.ETIMEDOUT:
        return CliError(
            DOWN, f"kirod did not answer on {socket} in time", f"kirod may be hung; {log_hint()}"
        )
    if isinstance(cause, FileNotFoundError):
        return CliError(
            DOWN,
            f"kirod is not running (no control socket at {socket})",
            f"{start_hint()}; if it runs with another socket_path, pass --socket or set "
            "KIROD_SOCKET_PATH",
        )
    return CliError(DOWN, str(exc), start_hint())


def refused(exc: ControlError) -> CliError:
    """An error document from kirod, with a hint for the codes a user can act on."""
    hints = {
        "invalid_import": "give Kiro IDE's kiro-auth-token.json, kiro-cli's data.sqlite3, "
        "opencode-kiro-auth's kiro.db or kiro-accounts.json, or a ksk_ API key",
        "refresh_failed": "if the refresh token was rejected, sign in again with "
        "`kiroctl accounts login` or re-import the account",
        "upstream_failed": "Kiro did not answer; check your network or proxy_url and retry",
        "login_failed": "check your network (or proxy_url) and the start URL and region",
        "name_taken": "choose another name, or revoke the old key with `kiroctl keys revoke`",
        "invalid_proxy": "give http://, https://, socks5:// or socks5h://[user:pass@]host:port, "
        "`direct` or `none`",
        "overage_unavailable": "overage needs a paid Kiro plan; `kiroctl accounts list` shows "
        "n/a under OVERAGE for the accounts that cannot use it",
    }
    code = NOT_FOUND if exc.status == 404 else FAILED
    return CliError(code, str(exc), hints.get(exc.code))
