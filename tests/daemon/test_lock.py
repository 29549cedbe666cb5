"""What the lock file tells a second instance: the holder's pid, and how to stop the holder."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kirod.daemon.lock import Holder, InstanceLock, how_to_stop, systemd_unit
from kirod.errors import AlreadyRunning

USER_UNIT = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/kirod.service\n"
SYSTEM_UNIT = "0::/system.slice/kirod.service\n"
TERMINAL = (
    "0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
    "app-org.gnome.Terminal.slice/vte-spawn-1.scope\n"
)
V1_USER_UNIT = (
    "12:pids:/user.slice/user-1000.slice/user@1000.service/app.slice/kirod.service\n"
    "1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/kirod.service\n"
)


@pytest.mark.parametrize(
    ("cgroup", "expected"),
    [
        (USER_UNIT, ("kirod.service", True)),
        (V1_USER_UNIT, ("kirod.service", True)),
        (SYSTEM_UNIT, ("kirod.service", False)),
        (TERMINAL, None),
        ("0::/user.slice/user-1000.slice/user@1000.service/init.scope\n", None),
        ("", None),
    ],
)
def test_the_service_unit_comes_from_the_cgroup(
    cgroup: str, expected: tuple[str, bool] | None
) -> None:
    assert systemd_unit(cgroup) == expected


def test_the_stop_command_names_how_kirod_runs() -> None:
    def stop(**changes: object) -> str:
        options: dict[str, object] = {
            "systemd": False,
            "cgroup": "",
            "launchd_label": None,
            "uid": 501,
        }
        options.update(changes)
        return how_to_stop(4242, **options)  # type: ignore[arg-type]

    assert stop() == "kill 4242"
    assert stop(systemd=True, cgroup=USER_UNIT) == "systemctl --user stop kirod"
    assert stop(systemd=True, cgroup=USER_UNIT.replace("kirod.", "kirod-work.")) == (
        "systemctl --user stop kirod-work"
    )
    assert stop(systemd=True, cgroup=SYSTEM_UNIT) == "sudo systemctl stop kirod"
    # Started from a terminal inside a systemd session: a plain process.
    assert stop(systemd=True, cgroup=TERMINAL) == "kill 4242"
    assert stop(systemd=False, cgroup=USER_UNIT) == "kill 4242"
    assert stop(launchd_label="dev.kirod") == "launchctl bootout gui/501/dev.kirod"
    assert stop(launchd_label="homebrew.mxcl.kirod") == "brew services stop kirod"


def test_holder_reads_new_and_old_lock_files() -> None:
    holder = Holder("123\nsystemctl --user stop kirod\n")
    assert (holder.pid, holder.stop) == ("123", "systemctl --user stop kirod")
    old = Holder("123\n")  # what earlier versions wrote
    assert (old.pid, old.stop) == ("123", "kill 123")
    empty = Holder("")
    assert empty.pid == "unknown"


async def test_a_refused_instance_is_told_once_then_times_out(tmp_path: Path) -> None:
    path = tmp_path / "kirod.lock"
    held = InstanceLock(path, "systemctl --user stop kirod")
    await held.acquire(0)
    try:
        told: list[Holder] = []
        second = InstanceLock(path)
        with pytest.raises(AlreadyRunning) as caught:
            await asyncio.wait_for(second.acquire(1.2, told.append), 5)
        assert [holder.stop for holder in told] == ["systemctl --user stop kirod"]
        assert "stop it first: systemctl --user stop kirod" in str(caught.value)
    finally:
        held.release()
