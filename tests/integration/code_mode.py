"""The request Codex's code mode starts from, replayed by the code-mode and prompt-caching tests."""

from __future__ import annotations

from typing import Any

from tests.support import captures
from tests.support.captures import CODE_MODE_MODEL


def captured_body() -> dict[str, Any]:
    """The pinned Codex's first `/v1/responses` body for gpt-5.6-sol, as captured."""
    return captures.pinned_request("codex", CODE_MODE_MODEL).body
