"""The README's configuration for each client, as a user copies it: the fenced block under the
client's bold heading (`**opencode**`, `**Cline CLI**`, …), which names kirod's default port.

Imported by the client test modules (not a test module itself).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[2] / "README.md"
README_PORT = "http://127.0.0.1:5476"
"""kirod's default base URL, as the README's blocks write it."""


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
