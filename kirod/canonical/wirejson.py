"""Compact JSON bytes for what kirod sends (SSE event data, the upstream request body), and the
decoding of what Kiro streams back.

With orjson installed (optional: `pip install orjson`), encoding is an order of magnitude faster;
without it, the standard library gives the same document. Both write compact UTF-8 (no spaces,
no ASCII escaping). Anything orjson refuses (an integer beyond 64 bits, a lone surrogate, a
mapping that is not a dict) falls back to the standard library, which accepts or rejects it
exactly as before. Floats may be spelled differently (`1e-05` or `1e-5`), never valued so.

`loads` is for Kiro's small event payloads, decoded per frame (6x faster with orjson). What
orjson rejects (NaN, a lone surrogate, bad UTF-8) goes to the standard library, which decodes or
rejects it as before; the one difference is that orjson reads an integer beyond 64 bits as a
float. Request bodies and tool-call arguments use orjson (`ORJSON_LOADS`) only where that
difference cannot arise (`kirod.protocols.fields.exact_orjson`).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any


def _stdlib_dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


_Loads = Callable[[bytes | bytearray | str], Any]


def _load_orjson() -> tuple[Callable[[Any], bytes], _Loads] | None:
    try:
        module = importlib.import_module("orjson")
    except ImportError:
        return None
    encode: Callable[[Any], bytes] = module.dumps
    decode: _Loads = module.loads
    return encode, decode


_ORJSON = _load_orjson()
_ORJSON_DUMPS, ORJSON_LOADS = _ORJSON if _ORJSON is not None else (None, None)
"""`ORJSON_LOADS`: orjson's own `loads`, None without orjson."""
BACKEND = "orjson" if _ORJSON is not None else "json"


def dumps(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON."""
    if _ORJSON_DUMPS is not None:
        try:
            return _ORJSON_DUMPS(value)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            pass
    return _stdlib_dumps(value)


def loads(data: bytes) -> Any:
    """The JSON document in `data`; raises `ValueError` (or `RecursionError`) as `json.loads`."""
    if ORJSON_LOADS is not None:
        try:
            return ORJSON_LOADS(data)
        except ValueError:  # orjson.JSONDecodeError is a ValueError
            pass
    return json.loads(data.decode("utf-8"))
