"""What a model's `additionalModelRequestFieldsSchema` lets a request send
(docs/KIRO-PROTOCOL.md §2.6, §6.2).

Kiro enforces each schema strictly (`additionalProperties: false`, enums, integer bounds): a key,
enum value or number it does not allow is a 400. kirod keeps only what it sends from the schema:
the root keys, where the effort goes and its levels and default, the thinking types, and the
`max_tokens` bounds. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from kirod.canonical.request import Effort

EFFORTS: tuple[Effort, ...] = ("low", "medium", "high", "xhigh", "max")
EffortKey: TypeAlias = Literal["output_config", "reasoning"]


@dataclass(frozen=True, slots=True)
class RequestFields:
    """One model's schema, as kirod uses it.

    `effort_key` is the root key whose `effort` the model reads (Claude `output_config`, GPT
    `reasoning`), None when none has one; `efforts` its enum (all levels when it lists none),
    `default_effort` its `default`. `thinking_types` is the enum of `thinking.type` (empty: no
    `thinking` key). `max_tokens` is the root `max_tokens` range (minimum, maximum), None when the
    schema has no such key.
    """

    keys: frozenset[str]
    effort_key: EffortKey | None = None
    efforts: tuple[Effort, ...] = EFFORTS
    default_effort: Effort | None = None
    thinking_types: tuple[str, ...] = ()
    max_tokens: tuple[int, int] | None = None

    def clamp_max_tokens(self, asked: int) -> int | None:
        """`asked` moved into the schema's `max_tokens` range; None when it has no such key."""
        if self.max_tokens is None:
            return None
        low, high = self.max_tokens
        return min(max(asked, low), high)


def parse_request_fields(schema: object) -> RequestFields | None:
    """The parts of `schema` kirod sends by; None when it is not an object schema."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return None
    keys = frozenset(key for key in properties if isinstance(key, str))
    effort_key: EffortKey | None = None
    effort: Mapping[str, object] = {}
    if (found := _property(properties.get("output_config"), "effort")) is not None:
        effort_key, effort = "output_config", found
    elif (found := _property(properties.get("reasoning"), "effort")) is not None:
        effort_key, effort = "reasoning", found
    enum = effort.get("enum")
    listed = tuple(e for e in EFFORTS if isinstance(enum, list) and e in enum)
    default = effort.get("default")
    thinking = _property(properties.get("thinking"), "type") or {}
    types = thinking.get("enum")
    return RequestFields(
        keys=keys,
        effort_key=effort_key,
        efforts=listed or EFFORTS,
        default_effort=next((e for e in EFFORTS if e == default), None),
        thinking_types=tuple(t for t in types if isinstance(t, str))
        if isinstance(types, list)
        else (),
        max_tokens=_bounds(properties.get("max_tokens")),
    )


def _property(node: object, name: str) -> Mapping[str, object] | None:
    fields = node.get("properties") if isinstance(node, Mapping) else None
    found = fields.get(name) if isinstance(fields, Mapping) else None
    return found if isinstance(found, Mapping) else None


def _bounds(node: object) -> tuple[int, int] | None:
    """An integer key's (minimum, maximum); an absent bound is 1 or unbounded."""
    if not isinstance(node, Mapping) or node.get("type") not in ("integer", "number"):
        return None
    return _integer(node.get("minimum"), 1), _integer(node.get("maximum"), 2**31 - 1)


def _integer(value: object, default: int) -> int:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    return default
