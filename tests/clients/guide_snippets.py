"""The user guide's configuration for each client, as a user copies it: the fenced block in the
client's section of docs/guide/client-settings.md (`## opencode`, `## Cline CLI`, …), which names
kirod's default port; and its shell lines run as a user who pasted them.

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

CLIENTS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "client-settings.md"
GUIDE_PORT = "http://127.0.0.1:5476"
"""kirod's default base URL, as the guide's blocks write it."""
KEY_VARIABLE = "KIROD_API_KEY"
"""Where the guide's shell lines take kirod's key from."""


def client_section(heading: str) -> str:
    """The text of the clients page's `## heading` section, up to the next section."""
    sections = re.split(r"^## ", CLIENTS_PAGE.read_text(), flags=re.MULTILINE)
    (section,) = [text for text in sections if text.startswith(f"{heading}\n")]
    return section


def guide_block(heading: str, fence: str) -> str:
    """The one ```` ```fence ```` block of the client's `## heading` section, as written; it
    names kirod's default port."""
    block = guide_code(heading, fence)
    assert GUIDE_PORT in block, block
    return block


def guide_code(heading: str, fence: str) -> str:
    """The one ```` ```fence ```` block of the client's `## heading` section, as written (a
    script whose settings come from elsewhere, e.g. the section's shell lines)."""
    (block,) = re.findall(rf"^```{fence}\n(.*?)^```", client_section(heading), re.S | re.M)
    assert isinstance(block, str)
    return block


def guide_json(heading: str, base_url: str) -> dict[str, Any]:
    """The guide's JSON block for the client `heading`, pointed at `base_url` instead of the
    default port."""
    block = guide_block(heading, "json")
    document: dict[str, Any] = json.loads(block.replace(GUIDE_PORT, base_url))
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
    """`script` (the guide's shell lines) run by a shell in the client's working directory, as
    a user who pasted them: the client's environment without the variables the lines set, the
    key in KEY_VARIABLE, the client's binary first on PATH."""
    unset = set(set_by_script)
    env = {name: value for name, value in client.env.items() if name not in unset}
    env[KEY_VARIABLE] = key
    env["PATH"] = f"{client.binary.path.parent}:{env['PATH']}"
    return runs.run(kind, ["/bin/sh", "-c", script], client.workdir, env, timeout_s)
