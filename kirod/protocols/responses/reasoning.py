"""Reasoning: the request's `reasoning` options, `reasoning` output items, and sealed reasoning.

The request's `reasoning.effort` maps onto the canonical efforts (`minimal` is `low`; `none`
turns reasoning off); a `summary` asks for the thinking to be shown, as each `reasoning` item's
summary text.

Sealed reasoning is model thinking carried through the client as `encrypted_content`. A
Responses client that sends `include: ["reasoning.encrypted_content"]` (Codex does, with
`store: false`) keeps no server state; it replays each reasoning item verbatim on the next turn.
Kiro can only continue a reasoning chain from the original text and its upstream signature, so
both travel inside the item, encrypted and authenticated with a per-install key: the client can
neither read the thinking it did not ask to see nor forge reasoning that kirod will replay.

Token format: `krs1_` + base64url(nonce ‖ AES-256-GCM ciphertext ‖ tag), no padding, with the
associated data `kirod-reasoning-v1`. The plaintext is compact JSON, `{"t": text, "s": signature}`
for thinking, `{"r": data}` for redacted (opaque) reasoning, or `{"c": summary}` for the summary
a compaction item carries (`compaction.py`). Anything that is not such a token
under this key — OpenAI's own blobs, another install's, a truncated or edited one — opens to
`None`, and the decoder drops it rather than failing the request.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kirod.canonical.request import Effort, Reasoning, RedactedThinkingBlock, ThinkingBlock
from kirod.protocols.fields import invalid, string_field

PREFIX: Final = "krs1_"
KEY_BYTES: Final = 32
_ASSOCIATED_DATA: Final = b"kirod-reasoning-v1"
_NONCE_BYTES: Final = 12
_TAG_BYTES: Final = 16

_EFFORTS: Final[Mapping[str, Effort]] = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "max",
}
_SUMMARIES: Final = frozenset({"auto", "concise", "detailed"})


def reasoning_options(value: object) -> tuple[Reasoning | None, dict[str, Any] | None, bool]:
    """`reasoning` → canonical Reasoning (None for effort `none`), its echo, summary wanted."""
    if value is None:
        return None, None, False
    if not isinstance(value, Mapping):
        raise invalid("reasoning", "must be an object", "invalid_type")
    effort = string_field(value, "effort", "reasoning")
    if effort is not None and effort != "none" and effort not in _EFFORTS:
        raise invalid(
            "reasoning.effort", "must be one of none, minimal, low, medium, high, xhigh, max"
        )
    summary = string_field(value, "summary", "reasoning")
    summary = summary or string_field(value, "generate_summary", "reasoning")
    if summary is not None and summary not in _SUMMARIES:
        raise invalid("reasoning.summary", "must be one of auto, concise, detailed")
    echo = {"effort": effort, "summary": summary}
    if effort == "none":
        return None, echo, False
    canonical = Reasoning(effort=_EFFORTS[effort] if effort else None, summary=summary)
    return canonical, echo, summary is not None


def reasoning_item(rs_id: str, summary: str | None, encrypted: str | None) -> dict[str, Any]:
    """A reasoning item; the summary is the thinking text, shown only when one was requested."""
    item: dict[str, Any] = {
        "id": rs_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}] if summary else [],
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


class ReasoningBox:
    """Seals reasoning into `encrypted_content` strings and opens the ones it sealed.

    `key` is 32 bytes, e.g. a purpose-specific key derived from the per-install secret.
    """

    __slots__ = ("_aead",)

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"the reasoning key must be {KEY_BYTES} bytes, not {len(key)}")
        self._aead = AESGCM(key)

    def seal(self, text: str, signature: str | None) -> str:
        """Seal thinking text and its upstream signature (None when the model gave none)."""
        return self._seal({"t": text, "s": signature})

    def seal_redacted(self, data: str) -> str:
        """Seal an opaque redacted-reasoning blob, which replays upstream as it came."""
        return self._seal({"r": data})

    def seal_summary(self, summary: str) -> str:
        """Seal the summary of a compacted conversation (a `compaction` item's content)."""
        return self._seal({"c": summary})

    def open_summary(self, token: str) -> str | None:
        """A sealed compaction summary, or None for anything else."""
        payload = self._open(token)
        summary = payload.get("c") if isinstance(payload, dict) else None
        return summary if isinstance(summary, str) else None

    def open(self, token: str) -> tuple[str, str | None] | None:
        """The thinking text and signature, or None for anything but sealed thinking."""
        block = self.open_block(token)
        if isinstance(block, ThinkingBlock):
            return block.thinking, block.signature
        return None

    def open_block(self, token: str) -> ThinkingBlock | RedactedThinkingBlock | None:
        """The sealed reasoning as a canonical block, or None when foreign/altered/truncated."""
        return _block(self._open(token))

    def _open(self, token: str) -> object:
        """The authenticated plaintext JSON of a token this box sealed, else None."""
        if not token.startswith(PREFIX):
            return None
        try:
            raw = base64.b64decode(_pad(token[len(PREFIX) :]), altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            return None
        if len(raw) < _NONCE_BYTES + _TAG_BYTES:
            return None
        try:
            plain = self._aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _ASSOCIATED_DATA)
        except InvalidTag:
            return None
        return json.loads(plain)

    def _seal(self, payload: dict[str, str | None]) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        plain = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        sealed = nonce + self._aead.encrypt(nonce, plain, _ASSOCIATED_DATA)
        return PREFIX + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")


def _pad(text: str) -> bytes:
    """Restore the padding the token omits; non-ASCII text is not base64url (ValueError)."""
    return (text + "=" * (-len(text) % 4)).encode("ascii")


def _block(payload: object) -> ThinkingBlock | RedactedThinkingBlock | None:
    """Authenticated plaintext is ours, but a shape check keeps a future format from crashing."""
    if not isinstance(payload, dict):
        return None
    redacted, text, signature = payload.get("r"), payload.get("t"), payload.get("s")
    if isinstance(redacted, str):
        return RedactedThinkingBlock(redacted)
    if isinstance(text, str) and (signature is None or isinstance(signature, str)):
        return ThinkingBlock(text, signature)
    return None
