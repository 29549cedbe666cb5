"""Thought signatures: how reasoning kirod produced comes back to it through a Gemini client.

A Gemini answer's thinking is `thought: true` parts, the last carrying a `thoughtSignature`
(bytes, so base64 in JSON). kirod's signature there is the one its other codecs give thinking
(an HMAC binding the text to Kiro's own signature, `kirod.http.services`' signer), base64-encoded:
a client that sends the thought parts back with it has its reasoning replayed upstream, and
anything else (another server's signature, an edited text, no text at all, as Gemini CLI keeps
only the signature) is dropped, never forwarded as if Kiro had said it.
"""

from __future__ import annotations

import base64
import binascii
from typing import Protocol


class Verified(Protocol):
    @property
    def upstream_signature(self) -> str | None: ...


class Signer(Protocol):
    """What the codec needs of the install's thinking signer."""

    def sign(self, thinking: str, upstream_signature: str | None) -> str: ...

    def verify(self, thinking: str, signature: str) -> Verified | None: ...


def thought_signature(signer: Signer, thinking: str, upstream_signature: str | None) -> str:
    """The `thoughtSignature` of a turn's reasoning, in the URL-safe alphabet, which the SDKs
    read as bytes whichever alphabet they expect."""
    signed = signer.sign(thinking, upstream_signature).encode()
    return base64.urlsafe_b64encode(signed).decode("ascii")


def opened_signature(value: str) -> str | None:
    """kirod's signature inside a `thoughtSignature` (either base64 alphabet, as a client may
    encode the bytes again its own way), or None when it is not base64 text."""
    try:
        urlsafe = value.replace("+", "-").replace("/", "_")
        return base64.b64decode(urlsafe, altchars=b"-_", validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return None
