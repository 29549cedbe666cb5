"""A full disk, for real: the daemon's state directory is a small tmpfs mounted in a mount
namespace of its own (`unshare -m`), which the test fills with a file reached through
`/proc/PID/root`, then frees.

While it is full, requests whose purpose is not a write are served (the key's last use and the
operation log are lost and counted); those whose purpose is one (a stored response, a key, an
import, a login) are refused with a 507 `insufficient_storage` naming the file, before Kiro is
asked; a stored Responses stream whose store fails at its end finishes with `error` and
`response.failed`; `/ready` and `kiroctl status` say "disk full" until a write commits again.
Skipped, with the reason, where this machine cannot mount a tmpfs in a new mount namespace.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import anthropic
import openai
import pytest

from kirod.errors import ControlError
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, Script, ThreadedFake
from tests.support.kiro_env import daemon_env, import_account, kiro_ide_token_file
from tests.support.kiroctl import kiroctl

MODEL = "claude-sonnet-4-6"
TMPFS_SIZE = "4m"
# The daemon's state under its own tmpfs: `$0` is the mount point, the rest the daemon's command.
MOUNTED = 'mkdir -p "$0" && mount -t tmpfs -o size={size},mode=0700 kirod-state "$0" && exec "$@"'


def _cannot_mount() -> str | None:
    """Why a tmpfs cannot be mounted in a new mount namespace here; None when it can."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare and mount (util-linux) are not installed"
    with tempfile.TemporaryDirectory() as where:
        probe = subprocess.run(
            ["unshare", "-m", "sh", "-c", MOUNTED.format(size="64k"), where, "true"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    if probe.returncode != 0:
        return f"cannot mount a tmpfs in a new mount namespace: {probe.stderr.strip()}"
    return None


_WHY_NOT = "mount namespaces are Linux's" if sys.platform != "linux" else _cannot_mount()
pytestmark = pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or "")


def _written(out: BinaryIO, chunk: bytes) -> bool:
    """Whether `chunk` went to the file; False once the filesystem is full."""
    try:
        out.write(chunk)
        out.flush()
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        out.seek(0, os.SEEK_END)
        return False
    return True


class Disk:
    """The daemon's state filesystem as this process reaches it: through the daemon's root."""

    def __init__(self, proc: DaemonProcess) -> None:
        self.mount = Path(f"/proc/{proc.proc.pid}/root") / proc.state_dir.parent.relative_to("/")
        self.database = proc.state_dir / "kirod.db"
        self._filler = self.mount / "filler"

    def fill(self, leave: int = 0) -> None:
        """Write until the filesystem refuses, then give back `leave` bytes."""
        chunk = b"\0" * 65536
        with self._filler.open("wb") as out:
            while _written(out, chunk):
                pass
            if leave:
                out.truncate(max(0, out.tell() - leave))
        room = os.statvfs(self.mount)
        assert room.f_bavail * room.f_frsize <= leave

    def free(self) -> None:
        self._filler.unlink(missing_ok=True)

    @contextlib.contextmanager
    def full(self, leave: int = 0) -> Iterator[None]:
        self.fill(leave)
        try:
            yield
        finally:
            self.free()


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    state = module_tmp / "state"
    command = ["unshare", "-m", "sh", "-c", MOUNTED.format(size=TMPFS_SIZE), str(state)]
    proc = DaemonProcess(
        module_tmp,
        env=daemon_env(fake, {"KIROD_ENABLE_CHAT_COMPLETIONS": "true"}),
        command=[*command, sys.executable, "-m", "kirod"],
    )
    try:
        proc.wait_ready()
        import_account(proc, fake.fake.issue_social_account())
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def disk(daemon: DaemonProcess) -> Disk:
    return Disk(daemon)


@pytest.fixture
def service(fake: ThreadedFake) -> FakeKiro:
    fake.fake.clear_scripts()
    fake.fake.clear_requests()
    return fake.fake


def _new_key(daemon: DaemonProcess, name: str) -> str:
    """A stored key (its last use is written on its first request), not yet used, that may
    ask for the response cache."""
    made = kiroctl(daemon, "keys", "create", name, "--cache")
    assert made.exit_code == 0, made.output
    return made.stdout.strip()


def _ready(daemon: DaemonProcess) -> tuple[int, dict[str, Any]]:
    host, port = daemon.address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", "/ready", headers={"x-api-key": daemon.api_key})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def _chat(base_url: str, key: str) -> str:
    """A Messages request whose answer goes to the response cache and whose session is bound
    to its account: two more writes behind the answer."""
    with anthropic.Anthropic(base_url=base_url, api_key=key, max_retries=0) as claude:
        message = claude.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": "hello"}],
            extra_headers={"x-kirod-cache": "use", "x-claude-code-session-id": "disk-full"},
        )
    return "".join(block.text for block in message.content if block.type == "text")


def test_on_a_full_disk_requests_are_served_and_only_best_effort_writes_are_lost(
    daemon: DaemonProcess, disk: Disk, service: FakeKiro
) -> None:
    key = _new_key(daemon, "disk-best-effort")
    with disk.full():
        # The key's last use is written at admission, the operation log behind the answer.
        assert _chat(daemon.base_url, key).startswith("You said")
        with (
            anthropic.Anthropic(base_url=daemon.base_url, api_key=key, max_retries=0) as claude,
            claude.messages.stream(
                model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "streamed"}]
            ) as stream,
        ):
            assert stream.get_final_message().stop_reason == "end_turn"
        with openai.OpenAI(base_url=f"{daemon.base_url}/v1", api_key=key, max_retries=0) as gpt:
            unstored = gpt.responses.create(model=MODEL, input="not kept", store=False)
            assert unstored.status == "completed"
            chat = gpt.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "chat"}]
            )
            assert chat.choices[0].finish_reason == "stop"

        status, ready = _ready(daemon)
        assert status == 503
        assert "disk_full" in ready["reasons"], ready
        assert str(disk.database) in ready["message"]
        assert "disk full" in ready["message"]
        shown = kiroctl(daemon, "status")
        assert "disk full" in shown.output, shown.output
        assert str(disk.database) in shown.output
        # Lost, each at least once: the key's last use, and the operation log's, the response
        # cache's and the affinity map's batches (written behind, within 0.1 s).
        deadline = time.monotonic() + 5
        while daemon.client.status().skipped_writes < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert daemon.client.status().skipped_writes >= 4
        stats = kiroctl(daemon, "stats")  # flushes the log first: a lost batch is no error
        assert stats.exit_code == 0, stats.output
        assert "internal" not in stats.output

    assert _chat(daemon.base_url, key).startswith("You said")
    # Its operation-log row, written within 0.1 s, is the first write that commits.
    deadline = time.monotonic() + 5
    while (ready := _ready(daemon))[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ready[0] == 200, ready
    assert "disk full" not in kiroctl(daemon, "status").output
    log = daemon.log()
    assert "store_write_skipped" in log
    assert "disk full" in log
    assert "unhandled_error" not in log
    assert "internal_error" not in log
    # Logged at most once a minute, however many writes were lost.
    assert log.count("store_write_skipped") == 1


def test_a_stored_response_on_a_full_disk_is_refused_before_kiro_is_asked(
    daemon: DaemonProcess, disk: Disk, service: FakeKiro
) -> None:
    with (
        disk.full(),
        openai.OpenAI(
            base_url=f"{daemon.base_url}/v1", api_key=daemon.api_key, max_retries=0
        ) as gpt,
    ):
        for stream in (False, True):
            with pytest.raises(openai.APIStatusError) as refused:
                gpt.responses.create(model=MODEL, input="keep this", store=True, stream=stream)
            assert refused.value.status_code == 507
            error = refused.value.body
            assert isinstance(error, dict)
            assert error["code"] == "insufficient_storage", error
            assert "disk full" in error["message"]
            assert str(disk.database) in error["message"]
            assert refused.value.response.headers["x-should-retry"] == "false"
    assert service.requests("chat") == []


def test_a_stream_whose_store_finds_the_disk_full_ends_with_an_error_event(
    daemon: DaemonProcess, disk: Disk, service: FakeKiro
) -> None:
    # Room for the request's small writes but not for this answer, stored three times over
    # (the response, its conversation, the output items).
    service.enqueue(Script(reply=Reply(text="word " * 40_000), chunk_size=4096))
    with (
        disk.full(leave=131_072),
        openai.OpenAI(
            base_url=f"{daemon.base_url}/v1", api_key=daemon.api_key, max_retries=0
        ) as gpt,
    ):
        events = list(gpt.responses.create(model=MODEL, input="long", store=True, stream=True))
    kinds = [event.type for event in events]
    assert "response.output_item.done" in kinds
    assert "response.completed" not in kinds
    assert kinds[-2:] == ["error", "response.failed"], kinds[-4:]
    error = events[-2]
    assert error.code == "insufficient_storage"
    assert str(disk.database) in error.message
    # Nothing was stored that the client could continue from.
    with (
        openai.OpenAI(
            base_url=f"{daemon.base_url}/v1", api_key=daemon.api_key, max_retries=0
        ) as gpt,
        pytest.raises(openai.NotFoundError),
    ):
        gpt.responses.retrieve(events[-1].response.id)


def test_control_writes_on_a_full_disk_are_507s_that_say_so(
    daemon: DaemonProcess, disk: Disk, fake: ThreadedFake, service: FakeKiro
) -> None:
    tokens = fake.fake.issue_social_account()
    content = base64.b64encode(kiro_ide_token_file(tokens)).decode()
    with disk.full():
        created = kiroctl(daemon, "keys", "create", "on-a-full-disk")
        assert created.exit_code != 0
        assert "disk full" in created.output
        assert str(disk.database) in created.output
        assert "internal" not in created.output
        assert "Traceback" not in created.output
        for path, body in (
            ("/accounts/import", {"content_b64": content}),
            ("/logins", {}),
        ):
            with pytest.raises(ControlError) as refused:
                daemon.client.request("POST", path, body)
            assert refused.value.status == 507, path
            assert refused.value.code == "insufficient_storage"
            assert str(disk.database) in refused.value.message
        # Refused before AWS was asked for a device code, or Kiro for the account's profile.
        assert service.requests("oidc_register") == []
        assert service.requests("profiles") == []

    # Space is back: the same writes succeed.
    assert _new_key(daemon, "on-a-full-disk").startswith("sk-kirod-")
    assert import_account(daemon, tokens)["created"] is True
