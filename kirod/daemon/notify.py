"""systemd notifications (READY, STATUS, WATCHDOG, STOPPING); silent outside systemd."""

from __future__ import annotations

import sdnotify


class Notifier:
    def __init__(self) -> None:
        self._notifier = sdnotify.SystemdNotifier()

    def _send(self, message: str) -> None:
        self._notifier.notify(message)

    def ready(self, status: str) -> None:
        self._send(f"READY=1\nSTATUS={status}")

    def status(self, status: str) -> None:
        self._send(f"STATUS={status}")

    def watchdog(self) -> None:
        self._send("WATCHDOG=1")

    def stopping(self, status: str) -> None:
        self._send(f"STOPPING=1\nSTATUS={status}")
