"""`make clients-latest`: the client tests and captures against the newest published clients.

    python -m tests.clients.latest [pytest arguments…]
    python -m tests.clients.latest --dry-run     # what it would install, capture and compare

Installs the newest published version of every client versions.json pins (`@anthropic-ai/
claude-code`, `@openai/codex`, opencode's Linux x64 package, Kilo Code, Cline, Continue, Copilot
CLI, aider, llm, Gemini CLI, pi, the agent SDKs) into `.cache/clients/`, runs `tests/clients`
against them (`KIROD_TEST_CLIENT_VERSION`, `KIROD_TEST_CODEX_VERSION`,
`KIROD_TEST_OPENCODE_VERSION`, `KIROD_TEST_<CLIENT>_VERSION` for the others), captures what each
sends as `capture.py --client NAME` does (Codex once per model of `capture.CODEX_MODELS`) into
`.cache/clients/captures/`, and prints how each capture differs from the pinned version's
(`capture_diff.differences`) and how to pin a newer version whose capture worked. Exits with
pytest's status, or 1 if an install or a capture failed. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.clients import capture, cc_env, codex_env, install, opencode_env

PYTEST_TIMEOUT_S = 600.0
VERSION_ENVS = {
    cc_env.CLIENT: cc_env.VERSION_ENV,
    codex_env.CLIENT: codex_env.VERSION_ENV,
    opencode_env.CLIENT: opencode_env.VERSION_ENV,
    **{
        client: install.env_names(client)[1]
        for client in install.TESTED_CLIENTS
        if client not in (cc_env.CLIENT, codex_env.CLIENT, opencode_env.CLIENT)
    },
}
"""Each client `make clients-latest` tries, and the variable that points the tests at it."""


@dataclass(frozen=True)
class Job:
    """One capture of a client at its newest version, and the pinned one's to compare with."""

    client: str
    version: str
    variant: str
    out: Path
    pinned: Path


def jobs(newest: Mapping[str, str]) -> list[Job]:
    """Every capture `capture.py` makes, of each client at its `newest` version, written beside
    the installs."""
    folder = install.cache_root() / "captures"
    return [
        Job(
            client,
            newest[client],
            variant,
            folder / capture.output(client, newest[client], variant).name,
            capture.pinned_output(client, variant),
        )
        for client, variant in capture.every_capture()
    ]


def pin_hint(client: str, version: str) -> str:
    return (
        f"to pin {client} {version}: set it in tests/clients/versions.json, then run "
        f"`python -m tests.clients.install --relock {client}`, `make clients` and "
        f"`python -m tests.clients.capture --client {client}`"
    )


def _install_newest() -> tuple[dict[str, str], list[str]]:
    """The version of each client to try (its pin when the newest cannot be installed), and the
    clients whose newest could not be."""
    newest: dict[str, str] = {}
    uninstallable = []
    for client in VERSION_ENVS:
        pinned = install.pin(client).version
        try:
            version = install.latest_version(client)
            binary = install.install(client, version)
        except install.InstallError as exc:
            # Its tests run at the pin; the exit status still says the newest failed.
            print(f"cannot install the newest {client}: {exc}", file=sys.stderr)
            uninstallable.append(client)
            newest[client] = pinned
            continue
        print(f"newest {client}: {version} (pinned: {pinned}) at {binary}", flush=True)
        newest[client] = version
    return newest, uninstallable


def _capture(job: Job) -> int:
    binary = install.installed(job.client, job.version)
    if binary is None:
        print(f"{job.client} {job.version} is not installed", file=sys.stderr)
        return 2
    return capture.capture_to(job.client, binary, job.variant, job.out, job.pinned)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the captures and comparisons for the pinned versions; install nothing",
    )
    args, pytest_args = parser.parse_known_args(argv)
    if args.dry_run:
        for job in jobs({client: install.pin(client).version for client in VERSION_ENVS}):
            print(f"{job.client} {job.variant}: capture into {job.out}, compare with {job.pinned}")
        return 0
    newest, uninstallable = _install_newest()
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", str(install.HERE), *pytest_args],
        env={**os.environ, **{VERSION_ENVS[client]: newest[client] for client in VERSION_ENVS}},
        cwd=install.REPO,
        timeout=PYTEST_TIMEOUT_S,
        check=False,
    )
    captured: dict[str, int] = {}
    for job in jobs(newest):
        code = _capture(job)
        captured[job.client] = captured.get(job.client, 0) or code
    for client, code in captured.items():
        if code == 0 and newest[client] != install.pin(client).version:
            print(pin_hint(client, newest[client]))
    summary = {
        "pytest": tests.returncode,
        "clients": {
            client: {
                "version": newest[client],
                "pinned": install.pin(client).version,
                "capture": captured[client],
            }
            for client in captured
        },
        "not_installed": uninstallable,
    }
    print(f"clients-latest: {json.dumps(summary)}")
    failed = any(captured.values()) or uninstallable
    return tests.returncode or (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
