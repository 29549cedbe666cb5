"""Which catalog model serves a client's model name (docs/KIRO-PROTOCOL.md §2.7).

A name the catalog lists (in any of its spellings: dated, dashed, `[1m]`, legacy enum) is served
as named. Under the "family" policy a name it lacks is served by the newest model of the same
Claude line (`claude-opus-5-5`, `fable`, `claude-mythos-9` → that line's newest) or, for a GPT
name, of the same GPT tier (`gpt-6.2-sol` → the newest `sol`), else by the newest GPT model. Lines
and tiers are read from the catalog's own ids (`model_names`), so a line or tier Kiro adds needs
no change here. "strict" answers 404 instead; configured aliases win over both, and so does a
Gemini name's class (`gemini_names`) when the Gemini API is on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from kirod.canonical.catalog import ModelCatalog, ModelInfo, public_models
from kirod.canonical.gemini_names import serving_name
from kirod.canonical.model_names import Vendor, line_word, parse_name
from kirod.errors import ApiError, ErrorKind

FallbackPolicy: TypeAlias = Literal["family", "strict"]
ResolvedVia: TypeAlias = Literal["exact", "alias", "family", "tier", "newest"]
"""How a name was served: as listed, by an alias, by the newest of its Claude line ("family"),
by the newest of its GPT tier ("tier"), or by the newest GPT model ("newest")."""

_SHOWN_MODELS = 8


@dataclass(frozen=True, slots=True)
class ModelPolicy:
    """How names a catalog lacks are served: `aliases` (client id → model id) win, then a Gemini
    name's class in `gemini_classes` (`gemini_names`; empty while the Gemini API is off), then
    `fallback`: "family" serves the newest model of the same Claude line or GPT tier,
    "strict" refuses."""

    aliases: Mapping[str, str] = field(default_factory=dict)
    fallback: FallbackPolicy = "family"
    gemini_classes: Mapping[str, str] = field(default_factory=dict)


STRICT = ModelPolicy(fallback="strict")


@dataclass(frozen=True, slots=True)
class Resolution:
    """The model serving a request, and whether it is the one named or a substitute.

    `line` is the Claude line or GPT tier a substitute was chosen from (None otherwise).
    """

    info: ModelInfo
    via: ResolvedVia
    line: str | None = None

    @property
    def why(self) -> str:
        """How the model was chosen, in words (`kiroctl models`)."""
        if self.via == "family":
            return f"the newest {self.line} model offered"
        if self.via == "tier":
            return f"the newest GPT {self.line} model offered"
        if self.via == "newest":
            tier = f"no GPT {self.line} model is offered: " if self.line else ""
            return f"{tier}the newest GPT model offered"
        return "an alias in model_aliases" if self.via == "alias" else "offered as named"


def newest(
    catalog: ModelCatalog, vendor: Vendor, line: str | None = None, *, million: bool = False
) -> ModelInfo | None:
    """The catalog's newest model of `vendor` (and of its Claude line or GPT tier `line`) by
    version. Of one version's entries the 1M-context variant is chosen when `million` asks for
    it, else the plain one; of equals, the first listed."""
    best: tuple[tuple[int, ...], bool] | None = None
    chosen: ModelInfo | None = None
    for info in catalog:
        name = catalog.name_of(info)
        if name.vendor != vendor or (line is not None and name.line != line):
            continue
        rank = (name.version, name.million == million)
        if best is None or rank > best:
            best, chosen = rank, info
    return chosen


def newest_of_family(
    family: str, catalog: ModelCatalog, *, million: bool = False
) -> ModelInfo | None:
    """The catalog's newest model of the Claude line `family`."""
    return newest(catalog, "claude", family, million=million)


def substitute(name: str, catalog: ModelCatalog) -> Resolution | None:
    """The model the "family" policy serves for a name the catalog does not list, if any."""
    wanted = parse_name(name)
    line = wanted.line if wanted.vendor == "claude" else None
    if line is None and (word := line_word(name)) in catalog.lines():
        line = word  # a bare line word: `opus`, `fable`
    if line is not None:
        info = newest(catalog, "claude", line, million=wanted.million)
        return Resolution(info, "family", line) if info else None
    if wanted.vendor != "gpt":
        return None
    if wanted.line is not None and (info := newest(catalog, "gpt", wanted.line)) is not None:
        return Resolution(info, "tier", wanted.line)
    info = newest(catalog, "gpt")
    return Resolution(info, "newest", wanted.line) if info else None


def _exact(name: str, catalog: ModelCatalog) -> ModelInfo | None:
    for spelling in parse_name(name).spellings:
        if (info := catalog.get(spelling)) is not None:
            return info
    return None


def resolve(name: str, catalog: ModelCatalog, policy: ModelPolicy = STRICT) -> Resolution:
    """The catalog entry serving a client's model name, under `policy`.

    An alias rewrites the name first (its target may itself fall back); a name the catalog
    lacks is served by `substitute` when the policy says so. Anything else is a 404 that lists
    models the client may use instead.
    """
    target = policy.aliases.get(name) or policy.aliases.get(name.strip().lower())
    if target is None and policy.gemini_classes:
        served = serving_name(name, policy.gemini_classes, policy.aliases)
        target = served if served != name else None
    wanted = target or name
    if (info := _exact(wanted, catalog)) is not None:
        return Resolution(info, "alias" if target else "exact")
    if policy.fallback == "family" and (found := substitute(wanted, catalog)) is not None:
        return found
    raise unknown_model(name, catalog)


def resolve_model(name: str, catalog: ModelCatalog) -> ModelInfo:
    """The catalog entry `name` names exactly (no alias, no fallback)."""
    return resolve(name, catalog).info


def line_defaults(catalog: ModelCatalog) -> dict[str, str]:
    """Each Claude line word the catalog offers (`opus`, `fable`) → the Kiro id serving it."""
    out: dict[str, str] = {}
    for line in catalog.lines():
        if (info := newest(catalog, "claude", line)) is not None:
            out[line] = info.kiro_id
    return out


# Kiro serves no Claude model to requests leaving from some regions (mainland China, Hong Kong
# since about May 2026), and an organisation's admins may restrict models: the same account lists
# them again through a proxy elsewhere (docs/KIRO-PROTOCOL.md §2.7).
LIMITED_HINT = (
    "Kiro may limit models by the region the account's requests leave from or by an "
    "organisation's policy; to route the account through a proxy elsewhere, run "
    "'kiroctl accounts set-proxy ACCOUNT URL'"
)


def lists_no_claude(catalog: ModelCatalog) -> bool:
    """The catalog lists models, but no Claude one: what a region's gate looks like."""
    return bool(len(catalog)) and all(
        parse_name(info.kiro_id).vendor != "claude" for info in catalog
    )


def claude_gated(name: str, catalog: ModelCatalog) -> bool:
    """A Claude name, while the catalog lists models but no Claude one."""
    return parse_name(name).vendor == "claude" and lists_no_claude(catalog)


def unknown_model(name: str, catalog: ModelCatalog) -> ApiError:
    """404 naming the model and a few that work, with "…" when the list is cut; for a Claude
    name while no Claude model is listed, why that may be and what to do."""
    shown = _shown(name)
    available = [row.id for row in public_models(catalog)]
    listed = ", ".join(available[:_SHOWN_MODELS])
    if len(available) > _SHOWN_MODELS:
        listed += ", …"
    gated = ""
    if claude_gated(name, catalog):
        gated = f"Kiro lists no Claude model for the accounts: {LIMITED_HINT}. "
    return ApiError(
        ErrorKind.NOT_FOUND,
        f"model '{shown}' is not available; {gated}models that work include {listed} "
        "(GET /v1/models lists them all)",
        code="model_not_found",
        param="model",
        final=True,
    )


def limited_model(name: str) -> ApiError:
    """Kiro refused (INVALID_MODEL_ID) a model the account's catalog listed, or a Claude model
    while it lists none: not the plan's doing, most likely the region's or a policy's."""
    return ApiError(
        ErrorKind.INVALID_REQUEST,
        f"Kiro refused model '{_shown(name)}' for this account, not for want of a plan: "
        f"{LIMITED_HINT}",
        code="model_not_available",
        param="model",
        final=True,
    )


def _shown(name: str) -> str:
    return name if len(name) <= 100 else name[:100] + "…"
