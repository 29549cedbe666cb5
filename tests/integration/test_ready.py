"""`/ready` names every reason the daemon cannot serve a model request."""

from __future__ import annotations

import json
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path

from kirod.testing.daemon import DaemonProcess


def ready(proc: DaemonProcess) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(proc.base_url + "/ready")  # noqa: S310
    request.add_header("Authorization", f"Bearer {proc.api_key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_an_unusable_response_store_is_reported(short_tmp: Path) -> None:
    first = DaemonProcess(short_tmp)
    first.wait_ready()
    assert ready(first)[1]["reasons"] == ["no_active_accounts"]
    assert first.stop() == 0
    with sqlite3.connect(first.state_dir / "kirod.db") as db:
        db.execute("DROP TABLE responses")
    second = DaemonProcess(short_tmp)
    try:
        second.wait_ready()
        status, body = ready(second)
        assert status == 503
        assert body["reasons"] == ["no_active_accounts", "reasoning_replay_store_unavailable"]
    finally:
        second.kill()
