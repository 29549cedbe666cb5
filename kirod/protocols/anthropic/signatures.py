"""Signatures for the thinking blocks kirod hands to Anthropic clients.

Clients echo thinking blocks back on the next turn, and only reasoning kirod itself produced may be
replayed upstream (a foreign or altered block would be forwarded as if Kiro had said it, or fail
with `THINKING_SIGNATURE_INVALID`). So every thinking block kirod emits carries a signature that
binds its text to the upstream signature with an HMAC under a per-install secret, and embeds that
upstream signature so it can be recovered when the block returns. Blocks without an upstream
signature (prompt-tag thinking) are signed too, so they verify and are then simply not replayed.

Formats (`<mac>` is the unpadded base64url HMAC-SHA256, always 43 characters):

    thinking    kirod.t1.<mac>                  no upstream signature
                kirod.t1.<mac>.<upstream>       the upstream signature, verbatim
    redacted    kirod.r1.<mac>.<data>           the upstream redacted data, verbatim

The thinking MAC covers `kirod.t1 NUL`, the UTF-8 thinking text's length (8 bytes, big-endian),
the text, then `0x00` (no upstream signature) or `0x01` and the upstream signature; the redacted
MAC covers `kirod.r1 NUL` and the data. The version tag in the prefix and in the MAC input lets a
later format coexist with this one. An empty upstream signature is the same as none.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Final

_THINKING: Final = "kirod.t1."
_REDACTED: Final = "kirod.r1."
_MAC_CHARS: Final = 43
MIN_SECRET_BYTES: Final = 16


@dataclass(frozen=True, slots=True)
class VerifiedSignature:
    """A signature kirod made; `upstream_signature` is what Kiro signed the reasoning with."""

    upstream_signature: str | None


def _utf8(text: str) -> bytes:
    # JSON may carry lone surrogates; they must sign and verify rather than raise.
    return text.encode("utf-8", "surrogatepass")


class ThinkingSigner:
    """Signs and verifies thinking blocks and wraps redacted reasoning, under one secret."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise ValueError(f"the signing secret must be at least {MIN_SECRET_BYTES} bytes")
        self._secret = secret

    def sign(self, thinking: str, upstream_signature: str | None) -> str:
        """The opaque signature for a thinking block kirod emits."""
        mac = self._thinking_mac(thinking, upstream_signature or None)
        tail = f".{upstream_signature}" if upstream_signature else ""
        return f"{_THINKING}{mac}{tail}"

    def verify(self, thinking: str, signature: str) -> VerifiedSignature | None:
        """The embedded upstream signature if kirod signed exactly this text, else None."""
        parsed = _split(signature, _THINKING)
        if parsed is None:
            return None
        mac, upstream = parsed
        if not _same(mac, self._thinking_mac(thinking, upstream)):
            return None
        return VerifiedSignature(upstream)

    def wrap_redacted(self, data: str) -> str:
        """Redacted reasoning as handed to the client: the upstream data, authenticated."""
        return f"{_REDACTED}{self._redacted_mac(data)}.{data}"

    def unwrap_redacted(self, wrapped: str) -> str | None:
        """The upstream data if kirod wrapped it, else None."""
        parsed = _split(wrapped, _REDACTED)
        if parsed is None:
            return None
        mac, data = parsed
        if data is None or not _same(mac, self._redacted_mac(data)):
            return None
        return data

    def _thinking_mac(self, thinking: str, upstream: str | None) -> str:
        text = _utf8(thinking)
        message = [b"kirod.t1\x00", len(text).to_bytes(8, "big"), text]
        message += [b"\x01", _utf8(upstream)] if upstream else [b"\x00"]
        return self._mac(b"".join(message))

    def _redacted_mac(self, data: str) -> str:
        return self._mac(b"kirod.r1\x00" + _utf8(data))

    def _mac(self, message: bytes) -> str:
        digest = hmac.new(self._secret, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _split(value: str, prefix: str) -> tuple[str, str | None] | None:
    """(mac, payload) of `prefix<mac>[.<payload>]`; None when the shape is wrong."""
    if not value.startswith(prefix):
        return None
    rest = value[len(prefix) :]
    mac, tail = rest[:_MAC_CHARS], rest[_MAC_CHARS:]
    if len(mac) != _MAC_CHARS:
        return None
    if not tail:
        return mac, None
    if tail[0] != "." or len(tail) == 1:
        return None
    return mac, tail[1:]


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(_utf8(given), expected.encode("ascii"))
