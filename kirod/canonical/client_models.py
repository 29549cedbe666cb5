"""The model ids the supported clients send with their own settings, for `kiroctl models`.

Each row names the client (and the version its id was read from: a capture or the client's own
catalog), what the id is to that client, and the id. Resolution never reads this table: it
serves any name by its Claude line or GPT tier (`resolution`); the table only lets a user see,
before a client sends them, what serves the ids they are likely to send.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClientModel:
    client: str
    role: str  # "default", "alias", "subagent", "catalog", "guide" (the user guide's setting)
    id: str


_CLAUDE_CODE = "Claude Code 2.1.332"
_CODEX = "Codex 0.171.0"

CLIENT_MODELS: tuple[ClientModel, ...] = (
    ClientModel(_CLAUDE_CODE, "default", "claude-opus-5-5"),
    *(ClientModel(_CLAUDE_CODE, "alias", word) for word in ("opus", "sonnet", "haiku", "fable")),
    ClientModel(_CLAUDE_CODE, "subagent fable", "claude-fable-5-2"),
    ClientModel(_CODEX, "default", "gpt-6.2-sol"),
    *(
        ClientModel(_CODEX, "catalog", slug)
        for slug in (
            "gpt-6.2-astra",
            "gpt-6.1-terra",
            "gpt-6.1-sol",
            "gpt-6-astra",
            "gpt-6-sol",
            "gpt-6-luna",
            "gpt-5.6-sol",
            "gpt-5.6-terra",
            "gpt-5.6-luna",
            "gpt-5.5",
        )
    ),
    ClientModel("opencode 1.18.34", "guide", "claude-sonnet-4-6"),
)
"""From `codex debug models` (priority order) and the client captures in tests/clients."""
