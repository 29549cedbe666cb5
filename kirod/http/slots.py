"""The public listener's connection slots: which connection makes room at the cap, and when a
connection that sends nothing is closed.

A connection is idle while it has no request in flight: before its first request head is
complete (whether it has sent nothing or part of a head), and between keep-alive requests. At
the cap (`max_connections`) a new connection takes the slot of the connection idle longest, as
nginx reuses idle keep-alive connections and Envoy's overload manager closes them; a connection
with a request in flight (a stream, a WebSocket) is never closed for another. A connection that
has sent no byte `client_first_byte_timeout_s` after it opened is closed; header lines are
bounded by `client_header_timeout_s`, which aiohttp enforces.

Idle connections are kept in the order they became idle (opened, or finished their last
request), in an insertion-ordered dict: adding, removing and taking the oldest are O(1), and
bytes trickling in never make a connection look fresh. The first-byte deadlines fall in the
order connections open, so they sit in a second such dict, swept by one timer armed for the
earliest. Memory is one entry per open connection in each.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Protocol


class Slot(Protocol):
    def drop(self) -> None:
        """Close the connection at once, discarding what it has not sent yet."""
        ...


class Slots:
    def __init__(self, first_byte_s: float) -> None:
        self._first_byte_s = first_byte_s
        self._open: set[Slot] = set()
        self._idle: OrderedDict[Slot, None] = OrderedDict()
        self._silent: OrderedDict[Slot, float] = OrderedDict()  # first-byte deadlines
        self._sweep: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, slot: Slot) -> None:
        loop = asyncio.get_running_loop()
        self._open.add(slot)
        self._idle[slot] = None
        self._silent[slot] = loop.time() + self._first_byte_s
        if self._sweep is None:
            self._sweep = loop.call_at(self._silent[slot], self._expire)

    def heard(self, slot: Slot) -> None:
        """Its first byte arrived."""
        self._silent.pop(slot, None)

    def busy(self, slot: Slot) -> None:
        """A request head is complete: the connection has a request in flight."""
        self._silent.pop(slot, None)
        self._idle.pop(slot, None)

    def rested(self, slot: Slot) -> None:
        """Its request is answered and none follows yet: the youngest idle connection."""
        if slot in self._open:
            self._idle[slot] = None
            self._idle.move_to_end(slot)

    def closed(self, slot: Slot) -> None:
        self._open.discard(slot)
        self._idle.pop(slot, None)
        self._silent.pop(slot, None)

    def make_room(self) -> bool:
        """Close the connection idle longest; False when every one has a request in flight."""
        if not self._idle:
            return False
        slot = next(iter(self._idle))
        self.closed(slot)
        slot.drop()
        return True

    def _expire(self) -> None:
        self._sweep = None
        now = asyncio.get_running_loop().time()
        while self._silent:
            slot, deadline = next(iter(self._silent.items()))
            if deadline > now:
                self._sweep = asyncio.get_running_loop().call_at(deadline, self._expire)
                return
            self.closed(slot)
            slot.drop()
