"""How a report's optional fields are read from the JSON kiroctl received.

The daemon that wrote a document may be older than this kiroctl (a field it lacks) or newer (a
field of another type): either reads as None rather than breaking kiroctl.
"""

from __future__ import annotations


def number_or_none(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def text_or_none(value: object) -> str | None:
    return None if value is None else str(value)
