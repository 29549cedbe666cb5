"""The README's configuration for each client, as a user copies it: the fenced block under the
client's bold heading (`**opencode**`, `**Cline CLI**`, …), which names kirod's default port;
and its shell lines run as a user who pasted them.

Imported by the client test modules (not a test module itself).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from tests.clients import runs

F = TypeVar("F", bound=runs.Finished)

README = Path(__file__).resolve().parents[2] / "README.md"
README_PORT = "http://127.0.0.1:5476"
"""kirod's default base URL, as the README's blocks write it."""
KEY_VARIABLE = "KIROD_API_KEY"
"""Where the README's shell lines take kirod's key from."""


def readme_block(heading: str, fence: str) -> str:
    """The one ```` ```fence ```` block after the README's `**heading**`, as written."""
    pattern = rf"\*\*{re.escape(heading)}\*\*.*?```{fence}\n(.*?)```"
    (block,) = re.findall(pattern, README.read_text(), re.DOTALL)
    assert isinstance(block, str)
    assert README_PORT in block, block
    return block


def readme_json(heading: str, base_url: str) -> dict[str, Any]:
    """The README's JSON block under `heading`, pointed at `base_url` instead of the default
    port."""
    document: dict[str, Any] = json.loads(
        readme_block(heading, "json").replace(README_PORT, base_url)
    )
    return document


def paste(
    kind: type[F],
    client: runs.Client,
    script: str,
    key: str,
    *,
    set_by_script: Iterable[str],
    timeout_s: float,
) -> F:
    """`script` (the README's shell lines) run by a shell in the client's working directory, as
    a user who pasted them: the client's environment without the variables the lines set, the
    key in KEY_VARIABLE, the client's binary first on PATH."""
    unset = set(set_by_script)
    env = {name: value for name, value in client.env.items() if name not in unset}
    env[KEY_VARIABLE] = key
    env["PATH"] = f"{client.binary.path.parent}:{env['PATH']}"
    return runs.run(kind, ["/bin/sh", "-c", script], client.workdir, env, timeout_s)
