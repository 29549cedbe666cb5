"""Google's `Schema` (an OpenAPI 3.0 subset) as the JSON Schema Kiro's tool specs take.

Function declarations' `parameters` spell types in upper case (`OBJECT`, `STRING`: Gemini CLI's
and the SDKs' own form) and may say `nullable`; JSON Schema spells them in lower case and says
null as a type. Everything else (`properties`, `required`, `items`, `enum`, `description`,
`anyOf`, formats and bounds) has the same name and meaning in both and is kept. Property names
are data, never rewritten.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_SCHEMA_MAPS: Final = frozenset({"properties", "$defs", "definitions"})
_SCHEMA_LISTS: Final = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})


def json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` with lower-case types and `nullable: true` as a null type."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            lowered = value.lower()
            out[key] = lowered if lowered in _TYPES else value
        elif key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {
                name: json_schema(sub) if isinstance(sub, Mapping) else sub
                for name, sub in value.items()
            }
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [json_schema(sub) if isinstance(sub, Mapping) else sub for sub in value]
        elif key in ("items", "additionalProperties", "not") and isinstance(value, Mapping):
            out[key] = json_schema(value)
        elif key == "nullable":
            continue
        else:
            out[key] = value
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out
