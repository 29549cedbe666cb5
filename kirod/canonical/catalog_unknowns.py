"""What a ListAvailableModels answer says that kirod does not know (docs/KIRO-PROTOCOL.md §6.2).

Kiro adds catalog fields without notice (`promptCaching`, `modelProvider`, the request schema and
`refusalFallbackModels` each arrived that way), and new input types, schema keys and effort
levels would too. `catalog_unknowns` reads the pages beside `catalog_from_list_available_models`
and names, without values that are text, what falls outside what kirod knows: a field (the
model's, its `tokenLimits`' or `promptCaching`'s, the page's) as `path:type`, an input type, a
key of `additionalModelRequestFieldsSchema` or of a known key's `properties` as `path:type`, and
an enum value of a key kirod sends by as `path:value`. Models with the same unknowns are grouped,
so a field every model gained is one `CatalogUnknowns`. Pure: the caller, which has the drift
recorder, observes them.

"Known" is what the documented answer holds (docs/KIRO-PROTOCOL.md §6.2), read or not: only a
change is drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kirod.canonical.request_fields import EFFORTS
from kirod.drift import type_name

PAGE_FIELDS: Final = frozenset({"models", "defaultModel", "nextToken"})
MODEL_FIELDS: Final = frozenset(
    {
        "modelId",
        "modelName",
        "description",
        "rateMultiplier",
        "rateUnit",
        "supportedInputTypes",
        "tokenLimits",
        "supportsPromptCache",
        "promptCaching",
        "modelProvider",
        "additionalModelRequestFieldsSchema",
        "refusalFallbackModels",
    }
)
NESTED_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "tokenLimits": frozenset({"maxInputTokens", "maxOutputTokens"}),
    "promptCaching": frozenset(
        {
            "supportsPromptCaching",
            "maximumCacheCheckpointsPerRequest",
            "minimumTokensPerCacheCheckpoint",
        }
    ),
}
INPUT_TYPES: Final = frozenset({"TEXT", "IMAGE", "DOCUMENT"})
SCHEMA_KEYS: Final[Mapping[str, frozenset[str]]] = {
    "thinking": frozenset({"type", "display"}),
    "output_config": frozenset({"effort"}),
    "reasoning": frozenset({"effort"}),
    "max_tokens": frozenset(),
}
"""The schema's root keys, each with the keys of its `properties` kirod knows."""
SCHEMA_ENUMS: Final[Mapping[str, frozenset[str]]] = {
    "output_config.effort": frozenset(EFFORTS),
    "reasoning.effort": frozenset(EFFORTS),
    "thinking.type": frozenset({"adaptive", "enabled", "disabled", "between_tools"}),
    "thinking.display": frozenset({"summarized", "omitted"}),
}


@dataclass(frozen=True, slots=True)
class CatalogUnknowns:
    """What `models` (Kiro ids, in listing order; empty for the page's own fields) have that
    kirod does not know, each part sorted."""

    models: tuple[str, ...]
    fields: tuple[str, ...] = ()  # `path:type`
    input_types: tuple[str, ...] = ()
    schema_keys: tuple[str, ...] = ()  # `path:type`
    enum_values: tuple[str, ...] = ()  # `path:value`


def catalog_unknowns(pages: Iterable[Mapping[str, Any]]) -> tuple[CatalogUnknowns, ...]:
    """The unknowns of a ListAvailableModels answer, one per distinct set; empty when none."""
    found: dict[tuple[tuple[str, ...], ...], list[str]] = {}
    for page in pages:
        page_fields = _fields(page, PAGE_FIELDS, "")
        if page_fields:
            found.setdefault((page_fields, (), (), ()), [])
        entries = page.get("models")
        for entry in entries if isinstance(entries, list) else ():
            if not isinstance(entry, Mapping) or not isinstance(entry.get("modelId"), str):
                continue
            parts = _entry_unknowns(entry)
            if any(parts):
                models = found.setdefault(parts, [])
                if entry["modelId"] not in models:
                    models.append(entry["modelId"])
    return tuple(
        CatalogUnknowns(tuple(models), fields, inputs, keys, enums)
        for (fields, inputs, keys, enums), models in found.items()
    )


def _entry_unknowns(entry: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    fields = set(_fields(entry, MODEL_FIELDS, ""))
    for name, known in NESTED_FIELDS.items():
        nested = entry.get(name)
        if isinstance(nested, Mapping):
            fields.update(_fields(nested, known, f"{name}."))
    inputs = entry.get("supportedInputTypes")
    unknown_inputs = {
        item if isinstance(item, str) else type_name(item)
        for item in (inputs if isinstance(inputs, list) else ())
        if item not in INPUT_TYPES
    }
    keys, enums = _schema_unknowns(entry.get("additionalModelRequestFieldsSchema"))
    return tuple(sorted(fields)), tuple(sorted(unknown_inputs)), keys, enums


def _fields(mapping: Mapping[str, Any], known: frozenset[str], prefix: str) -> tuple[str, ...]:
    return tuple(
        sorted(
            f"{prefix}{key}:{type_name(value)}"
            for key, value in mapping.items()
            if key not in known
        )
    )


def _schema_unknowns(schema: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The schema's unknown keys (root and one level down) and enum values of known keys."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return (), ()
    keys: set[str] = set()
    enums: set[str] = set()
    for key, node in properties.items():
        known = SCHEMA_KEYS.get(key)
        if known is None:
            keys.add(f"{key}:{_declared_type(node)}")
            continue
        nested = node.get("properties") if isinstance(node, Mapping) else None
        for name, child in nested.items() if isinstance(nested, Mapping) else ():
            path = f"{key}.{name}"
            if name not in known:
                keys.add(f"{path}:{_declared_type(child)}")
                continue
            values = child.get("enum") if isinstance(child, Mapping) else None
            allowed = SCHEMA_ENUMS.get(path, frozenset())
            enums.update(
                f"{path}:{value if isinstance(value, str) else type_name(value)}"
                for value in (values if isinstance(values, list) else ())
                if value not in allowed
            )
    return tuple(sorted(keys)), tuple(sorted(enums))


def _declared_type(node: object) -> str:
    """A schema node's declared `type` (`string`, `object`, …), else what the node itself is."""
    declared = node.get("type") if isinstance(node, Mapping) else None
    return declared if isinstance(declared, str) else type_name(node)
