"""`kill -9` at random points while kirod refreshes tokens, rotates refresh tokens and imports
accounts (50 trials in all; 500 with KIROD_RELIABILITY_FULL=1).

After every kill the database opens and passes its integrity check, the restarted daemon lists
every account it ever acknowledged, and each account holds the newest refresh token the fake
issued, except in the one window no local store can close: the fake rotated the token (and revoked
the old one) but kirod died before committing the new one. Those kills are counted; the account
then goes to `needs_login` with a reason that says what to do, and the others keep serving.

The lock's own crash cases (deleted or replaced lock file, two daemons started at once) are in
tests/integration/test_lifecycle.py.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import json
import random
import shutil
import sqlite3
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kirod.localapi.client import ControlError, DaemonUnreachable
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, ThreadedFake, TokenSet
from tests.reliability.figures import FIGURES
from tests.reliability.reliability_env import (
    FULL,
    PATHS,
    Transcript,
    import_account,
    post,
    request_body,
    secrets_of,
    start,
    wait_until,
)

TRIALS = {"refresh": 17, "rotation": 17, "import": 16}  # 50 kills in `make test`
SCALE = 10 if FULL else 1
ACCOUNTS = 3
ACTIVITY_S = 0.25  # the kill lands uniformly in this much activity after the daemon is ready
ACCESS_TTL_S = 60
REFRESH_ENV = {
    # Every access token is inside the refresh window: each use of an account refreshes it, and
    # the maintenance pass at start (then every second) refreshes them all.
    "KIROD_REFRESH_WINDOW_S": str(ACCESS_TTL_S * 10),
    "KIROD_MAINTENANCE_INTERVAL_S": "1",
}

pytestmark = pytest.mark.timeout(120 * SCALE)


@dataclass
class Tally:
    kills: int = 0
    window: int = 0  # rotated by the fake, not yet stored by kirod
    in_flight_kept: int = 0  # an import killed mid-way that had been stored
    in_flight_lost: int = 0  # … that had not (the client never saw it acknowledged)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Stored:
    profile_arn: str
    refresh_token: str | None
    status: str


def stored_accounts(proc: DaemonProcess) -> dict[str, Stored]:
    """The accounts in the database of a killed daemon, read without writing to it."""
    uri = f"file:{proc.state_dir / 'kirod.db'}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = db.execute(
            "SELECT id, profile_arn, credentials, status FROM accounts WHERE removed_at IS NULL"
        ).fetchall()
    return {row[0]: Stored(row[1], json.loads(row[2]).get("refresh_token"), row[3]) for row in rows}


def kiro_ide_file(tokens: TokenSet, refresh_token: str) -> dict[str, str]:
    """An import of the account with `refresh_token` (its access token is refreshed at once)."""
    document = {
        "accessToken": "aoa-expired-placeholder",
        "refreshToken": refresh_token,
        "profileArn": tokens.profile_arn,
        "expiresAt": "2000-01-01T00:00:00.000Z",
        "authMethod": "social",
        "provider": "Google",
    }
    return {"content_b64": base64.b64encode(json.dumps(document).encode()).decode()}


class Activity:
    """Calls `step` in a loop on a thread until the daemon dies (or `limit` steps)."""

    def __init__(self, step: Callable[[int], None], limit: int = 200) -> None:
        self._step = step
        self._limit = limit
        self.steps = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for n in range(self._limit):
            try:
                self._step(n)
            except (DaemonUnreachable, ControlError, OSError):
                return
            self.steps += 1

    def join(self) -> None:
        self._thread.join(10)
        assert not self._thread.is_alive()


def settle(fake: FakeKiro) -> None:
    """Wait until the fake finished every request the dead daemon had sent."""
    wait_until(
        lambda: all(record.status is not None for record in fake.requests()),
        what="the fake to answer what the killed daemon sent",
    )


@dataclass
class Run:
    """One scenario's kills: what was counted, and every daemon started (for the log scans)."""

    tally: Tally = field(default_factory=Tally)
    daemons: list[DaemonProcess] = field(default_factory=list)
    error: str | None = None  # the traceback of the check that failed


def refresh_trials(run: Run, root: Path, transcript: Transcript, *, rotate: bool) -> None:
    """Three accounts refreshing without pause (maintenance and `kiroctl accounts refresh`)."""
    rng = random.Random(f"crash-{rotate}")
    trials = TRIALS["rotation" if rotate else "refresh"] * SCALE
    service = FakeKiro(access_ttl_s=ACCESS_TTL_S, rotate_refresh_tokens=rotate)
    tally = run.tally
    with ThreadedFake(service) as fake:
        proc = start(root, fake, REFRESH_ENV)
        run.daemons.append(proc)
        try:
            issued = [service.issue_social_account() for _ in range(ACCOUNTS)]
            by_arn = {tokens.profile_arn: tokens for tokens in issued}
            for tokens in issued:
                import_account(proc, tokens)
            for trial in range(trials):
                ids = [a["id"] for a in transcript.control(proc, "GET", "/accounts")["accounts"]]

                def refresh(n: int, ids: list[str] = ids, proc: DaemonProcess = proc) -> None:
                    with contextlib.suppress(ControlError):  # a refresh that fails is fine
                        transcript.control(proc, "POST", f"/accounts/{ids[n % len(ids)]}/refresh")

                service.clear_requests()
                activity = Activity(refresh)
                time.sleep(rng.uniform(0, ACTIVITY_S))
                proc.kill()
                activity.join()
                tally.kills += 1
                settle(service)

                stored = stored_accounts(proc)
                assert sorted(stored) == sorted(ids), f"trial {trial}: an account was lost"
                dead: list[tuple[str, TokenSet]] = []
                for account_id, row in stored.items():
                    tokens = by_arn[row.profile_arn]
                    issued_tokens = service.refresh_tokens(tokens.account_id)
                    if row.refresh_token == issued_tokens[-1]:
                        continue
                    assert rotate, f"trial {trial}: a refresh token changed without rotation"
                    assert row.refresh_token == issued_tokens[-2], (
                        f"trial {trial}: {account_id} holds refresh token "
                        f"#{issued_tokens.index(row.refresh_token or '')} of {len(issued_tokens)}"
                    )
                    tally.window += 1
                    dead.append((account_id, tokens))

                proc = start(root, fake, REFRESH_ENV)
                run.daemons.append(proc)
                listed = [a["id"] for a in transcript.control(proc, "GET", "/accounts")["accounts"]]
                assert sorted(listed) == sorted(ids), f"trial {trial}: the restart lost one"
                for account_id, tokens in dead:
                    # The rotated-away token is refused: the account says to log in again...
                    def needs_login(
                        account_id: str = account_id, proc: DaemonProcess = proc
                    ) -> dict[str, Any] | None:
                        account = transcript.control(proc, "GET", f"/accounts/{account_id}")
                        return account if account["status"] == "needs_login" else None

                    account = wait_until(needs_login, what="needs_login after a lost rotation")
                    assert "kiroctl accounts login" in account["status_reason"]
                    # ...which the user does: a new import of the account's current login.
                    transcript.control(proc, "DELETE", f"/accounts/{account_id}")
                    live = service.refresh_tokens(tokens.account_id)[-1]
                    transcript.control(
                        proc, "POST", "/accounts/import", kiro_ide_file(tokens, live)
                    )
            answer = post(proc, PATHS["messages"], request_body("messages", False), transcript)
            assert answer.status == 200  # the pool still serves after all those kills
        finally:
            proc.kill()


def import_trials(run: Run, root: Path, transcript: Transcript) -> None:
    """Accounts imported one after the other through the control API."""
    rng = random.Random("crash-import")
    trials = TRIALS["import"] * SCALE
    service = FakeKiro()
    tally = run.tally
    acknowledged: set[str] = set()  # profile ARNs the control API answered 201 for
    with ThreadedFake(service) as fake:
        proc = start(root, fake, {})
        run.daemons.append(proc)
        try:
            for trial in range(trials):
                in_flight: list[str] = []

                def import_one(
                    n: int, proc: DaemonProcess = proc, in_flight: list[str] = in_flight
                ) -> None:
                    tokens = service.issue_social_account()
                    in_flight[:] = [tokens.profile_arn]
                    account = import_account(proc, tokens)
                    transcript.add("import", account)
                    acknowledged.add(tokens.profile_arn)  # noqa: B023 - the one set, on purpose
                    in_flight.clear()

                activity = Activity(import_one, limit=8)  # the account list stays small
                time.sleep(rng.uniform(0, ACTIVITY_S / 2))
                proc.kill()
                activity.join()
                tally.kills += 1
                settle(service)

                stored = stored_accounts(proc)
                arns = {row.profile_arn for row in stored.values()}
                assert acknowledged <= arns, f"trial {trial}: an acknowledged import was lost"
                extra = arns - acknowledged
                assert extra <= set(in_flight), f"trial {trial}: unknown accounts {extra}"
                if in_flight:
                    if extra:
                        tally.in_flight_kept += 1
                        acknowledged |= extra
                    else:
                        tally.in_flight_lost += 1
                assert {row.status for row in stored.values()} <= {"active"}

                proc = start(root, fake, {})
                run.daemons.append(proc)
                listed = transcript.control(proc, "GET", "/accounts")["accounts"]
                assert {account["profile_arn"] for account in listed} == acknowledged
        finally:
            proc.kill()
    tally.notes.append(f"{len(acknowledged)} accounts imported")


@pytest.fixture(scope="module")
def runs(transcript: Transcript) -> Iterator[dict[str, Run]]:
    """The three scenarios at once, each with its own fake and daemon (startup is CPU-bound)."""
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    scenarios: dict[str, Callable[[Run, Path, Transcript], None]] = {
        "refresh": lambda run, path, record: refresh_trials(run, path, record, rotate=False),
        "rotation": lambda run, path, record: refresh_trials(run, path, record, rotate=True),
        "import": import_trials,
    }
    results = {name: Run() for name in scenarios}

    def go(name: str) -> None:
        try:
            scenarios[name](results[name], root / name, transcript)
        except Exception:
            results[name].error = traceback.format_exc()

    try:
        with concurrent.futures.ThreadPoolExecutor(len(scenarios)) as pool:
            list(pool.map(go, scenarios))
        yield results
        daemons = [daemon for run in results.values() for daemon in run.daemons]
        assert not transcript.leaks(secrets_of(daemons))
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("scenario", list(TRIALS))
def test_kill_9(runs: dict[str, Run], scenario: str) -> None:
    run = runs[scenario]
    print(f"\n{scenario}: {run.tally}")
    tally = run.tally
    FIGURES.record(
        "kills",
        scenario,
        {
            "kills": tally.kills,
            "window": tally.window,
            "kept": tally.in_flight_kept,
            "lost": tally.in_flight_lost,
        },
    )
    assert run.error is None, run.error
    assert run.tally.kills == TRIALS[scenario] * SCALE
    if scenario == "rotation":
        assert run.tally.window < run.tally.kills  # most kills lose nothing at all
    else:
        assert run.tally.window == 0
    for daemon in run.daemons:
        assert "unhandled_error" not in daemon.log()
