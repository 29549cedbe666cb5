"""The cyclic garbage collector, set for a daemon that streams.

CPython collects its youngest generation every 700 net allocations of tracked objects. One
streamed request allocates thousands that live as long as the request (events, frames, futures,
the transports), so at 64 streams a young collection ran every three requests and each one
walked the tens of thousands of objects the requests in flight held, and every few hundred a
full collection walked all ~70,000 objects, most of them modules, classes and functions
imported at start: about 0.35 ms of a streamed request's 2.5 ms of CPU, and a full collection
held the event loop ~40 ms (bench/README.md, "The garbage collector").

`settle()`, called once before serving, when every module is imported: collect, then freeze
what is loaded (it lives as long as the process; a frozen object is never walked again), and
raise the young threshold above what a busy loop holds in flight. Cycles are still collected,
only in larger batches: each request leaves about one small cycle (asyncio's closed socket
transport), so at most ~4,000 of them wait for a collection.
"""

from __future__ import annotations

import gc
from typing import Final

YOUNG_THRESHOLD: Final = 20_000
"""Net allocations of tracked objects between young collections (CPython's default: 700)."""


def settle() -> None:
    """Freeze the loaded objects and raise the young generation's threshold (module docstring)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
