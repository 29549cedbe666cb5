"""What a step of a multi-exchange turn sees and answers: `Part`, `Next` and the `Step` protocol.

A step (a web search inside the turn, a continuation after a truncated tool call) is told how a
part of the turn ended (`Part`) and answers with the `Next` request to send, on the same account
and conversation, and the whole blocks kirod shows the client between the two parts, or None.
`kirod.upstream.turn` drives the parts and asks the steps. The steps know these types, never
the turn nor the exchange (which itself uses web search, for a search-only call), so the modules
depend one way: turn → exchange → websearch → step, and turn → step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kirod.canonical.assemble import CanonicalCompletion
from kirod.canonical.events import CanonicalEvent, ErrorEvent
from kirod.canonical.request import CanonicalRequest
from kirod.upstream.translate import Truncation

__all__ = ["Next", "Part", "Step"]


@dataclass(frozen=True, slots=True)
class Part:
    """How one part of the turn ended: its request, and the message it produced (`completion`:
    the blocks completed before a failure when `error` is set; `truncation`: the tool call Kiro
    cut off, which that error then reports)."""

    request: CanonicalRequest
    completion: CanonicalCompletion
    error: ErrorEvent | None = None
    number: int = 1  # 1 for the first exchange of the turn
    truncation: Truncation | None = None


@dataclass(frozen=True, slots=True)
class Next:
    """The next part: its request, and the whole blocks shown before it (indexed from 0). No
    request: the blocks are shown after the part's own, and the message ends as the part did."""

    request: CanonicalRequest | None
    shown: tuple[CanonicalEvent, ...] = ()


class Step(Protocol):
    async def after(self, part: Part) -> Next | None:
        """The part that follows `part`, or None when this step has nothing to add."""
