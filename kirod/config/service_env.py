"""What the service manager (systemd, launchd) and the desktop session tell kirod through the
environment: the watchdog interval, who started it, how to show a desktop notification."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ServiceEnv:
    """What the service manager told us through the environment."""

    watchdog_interval_s: float | None
    systemd: bool = False  # started by systemd (INVOCATION_ID is set for every unit it runs)
    launchd_label: str | None = None  # the launchd job's label (XPC_SERVICE_NAME)
    desktop: Literal["notify-send", "osascript"] | None = None  # how to notify the session


def desktop_notifier(
    env: Mapping[str, str], platform: str
) -> Literal["notify-send", "osascript"] | None:
    """The program that shows a desktop notification in this session, if there is a session."""
    if platform == "darwin":
        return "osascript"
    if any(env.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS")):
        return "notify-send"
    return None


def load_service_env(
    env: Mapping[str, str] | None = None, platform: str = sys.platform
) -> ServiceEnv:
    """Read systemd's watchdog request (pings go out at half the configured interval) and
    which service manager, if any, started us."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    interval: float | None = None
    if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
        interval = int(usec) / 1_000_000 / 2
    label = env.get("XPC_SERVICE_NAME", "")
    return ServiceEnv(
        watchdog_interval_s=interval,
        systemd=bool(env.get("INVOCATION_ID")),
        # Apps started from a terminal on macOS carry "0" or "application.…" here.
        launchd_label=label if label and label != "0" and "application." not in label else None,
        desktop=desktop_notifier(env, platform),
    )
