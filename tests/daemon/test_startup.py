"""Starting and stopping the real daemon as a subprocess: SIGHUP, a second instance on the same
state dir, paths kirod cannot use, the directories it shares with the user, and the API key file
of another instance."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kirod.testing.daemon import DaemonProcess

ROUTES_DAEMON = [
    sys.executable,
    str(Path(__file__).parents[1] / "integration" / "routes_daemon.py"),
]


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def get(url: str, key: str | None = None, timeout: float = 10.0) -> tuple[int, Any]:
    request = urllib.request.Request(url)  # noqa: S310 - loopback only
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def wait_for(condition: Callable[[], bool], timeout_s: float) -> float:
    """Poll every 20 ms; return the seconds it took, or fail after `timeout_s`."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not true after {timeout_s} s")
        time.sleep(0.02)
    return time.monotonic() - started


def failed_start(proc: DaemonProcess) -> tuple[int, str]:
    code = proc.wait(20)
    return code, proc.log()


# -- SIGHUP -------------------------------------------------------------------------------------


def test_sighup_drains_like_sigterm_and_exits_0(short_tmp: Path) -> None:
    proc = DaemonProcess(short_tmp / "a", command=ROUTES_DAEMON)
    try:
        proc.wait_ready()
        answers: list[tuple[int, Any]] = []
        request = threading.Thread(
            target=lambda: answers.append(get(proc.base_url + "/test/slow?s=1", proc.api_key)),
            daemon=True,
        )
        request.start()
        time.sleep(0.3)  # the request is in flight
        assert proc.stop(signal.SIGHUP, timeout_s=15) == 0
        request.join(10)
        assert answers == [(200, {"slept": 1.0})]  # drained, not cut
        assert not proc.socket_path.exists()
        log = proc.log()
        assert "shutdown reason=SIGHUP" in log
        assert "stopped exit_code=0" in log
    finally:
        proc.kill()


# -- a second instance --------------------------------------------------------------------------


def test_a_second_instance_says_at_once_who_it_waits_for_and_how_to_stop_it(
    short_tmp: Path,
) -> None:
    # Not a service, even when the tests themselves run in one.
    first = DaemonProcess(short_tmp / "a", env={"INVOCATION_ID": "", "XPC_SERVICE_NAME": ""})
    try:
        first.wait_ready()
        second = DaemonProcess(first.root, env={"KIROD_LOCK_TIMEOUT_S": "8"})
        waiting = f"waiting for kirod (pid {first.proc.pid}) to release"
        wait_for(lambda: waiting in second.log(), 7.5)
        # Said while it waits, not once the wait is over (a loaded machine may take seconds
        # just to start the interpreter, so the bound is the wait itself, not the clock).
        assert second.proc.poll() is None
        assert f"{first.state_dir / 'kirod.lock'} (up to 8 s)" in second.log()
        assert second.wait(20) == 1
        log = second.log()
        # The first one is a plain process here, not a service: its pid is how to stop it.
        assert f"stop it first: kill {first.proc.pid}" in log
        assert "systemctl" not in log
        assert get(first.base_url + "/health")[0] == 200
    finally:
        first.kill()


# -- paths kirod cannot use ---------------------------------------------------------------------


def _proc_runtime_dir(root: Path) -> tuple[dict[str, str], list[str], str, str]:
    return (
        {"XDG_RUNTIME_DIR": "/proc/kirod-test-runtime"},
        [],
        "/proc/kirod-test-runtime",
        "socket_path",
    )


def _state_dir_below_a_file(root: Path) -> tuple[dict[str, str], list[str], str, str]:
    (root / "file").write_text("not a directory\n")
    state = root / "file" / "state"
    return {}, ["--state-dir", str(state)], str(root / "file"), "state_dir"


def _key_file_below_a_file(root: Path) -> tuple[dict[str, str], list[str], str, str]:
    (root / "file").write_text("not a directory\n")
    key = root / "file" / "api-key"
    return {"KIROD_API_KEY_FILE": str(key)}, [], str(root / "file"), "api_key_file"


def _unwritable_state_dir(root: Path) -> tuple[dict[str, str], list[str], str, str]:
    state = root / "readonly"
    state.mkdir(mode=0o500)
    return {}, ["--state-dir", str(state)], str(state), "state_dir"


CASES = {
    "runtime dir in /proc": _proc_runtime_dir,
    "state dir below a regular file": _state_dir_below_a_file,
    "api key file below a regular file": _key_file_below_a_file,
    "unwritable state dir": _unwritable_state_dir,
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_unusable_path_is_one_line_naming_it_and_the_fix_exit_2(
    short_tmp: Path, case: str
) -> None:
    if case == "unwritable state dir" and os.geteuid() == 0:
        pytest.skip("root can write any directory")
    root = short_tmp / "a"
    root.mkdir()
    env, args, named, setting = CASES[case](root)
    code, log = failed_start(DaemonProcess(root, env=env, args=args))
    assert "Traceback" not in log
    [line] = [line for line in log.splitlines() if "cannot start" in line]
    assert code == 2, log
    assert line.startswith("kirod: cannot start: ")
    assert named in line
    assert f"set {setting}" in line


# -- directories kirod did not create -----------------------------------------------------------


def test_a_shared_socket_directory_is_refused_and_left_as_it_was(short_tmp: Path) -> None:
    shared = short_tmp / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # noqa: S103 - the sticky, world-writable kind is what is tested
    proc = DaemonProcess(short_tmp / "a", env={"KIROD_SOCKET_PATH": str(shared / "kirod.sock")})
    code, log = failed_start(proc)
    assert mode(shared) == 0o1777  # kept its sticky bit and its mode
    assert code == 2, log
    assert "Traceback" not in log
    assert f"{shared} is writable by other users" in log
    assert not (shared / "kirod.sock").exists()


def test_an_existing_config_directory_keeps_its_mode(short_tmp: Path) -> None:
    config = short_tmp / "a" / "config" / "kirod"
    config.mkdir(parents=True)
    os.chmod(config, 0o755)  # noqa: S103 - as `mkdir` leaves it for a user writing config.toml
    proc = DaemonProcess(short_tmp / "a")
    try:
        proc.wait_ready()
        assert mode(config) == 0o755
        assert mode(proc.api_key_file) == 0o600
        assert mode(proc.socket_path.parent) == 0o700  # created by kirod
    finally:
        proc.kill()


# -- the API key file ---------------------------------------------------------------------------


def test_a_second_state_dir_never_overwrites_the_key_file_of_the_first(short_tmp: Path) -> None:
    first = DaemonProcess(short_tmp / "a")
    second: DaemonProcess | None = None
    try:
        first.wait_ready()
        key_file = first.api_key_file
        key = first.api_key
        # Same config dir, hence the same default api_key_file; its own state and socket.
        second = DaemonProcess(short_tmp / "b", env={"XDG_CONFIG_HOME": str(first.root / "config")})
        second.wait_ready()

        assert key_file.read_text().strip() == key
        assert get(first.base_url + "/ready", key)[0] == 503  # authenticated: no accounts yet
        own_file = second.state_dir / "api-key"
        own_key = own_file.read_text().strip()
        assert own_key != key
        assert mode(own_file) == 0o600
        assert get(second.base_url + "/ready", own_key)[0] == 503
        assert get(second.base_url + "/ready", key)[0] == 401
        log = second.log()
        assert "api_key_file_taken" in log
        assert str(key_file) in log
        assert str(own_file) in log
    finally:
        first.kill()
        if second is not None:
            second.kill()


def test_a_secret_given_as_a_flag_is_warned_about_and_not_logged(short_tmp: Path) -> None:
    secret = "sk-flag-secret-key-0123456789"
    proc = DaemonProcess(short_tmp / "flags", args=["--api-keys", secret])
    try:
        proc.wait_ready()
        log = proc.log()
        assert "secret_on_command_line option=--api-keys" in log
        assert "KIROD_API_KEYS" in log
        assert secret not in log
    finally:
        proc.kill()
