"""The model catalog: public ids ↔ Kiro ids, limits and capabilities
(docs/KIRO-PROTOCOL.md §2.7, §6.2).

Clients name models the way Anthropic and OpenAI do (`claude-sonnet-4-5-20250929`,
`claude-opus-4-6[1m]`); Kiro wants its own lowercase dotted ids (`claude-sonnet-4.5`). A model's
traits come from the account's ListAvailableModels answer wherever it says them
(`catalog_from_list_available_models`), and from its name (`model_names.NAME_RULES`) for what it
leaves out. It is pure: the static catalog is the fallback for accounts whose list cannot be read.
`resolution` turns a client's name into one of these entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kirod.canonical.model_names import (
    DEFAULT_CONTEXT_WINDOW,
    ModelName,
    ReasoningFieldStyle,
    parse_name,
    traits_of,
)
from kirod.canonical.model_names import display_name as model_display_name
from kirod.canonical.request import Effort
from kirod.canonical.request_fields import EFFORTS, RequestFields, parse_request_fields

__all__ = ["EFFORTS", "ModelCatalog", "ModelInfo", "RequestFields"]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One model as kirod serves it.

    `public_id` is the Anthropic-style name listed on /v1/models; `kiro_id` is the upstream
    `modelId`. `reasoning_field_style` names the effort field the model takes (none: it predates
    adaptive thinking, so tag thinking asks it for a budget), `efforts` the levels it lists; an
    effort is clamped to them, and `default_effort` is the level Kiro's own agent sends when the
    user chose none. `request_fields` is what the catalog's `additionalModelRequestFieldsSchema`
    allows (None: no schema was read, the static list or a name): Claude's effort goes in the root
    field only where it allows it (docs/KIRO-PROTOCOL.md §2.6), else by prompt tags
    (docs/KIRO-PROTOCOL.md §2.5).
    `cache_checkpoints` is how many message-level `cachePoint`s a request may carry: the catalog's
    `promptCaching.maximumCacheCheckpointsPerRequest` for a model listed with
    `supportsPromptCaching` (4 when it lists no number: docs/KIRO-PROTOCOL.md §6.2), else 0 (the
    static fallback never assumes caching). `supports_documents`: where the catalog lists DOCUMENT
    input, and for Claude, which reads documents though no catalog lists DOCUMENT
    (docs/KIRO-PROTOCOL.md §2.3, rule 21). `provider` is the catalog's `modelProvider`
    (`anthropic`, `openai`, …), else the name's. `refusal_fallback_models` are the ids the catalog
    names for when the model refuses (`refusalFallbackModels`), shown, not acted on.
    `rate_multiplier` is the catalog's `rateMultiplier`, what a request costs in credits against
    `auto`'s 1.0 (None: not listed); `kiroctl doctor --live` chats on the cheapest.
    """

    public_id: str
    kiro_id: str
    display_name: str
    context_window: int = DEFAULT_CONTEXT_WINDOW
    max_output_tokens: int = 64_000
    supports_images: bool = True
    supports_documents: bool = False  # DOCUMENT listed, or Claude (rule 21)
    reasoning_field_style: ReasoningFieldStyle = "none"
    efforts: tuple[Effort, ...] = EFFORTS  # the reasoning efforts it accepts, lowest first
    default_effort: Effort | None = None
    request_fields: RequestFields | None = None
    cache_checkpoints: int = 0
    provider: str = "kiro"
    refusal_fallback_models: tuple[str, ...] = ()
    rate_multiplier: float | None = None

    def clamp_effort(self, effort: Effort) -> Effort:
        """The strongest effort the model accepts that is not above `effort` (else its lowest)."""
        if effort in self.efforts or not self.efforts:
            return effort
        rank = EFFORTS.index(effort)
        below = [e for e in self.efforts if EFFORTS.index(e) <= rank]
        return below[-1] if below else self.efforts[0]


@dataclass(frozen=True, slots=True)
class ModelCatalog:
    """The models one account (or the static fallback) offers, in listing order."""

    models: tuple[ModelInfo, ...]
    _index: Mapping[str, ModelInfo] = field(init=False, repr=False, compare=False)
    _names: Mapping[str, ModelName] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, ModelInfo] = {}
        for info in self.models:
            index.setdefault(info.kiro_id, info)
        for info in self.models:
            index.setdefault(info.public_id, info)
        object.__setattr__(self, "_index", index)
        # Read once per catalog (an account's is built once an hour), not once per request.
        object.__setattr__(
            self, "_names", {info.kiro_id: parse_name(info.kiro_id) for info in self.models}
        )

    def __iter__(self) -> Iterator[ModelInfo]:
        return iter(self.models)

    def __len__(self) -> int:
        return len(self.models)

    def get(self, model_id: str) -> ModelInfo | None:
        """The model whose Kiro id (preferred) or public id is exactly `model_id`."""
        return self._index.get(model_id)

    def name_of(self, info: ModelInfo) -> ModelName:
        """What the model's Kiro id says: vendor, line (Claude line or GPT tier), version."""
        return self._names.get(info.kiro_id) or parse_name(info.kiro_id)

    def lines(self) -> tuple[str, ...]:
        """The Claude lines the catalog offers (`opus`, `fable`, …), in listing order."""
        found = (self._names[i.kiro_id] for i in self.models)
        return tuple(dict.fromkeys(n.line for n in found if n.vendor == "claude" and n.line))


@dataclass(frozen=True, slots=True)
class ListedModel:
    """One row of /v1/models: an id a client may send, and the model it names."""

    id: str
    info: ModelInfo


def describe(kiro_id: str, display_name: str | None = None) -> ModelInfo:
    """The model `kiro_id` as its name tells it (`NAME_RULES`), where no catalog says more."""
    return ModelInfo(
        public_id=_public_id(kiro_id),
        kiro_id=kiro_id,
        display_name=display_name or model_display_name(kiro_id),
        **traits_of(kiro_id),
    )


def _public_id(kiro_id: str) -> str:
    """Claude ids are listed Anthropic-style (`claude-sonnet-4-5`); others keep Kiro's spelling."""
    return kiro_id.replace(".", "-") if kiro_id.startswith("claude-") else kiro_id


STATIC_CATALOG = ModelCatalog(
    (
        describe("claude-sonnet-4.5", "Claude Sonnet 4.5"),
        describe("claude-sonnet-4.6", "Claude Sonnet 4.6"),
        describe("claude-sonnet-4", "Claude Sonnet 4"),
        describe("claude-haiku-4.5", "Claude Haiku 4.5"),
        describe("claude-opus-4.5", "Claude Opus 4.5"),
        describe("claude-opus-4.6", "Claude Opus 4.6"),
        describe("claude-opus-4.7", "Claude Opus 4.7"),
        describe("claude-opus-4.8", "Claude Opus 4.8"),
        describe("claude-opus-5", "Claude Opus 5"),
        describe("claude-sonnet-5", "Claude Sonnet 5"),
        describe("claude-fable-5", "Claude Fable 5"),
        describe("claude-fable-5.1", "Claude Fable 5.1"),
        describe("claude-opus-5.5", "Claude Opus 5.5"),
        describe("claude-sonnet-5.5", "Claude Sonnet 5.5"),
        describe("claude-sonnet-4.5-1m"),
        describe("claude-sonnet-4.6-1m"),
        describe("claude-opus-4.6-1m"),
        describe("auto", "Auto (Kiro picks the model)"),
        describe("gpt-5.6-sol", "GPT-5.6 Sol"),
        describe("gpt-5.6-terra", "GPT-5.6 Terra"),
        describe("gpt-5.6-luna", "GPT-5.6 Luna"),
        describe("deepseek-3.2", "DeepSeek 3.2"),
        describe("glm-5", "GLM-5"),
        describe("minimax-m2.1", "MiniMax M2.1"),
        describe("minimax-m2.5", "MiniMax M2.5"),
        describe("qwen3-coder-next", "Qwen3 Coder Next"),
    )
)
"""Fallback for accounts whose ListAvailableModels cannot be read (runtime.kiro.dev:
docs/KIRO-PROTOCOL.md §1.1)."""

STATIC_CATALOG_AS_OF = 1_796_342_400.0  # 2026-12-04 UTC: when the list above was last checked


def public_models(catalog: ModelCatalog) -> tuple[ListedModel, ...]:
    """The /v1/models rows: one per model, by the public id clients send."""
    rows: dict[str, ListedModel] = {}
    for info in catalog:
        rows.setdefault(info.public_id, ListedModel(info.public_id, info))
    return tuple(rows.values())


def catalog_from_list_available_models(pages: Iterable[Mapping[str, Any]]) -> ModelCatalog:
    """Build a catalog from ListAvailableModels response pages (docs/KIRO-PROTOCOL.md §6.2).

    Fields the response leaves out fall back to the static entry for the same id, else to what
    the id's name tells (`NAME_RULES`), so a sparse answer or a model launched today still has
    usable limits; entries without a string `modelId` are skipped.
    """
    models: dict[str, ModelInfo] = {}
    for page in pages:
        entries = page.get("models")
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if isinstance(entry, Mapping) and isinstance(entry.get("modelId"), str):
                info = _from_listing(entry)
                models.setdefault(info.kiro_id, info)
    return ModelCatalog(tuple(models.values()))


def _from_listing(entry: Mapping[str, Any]) -> ModelInfo:
    kiro_id: str = entry["modelId"]
    base = STATIC_CATALOG.get(kiro_id) or describe(kiro_id)
    limits = entry.get("tokenLimits")
    limits = limits if isinstance(limits, Mapping) else {}
    name = entry.get("modelName")
    inputs = entry.get("supportedInputTypes")
    provider = entry.get("modelProvider")
    fields = parse_request_fields(entry.get("additionalModelRequestFieldsSchema"))
    return ModelInfo(
        public_id=base.public_id,
        kiro_id=kiro_id,
        display_name=name if isinstance(name, str) and name else base.display_name,
        context_window=_positive_int(limits.get("maxInputTokens"), base.context_window),
        max_output_tokens=_positive_int(limits.get("maxOutputTokens"), base.max_output_tokens),
        supports_images="IMAGE" in inputs if isinstance(inputs, list) else base.supports_images,
        supports_documents=(isinstance(inputs, list) and "DOCUMENT" in inputs)
        or base.supports_documents,
        reasoning_field_style=_advertised_style(fields),
        efforts=fields.efforts if fields is not None else EFFORTS,
        default_effort=(fields.default_effort if fields else None) or base.default_effort,
        request_fields=fields,
        cache_checkpoints=_cache_checkpoints(entry.get("promptCaching")),
        provider=provider.lower() if isinstance(provider, str) and provider else base.provider,
        refusal_fallback_models=_model_ids(entry.get("refusalFallbackModels")),
        rate_multiplier=_rate(entry.get("rateMultiplier")),
    )


CACHE_CHECKPOINTS_UNSTATED = 4
"""docs/KIRO-PROTOCOL.md §6.2: a model listed as caching without a checkpoint count (the Opus 5.5
capture) still caches; every count listed so far on Claude models is 4."""


def _cache_checkpoints(caching: object) -> int:
    """`maximumCacheCheckpointsPerRequest` of a `promptCaching` block that supports caching."""
    if not isinstance(caching, Mapping) or caching.get("supportsPromptCaching") is not True:
        return 0
    count = caching.get("maximumCacheCheckpointsPerRequest")
    return CACHE_CHECKPOINTS_UNSTATED if count is None else _positive_int(count, 0)


def _model_ids(value: object) -> tuple[str, ...]:
    """`refusalFallbackModels`: model ids, as strings or as `{"modelId": …}` entries."""
    if not isinstance(value, list):
        return ()
    found = (item.get("modelId") if isinstance(item, Mapping) else item for item in value)
    return tuple(item for item in found if isinstance(item, str) and item)


def _rate(value: object) -> float | None:
    """`rateMultiplier`: a number not below 0 (docs/KIRO-PROTOCOL.md §6.2), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _positive_int(value: object, default: int) -> int:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return int(value)
    return default


def _advertised_style(fields: RequestFields | None) -> ReasoningFieldStyle:
    """The effort field a model's `additionalModelRequestFieldsSchema` allows. A listed model
    without one takes no such field: Kiro rejects fields a model's schema does not allow."""
    keys = fields.keys if fields is not None else frozenset()
    if "output_config" in keys:
        return "output_config"
    if "reasoning" in keys:
        return "reasoning"
    return "none"
