"""The opt-in `x-kirod-credits` response header: Kiro's metered credits, for scripts.

A request sending `x-kirod-credits: 1` gets the credits Kiro metered for it (`meteringEvent`)
as a response header of the same name. Only non-streaming answers carry it: Kiro meters at the
end of its stream, after a streaming answer's headers are gone, and kirod does not invent an
early figure. Streaming callers read credits from `kiroctl stats` (or its JSON) instead.
Credits never go into the protocols' standard usage fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kirod.canonical.events import Usage

CREDITS_HEADER: Final = "x-kirod-credits"


def credits_headers(request_headers: Mapping[str, str], usage: Usage) -> dict[str, str]:
    """The header for an answer with `usage`, when the request asked and Kiro metered it."""
    if request_headers.get(CREDITS_HEADER, "").strip() != "1" or usage.credits is None:
        return {}
    return {CREDITS_HEADER: repr(round(usage.credits, 6))}
