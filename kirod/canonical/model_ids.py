"""What a client's model id may be: an identifier, never free text.

Every decoder checks the `model` it reads here (through `kirod.protocols.fields`), so a name
reaches the operation log, `kiroctl stats`, `kiroctl trace` and the console only as ASCII
letters, digits and `. _ : / @ [ ] -`. That is what real ids are made of: Claude Code's
`claude-sonnet-4-5[1m]`, a router's `anthropic/claude-…` or `openai/gpt-…`, opencode's
`kirod/claude-…`, Ollama's `glm-5:latest` and `hf.co/org/model:Q4_K_M`, Bedrock's
`us.anthropic.claude-…-v1:0`, Vertex's `claude-…@20250514`, Kiro's `CLAUDE_SONNET_4_5_…_V1_0`.
Nothing a terminal or a log reader would act on (escape sequences, line breaks, NUL) gets in,
and a refusal names the first bad character by its position and code point, never by itself.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Final

MAX_MODEL_CHARS: Final = 128
ALLOWED_CHARS: Final = string.ascii_letters + string.digits + "._:/@[]-"
_IDENTIFIER: Final = re.compile(r"[A-Za-z0-9._:/@\[\]-]+")
_SPELLED: Final = "letters, digits and . _ : / @ [ ] -"


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a name is no model id: the text for a 400 (after the field's name) and an OpenAI
    error code."""

    text: str
    code: str


def model_id_problem(name: str) -> Problem | None:
    """What is wrong with `name` as a model id; None when it is one."""
    if _IDENTIFIER.fullmatch(name) and len(name) <= MAX_MODEL_CHARS:
        return None
    if not name:
        return Problem("must not be empty", "invalid_value")
    if len(name) > MAX_MODEL_CHARS:
        return Problem(
            f"must be at most {MAX_MODEL_CHARS} characters ({len(name)} sent)", "string_too_long"
        )
    position, char = next((i, c) for i, c in enumerate(name) if c not in ALLOWED_CHARS)
    return Problem(
        f"character {position + 1} (U+{ord(char):04X}) is not allowed in a model id, "
        f"which is made of {_SPELLED}",
        "invalid_value",
    )
