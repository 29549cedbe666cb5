"""The model catalog: public ids ↔ Kiro ids, limits and capabilities (kiro-protocol §2.5, §6.2).

Clients name models the way Anthropic and OpenAI do (`claude-sonnet-4-5-20250929`,
`claude-opus-4-6[1m]`); Kiro wants its own lowercase dotted ids (`claude-sonnet-4.5`). This module
turns one into the other and knows what each model can do. It is pure: the static catalog is the
fallback for accounts whose `ListAvailableModels` cannot be read, and
`catalog_from_list_available_models` builds the same shape from what an account reports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from kirod.canonical.request import Effort
from kirod.errors import ApiError, ErrorKind

EFFORTS: tuple[Effort, ...] = ("low", "medium", "high", "xhigh", "max")

ReasoningFieldStyle: TypeAlias = Literal["none", "output_config", "reasoning"]
"""Which root `additionalModelRequestFields` key carries an effort (§2.4b): Claude takes
`output_config`, GPT-5.6 takes `reasoning`, and the 4.5 generation rejects any such field."""

DEFAULT_CONTEXT_WINDOW = 200_000
_CLAUDE_MAX_OUTPUT = 64_000
_GPT_MAX_OUTPUT = 128_000
_OPEN_WEIGHT_MAX_OUTPUT = 32_000


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One model as kirod serves it.

    `public_id` is the Anthropic-style name listed on /v1/models; `kiro_id` is the upstream
    `modelId`. `native_reasoning` says the model honours `userInputMessage.reasoning` (§2.4b);
    other models get prompt-tag thinking (§2.4a). `reasoning_field_style` names the effort field
    the model takes (none: it predates adaptive thinking, so tag thinking asks it for a budget),
    `efforts` the levels it lists; an effort is clamped to them. `cache_checkpoints` is how many
    message-level `cachePoint`s a request may carry: the catalog's
    `promptCaching.maximumCacheCheckpointsPerRequest` for a model listed with
    `supportsPromptCaching`, else 0 (the static fallback never assumes caching). Likewise
    `supports_documents` only where the catalog lists DOCUMENT input: no capture shows one.
    """

    public_id: str
    kiro_id: str
    display_name: str
    context_window: int = DEFAULT_CONTEXT_WINDOW
    max_output_tokens: int = _CLAUDE_MAX_OUTPUT
    supports_images: bool = True
    supports_documents: bool = False  # only where the account's catalog lists DOCUMENT input
    native_reasoning: bool = False
    reasoning_field_style: ReasoningFieldStyle = "none"
    efforts: tuple[Effort, ...] = EFFORTS  # the reasoning efforts it accepts, lowest first
    cache_checkpoints: int = 0

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

    def __post_init__(self) -> None:
        index: dict[str, ModelInfo] = {}
        for info in self.models:
            index.setdefault(info.kiro_id, info)
        for info in self.models:
            index.setdefault(info.public_id, info)
        object.__setattr__(self, "_index", index)

    def __iter__(self) -> Iterator[ModelInfo]:
        return iter(self.models)

    def __len__(self) -> int:
        return len(self.models)

    def get(self, model_id: str) -> ModelInfo | None:
        """The model whose Kiro id (preferred) or public id is exactly `model_id`."""
        return self._index.get(model_id)


@dataclass(frozen=True, slots=True)
class ListedModel:
    """One row of /v1/models: an id a client may send, and the model it names."""

    id: str
    info: ModelInfo


_NATIVE_REASONING = re.compile(r"^(claude-opus-4\.[78]|claude-opus-5|gpt-5\.6-[a-z0-9]+)$")
_MILLION_CONTEXT = re.compile(
    r"^(claude-sonnet-4\.6|claude-opus-4\.[678]|claude-opus-5|claude-sonnet-5|.*-1m)$"
)


def _native_reasoning(kiro_id: str) -> bool:
    """§2.4b: only opus-4.7/4.8/5 and gpt-5.6-* honour `userInputMessage.reasoning`."""
    return _NATIVE_REASONING.match(kiro_id) is not None


def _field_style(kiro_id: str) -> ReasoningFieldStyle:
    """§2.4b: GPT-5.6 takes `reasoning`, Claude newer than the 4.5 generation `output_config`."""
    if kiro_id.startswith("gpt-"):
        return "reasoning"
    if kiro_id.startswith("claude-") and not re.match(r"^claude-\w+-4(\.5)?(-1m)?$", kiro_id):
        return "output_config"
    return "none"


def _public_id(kiro_id: str) -> str:
    """Claude ids are listed Anthropic-style (`claude-sonnet-4-5`); others keep Kiro's spelling."""
    return kiro_id.replace(".", "-") if kiro_id.startswith("claude-") else kiro_id


def _static(
    kiro_id: str,
    display_name: str,
    *,
    max_output_tokens: int = _CLAUDE_MAX_OUTPUT,
    supports_images: bool = True,
) -> ModelInfo:
    if kiro_id.startswith("gpt-"):
        window = 272_000
    elif _MILLION_CONTEXT.match(kiro_id):
        window = 1_000_000
    else:
        window = DEFAULT_CONTEXT_WINDOW
    return ModelInfo(
        public_id=_public_id(kiro_id),
        kiro_id=kiro_id,
        display_name=display_name,
        context_window=window,
        max_output_tokens=max_output_tokens,
        supports_images=supports_images,
        native_reasoning=_native_reasoning(kiro_id),
        reasoning_field_style=_field_style(kiro_id),
    )


STATIC_CATALOG = ModelCatalog(
    (
        _static("claude-sonnet-4.5", "Claude Sonnet 4.5"),
        _static("claude-sonnet-4.6", "Claude Sonnet 4.6"),
        _static("claude-sonnet-4", "Claude Sonnet 4"),
        _static("claude-haiku-4.5", "Claude Haiku 4.5"),
        _static("claude-opus-4.5", "Claude Opus 4.5"),
        _static("claude-opus-4.6", "Claude Opus 4.6"),
        _static("claude-opus-4.7", "Claude Opus 4.7"),
        _static("claude-opus-4.8", "Claude Opus 4.8"),
        _static("claude-opus-5", "Claude Opus 5"),
        _static("claude-sonnet-5", "Claude Sonnet 5"),
        _static("claude-sonnet-4.5-1m", "Claude Sonnet 4.5 (1M context)"),
        _static("claude-sonnet-4.6-1m", "Claude Sonnet 4.6 (1M context)"),
        _static("claude-opus-4.6-1m", "Claude Opus 4.6 (1M context)"),
        _static("auto", "Auto (Kiro picks the model)"),
        _static("gpt-5.6-sol", "GPT-5.6 Sol", max_output_tokens=_GPT_MAX_OUTPUT),
        _static("gpt-5.6-terra", "GPT-5.6 Terra", max_output_tokens=_GPT_MAX_OUTPUT),
        _static("gpt-5.6-luna", "GPT-5.6 Luna", max_output_tokens=_GPT_MAX_OUTPUT),
        *(
            _static(kiro_id, name, max_output_tokens=_OPEN_WEIGHT_MAX_OUTPUT, supports_images=False)
            for kiro_id, name in (
                ("deepseek-3.2", "DeepSeek 3.2"),
                ("glm-5", "GLM-5"),
                ("minimax-m2.1", "MiniMax M2.1"),
                ("minimax-m2.5", "MiniMax M2.5"),
                ("qwen3-coder-next", "Qwen3 Coder Next"),
            )
        ),
    )
)
"""Fallback for accounts whose ListAvailableModels cannot be read (runtime.kiro.dev, §1.2)."""

STATIC_CATALOG_AS_OF = 1_796_169_600.0  # 2026-12-02 UTC: when the list above was last checked


_FAMILY = r"(?P<family>sonnet|opus|haiku)"
_CONTEXT_SUFFIX = re.compile(r"\[\d+[km]\]$")
_LEGACY_ENUM = re.compile(r"^(?P<body>claude_[a-z0-9_]+?)_v\d+_\d+$")
_FAMILY_MAJOR_MINOR = re.compile(
    rf"^claude-{_FAMILY}-(?P<major>\d+)-(?P<minor>\d{{1,2}})(?:-(?:\d{{8}}|latest))?(?P<m1>-1m)?$"
)
_FAMILY_MAJOR = re.compile(rf"^claude-{_FAMILY}-(?P<major>\d+)(?:-(?:\d{{8}}|latest))?$")
_MAJOR_MINOR_FAMILY = re.compile(
    rf"^claude-(?P<major>\d+)[-.](?P<minor>\d{{1,2}})-{_FAMILY}(?:-[a-z0-9-]+)?$"
)


def _candidates(name: str) -> tuple[str, ...]:
    """The Kiro ids `name` may mean, most likely first (jwadow's normalizer, §2.5).

    `[1m]`/`[200k]` suffixes are Claude Code's context-size hints, not part of the id; legacy
    2025 enum ids (`CLAUDE_SONNET_4_5_20250929_V1_0`) are read as their dashed spelling.
    """
    normal = _CONTEXT_SUFFIX.sub("", name.strip()).strip().lower()
    if normal == "auto-kiro":
        return ("auto",)
    if legacy := _LEGACY_ENUM.match(normal):
        normal = legacy["body"].replace("_", "-")
    if m := _FAMILY_MAJOR_MINOR.match(normal):
        return (f"claude-{m['family']}-{m['major']}.{m['minor']}{m['m1'] or ''}",)
    if m := _FAMILY_MAJOR.match(normal):
        return (f"claude-{m['family']}-{m['major']}",)
    if m := _MAJOR_MINOR_FAMILY.match(normal):
        # `claude-3-7-sonnet` was Kiro's own spelling; `claude-4.5-opus-high` means opus 4.5.
        return (
            f"claude-{m['major']}.{m['minor']}-{m['family']}",
            f"claude-{m['family']}-{m['major']}.{m['minor']}",
        )
    return (normal,)


FallbackPolicy: TypeAlias = Literal["family", "strict"]
ResolvedVia: TypeAlias = Literal["exact", "alias", "family"]
FAMILIES = ("opus", "sonnet", "haiku")
_FAMILY_IN_NAME = re.compile(r"(?:^|[-_./])(opus|sonnet|haiku)(?:$|[-_./\d])")
_VERSION = re.compile(
    r"^claude-(?P<family>opus|sonnet|haiku)-(?P<major>\d+)(?:\.(?P<minor>\d+))?(?P<m1>-1m)?$"
)
_SHOWN_MODELS = 8


@dataclass(frozen=True, slots=True)
class ModelPolicy:
    """How names a catalog lacks are served: `aliases` (client id → model id) win, then
    `fallback`: "family" serves the newest model of the same Claude family, "strict" refuses."""

    aliases: Mapping[str, str] = field(default_factory=dict)
    fallback: FallbackPolicy = "family"


STRICT = ModelPolicy(fallback="strict")


@dataclass(frozen=True, slots=True)
class Resolution:
    """The model serving a request, and whether it is the one named or a substitute."""

    info: ModelInfo
    via: ResolvedVia


def family_of(name: str) -> str | None:
    """The Claude family a name asks for: `opus`, `claude-opus-5-5`, `claude-3-5-haiku-latest`.

    Only Claude names (and the bare family words) have a family; `gpt-5.7` has none.
    """
    normal = _CONTEXT_SUFFIX.sub("", name.strip()).strip().lower().removeprefix("anthropic/")
    if normal in FAMILIES:
        return normal
    if not normal.startswith("claude"):
        return None
    match = _FAMILY_IN_NAME.search(normal)
    return match[1] if match else None


def newest_of_family(
    family: str, catalog: ModelCatalog, *, million: bool = False
) -> ModelInfo | None:
    """The catalog's newest model of `family` by version. Of one version's entries the
    1M-context variant is chosen when `million` asks for it, else the plain one."""
    best: tuple[int, int, bool] | None = None
    chosen: ModelInfo | None = None
    for info in catalog:
        match = _VERSION.match(info.kiro_id)
        if match is None or match["family"] != family:
            continue
        rank = (int(match["major"]), int(match["minor"] or 0), bool(match["m1"]) == million)
        if best is None or rank > best:
            best, chosen = rank, info
    return chosen


def _exact(name: str, catalog: ModelCatalog) -> ModelInfo | None:
    for candidate in _candidates(name):
        if (info := catalog.get(candidate)) is not None:
            return info
    return None


def resolve(name: str, catalog: ModelCatalog, policy: ModelPolicy = STRICT) -> Resolution:
    """The catalog entry serving a client's model name, under `policy`.

    An alias rewrites the name first (its target may itself fall back); a name the catalog
    lacks is served by the newest model of its Claude family when the policy says so. Anything
    else is a 404 that lists models the client may use instead.
    """
    target = policy.aliases.get(name) or policy.aliases.get(name.strip().lower())
    wanted = target or name
    if (info := _exact(wanted, catalog)) is not None:
        return Resolution(info, "alias" if target else "exact")
    if policy.fallback == "family" and (family := family_of(wanted)) is not None:
        million = "[1m]" in wanted.lower() or wanted.lower().endswith("-1m")
        if (info := newest_of_family(family, catalog, million=million)) is not None:
            return Resolution(info, "family")
    raise unknown_model(name, catalog)


def resolve_model(name: str, catalog: ModelCatalog) -> ModelInfo:
    """The catalog entry `name` names exactly (no alias, no fallback)."""
    return resolve(name, catalog).info


def unknown_model(name: str, catalog: ModelCatalog) -> ApiError:
    """404 naming the model and a few that work, with "…" when the list is cut."""
    shown = name if len(name) <= 100 else name[:100] + "…"
    available = [row.id for row in public_models(catalog)]
    listed = ", ".join(available[:_SHOWN_MODELS])
    if len(available) > _SHOWN_MODELS:
        listed += ", …"
    return ApiError(
        ErrorKind.NOT_FOUND,
        f"model '{shown}' is not available; models that work include {listed} "
        "(GET /v1/models lists them all)",
        code="model_not_found",
        param="model",
        final=True,
    )


def public_models(catalog: ModelCatalog) -> tuple[ListedModel, ...]:
    """The /v1/models rows: one per model, by the public id clients send."""
    rows: dict[str, ListedModel] = {}
    for info in catalog:
        rows.setdefault(info.public_id, ListedModel(info.public_id, info))
    return tuple(rows.values())


def catalog_from_list_available_models(pages: Iterable[Mapping[str, Any]]) -> ModelCatalog:
    """Build a catalog from ListAvailableModels response pages (§6.2).

    Fields the response leaves out fall back to the static entry for the same id, so a sparse
    answer still yields usable limits; entries without a string `modelId` are skipped.
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
    base = STATIC_CATALOG.get(kiro_id) or _static(kiro_id, kiro_id)
    limits = entry.get("tokenLimits")
    limits = limits if isinstance(limits, Mapping) else {}
    name = entry.get("modelName")
    inputs = entry.get("supportedInputTypes")
    return ModelInfo(
        public_id=base.public_id,
        kiro_id=kiro_id,
        display_name=name if isinstance(name, str) and name else base.display_name,
        context_window=_positive_int(limits.get("maxInputTokens"), base.context_window),
        max_output_tokens=_positive_int(limits.get("maxOutputTokens"), base.max_output_tokens),
        supports_images="IMAGE" in inputs if isinstance(inputs, list) else base.supports_images,
        supports_documents=isinstance(inputs, list) and "DOCUMENT" in inputs,
        native_reasoning=base.native_reasoning,
        reasoning_field_style=_advertised_style(
            entry.get("additionalModelRequestFieldsSchema"), base.reasoning_field_style
        ),
        efforts=_advertised_efforts(entry.get("additionalModelRequestFieldsSchema")),
        cache_checkpoints=_cache_checkpoints(entry.get("promptCaching")),
    )


def _cache_checkpoints(caching: object) -> int:
    """`maximumCacheCheckpointsPerRequest` of a `promptCaching` block that supports caching."""
    if not isinstance(caching, Mapping) or caching.get("supportsPromptCaching") is not True:
        return 0
    return _positive_int(caching.get("maximumCacheCheckpointsPerRequest"), 0)


def _positive_int(value: object, default: int) -> int:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return int(value)
    return default


def _advertised_style(schema: object, default: ReasoningFieldStyle) -> ReasoningFieldStyle:
    """The effort field a model's `additionalModelRequestFieldsSchema` allows, if it says."""
    if not isinstance(schema, Mapping):
        return default
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return "none"
    if "output_config" in properties:
        return "output_config"
    if "reasoning" in properties:
        return "reasoning"
    return "none"


def _advertised_efforts(schema: object) -> tuple[Effort, ...]:
    """The `effort` enum of the schema's `output_config` or `reasoning`; all when it says none."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    for key in ("output_config", "reasoning"):
        node = properties.get(key) if isinstance(properties, Mapping) else None
        fields = node.get("properties") if isinstance(node, Mapping) else None
        effort = fields.get("effort") if isinstance(fields, Mapping) else None
        enum = effort.get("enum") if isinstance(effort, Mapping) else None
        if isinstance(enum, list):
            listed = tuple(e for e in EFFORTS if e in enum)
            if listed:
                return listed
    return EFFORTS
