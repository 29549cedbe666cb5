"""The real daemon as a subprocess: lock, sockets, modes, signals, drain, sd_notify."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kirod.testing.daemon import DaemonProcess

ROUTES_DAEMON = [sys.executable, str(Path(__file__).with_name("routes_daemon.py"))]


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def get(url: str, key: str | None = None, timeout: float = 30.0) -> tuple[int, Any]:
    request = urllib.request.Request(url)  # noqa: S310
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


class Background:
    """One request in a thread, so the test can signal the daemon while it is in flight."""

    def __init__(self, url: str, key: str) -> None:
        self.result: tuple[int, Any] | BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(url, key), daemon=True)
        self._thread.start()

    def _run(self, url: str, key: str) -> None:
        try:
            self.result = get(url, key)
        except BaseException as exc:
            self.result = exc

    def join(self, timeout: float) -> tuple[int, Any] | BaseException | None:
        self._thread.join(timeout)
        return self.result


@pytest.fixture
def daemon(short_tmp: Path) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(short_tmp / "a")
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.kill()


def test_serves_with_private_modes_and_stops_cleanly(daemon: DaemonProcess) -> None:
    status, body = get(daemon.base_url + "/health")
    assert (status, body) == (200, {"status": "ok"})

    assert mode(daemon.socket_path) == 0o600
    assert stat.S_ISSOCK(os.stat(daemon.socket_path).st_mode)
    assert mode(daemon.socket_path.parent) == 0o700
    assert mode(daemon.state_dir) == 0o700
    for name in ("kirod.db", "kirod.db-wal", "kirod.db-shm", "kirod.lock"):
        assert mode(daemon.state_dir / name) == 0o600, name
    assert mode(daemon.api_key_file) == 0o600
    assert mode(daemon.api_key_file.parent) == 0o700

    key = daemon.api_key
    assert key.startswith("sk-kirod-")
    assert daemon.stop() == 0
    assert not daemon.socket_path.exists()
    log = daemon.log()
    assert "api_key_created" in log
    assert key not in log
    assert "stopped exit_code=0" in log


def test_status_reports_listeners_and_lock(daemon: DaemonProcess) -> None:
    status = daemon.client.status()
    assert status.pid == daemon.proc.pid
    assert status.state == "serving"
    assert {item.kind for item in status.listeners} == {"tcp", "unix"}
    assert status.lock_path == str(daemon.state_dir / "kirod.lock")


def test_restart_keeps_the_generated_key(short_tmp: Path) -> None:
    first = DaemonProcess(short_tmp / "a")
    first.wait_ready()
    key = first.api_key
    assert first.stop() == 0
    second = DaemonProcess(short_tmp / "a")
    try:
        second.wait_ready()
        assert second.api_key == key
        assert get(second.base_url + "/ready", key)[0] == 503  # authenticated: no accounts yet
        assert "api_key_created" not in second.log().split("stopped exit_code=0", 1)[-1]
    finally:
        second.kill()


def test_second_instance_is_refused_naming_lock_and_pid(daemon: DaemonProcess) -> None:
    second = DaemonProcess(daemon.root, env={"KIROD_LOCK_TIMEOUT_S": "1"})
    code = second.wait(15)
    assert code == 1
    message = second.log()
    assert str(daemon.state_dir / "kirod.lock") in message
    assert f"pid {daemon.proc.pid}" in message
    assert get(daemon.base_url + "/health")[0] == 200  # the first one is unaffected


def test_sigterm_drains_inflight_request_then_exits_0(short_tmp: Path) -> None:
    proc = DaemonProcess(short_tmp / "a", command=ROUTES_DAEMON)
    try:
        proc.wait_ready()
        request = Background(proc.base_url + "/test/slow?s=2", proc.api_key)
        time.sleep(0.5)
        proc.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        proc.proc.send_signal(signal.SIGTERM)  # a second signal joins the shutdown in progress
        assert proc.wait(20) == 0
        assert request.join(10) == (200, {"slept": 2.0})
        log = proc.log()
        assert "shutdown reason=SIGTERM" in log
        assert "shutdown_in_progress" in log
    finally:
        proc.kill()


def test_drain_is_bounded_by_shutdown_drain_s(short_tmp: Path) -> None:
    proc = DaemonProcess(
        short_tmp / "a", command=ROUTES_DAEMON, env={"KIROD_SHUTDOWN_DRAIN_S": "1"}
    )
    try:
        proc.wait_ready()
        request = Background(proc.base_url + "/test/slow?s=30", proc.api_key)
        time.sleep(0.5)
        started = time.monotonic()
        assert proc.stop() == 0
        assert time.monotonic() - started < 6
        assert not isinstance(request.join(10), tuple)  # cut off, not answered
    finally:
        proc.kill()


def test_deleted_lock_file_exits_1_after_draining(short_tmp: Path) -> None:
    proc = DaemonProcess(short_tmp / "a", command=ROUTES_DAEMON)
    try:
        proc.wait_ready()
        request = Background(proc.base_url + "/test/slow?s=7", proc.api_key)
        time.sleep(0.3)
        (proc.state_dir / "kirod.lock").unlink()
        # The lock is checked every 5 s; the drain window is 10 s.
        assert proc.wait(20) == 1
        assert request.join(10) == (200, {"slept": 7.0})
        assert "single_instance_lock_compromised" in proc.log()
    finally:
        proc.kill()


def test_replaced_lock_file_exits_1(daemon: DaemonProcess) -> None:
    lock = daemon.state_dir / "kirod.lock"
    replacement = lock.with_name("replacement")
    replacement.write_text("12345\n")
    os.replace(replacement, lock)
    assert daemon.wait(20) == 1
    assert "single_instance_lock_compromised" in daemon.log()


def test_stale_socket_file_is_replaced(short_tmp: Path) -> None:
    path = short_tmp / "a" / "run" / "kirod" / "kirod.sock"
    path.parent.mkdir(parents=True, mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nothing listens
    proc = DaemonProcess(short_tmp / "a")
    try:
        proc.wait_ready()
        assert mode(path) == 0o600
    finally:
        proc.kill()


def test_live_socket_is_a_clear_already_running_error(short_tmp: Path) -> None:
    path = short_tmp / "a" / "run" / "kirod" / "kirod.sock"
    path.parent.mkdir(parents=True, mode=0o700)
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(str(path))
    live.listen(1)
    try:
        proc = DaemonProcess(short_tmp / "a")
        assert proc.wait(15) == 1
        assert "already running" in proc.log()
        assert path.exists()  # never removed from under its owner
    finally:
        live.close()


def test_config_errors_name_the_key_and_exit_2(short_tmp: Path) -> None:
    config = short_tmp / "config" / "kirod" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("prot = 1234\n")
    proc = DaemonProcess(short_tmp)
    assert proc.wait(15) == 2
    assert "unknown option 'prot'" in proc.log()

    config.write_text('listen = "0.0.0.0:1"\n')
    proc = DaemonProcess(short_tmp)
    assert proc.wait(15) == 2
    assert "use `host` and `port` instead" in proc.log()


def test_unreadable_database_is_a_startup_error_naming_the_file(short_tmp: Path) -> None:
    database = short_tmp / "state" / "kirod" / "kirod.db"
    database.parent.mkdir(parents=True, mode=0o700)
    database.write_bytes(b"this is not a database" * 100)
    proc = DaemonProcess(short_tmp)
    assert proc.wait(15) == 1
    log = proc.log()
    assert (
        f"kirod: cannot start: the database {database} is damaged (file is not a database)" in log
    )
    assert "`kiroctl db recover`" in log  # and what to run
    assert "Traceback" not in log
    assert database.read_bytes() == b"this is not a database" * 100


def test_non_loopback_host_is_refused(short_tmp: Path) -> None:
    proc = DaemonProcess(short_tmp, args=["--host", "0.0.0.0"])
    assert proc.wait(15) == 2
    assert "allow_remote" in proc.log()


@pytest.fixture
def notify_socket(short_tmp: Path) -> Iterator[tuple[socket.socket, Path]]:
    path = short_tmp / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(10)
    try:
        yield sock, path
    finally:
        sock.close()


def receive_until(sock: socket.socket, needle: str, timeout_s: float = 15.0) -> list[str]:
    messages: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = sock.recv(4096).decode()
        messages.append(message)
        if needle in message:
            return messages
    raise AssertionError(f"{needle!r} not received; got {messages}")


def test_sd_notify_ready_watchdog_stopping(
    short_tmp: Path, notify_socket: tuple[socket.socket, Path]
) -> None:
    sock, path = notify_socket
    proc = DaemonProcess(
        short_tmp / "a", env={"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "400000"}
    )
    try:
        ready = receive_until(sock, "READY=1")
        assert "STATUS=serving on http://127.0.0.1:" in ready[-1]
        receive_until(sock, "WATCHDOG=1")
        proc.wait_ready()
        proc.proc.send_signal(signal.SIGTERM)
        stopping = receive_until(sock, "STOPPING=1")
        assert "STATUS=draining" in stopping[-1]
        assert proc.wait(20) == 0
    finally:
        proc.kill()


def test_control_api_refuses_browser_requests(daemon: DaemonProcess) -> None:
    for header in ("Origin", "Referer"):
        connection_headers = {header: "http://evil.example"}
        client = daemon.client
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(client.socket_path))
        lines = ["GET /localapi/v1/status HTTP/1.1", "Host: localhost", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in connection_headers.items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
        sock.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 403"), head
        assert json.loads(body)["error"]["code"] == "forbidden"


def test_control_routes_are_not_served_over_tcp(daemon: DaemonProcess) -> None:
    status, body = get(daemon.base_url + "/localapi/v1/status", daemon.api_key)
    assert status == 404
    assert body["error"]["code"] == "not_found"


def test_two_daemons_started_at_once_exactly_one_serves(short_tmp: Path) -> None:
    env = {"KIROD_LOCK_TIMEOUT_S": "1"}
    first = DaemonProcess(short_tmp / "a", env=env)
    second = DaemonProcess(short_tmp / "a", env=env)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            codes = (first.proc.poll(), second.proc.poll())
            if codes.count(1) == 1:
                break
            time.sleep(0.1)
        survivor = first if second.proc.returncode == 1 else second
        loser = second if survivor is first else first
        assert loser.proc.returncode == 1
        assert survivor.proc.poll() is None
        status = survivor.wait_ready()
        assert status.pid == survivor.proc.pid
        assert "holds the lock" in loser.log() or "already running" in loser.log()
    finally:
        first.kill()
        second.kill()
