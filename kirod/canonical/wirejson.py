"""Compact JSON bytes for what kirod sends: SSE event data and the upstream request body.

With orjson installed (optional: `pip install orjson`), encoding is an order of magnitude faster;
without it, the standard library gives the same document. Both write compact UTF-8 (no spaces,
no ASCII escaping). Anything orjson refuses (an integer beyond 64 bits, a lone surrogate, a
mapping that is not a dict) falls back to the standard library, which accepts or rejects it
exactly as before. Floats may be spelled differently (`1e-05` or `1e-5`), never valued so.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any


def _stdlib_dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _load_orjson() -> Callable[[Any], bytes] | None:
    try:
        module = importlib.import_module("orjson")
    except ImportError:
        return None
    encode: Callable[[Any], bytes] = module.dumps
    return encode


_ORJSON_DUMPS = _load_orjson()
BACKEND = "orjson" if _ORJSON_DUMPS is not None else "json"


def dumps(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON."""
    if _ORJSON_DUMPS is not None:
        try:
            return _ORJSON_DUMPS(value)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            pass
    return _stdlib_dumps(value)
