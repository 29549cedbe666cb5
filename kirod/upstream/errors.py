"""Errors raised while talking to Kiro.

This is the upstream branch of the tree drawn in `kirod.errors`. Foreign exceptions met on the way
(aiohttp, botocore) are mapped into it by the upstream module that calls the foreign library.

    KirodError
    └── UpstreamError              talking to Kiro failed
        └── UpstreamProtocolError  the response stream is malformed: bad framing or CRC,
                                   oversized frame, truncated stream, undecodable payload
"""

from __future__ import annotations

from kirod.errors import KirodError


class UpstreamError(KirodError):
    """Base of every failure of the upstream Kiro service or of our exchange with it."""


class UpstreamProtocolError(UpstreamError):
    """Kiro's response violated the event-stream protocol; the stream cannot be trusted further."""
