"""Compaction for Codex: a summary of the conversation, sealed into one `compaction` item.

Codex asks the server to compact in two ways (docs/CLIENTS.md §3.3): `POST /v1/responses/compact`
(v1, unary JSON, `{"output": [items]}`) or an ordinary `/v1/responses` turn whose input carries
`{"type": "compaction_trigger"}` (v2). Either way the answer must hold exactly one
`{"type": "compaction", "encrypted_content": …}` item, which Codex sends back in later turns in
place of the history it replaces.

Kiro cannot compact, so kirod runs one summarisation turn: the conversation so far, tools off, then
`SUMMARY_INSTRUCTION` as the last user turn: an instruction in kirod's own words, sent only because
the client asked for exactly this (docs/guide/apis.md lists every text kirod adds). The model's
answer is sealed (`ReasoningBox.seal_summary`, AES-GCM under the install's key); when the item
comes back, the decoder opens it into a user turn holding the summary. A blob kirod did not seal
(OpenAI's, another install's, an edited one) is a 400 naming the item: dropping it would silently
lose the conversation it stands for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kirod.canonical.token_count import estimate_text_tokens
from kirod.protocols.responses.reasoning import ReasoningBox

SUMMARY_INSTRUCTION: Final = (
    "Summarise the conversation above so that it can continue from the summary alone: the "
    "user's goal and constraints, what has been done (files read and changed, commands run and "
    "what they showed), decisions made and why, open problems, and the next steps. Keep names, "
    "paths, identifiers and error messages exact. Answer with the summary only."
)
"""The user turn that ends a compaction request (see the module docstring)."""

TRIGGER: Final = "compaction_trigger"
ITEM_TYPES: Final = frozenset({"compaction", "compaction_summary"})


def compaction_item(item_id: str, box: ReasoningBox, summary: str) -> dict[str, Any]:
    """The one output item of a compaction; `item_id` starts with `cmp_`, as Codex requires."""
    return {"id": item_id, "type": "compaction", "encrypted_content": box.seal_summary(summary)}


RETAINED_USER_TOKENS: Final = 20_000
"""How much of the user's own words a v1 compaction hands back beside the summary (newest
first), as OpenAI's endpoint keeps user messages: what was asked stays verbatim."""


def retained_user_messages(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The newest user message items of `items` within `RETAINED_USER_TOKENS`, in order."""
    kept: list[dict[str, Any]] = []
    budget = RETAINED_USER_TOKENS
    for item in reversed(items):
        if item.get("type", "message") != "message" or item.get("role") != "user":
            continue
        content = item.get("content")
        parts = content if isinstance(content, list) else []
        text = "".join(p.get("text", "") for p in parts if isinstance(p, Mapping))
        budget -= estimate_text_tokens(text)
        if budget < 0:
            break
        kept.append(dict(item))
    kept.reverse()
    return kept
