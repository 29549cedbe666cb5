"""The side APIs' drift: what ListAvailableModels and getUsageLimits answered that kirod does not
know, recorded by shape once per read (docs/RELIABILITY.md, "Drift").

The pure readers name the unknowns (`kirod.canonical.catalog_unknowns`,
`kirod.upstream.usage.usage_unknowns`); here they become observations of the daemon's recorder:
one per distinct set of catalog unknowns (with how many models have it, and the first one's id),
one per usage answer with unknown fields. The answers themselves are used as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from kirod.canonical.catalog_unknowns import catalog_unknowns
from kirod.drift import MAX_VALUE_CHARS, Drift, Kind, shape_value
from kirod.upstream.usage import usage_unknowns

SEPARATOR: Final = "/"
MORE: Final = "/..."


def listed(items: Iterable[str]) -> str | None:
    """`items` as one fact `shape_value` keeps: joined by `/`, each not code-like one as `_`,
    cut with `/...` where they would not fit; None when there are none."""
    kept: list[str] = []
    size = 0
    for item in items:
        shaped = shape_value(item)
        part = shaped if not shaped.startswith("<") else "_"
        if size + len(part) + len(SEPARATOR) + len(MORE) > MAX_VALUE_CHARS and kept:
            return SEPARATOR.join(kept) + MORE
        kept.append(part)
        size += len(part) + len(SEPARATOR)
    return SEPARATOR.join(kept) or None


def observe_catalog(drift: Drift, region: str, pages: Iterable[Mapping[str, Any]]) -> None:
    """One ListAvailableModels answer's unknowns (docs/KIRO-PROTOCOL.md §6.2)."""
    for unknowns in catalog_unknowns(pages):
        drift.observe(
            Kind.CATALOG_FIELD,
            "ListAvailableModels",
            region=region,
            model=unknowns.models[0] if unknowns.models else None,
            models=len(unknowns.models),
            fields=listed(unknowns.fields),
            input_types=listed(unknowns.input_types),
            schema_keys=listed(unknowns.schema_keys),
            enum_values=listed(unknowns.enum_values),
        )


def observe_usage(drift: Drift, region: str, doc: Mapping[str, Any]) -> None:
    """One getUsageLimits answer's unknown fields (docs/KIRO-PROTOCOL.md §6.1)."""
    fields = usage_unknowns(doc)
    if fields:
        drift.observe(
            Kind.USAGE_FIELD,
            "getUsageLimits",
            region=region,
            fields=listed(fields),
            count=len(fields),
        )
