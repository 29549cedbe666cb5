"""A damaged database, through the real daemon and kiroctl: pages of a table overwritten with
garbage at their offsets (from SQLite's `dbstat`), a file cut short.

At start kirod refuses a damaged file with one message naming it and `kiroctl db recover`, and
leaves it untouched (its hash); damage in the tables that grow with use, or met while serving,
makes the store read-only and the daemon not ready (`/ready` 503 `database_damaged`, `kiroctl
status` degraded), never a 500, and a plain Messages call is still served. `kiroctl db check`
finds the damage, `db backup` copies the store while kirod serves, and `db recover` brings the
accounts and API keys back into a new file on which kirod starts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result

from kirod.localapi.client import DaemonUnreachable
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.reliability.reliability_env import (
    Transcript,
    daemon_env,
    import_account,
    post,
    request_body,
    secrets_of,
    start,
    wait_until,
)
from tests.support.damage import damage, digest
from tests.support.kiroctl import kiroctl as run_kiroctl

pytestmark = pytest.mark.timeout(120)

DAMAGED = "database_damaged"
OPLOG_ROWS = 3000  # about 300 pages of realistic rows: room to damage some in the middle


@pytest.fixture(scope="module", autouse=True)
def nothing_leaks(transcript: Transcript) -> Iterator[None]:
    yield
    assert not transcript.leaks(secrets_of(DaemonProcess.started))


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kd-db-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def kiroctl(
    transcript: Transcript, proc: DaemonProcess, *args: str, env: dict[str, str] | None = None
) -> Result:
    """kiroctl in-process; what it printed joins the transcript."""
    result = run_kiroctl(proc, *args, env=env)
    transcript.add(f"kiroctl {' '.join(args)} → {result.exit_code}", result.output)
    return result


def database(proc: DaemonProcess) -> Path:
    return proc.state_dir / "kirod.db"


def state_env(proc: DaemonProcess) -> dict[str, str]:
    """kiroctl's environment as a user's shell has it for this daemon's state dir."""
    return {"KIROD_STATE_DIR": str(proc.state_dir)}


def checkpoint(path: Path) -> None:
    """Fold the running daemon's log into the file, so its next reads come from the file."""
    with contextlib.closing(sqlite3.connect(path, timeout=10)) as conn:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0


def grow_oplog(path: Path, rows: int) -> None:
    """Copies of the daemon's own operation-log rows (a stopped daemon's file), up to `rows`."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        while (count := conn.execute("SELECT count(*) FROM oplog").fetchone()[0]) < rows:
            columns = [row[1] for row in conn.execute("PRAGMA table_info(oplog)")][1:]
            names = ", ".join(columns)
            conn.execute(
                f"INSERT INTO oplog ({names}) SELECT {names} FROM oplog LIMIT ?",  # noqa: S608
                (rows - count,),
            )
            conn.commit()


def served(proc: DaemonProcess, transcript: Transcript, protocol: str = "messages") -> int:
    return post(proc, f"/v1/{protocol}", request_body(protocol, False), transcript).status


def ready(proc: DaemonProcess) -> tuple[int, dict[str, object]]:
    import json
    import urllib.error
    import urllib.request

    asked = urllib.request.Request(  # noqa: S310 - loopback
        f"{proc.base_url}/ready", headers={"Authorization": f"Bearer {proc.api_key}"}
    )
    try:
        with urllib.request.urlopen(asked, timeout=5) as answer:  # noqa: S310
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def accounts_and_keys(path: Path) -> tuple[list[str], list[str]]:
    uri = f"file:{path}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        accounts = [r[0] for r in conn.execute("SELECT id FROM accounts ORDER BY id")]
        keys = [r[0] for r in conn.execute("SELECT key_hash FROM api_keys ORDER BY key_hash")]
    return accounts, keys


def serving_daemon(
    root: Path, fake: ThreadedFake, transcript: Transcript, requests: int = 3
) -> DaemonProcess:
    """A daemon with one account that has served `requests` Messages calls."""
    proc = start(root, fake)
    import_account(proc, fake.fake.issue_social_account())
    for _ in range(requests):
        assert served(proc, transcript) == 200
    return proc


def refused_start(root: Path, fake: ThreadedFake) -> tuple[int, str]:
    proc = DaemonProcess(root, env=daemon_env(fake))
    code = proc.wait(30)
    return code, proc.log()


def test_a_damaged_accounts_table_is_refused_at_start_untouched_naming_the_file_and_command(
    root: Path, fake: ThreadedFake, transcript: Transcript
) -> None:
    proc = serving_daemon(root, fake, transcript)
    assert proc.stop() == 0
    path = database(proc)
    damage(path, "accounts")
    before = digest(path)

    code, log = refused_start(root, fake)

    assert code == 1
    refusals = [line for line in log.splitlines() if "cannot start" in line]
    assert len(refusals) == 1, log
    assert f"the database {path} is damaged" in refusals[0]
    assert "`kiroctl db recover`" in refusals[0]
    assert "Traceback" not in log
    assert digest(path) == before

    checked = kiroctl(transcript, proc, "db", "check", env=state_env(proc))
    assert checked.exit_code == 1, checked.output
    assert f"{path}: damaged" in checked.output
    assert digest(path) == before


def test_a_truncated_file_is_refused_and_recover_brings_accounts_and_keys_back(
    root: Path, fake: ThreadedFake, transcript: Transcript
) -> None:
    proc = serving_daemon(root, fake, transcript)
    key = proc.api_key
    assert proc.stop() == 0
    path = database(proc)
    accounts, keys = accounts_and_keys(path)
    assert accounts
    assert keys
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(size - 3 * 4096)  # the last three pages are gone
    before = digest(path)

    code, log = refused_start(root, fake)
    assert code == 1
    assert f"the database {path} is damaged" in log
    assert "kiroctl db recover" in log
    assert digest(path) == before

    recovered = kiroctl(transcript, proc, "db", "recover", env=state_env(proc))

    assert recovered.exit_code == 0, recovered.output
    assert "accounts 1" in recovered.output
    kept = sorted(path.parent.glob("kirod.db.damaged-*"))
    assert [p.name for p in kept if not p.name.endswith(("-wal", "-shm"))]
    assert digest(next(p for p in kept if p.name.startswith("kirod.db.damaged-"))) == before
    assert accounts_and_keys(path) == (accounts, keys)
    assert os.stat(path).st_mode & 0o777 == 0o600
    again = start(root, fake)
    try:
        # The old API key (kept only as its digest) admits requests again; the account serves.
        assert again.api_key == key
        assert served(again, transcript) == 200
        assert ready(again)[0] == 200
    finally:
        assert again.stop() == 0
    checked = kiroctl(transcript, again, "db", "check", env=state_env(again))
    assert checked.exit_code == 0, checked.output
    assert "sound" in checked.output


def test_damage_met_while_serving_makes_the_store_read_only_and_the_daemon_not_ready(
    root: Path, fake: ThreadedFake, transcript: Transcript
) -> None:
    proc = serving_daemon(root, fake, transcript)
    try:
        first = post(
            proc, "/v1/responses", {**request_body("responses", False), "store": True}, transcript
        )
        assert first.status == 200
        assert first.document is not None
        path = database(proc)
        checkpoint(path)
        damage(path, "responses")
        hashed = digest(path)

        follow = {
            **request_body("responses", False),
            "previous_response_id": first.document["id"],
        }
        answer = post(proc, "/v1/responses", follow, transcript)

        assert answer.status == 503, answer.raw
        assert answer.document is not None
        assert answer.document["error"]["code"] == DAMAGED
        assert "kiroctl db recover" in answer.document["error"]["message"]
        status, body = ready(proc)
        assert status == 503
        assert body["reason"] == DAMAGED
        asked = len(fake.fake.requests("chat"))
        stored = post(
            proc, "/v1/responses", {**request_body("responses", True), "store": True}, transcript
        )
        assert stored.status == 503
        assert stored.document is not None
        assert stored.document["error"]["code"] == DAMAGED
        assert len(fake.fake.requests("chat")) == asked  # refused before Kiro was asked
        # A request that needs no write is still served, its key admitted and its log row
        # dropped, without a word per request.
        for _ in range(3):
            assert served(proc, transcript) == 200
        said = kiroctl(transcript, proc, "status")
        assert said.exit_code == 4, said.output
        assert f"the database {path} is damaged" in said.output.replace("\n", " ")
        assert "kiroctl db recover" in said.output.replace("\n", "")
        checked = kiroctl(transcript, proc, "db", "check")
        assert checked.exit_code == 1, checked.output
        assert digest(path) == hashed  # nothing written into the damaged file while serving
        assert "unhandled_error" not in proc.log()
        assert proc.log().count("is damaged") == 1
    finally:
        assert proc.stop() == 0
    assert digest(path) == hashed  # nor at the stop: its log stays beside it, for recover


def test_damage_in_the_operation_log_is_found_after_the_start_and_recover_salvages_the_rest(
    root: Path, fake: ThreadedFake, transcript: Transcript
) -> None:
    proc = serving_daemon(root, fake, transcript)
    key = proc.api_key
    assert proc.stop() == 0
    path = database(proc)
    grow_oplog(path, OPLOG_ROWS)
    accounts, keys = accounts_and_keys(path)
    damaged_pages = damage(path, "oplog", count=4)
    assert len(damaged_pages) == 4

    started = time.monotonic()
    proc = start(root, fake)  # the start's check leaves the growing tables to after the start
    try:
        assert time.monotonic() - started < 20
        wait_until(lambda: ready(proc)[1].get("reason") == DAMAGED, 10, "not ready")
        assert served(proc, transcript) == 200
        refused = kiroctl(transcript, proc, "db", "recover", env=state_env(proc))
        assert refused.exit_code == 1
        assert "kirod is running" in refused.output
    finally:
        assert proc.stop() == 0

    recovered = kiroctl(transcript, proc, "db", "recover", env=state_env(proc))

    assert recovered.exit_code == 0, recovered.output
    assert "row by row" in recovered.output or "sqlite3 .recover" in recovered.output
    kept = Path(recovered.output.split("kept as ")[1].split()[0].rstrip("."))
    assert kept.parent == path.parent
    assert kept.name.startswith("kirod.db.damaged-")
    assert kept.exists()
    assert accounts_and_keys(path) == (accounts, keys)
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT count(*) FROM oplog").fetchone()[0]
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    # The rows of the four damaged pages are lost, the others back: ~10 rows a page.
    assert OPLOG_ROWS - 200 < rows < OPLOG_ROWS, rows
    again = start(root, fake)
    try:
        assert again.api_key == key
        assert served(again, transcript) == 200
        assert ready(again) == (200, {"status": "ready"})
    finally:
        assert again.stop() == 0


def test_backup_copies_the_store_while_kirod_serves(
    root: Path, fake: ThreadedFake, transcript: Transcript
) -> None:
    proc = serving_daemon(root, fake, transcript)
    stop = threading.Event()
    statuses: list[int] = []

    def traffic() -> None:
        while not stop.is_set():
            statuses.append(served(proc, transcript))

    worker = threading.Thread(target=traffic)
    worker.start()
    target = root / "copy.db"
    try:
        copied = kiroctl(transcript, proc, "db", "backup", str(target))
        again = kiroctl(transcript, proc, "db", "backup", str(target))
    finally:
        stop.set()
        worker.join(30)
    try:
        assert copied.exit_code == 0, copied.output
        assert f"to {target}" in copied.output
        assert again.exit_code == 1  # never overwritten
        assert "exists" in again.output
        assert os.stat(target).st_mode & 0o777 == 0o600
        assert statuses
        assert set(statuses) == {200}
        with contextlib.closing(sqlite3.connect(f"file:{target}?mode=ro", uri=True)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert accounts_and_keys(target) == accounts_and_keys(database(proc))
    finally:
        assert proc.stop() == 0
    # With kirod stopped, kiroctl copies the file itself.
    offline = root / "offline.db"
    copied = kiroctl(transcript, proc, "db", "backup", str(offline), env=state_env(proc))
    assert copied.exit_code == 0, copied.output
    assert accounts_and_keys(offline) == accounts_and_keys(database(proc))


def test_sqlite3_recover_is_used_where_it_works(
    root: Path, fake: ThreadedFake, transcript: Transcript
) -> None:
    cli = shutil.which("sqlite3")
    if cli is None:
        pytest.skip("the sqlite3 command is not installed (`make` installs Debian's sqlite3)")
    probe = root / "probe.db"
    with contextlib.closing(sqlite3.connect(probe)) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
    tried = subprocess.run([cli, str(probe), ".recover"], capture_output=True, check=False)
    if tried.returncode != 0 or b"error" in tried.stderr:
        pytest.skip(f"this sqlite3's .recover fails on a sound file: {tried.stderr.decode()!r}")
    proc = serving_daemon(root, fake, transcript)
    assert proc.stop() == 0
    path = database(proc)
    accounts, keys = accounts_and_keys(path)
    grow_oplog(path, OPLOG_ROWS)
    damage(path, "oplog")

    recovered = kiroctl(transcript, proc, "db", "recover", env=state_env(proc))

    assert recovered.exit_code == 0, recovered.output
    assert "sqlite3 .recover" in recovered.output
    assert accounts_and_keys(path) == (accounts, keys)


def test_recover_leaves_a_sound_file_alone(
    root: Path, fake: ThreadedFake, transcript: Transcript
) -> None:
    proc = serving_daemon(root, fake, transcript, requests=0)
    assert proc.stop() == 0
    before = digest(database(proc))
    said = kiroctl(transcript, proc, "db", "recover", env=state_env(proc))
    assert said.exit_code == 0
    assert "sound; nothing to recover" in said.output
    assert digest(database(proc)) == before
    with pytest.raises(DaemonUnreachable):
        proc.client.status()


def test_recover_says_which_keys_it_could_not_bring_back(
    root: Path, fake: ThreadedFake, transcript: Transcript
) -> None:
    proc = serving_daemon(root, fake, transcript, requests=1)
    assert proc.stop() == 0
    path = database(proc)
    accounts, _ = accounts_and_keys(path)
    damage(path, "api_keys")  # its only page: no key can be read back

    recovered = kiroctl(transcript, proc, "db", "recover", env=state_env(proc))

    assert recovered.exit_code == 1
    assert "Rows in damaged pages are lost from: api_keys." in recovered.output
    assert "api_keys could not be read" in recovered.output
    assert "kiroctl keys create" in recovered.output
    assert accounts_and_keys(path) == (accounts, [])
