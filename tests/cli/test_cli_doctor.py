"""`kiroctl doctor` through the real CLI against the real daemon and the fake Kiro: what it checks
(through the account's proxy), its exit codes, `--json`, `--report` (and that no secret of the run
reaches the report), the drift line of `kiroctl status` and the console, and a kiroctl newer than
the daemon it talks to (a copy of the package that says a newer version, as a newer release would).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from click.testing import CliRunner

from kirod import __version__
from kirod.accounts.windows import STREAK
from kirod.cli import exits
from kirod.cli.context import App
from kirod.cli.main import cli
from kirod.drift import Drift, Kind
from kirod.paths import StatePaths
from kirod.storage.db import Database
from kirod.storage.drift import DriftStore
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, ThreadedFake
from kirod.testing.fake_kiro.drift import Drift as KiroDrift
from kirod.testing.proxies import HttpProxy, ThreadedProxy
from kirod.testing.tls import make_certificates
from tests.support.kiro_env import daemon_from, import_account, start_daemon
from tests.support.kiroctl import kiroctl

PASSWORD = "doctor-proxy-pw-5150"
PROMPT = "zebra-quokka-lighthouse-7731 tell me nothing"
MODEL = "claude-sonnet-4-6"
KIROCTL = "from kirod.cli.main import main; main()"
NEWER = "99.0.0"


@pytest.fixture(scope="module")
def proxy() -> Iterator[Any]:
    with ThreadedProxy(HttpProxy(username="doc", password=PASSWORD)) as running:
        yield running


@pytest.fixture(scope="module")
def account(daemon: DaemonProcess, fake: ThreadedFake, proxy: Any) -> dict[str, Any]:
    """One account, its traffic through a proxy that wants a password."""
    imported = import_account(daemon, fake.fake.issue_social_account())
    assert PASSWORD in proxy.url
    result = kiroctl(daemon, "accounts", "set-proxy", imported["id"], proxy.url)
    assert result.exit_code == 0, result.output
    return imported


def test_doctor_checks_kiro_through_the_accounts_proxy_and_finds_nothing_wrong(
    daemon: DaemonProcess, account: dict[str, Any], proxy: Any
) -> None:
    proxy.targets.clear()
    result = kiroctl(daemon, "doctor")
    assert result.exit_code == exits.OK, result.output
    out = result.stdout
    assert f"kiroctl {__version__} - Python " in out
    assert f"kirod    {__version__} - Python " in out  # plain ASCII off a terminal
    assert f"{account['label']}: active" in out
    via = f"via http://127.0.0.1:{proxy.port}"
    assert f"kiro us-east-1      {daemon.env['KIROD_KIRO_ENDPOINT']} {via}: answered" in out
    assert "Nothing needs attention." in out
    assert PASSWORD not in result.output
    assert proxy.targets, "the check did not go through the account's proxy"


def test_doctor_json_is_one_document(
    daemon: DaemonProcess, account: dict[str, Any], proxy: Any
) -> None:
    result = kiroctl(daemon, "doctor", "--json", "--since", "1h")
    assert result.exit_code == exits.OK, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {
        "kiroctl", "kirod", "config", "accounts", "reach", "drift", "errors", "attention", "exit",
    }  # fmt: skip
    assert doc["kirod"]["running"] is True
    assert doc["kirod"]["version"] == __version__
    assert doc["config"] == []
    assert [a["status"] for a in doc["accounts"]] == ["active"]
    assert {(r["target"], r["ok"]) for r in doc["reach"]} == {("kiro", True), ("auth", True)}
    assert {r["proxy"] for r in doc["reach"]} == {f"http://127.0.0.1:{proxy.port}"}
    assert PASSWORD not in result.stdout
    assert doc["drift"]["records"] == []
    assert doc["attention"] == []
    assert doc["exit"] == 0


def test_an_unreachable_proxy_is_named_with_what_to_do(
    daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    stranded = import_account(daemon, fake.fake.issue_social_account())
    result = kiroctl(daemon, "accounts", "set-proxy", stranded["id"], "http://127.0.0.1:9")
    assert result.exit_code == 0, result.output
    try:
        result = kiroctl(daemon, "doctor", "--json")
        assert result.exit_code == exits.DEGRADED, result.output
        doc = json.loads(result.stdout)
        (failed,) = [r for r in doc["reach"] if not r["ok"] and r["target"] == "kiro"]
        assert failed["failed_at"] == "proxy"
        assert failed["error"] == (
            "cannot connect to the proxy http://127.0.0.1:9: is it running? (proxy_url)"
        )
        texts = [item["text"] for item in doc["attention"]]
        assert any(text.startswith("Kiro unreachable: kiro us-east-1") for text in texts), texts
    finally:
        assert kiroctl(daemon, "accounts", "remove", stranded["id"], "--yes").exit_code == 0


def test_doctor_when_kirod_is_down_says_what_it_can_and_exits_3(tmp_path: Path) -> None:
    socket = tmp_path / "none.sock"
    result = CliRunner().invoke(cli, ["--socket", str(socket), "doctor"])
    assert result.exit_code == exits.DOWN, result.output
    assert f"kiroctl {__version__} - Python " in result.stdout
    assert f"kirod    not running (socket {socket})" in result.stdout
    assert "kirod is not running (no control socket at" in result.stdout
    report = tmp_path / "report.json"
    args = ["--socket", str(socket), "doctor", "--json", "--report", str(report)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == exits.DOWN
    doc = json.loads(result.stdout)
    assert (doc["kirod"]["running"], doc["exit"], doc["reach"]) == (False, exits.DOWN, None)
    bundle = json.loads(report.read_text())  # what kiroctl knows alone, for the bug report
    assert bundle["doctor"]["kiroctl"] == doc["kiroctl"]
    assert (bundle["config"], bundle["trace"]) == (None, None)


def test_doctor_names_what_is_wrong_with_the_settings_now(
    fake: ThreadedFake, tmp_path: Path
) -> None:
    config = tmp_path / "daemon" / "config" / "kirod" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('log_level = "info"\n')
    ca_file = make_certificates(tmp_path / "tls").ca_file
    proc = start_daemon(
        tmp_path / "daemon", fake, {"KIROD_PORTT": "8080", "KIROD_CA_FILE": str(ca_file)}
    )
    try:
        assert kiroctl(proc, "doctor", "--json").stdout.count("sets nothing") == 2  # + attention
        later = time.time() + 5
        os.utime(config, (later, later))
        ca_file.unlink()
        result = kiroctl(proc, "doctor", "--json")
        assert result.exit_code == exits.DEGRADED, result.output
        assert json.loads(result.stdout)["config"] == [
            "the environment variable KIROD_PORTT sets nothing (did you mean KIROD_PORT?): "
            "rename or unset it",
            f"the config file {config} changed since kirod started: restart kirod to apply it",
            f"ca_file {ca_file} no longer loads: kirod keeps what it loaded at start, a restart "
            "would fail",
        ]
    finally:
        proc.kill()


def seed_drift(proc: DaemonProcess) -> None:
    """What a running kirod would have written after meeting a new event type: a row of the
    drift table, written through the store as the maintenance pass writes it."""

    async def write() -> None:
        async with Database(StatePaths(proc.state_dir).database) as db:
            recorder = Drift()
            recorder.observe(Kind.EVENT_TYPE, "generateAssistantResponse", event_type="newEvent")
            recorder.observe(Kind.STOP_REASON, "generateAssistantResponse", stop_reason="PAUSED")
            await DriftStore(db).add(recorder.take())

    asyncio.run(write())


def console_overview(proc: DaemonProcess) -> str:
    """The console's overview page as a signed-in browser gets it (no JavaScript needed)."""
    link = proc.client.console_link().url
    token = link.split("#t=", 1)[1]
    with httpx.Client(base_url=proc.base_url, timeout=10) as browser:
        signed = browser.post(
            "/console/session", json={"token": token}, headers={"Origin": proc.base_url}
        )
        assert signed.status_code == 200, signed.text
        page = browser.get("/console/")
        assert page.status_code == 200
        return page.text


def test_drift_shows_in_status_the_console_and_doctor(fake: ThreadedFake, tmp_path: Path) -> None:
    proc = start_daemon(tmp_path, fake)
    try:
        import_account(proc, fake.fake.issue_social_account())
        before = kiroctl(proc, "status")
        assert "kirod does not know" not in before.stdout
        assert "Kiro changes" not in console_overview(proc)
        seed_drift(proc)
        day = kiroctl(proc, "doctor", "--json")
        assert day.exit_code == exits.DEGRADED, day.output
        doc = json.loads(day.stdout)
        assert {r["kind"] for r in doc["drift"]["records"]} == {"event_type", "stop_reason"}
        since = min(r["first_seen"] for r in doc["drift"]["records"])
        date = time.strftime("%Y-%m-%d", time.gmtime(since))
        line = f"Kiro answered in 2 ways kirod does not know since {date}: kiroctl doctor"
        status = kiroctl(proc, "status")
        assert f"  ! {line}" in status.stdout
        assert line in console_overview(proc)
        text = kiroctl(proc, "doctor").stdout
        assert "event_type at generateAssistantResponse: event_type=newEvent (1x" in text
        # The first drift's time, not the start of the window looked at.
        assert f"Kiro answered in 2 ways kirod does not know since {date}" in text
    finally:
        proc.kill()


def test_a_window_kiro_moved_is_drift_that_doctor_and_status_show(
    fake: ThreadedFake, tmp_path: Path
) -> None:
    """A real drift, met by the daemon: a Claude model's percentages are of a window other than
    the listed one (the fake's `Drift.WINDOW`), which kirod learns after a streak and records."""
    proc = start_daemon(tmp_path, fake)
    fake.fake.set_drifts(KiroDrift.WINDOW)
    try:
        import_account(proc, fake.fake.issue_social_account())
        filler = "The quick brown fox jumps over the lazy dog near the quiet river bank. " * 1_200
        with anthropic.Anthropic(
            base_url=proc.base_url, api_key=proc.api_key, max_retries=0
        ) as claude:
            for n in range(STREAK):
                claude.messages.create(
                    model="claude-sonnet-4-5",
                    max_tokens=64,
                    messages=[{"role": "user", "content": f"Question {n}. {filler}"}],
                )
        result = kiroctl(proc, "doctor", "--json")
        assert result.exit_code == exits.DEGRADED, result.output
        doc = json.loads(result.stdout)
        (record,) = doc["drift"]["records"]
        assert (record["kind"], record["where"]) == ("window", "generateAssistantResponse")
        assert dict(record["facts"])["listed"] == "200000"
        texts = [item["text"] for item in doc["attention"]]
        assert any(t.startswith("Kiro answered in 1 way kirod does not know") for t in texts)
        assert "Kiro answered in 1 way kirod does not know since" in kiroctl(proc, "status").stdout
    finally:
        fake.fake.set_drifts()
        proc.kill()


def test_the_report_holds_no_secret_of_the_run(
    daemon: DaemonProcess, fake: ThreadedFake, account: dict[str, Any], tmp_path: Path
) -> None:
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as client:
        for _ in range(2):
            answer = client.messages.create(
                model=MODEL, max_tokens=64, messages=[{"role": "user", "content": PROMPT}]
            )
            assert answer.content
    trace = daemon.client.trace(last=10)
    report = tmp_path / "kirod-report.json"
    result = kiroctl(daemon, "doctor", "--report", str(report))
    assert result.exit_code == exits.OK, result.output
    assert f"Report written to {report}" in result.stdout
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["kirod-report.json"]  # no temporary left
    text = report.read_text()
    bundle = json.loads(text)
    assert bundle["doctor"]["kiroctl"]["version"] == __version__
    assert bundle["config"]["settings"]["port"] == 0
    shapes = bundle["trace"]
    assert [s["model"] for s in shapes[-2:]] == [MODEL, MODEL]
    assert shapes[-1]["account"] == "account-1"
    assert shapes[-1]["output_tokens"] > 0
    assert bundle["doctor"]["accounts"][0]["account"] == "account-1"
    secrets = {PROMPT, "zebra-quokka", daemon.api_key, PASSWORD, account["id"], account["label"]}
    secrets |= {secret for made in FakeKiro.created for secret in made.issued_secrets()}
    secrets |= {request.request_id for request in trace.requests}
    secrets |= {request.key_id for request in trace.requests}
    secrets.add(str(Path.home()))
    found = sorted(secret[:12] for secret in secrets if secret and secret in text)
    assert not found, f"secrets in the report: {found}"


@pytest.mark.parametrize("where", ["missing/dir/report.json", "file/report.json"])
def test_a_report_that_cannot_be_written_is_a_sentence_and_exit_1(
    daemon: DaemonProcess, account: dict[str, Any], tmp_path: Path, where: str
) -> None:
    (tmp_path / "file").write_text("a file, not a directory")
    target = tmp_path / where
    result = kiroctl(daemon, "doctor", "--report", str(target))
    assert result.exit_code == exits.FAILED, result.output
    assert f"kiroctl: error: cannot write the report to {target}: " in result.stderr
    assert "Nothing needs attention." in result.stdout  # the findings are shown all the same
    assert "Traceback" not in result.output


def newer_kiroctl(root: Path) -> Path:
    """A copy of the kirod package whose version is newer: what a newer release is to a daemon."""
    package = Path(__import__("kirod").__file__).parent
    copy = root / "newer"
    shutil.copytree(package, copy / "kirod", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "pyproject.toml").write_text(f'[project]\nname = "kirod"\nversion = "{NEWER}"\n')
    return copy


def older_kirod(root: Path) -> Path:
    """A copy of the kirod package from before `GET /doctor`: its control API lacks the route."""
    package = Path(__import__("kirod").__file__).parent
    copy = root / "older"
    shutil.copytree(package, copy / "kirod", ignore=shutil.ignore_patterns("__pycache__"))
    server = copy / "kirod" / "localapi" / "server.py"
    routes = server.read_text()
    assert '    ("GET", "/doctor", doctor),\n' in routes
    server.write_text(routes.replace('    ("GET", "/doctor", doctor),\n', ""))
    (copy / "pyproject.toml").write_text(f'[project]\nname = "kirod"\nversion = "{__version__}"\n')
    return copy


def run_kiroctl(package_root: Path, socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(package_root)}
    return subprocess.run(
        [sys.executable, "-P", "-c", KIROCTL, "--socket", str(socket), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
        cwd=package_root,
    )


def test_a_kiroctl_newer_than_kirod_says_restart_kirod(fake: ThreadedFake, tmp_path: Path) -> None:
    newer = newer_kiroctl(tmp_path)
    older = older_kirod(tmp_path)
    proc = daemon_from(tmp_path / "daemon", fake, older)
    try:
        proc.wait_ready()
        version = run_kiroctl(newer, proc.socket_path, "version")
        assert version.returncode == 0, version.stderr
        assert version.stdout.splitlines()[:3] == [
            f"kiroctl {NEWER}",
            f"kirod   {__version__}",
            f"kiroctl {NEWER}, but the running kirod is {__version__}: restart kirod",
        ]
        result = run_kiroctl(newer, proc.socket_path, "doctor")
        assert result.returncode == exits.DEGRADED, result.stderr
        assert "Traceback" not in result.stderr + result.stdout
        assert f"kiroctl {NEWER}, but the running kirod is {__version__}: restart kirod" in (
            result.stdout
        )
        assert (
            f"this kirod (version {__version__}) is older than kiroctl {NEWER} and does not "
            "have the doctor's checks (settings, Kiro reachability)" in result.stdout
        )
        assert "restart kirod to run the installed version; " in result.stdout
        # Any command that meets a route kirod lacks says the same, through the control client.
        app = App(socket=proc.socket_path)
        with pytest.raises(exits.CliError) as refused:
            app.call(lambda kirod: kirod.doctor())
        assert refused.value.code == exits.FAILED
        assert refused.value.message == (
            f"this kirod (version {__version__}) does not have the control route "
            f"/localapi/v1/doctor, which kiroctl {__version__} uses"
        )
        assert refused.value.hint is not None
        assert refused.value.hint.startswith("restart kirod to run the installed version; ")
    finally:
        proc.kill()
