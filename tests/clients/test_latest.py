"""`make clients-latest` (latest.py) tries every client versions.json pins, and captures and
compares every capture `capture.py` makes.

No client and no registry needed: installing and running the newest clients is `make
clients-latest` itself; these check what it would do.
"""

from __future__ import annotations

import json

import pytest

from tests.clients import capture, codex_env, install, latest

NEWEST = "99.0.0"


def test_every_pinned_client_is_tried_under_its_own_variable() -> None:
    assert list(latest.VERSION_ENVS) == list(install.TESTED_CLIENTS)
    assert len(set(latest.VERSION_ENVS.values())) == len(latest.VERSION_ENVS)


def test_every_capture_is_made_and_compared_with_the_pinned_ones() -> None:
    jobs = latest.jobs(dict.fromkeys(latest.VERSION_ENVS, NEWEST))
    assert [(job.client, job.variant) for job in jobs] == capture.every_capture()
    assert {job.client for job in jobs} == set(install.TESTED_CLIENTS)
    codex = [job.variant for job in jobs if job.client == codex_env.CLIENT]
    assert codex == list(capture.CODEX_MODELS)
    folder = install.cache_root() / "captures"
    for job in jobs:
        assert job.version == NEWEST
        assert job.out == folder / f"{job.client}-{NEWEST}-{job.variant}.json"
        assert json.loads(job.pinned.read_text())["version"] == install.pin(job.client).version


def test_the_hint_to_pin_names_the_clients_commands() -> None:
    hint = latest.pin_hint("kilo-code", "7.8.0")
    assert hint.startswith("to pin kilo-code 7.8.0: set it in tests/clients/versions.json")
    assert "`python -m tests.clients.install --relock kilo-code`" in hint
    assert "`python -m tests.clients.capture --client kilo-code`" in hint


def test_a_dry_run_lists_every_capture_and_installs_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert latest.main(["--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        f"{client} {variant}" for client, variant in capture.every_capture()
    ]
