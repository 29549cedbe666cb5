"""`make clients-latest`: the client tests and a capture against the newest Claude Code on npm.

    python tests/clients/latest.py [pytest arguments…]

Installs the newest published `@anthropic-ai/claude-code` into `.cache/clients/`, runs
`tests/clients` against it (`KIROD_TEST_CLIENT_VERSION`), captures its default `-p hello` request
into `.cache/clients/captures/` and prints how that differs from the pinned version's capture.
Exits with pytest's status, or 1 if the capture failed. Not part of `make test`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture
import install
from cc_env import CLIENT, VERSION_ENV

PYTEST_TIMEOUT_S = 600.0


def main(argv: list[str]) -> int:
    try:
        version = install.latest_version(CLIENT)
        binary = install.install(CLIENT, version)
    except install.InstallError as exc:
        print(f"cannot install the newest {CLIENT}: {exc}", file=sys.stderr)
        return 1
    pinned = install.pin(CLIENT).version
    print(f"newest {CLIENT}: {version} (pinned: {pinned}) at {binary}", flush=True)
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", str(install.HERE), *argv],
        env={**os.environ, VERSION_ENV: version},
        cwd=install.REPO,
        timeout=PYTEST_TIMEOUT_S,
        check=False,
    )
    out = install.cache_root() / "captures" / f"{CLIENT}-{version}-default.json"
    code = capture.main(
        ["--version", version, "--out", str(out), "--compare", str(capture.default_output(pinned))]
    )
    if code == 0 and version != pinned:
        print(
            f"to pin {version}: set it in tests/clients/versions.json, then run "
            "`python tests/clients/install.py --relock`, `make clients` and "
            "`python tests/clients/capture.py`"
        )
    summary = {"version": version, "pytest": tests.returncode, "capture": code}
    print(f"clients-latest: {json.dumps(summary)}")
    return tests.returncode or (1 if code else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
