"""kiroctl against a kirod of another release: the control API states its version and revision in
every answer, and kiroctl says which of the two is older and what to run, never with a traceback,
whatever shape of answer an older kirod gives (docs/RELEASING.md §4).

The older answers are replayed by a small HTTP server on a Unix socket, in the shapes the base
tree's history shows: the first kirod's (commit cc54985, 2026-11-30: a status of `DaemonInfo`
alone, every other route missing) and the account pool's (commit 74d0ad0, 2026-11-30: health and
accounts but no pacing or drift). A real older kirod is a copy of the package without the version
headers, as tests/cli/test_cli_doctor.py builds its older kirod.
"""

from __future__ import annotations

import http.server
import json
import shutil
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner, Result

from kirod import __version__
from kirod.cli import exits
from kirod.cli.main import cli
from kirod.errors import ControlError
from kirod.localapi.client import DaemonRelease, LocalClient
from kirod.localapi.wire import API_REVISION, PREFIX
from kirod.report_types.status import NOT_JUDGED
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import daemon_from

Answers = dict[tuple[str, str], tuple[int, Any]]

LISTENERS = [
    {"kind": "tcp", "address": "127.0.0.1:8765"},
    {"kind": "unix", "address": "/run/user/1000/kirod/kirod.sock"},
]
# cc54985 kirod/localapi/schema.py `Status`: what the daemon said of itself, nothing more.
FIRST_STATUS = {
    "version": "0.1.0",
    "pid": 4242,
    "uptime_s": 12.5,
    "state": "serving",
    "listeners": LISTENERS,
    "lock_path": "/run/user/1000/kirod/kirod.lock",
}
# 74d0ad0 kirod/localapi/schema.py `Status` and `Maintenance`: health and accounts, no pacing,
# no drift.
POOL_STATUS = {
    **FIRST_STATUS,
    "health": "healthy",
    "problems": [],
    "accounts": {"total": 1, "usable": 1, "by_status": {"active": 1}},
    "maintenance": {
        "interval_s": 300.0,
        "running": False,
        "last_pass_started": 1764500000.0,
        "last_pass_finished": 1764500001.5,
        "last_pass_error": None,
        "next_pass_at": 1764500300.0,
        "results": [
            {"account_id": "acc_1", "at": 1764500001.0, "actions": ["usage"], "error": None}
        ],
    },
}
# 74d0ad0 kirod/storage/accounts.py `AccountRecord.redacted()`.
POOL_ACCOUNT = {
    "id": "acc_1",
    "label": "work",
    "auth_kind": "social",
    "region": "us-east-1",
    "auth_region": "us-east-1",
    "profile_arn": None,
    "status": "active",
    "status_reason": None,
    "status_since": 1764400000.0,
    "status_until": None,
    "usage": None,
    "usage_at": None,
    "failures": 0,
    "auth_failures": 0,
    "last_error": None,
    "last_error_at": None,
    "generation": 3,
    "created_at": 1764400000.0,
    "updated_at": 1764500001.0,
    "expires_at": 1764503600.0,
}
FIRST: Answers = {("GET", "/status"): (200, FIRST_STATUS)}
POOL: Answers = {
    ("GET", "/status"): (200, POOL_STATUS),
    ("GET", "/accounts"): (200, {"accounts": [POOL_ACCOUNT]}),
}
# What kiroctl reads; each command against an older kirod works or says it is older.
COMMANDS = [
    ("status",),
    ("status", "--json"),
    ("version",),
    ("accounts", "list"),
    ("keys", "list"),
    ("stats",),
    ("trace", "--last", "3"),
    ("logs",),
    ("models",),
    ("config",),
    ("doctor",),
    ("cache", "stats"),
    ("extensions",),
]


class _Replay(http.server.BaseHTTPRequestHandler):
    """Answers each request from the server's `answers`; a route it lacks as every kirod did."""

    protocol_version = "HTTP/1.0"
    server: Replay

    def _answer(self) -> None:
        route = urlsplit(self.path).path.removeprefix(PREFIX)
        missing = {"error": {"code": "not_found", "message": f"no such control route: {self.path}"}}
        status, body = self.server.answers.get((self.command, route), (404, missing))
        payload = json.dumps(body).encode()
        self.send_response(status)
        for name, value in self.server.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Replay(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, answers: Answers, headers: dict[str, str]) -> None:
        super().__init__(str(path), _Replay)
        self.answers = answers
        self.headers = headers


@pytest.fixture
def replay(tmp_path: Path) -> Iterator[Any]:
    """`replay(answers, headers)`: a kirod replaying those answers; its socket's path."""
    servers: list[Replay] = []

    def start(answers: Answers, headers: dict[str, str] | None = None) -> Path:
        path = tmp_path / f"kirod{len(servers)}.sock"
        server = Replay(path, answers, headers or {})
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return path

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def run(socket: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--socket", str(socket), *args])


def no_traceback(result: Result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        result.output,
        result.exc_info,
    )
    assert "Traceback" not in result.output


OLDER_SENTENCE = (
    "this kirod (version 0.1.0) is older than kiroctl {kiroctl} and does not have revision "
    f"{API_REVISION} of the control API (it has 0)"
)


def test_the_first_kirods_status_is_shown_and_it_is_named_older(replay: Any) -> None:
    socket = replay(FIRST)
    result = run(socket, "status")
    no_traceback(result)
    assert result.exit_code == exits.DEGRADED  # its health is not known: never "healthy"
    assert result.stdout.startswith("kirod 0.1.0 - serving - up 12s")
    assert f"\n  kiroctl      {__version__}, not the running kirod's 0.1.0" in result.stdout
    assert f"! {NOT_JUDGED}" in result.stdout
    assert OLDER_SENTENCE.format(kiroctl=__version__) in result.stderr
    assert "hint: restart kirod to run the installed version; " in result.stderr
    assert result.stderr.count("kiroctl: warning:") == 1  # one sentence, not one per call

    document = json.loads(run(socket, "status", "--json").stdout)
    assert document["kiroctl"] == __version__
    assert document["status"] == FIRST_STATUS  # as kirod sent it
    assert document["health"] == "degraded"


@pytest.mark.parametrize("answers", [FIRST, POOL], ids=["first", "pool"])
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_every_command_against_an_older_kirod_works_or_says_it_is_older(
    replay: Any, answers: Answers, args: tuple[str, ...]
) -> None:
    result = run(replay(answers), *args)
    no_traceback(result)
    said = OLDER_SENTENCE.format(kiroctl=__version__)
    if result.exit_code in (exits.OK, exits.DEGRADED):
        # `version` says it in its own words, in place of the warning.
        own = f"kiroctl {__version__}, but the running kirod is 0.1.0: restart kirod"
        assert said in result.stderr or own in result.stdout, result.output
    else:
        assert result.exit_code == exits.FAILED, result.output
        assert "is older than kiroctl" in result.stderr, result.output
        assert "restart kirod to run the installed version; " in result.stderr


def test_the_pool_kirods_status_lists_its_accounts(replay: Any) -> None:
    result = run(replay(POOL), "status")
    no_traceback(result)
    assert result.exit_code == exits.OK, result.output
    assert "healthy" in result.stdout
    assert "work" in result.stdout
    assert "active" in result.stdout
    assert NOT_JUDGED not in result.stdout


def test_a_newer_kirod_is_named_newer_and_its_new_fields_are_left_alone(replay: Any) -> None:
    newer = {"Kirod-Version": "99.0.0", "Kirod-Api": str(API_REVISION + 1)}
    status = {**POOL_STATUS, "weather": {"sunny": True}}
    account = {**POOL_ACCOUNT, "moods": ["calm"]}
    answers: Answers = {
        ("GET", "/status"): (200, status),
        ("GET", "/accounts"): (200, {"accounts": [account]}),
    }
    result = run(replay(answers, newer), "status")
    no_traceback(result)
    assert result.exit_code == exits.OK, result.output
    assert (
        f"this kirod (version 99.0.0) is newer than kiroctl {__version__} and speaks revision "
        f"{API_REVISION + 1} of the control API, which kiroctl knows up to {API_REVISION}"
    ) in result.stderr
    assert "run the kiroctl installed with that kirod" in result.stderr
    # A field it cannot read after that: the sentence is not said twice.
    unreadable = {**status, "pacing": {"spacing": "soon"}}
    result = run(replay({**answers, ("GET", "/status"): (200, unreadable)}, newer), "status")
    no_traceback(result)
    assert result.exit_code == exits.FAILED
    assert result.stderr.count("is newer than kiroctl") == 1
    assert f"kiroctl: error: kiroctl {__version__} cannot read kirod's answer: " in result.stderr
    assert "kirod and kiroctl are of different releases, as said above" in result.stderr


def test_an_unreadable_answer_of_the_same_revision_is_a_sentence_and_exit_1(replay: Any) -> None:
    same = {"Kirod-Version": __version__, "Kirod-Api": str(API_REVISION)}
    broken = {**POOL_STATUS, "version": __version__, "listeners": 5}
    result = run(replay({("GET", "/status"): (200, broken)}, same), "status")
    no_traceback(result)
    assert result.exit_code == exits.FAILED
    assert f"kiroctl: error: kiroctl {__version__} cannot read kirod's answer: a field is " in (
        result.stderr
    )
    missing = {("GET", "/accounts"): (200, {"accounts": [{"label": "work"}]})}
    result = run(replay(missing, same), "accounts", "list")
    no_traceback(result)
    assert result.exit_code == exits.FAILED
    assert "cannot read kirod's answer: the field 'id' is missing" in result.stderr


def test_every_answer_of_the_real_daemon_states_its_version(daemon: DaemonProcess) -> None:
    client = LocalClient(daemon.socket_path)
    client.status()
    assert client.release == DaemonRelease(__version__, API_REVISION)
    for method, path in (("GET", "/no/such/route"), ("GET", "/stats?since=nope")):
        client.release = None
        with pytest.raises(ControlError):
            client.request(method, path)
        assert client.release == DaemonRelease(__version__, API_REVISION)
    result = CliRunner().invoke(cli, ["--socket", str(daemon.socket_path), "status"])
    assert "warning" not in result.stderr  # the same release: nothing to say


def unversioned_kirod(root: Path, version: str) -> Path:
    """A copy of the package from before the version headers, calling itself `version`."""
    package = Path(__import__("kirod").__file__).parent
    copy = root / "unversioned"
    shutil.copytree(package, copy / "kirod", ignore=shutil.ignore_patterns("__pycache__"))
    server = copy / "kirod" / "localapi" / "server.py"
    source = server.read_text()
    assert "middlewares=[versioned, guard]" in source
    server.write_text(source.replace("middlewares=[versioned, guard]", "middlewares=[guard]"))
    (copy / "pyproject.toml").write_text(f'[project]\nname = "kirod"\nversion = "{version}"\n')
    return copy


def test_a_real_kirod_without_the_headers_is_named_older_with_its_version(
    fake: ThreadedFake, tmp_path: Path
) -> None:
    older = unversioned_kirod(tmp_path, "0.46.0")
    proc = daemon_from(tmp_path / "daemon", fake, older)
    try:
        proc.wait_ready()
        result = CliRunner().invoke(cli, ["--socket", str(proc.socket_path), "status"])
        no_traceback(result)
        assert result.exit_code == exits.DEGRADED  # no account yet
        assert result.stdout.startswith("kirod 0.46.0 - serving")
        assert (
            f"kiroctl: warning: this kirod (version 0.46.0) is older than kiroctl {__version__} "
            f"and does not have revision {API_REVISION} of the control API (it has 0)"
        ) in result.stderr
        assert "hint: restart kirod to run the installed version; " in result.stderr
    finally:
        proc.kill()
