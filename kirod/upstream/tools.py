"""The tools of a Kiro payload: names (rule 10), specs (rules 7, 8, 11) and schemas (rule 13).

Rule numbers are docs/KIRO-PROTOCOL.md §2.3's, as in `kirod.upstream.payload`, which calls this
module. The one cache, of cleaned tool schemas, is bounded by bytes (`SchemaCache`). A schema's top
level is always an object schema with no `oneOf`/`anyOf`/`allOf` (docs/KIRO-PROTOCOL.md §4.2: Kiro
answers `TOOL_SCHEMA_INVALID` otherwise), which MCP servers' schemas often are not (`_object_root`).
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
    `additionalProperties`; kiro.rs forces them) we follow kiro.rs and docs/KIRO-PROTOCOL.md §2.1's
    skeleton: the root is `type: object` with a `properties` object, and other keywords are kept
    when well-formed.
    """
    return _object_root(_clean_schema(schema, 1))


_COMBINATORS = ("allOf", "anyOf", "oneOf")
_ROOT_ANNOTATIONS = ("title", "description", "$defs", "definitions")
_FLATTENED = frozenset({"type", "properties", "required", "$ref", *_COMBINATORS})
MAX_FLATTEN_NODES = 10_000
"""Schema nodes a top-level union may expand to; `$ref`s could otherwise multiply them."""


def _object_root(cleaned: dict[str, Any]) -> dict[str, Any]:
    """docs/KIRO-PROTOCOL.md §2.3, rule 13: the top level is `type: object`, without
    `oneOf`/`anyOf`/`allOf`.

    A root of another type cannot describe a tool's input, which Kiro passes as an object, so
    it becomes the empty object schema (its title, description and definitions kept). A root
    union or `$ref` is flattened (`_Flattener`): the properties of every branch, each with its
    description, and only what every alternative requires.
    """
    kind = cleaned.get("type", "object")
    if kind != "object":
        kept = {key: cleaned[key] for key in _ROOT_ANNOTATIONS if key in cleaned}
        return {"type": "object", **kept, "properties": {}}
    if "$ref" not in cleaned and not any(key in cleaned for key in _COMBINATORS):
        cleaned["type"] = "object"
        cleaned.setdefault("properties", {})
        return cleaned
    properties, required = _Flattener(cleaned).fields(cleaned, frozenset())
    flat: dict[str, Any] = {"type": "object"}
    flat.update((key, value) for key, value in cleaned.items() if key not in _FLATTENED)
    flat["properties"] = properties
    if required or "required" in cleaned:
        flat["required"] = required
    return flat


_Fields = tuple[Mapping[str, Any], list[str]]
"""What a schema says of an object: its properties by name, and the names it requires."""


class _Flattener:
    """Flattens one root's unions: `allOf` branches all apply, so their properties and required
    names add up; of `anyOf`/`oneOf` branches one applies, so each of their properties may
    appear but only a name every branch requires is required. A property that branches declare
    differently keeps every form, under the combinator that joined them. Local `$ref`s into the
    root's `$defs`/`definitions` are followed (each once per path, so cycles end); a branch of
    another type than object adds no property.
    """

    def __init__(self, root: Mapping[str, Any]) -> None:
        self._definitions: dict[str, Mapping[str, Any]] = {}
        for key in ("$defs", "definitions"):
            for name, schema in _mapping(root.get(key)).items():
                pointer = str(name).replace("~", "~0").replace("/", "~1")
                self._definitions[f"#/{key}/{pointer}"] = schema
        self._nodes = 0

    def fields(self, node: Mapping[str, Any], followed: frozenset[str]) -> _Fields:
        self._nodes += 1
        if self._nodes > MAX_FLATTEN_NODES:
            raise ApiError(
                ErrorKind.INVALID_REQUEST,
                f"a tool schema's top-level union expands to more than {MAX_FLATTEN_NODES} "
                "schemas; simplify it",
                code="invalid_value",
            )
        # A schema that is not what JSON Schema allows where it stands (a branch that is a
        # string, `required` that is not a list) adds nothing rather than failing the request.
        if not isinstance(node, Mapping) or node.get("type", "object") != "object":
            return {}, []
        required = node.get("required")
        names = (
            [name for name in required if isinstance(name, str)]
            if isinstance(required, list)
            else []
        )
        parts: list[_Fields] = [(_mapping(node.get("properties")), names)]
        ref = node.get("$ref")
        if isinstance(ref, str) and ref in self._definitions and ref not in followed:
            parts.append(self.fields(self._definitions[ref], followed | {ref}))
        parts.extend(self.fields(branch, followed) for branch in _sequence(node.get("allOf")))
        for key in ("anyOf", "oneOf"):
            if branches := [self.fields(branch, followed) for branch in _sequence(node.get(key))]:
                parts.append(_either(branches))
        properties = _merged([properties for properties, _ in parts], "allOf")
        return properties, _union(required for _, required in parts)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: object) -> Sequence[Any]:
    return value if isinstance(value, list) else ()


def _either(branches: Sequence[_Fields]) -> _Fields:
    """The fields of one branch out of several: any property, the names all of them require."""
    first, *others = (required for _, required in branches)
    common = [name for name in first if all(name in other for other in others)]
    return _merged([properties for properties, _ in branches], "anyOf"), _union([common])


def _merged(sources: Sequence[Mapping[str, Any]], combinator: str) -> dict[str, Any]:
    """Every property of `sources`; one declared differently by several is the `combinator` of
    its forms, described by the first form's description."""
    forms: dict[str, list[Any]] = {}
    for properties in sources:
        for name, schema in properties.items():
            known = forms.setdefault(name, [])
            if schema not in known:
                known.append(schema)
    merged: dict[str, Any] = {}
    for name, variants in forms.items():
        if len(variants) == 1:
            merged[name] = variants[0]
            continue
        described = next((form["description"] for form in variants if "description" in form), None)
        merged[name] = {combinator: variants}
        if described is not None:
            merged[name]["description"] = described
    return merged


def _union(lists: Iterable[Iterable[str]]) -> list[str]:
    return list(dict.fromkeys(name for names in lists for name in names))


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
