"""What each pinned client sends, as committed in tests/clients/captures/, for the tests that
replay it (protocols, upstream, integration and the client tests). The captures are recorded by
`python -m tests.clients.capture`; versions.json (`tests.clients.install`) says which version of a
client is pinned.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.clients import install

CLAUDE_CODE = "claude-code"
CODEX = "codex"
"""The two clients whose captures other folders replay, as versions.json names them."""

CODE_MODE_MODEL = "gpt-5.6-sol"
"""A slug Codex's bundled catalog marks `tool_mode: code_mode_only` (docs/CLIENTS.md §3.2)."""
CLAUDE_MODEL = "claude-sonnet-4-6"
"""A model Codex does not know: the classic shape, top-level function tools."""

PROMPT = "hello"
"""What each client is asked when it is captured (but Cline: `capture.CLINE_PROMPT`)."""
DEFAULT = "default"
"""The one variant of every client but Codex, whose variants are its models."""
CAPTURES = install.HERE / "captures"


def output(client: str, version: str, variant: str = DEFAULT) -> Path:
    """Where the capture of `client` at `version` is committed."""
    return CAPTURES / f"{client}-{version}-{variant}.json"


@dataclass(frozen=True)
class Recorded:
    """One API request of the committed capture of a pinned client: what tests replay."""

    client: str
    version: str
    path: str
    headers: dict[str, str]  # as sent, minus credentials (a test adds its own)
    body: dict[str, Any]  # a private copy: a test may change it


def pinned_requests(client: str = CLAUDE_CODE, model: str | None = None) -> list[Recorded]:
    """The model requests the pinned `client` sends with default settings (Codex: for `model`,
    by default the classic shape), in order. Raises FileNotFoundError when versions.json names
    a version nobody captured yet: run `python -m tests.clients.capture --client CLIENT`."""
    version = install.pin(client).version
    default = CLAUDE_MODEL if client == CODEX else DEFAULT
    document = json.loads(output(client, version, model or default).read_text())
    return [
        Recorded(client, version, r["path"], dict(r["headers"]), r["body"])
        for r in document["requests"]
        if r["path"].startswith("/v1/")
    ]


def pinned_request(client: str = CLAUDE_CODE, model: str | None = None) -> Recorded:
    """The first of `pinned_requests`."""
    return pinned_requests(client, model)[0]
