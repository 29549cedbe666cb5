"""The tools of a Kiro payload: names (rule 10), specs (rules 7, 8, 11) and schemas (rule 13).

Rule numbers are kiro-protocol §2.3's, as in `kirod.upstream.payload`, which calls this module.
The one cache, of cleaned tool schemas, is bounded by bytes (`SchemaCache`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kirod.canonical.request import CanonicalRequest, ToolSpec, ToolUseBlock
from kirod.errors import ApiError, ErrorKind

MAX_TOOL_NAME = 64
MAX_DESCRIPTION = 10_000
TRUNCATED = "\n\n[description truncated]"
MAX_NESTING = 200
"""Tool inputs and schemas nested deeper are refused (the decoders stop at 128 already)."""


@dataclass(frozen=True, slots=True)
class ToolNameMap:
    """Names sent to Kiro → the client's names, for tool calls on the way out (rule 10)."""

    originals: Mapping[str, str] = field(default_factory=dict)

    def original(self, name: str) -> str:
        """The client's name for the tool Kiro calls `name`; unshortened names map to themselves."""
        return self.originals.get(name, name)


def too_deep(what: str) -> ApiError:
    return ApiError(
        ErrorKind.INVALID_REQUEST,
        f"a tool {what} nests more than {MAX_NESTING} levels deep",
        code="invalid_value",
    )


# -- tool names (rule 10) --------------------------------------------------------------------------


def tool_names(request: CanonicalRequest) -> list[str]:
    """Every tool name the payload will mention: declared tools, then tools used in history."""
    used = (
        block.name
        for message in request.messages
        for block in message.content
        if isinstance(block, ToolUseBlock)
    )
    return [*(tool.name for tool in request.tools), *used]


def shorten_tool_names(names: Iterable[str]) -> dict[str, str]:
    """Rule 10: names over 64 chars become prefix + "_" + 8 hex of SHA-256, unique per request.

    Kiro matches tool names case-insensitively (rule 8), so uniqueness is checked that way; a
    collision re-hashes with a counter, which keeps the result deterministic for a given tool set.
    """
    unique = list(dict.fromkeys(names))
    taken = {name.lower() for name in unique if len(name) <= MAX_TOOL_NAME}
    short: dict[str, str] = {}
    for name in unique:
        if len(name) <= MAX_TOOL_NAME:
            short[name] = name
            continue
        salt = 0
        while True:
            seed = name if salt == 0 else f"{name}#{salt}"
            digest = hashlib.sha256(seed.encode()).hexdigest()[:8]
            candidate = f"{name[: MAX_TOOL_NAME - 9]}_{digest}"
            if candidate.lower() not in taken:
                break
            salt += 1
        taken.add(candidate.lower())
        short[name] = candidate
    return short


# -- tools (rules 7, 8, 11, 13) --------------------------------------------------------------------


def tool_specs(
    declared: Sequence[ToolSpec],
    schemas: Sequence[bytes],
    names: Mapping[str, str],
    used: Iterable[str],
) -> list[dict[str, Any]]:
    """Rules 7 and 8: declare the client's tools plus every tool used in history.

    Kiro rejects toolResults without tools and uses of undeclared tools (matched
    case-insensitively); undeclared ones get a placeholder spec with an empty object schema.
    `schemas` are the declared tools' schemas as JSON (the size check had them made); `used`
    the names (as sent to Kiro) of the tools the history calls.
    """
    specs: list[dict[str, Any]] = []
    known: set[str] = set()
    for tool, schema in zip(declared, schemas, strict=True):
        name = names[tool.name]
        if name.lower() not in known:
            known.add(name.lower())
            specs.append(_spec(name, _description(tool), SCHEMAS.get(schema, tool.input_schema)))
    for name in used:
        if name.lower() not in known:
            known.add(name.lower())
            specs.append(_spec(name, f"Tool: {name}", _clean_schema_root({})))
    return specs


def _spec(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "toolSpecification": {
            "name": name,
            "description": description,
            "inputSchema": {"json": schema},
        }
    }


def _description(tool: ToolSpec) -> str:
    """Rule 11: at most 10 000 chars (truncated with a marker); empty becomes "Tool: {name}"."""
    text = tool.description.strip()
    if not text:
        return f"Tool: {tool.name}"
    if len(text) > MAX_DESCRIPTION:
        return text[: MAX_DESCRIPTION - len(TRUNCATED)] + TRUNCATED
    return text


_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_VALUES = frozenset(
    {"items", "additionalProperties", "not", "contains", "if", "then", "else", "propertyNames"}
)


class SchemaCache:
    """Cleaned tool schemas by their JSON, least recently used out, bounded by bytes.

    Agents send the same tools with every request of a session, so each distinct schema is
    cleaned once. The budget counts each schema's JSON (`max_bytes` in all); a cleaned dict
    takes about three times as much again, so the default 1 MiB holds ~4.5 MB. A schema
    above `max_entry_bytes` is cleaned every time and never kept. The dicts are shared between
    payloads, which are only ever encoded, never modified. A pure-function cache: it changes
    no result, only how often one is computed.
    """

    def __init__(self, max_bytes: int, max_entry_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._max_entry_bytes = max_entry_bytes
        self._bytes = 0
        self._entries: dict[bytes, dict[str, Any]] = {}

    def get(self, key: bytes, schema: Mapping[str, Any]) -> dict[str, Any]:
        """The cleaned form of `schema`, whose JSON is `key`."""
        cleaned = self._entries.pop(key, None)
        if cleaned is None:
            cleaned = _clean_schema_root(schema)
            if len(key) > self._max_entry_bytes:
                return cleaned
            self._bytes += len(key)
            while self._bytes > self._max_bytes:
                oldest = next(iter(self._entries))
                del self._entries[oldest]
                self._bytes -= len(oldest)
        self._entries[key] = cleaned
        return cleaned


SCHEMA_CACHE_BYTES: Final = 1024 * 1024
SCHEMA_ENTRY_BYTES: Final = 64 * 1024
SCHEMAS: Final = SchemaCache(SCHEMA_CACHE_BYTES, SCHEMA_ENTRY_BYTES)


def _clean_schema_root(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Rule 13: the common ground of peers' schema fixes, rooted as an object schema.

    Where peers conflict (jwadow strips `required: []`, empty `properties` and
    `additionalProperties`; kiro.rs forces them) we follow kiro.rs and the §2.1 skeleton: the root
    is `type: object` with a `properties` object, and other keywords are kept when well-formed.
    """
    cleaned = _clean_schema(schema, 1)
    cleaned["type"] = "object"
    cleaned.setdefault("properties", {})
    return cleaned


def _clean_schema(schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
    """Rule 13: no nulls, `type` a string, `properties` an object, `required` strings only."""
    if depth > MAX_NESTING:
        raise too_deep("schema")
    depth += 1
    cleaned: dict[str, Any] = {}
    for key, value in schema.items():
        if value is None or key == "$schema":  # Kiro rejects both (jwadow, kiro.rs)
            continue
        if key == "type":
            if (kind := _schema_type(value)) is not None:
                cleaned[key] = kind
        elif key == "required":
            if isinstance(value, list):
                cleaned[key] = [item for item in value if isinstance(item, str)]
        elif key in _SCHEMA_MAPS:
            if isinstance(value, Mapping):
                cleaned[key] = {
                    name: _clean_schema(sub, depth + 1)
                    for name, sub in value.items()
                    if isinstance(sub, Mapping)
                }
            elif key == "properties":
                cleaned[key] = {}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            cleaned[key] = [
                _clean_schema(sub, depth + 1) for sub in value if isinstance(sub, Mapping)
            ]
        elif key in _SCHEMA_VALUES and isinstance(value, Mapping):
            cleaned[key] = _clean_schema(value, depth)
        else:
            cleaned[key] = _drop_nulls(value, depth)
    return cleaned


def _schema_type(value: Any) -> str | None:
    """A `type` list (`["string", "null"]`) becomes its first non-null member."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        kinds = [item for item in value if isinstance(item, str)]
        return next((kind for kind in kinds if kind != "null"), kinds[0] if kinds else None)
    return None


def _drop_nulls(value: Any, depth: int) -> Any:
    if depth > MAX_NESTING:
        raise too_deep("schema")
    if isinstance(value, Mapping):
        return {
            key: _drop_nulls(item, depth + 1) for key, item in value.items() if item is not None
        }
    if isinstance(value, list):
        return [_drop_nulls(item, depth + 1) for item in value if item is not None]
    return value
