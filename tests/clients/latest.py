"""`make clients-latest`: the client tests and captures against the newest published clients.

    python tests/clients/latest.py [pytest arguments…]

Installs the newest published version of every client versions.json pins (`@anthropic-ai/
claude-code`, `@openai/codex`, opencode's Linux x64 package, Kilo Code, Cline, Continue, Copilot
CLI, aider, llm) into `.cache/clients/`, runs `tests/clients` against them
(`KIROD_TEST_CLIENT_VERSION`, `KIROD_TEST_CODEX_VERSION`, `KIROD_TEST_OPENCODE_VERSION`,
`KIROD_TEST_<CLIENT>_VERSION` for the others),
captures Claude Code's default `-p hello` request, Codex's first `codex exec hello` request (once
per model of `capture.CODEX_MODELS`) and opencode's `run hello` requests into
`.cache/clients/captures/` and prints how each differs from the pinned version's capture (for
Codex: paths, headers and `x-codex-beta-features` values, top-level fields, input item types,
message roles, tool types and names). Exits with pytest's status, or 1 if an install or a capture
failed. Not part of `make test`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture
import codex_env
import install
import opencode_env
from cc_env import CLIENT, VERSION_ENV

PYTEST_TIMEOUT_S = 600.0
CLIENTS = {
    CLIENT: VERSION_ENV,
    codex_env.CLIENT: codex_env.VERSION_ENV,
    opencode_env.CLIENT: opencode_env.VERSION_ENV,
    **{
        client: install.env_names(client)[1]
        for client in install.TESTED_CLIENTS
        if client not in (CLIENT, codex_env.CLIENT, opencode_env.CLIENT)
    },
}
"""Each client `make clients-latest` tries, and the variable that points the tests at it."""


def main(argv: list[str]) -> int:
    newest: dict[str, str] = {}
    uninstallable = []
    for client in CLIENTS:
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
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", str(install.HERE), *argv],
        env={**os.environ, **{CLIENTS[client]: newest[client] for client in CLIENTS}},
        cwd=install.REPO,
        timeout=PYTEST_TIMEOUT_S,
        check=False,
    )
    captures = install.cache_root() / "captures"

    version, pinned = newest[CLIENT], install.pin(CLIENT).version
    out = captures / f"{CLIENT}-{version}-default.json"
    code = capture.main(
        ["--version", version, "--out", str(out), "--compare", str(capture.default_output(pinned))]
    )

    codex_version, codex_pinned = newest[codex_env.CLIENT], install.pin(codex_env.CLIENT).version
    codex_code = 0
    for model in capture.CODEX_MODELS:
        codex_out = captures / f"{codex_env.CLIENT}-{codex_version}-{model}.json"
        pinned_capture = capture.codex_output(codex_pinned, model)
        arguments = ["--client", codex_env.CLIENT, "--version", codex_version, "--model", model]
        arguments += ["--out", str(codex_out), "--compare", str(pinned_capture)]
        codex_code = capture.main(arguments) or codex_code

    opencode_version = newest[opencode_env.CLIENT]
    opencode_pinned = install.pin(opencode_env.CLIENT).version
    opencode_out = captures / f"{opencode_env.CLIENT}-{opencode_version}-default.json"
    arguments = ["--client", opencode_env.CLIENT, "--version", opencode_version]
    arguments += ["--out", str(opencode_out)]
    arguments += ["--compare", str(capture.opencode_output(opencode_pinned))]
    opencode_code = capture.main(arguments)

    if code == 0 and version != pinned:
        print(
            f"to pin {version}: set it in tests/clients/versions.json, then run "
            "`python tests/clients/install.py --relock`, `make clients` and "
            "`python tests/clients/capture.py`"
        )
    if codex_code == 0 and codex_version != codex_pinned:
        print(
            f"to pin {codex_env.CLIENT} {codex_version}: set it in tests/clients/versions.json, "
            f"then run `python tests/clients/install.py --relock {codex_env.CLIENT}`, "
            "`make clients` and `python tests/clients/capture.py --client codex`"
        )
    if opencode_code == 0 and opencode_version != opencode_pinned:
        print(
            f"to pin {opencode_env.CLIENT} {opencode_version}: set it in "
            "tests/clients/versions.json, then run `python tests/clients/install.py --relock "
            f"{opencode_env.CLIENT}`, `make clients` and "
            "`python tests/clients/capture.py --client opencode`"
        )
    summary = {
        "version": version,
        "pytest": tests.returncode,
        "capture": code,
        "codex": {"version": codex_version, "capture": codex_code},
        "opencode": {"version": opencode_version, "capture": opencode_code},
        "newest": newest,
        "not_installed": uninstallable,
    }
    print(f"clients-latest: {json.dumps(summary)}")
    failed = code or codex_code or opencode_code or uninstallable
    return tests.returncode or (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
