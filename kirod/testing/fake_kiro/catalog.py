"""The fake's model catalog, served paged by ListAvailableModels (docs/KIRO-PROTOCOL.md §2.7, §6.2).

Figures are plausible rather than authoritative: context windows follow what peers use for token
math (200 000 by default, 1 000 000 for the 1M and newest models, 272 000 for GPT-5.6), rate
multipliers follow the kiro-cli capture (`auto` 1.0, `claude-opus-4.7` 2.2).

GPT-5.6 is listed at 272 000 but has a 1 000 000 window (`Model.window`): its prompts go to
872 000 tokens, and the context percentage is of 1 000 000 (docs/KIRO-PROTOCOL.md §6.2; sunerpy/
kiro-provider docs/audits/kiro-gpt56-sol-1m-context-probe-2026-09-06.zh.md, 2026-09-06; yupanzi/
kiro2claude docs/PITFALLS.md, section "GPT context window", rolled out per account from
2026-09-14). An account the rollout has not reached has the listed window
(`Account.listed_windows`).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_EFFORTS = ["low", "medium", "high", "xhigh", "max"]


def claude_request_fields(
    *,
    efforts: Sequence[str] = _EFFORTS,
    default_effort: str | None = None,
    thinking_types: Sequence[str] = ("adaptive", "disabled"),
    max_tokens: int = 128_000,
) -> Mapping[str, Any]:
    """A Claude model's `additionalModelRequestFieldsSchema` (docs/KIRO-PROTOCOL.md §2.6, §6.2),
    shaped as the Opus 5.5 capture shows it (sunerpy/kiro-provider
    docs/audits/evidence/opus-5-5-catalog-probe-2026-09-26/management-catalog.json, 2026-09-26):
    `thinking.type` and `display`, `output_config.effort` with its levels and default, and
    `max_tokens` from 1,024 (sunerpy docs/audits/kiro-protocol-projection-probe-2026-08-26.md,
    2026-08-26: 1,024 to 128,000 on Claude 5.x, 64,000 at most on Opus 4.6), every level closed
    by `additionalProperties: false`."""
    effort: dict[str, Any] = {"type": "string", "enum": list(efforts)}
    if default_effort is not None:
        effort["default"] = default_effort
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "thinking": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "type": {"type": "string", "enum": list(thinking_types)},
                    "display": {"type": "string", "enum": ["summarized", "omitted"]},
                },
                "required": ["type"],
            },
            "output_config": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"effort": effort},
            },
            "max_tokens": {"type": "integer", "minimum": 1024, "maximum": max_tokens},
        },
    }


CLAUDE_REQUEST_FIELDS: Mapping[str, Any] = claude_request_fields()
"""Extra request keys the newest Claude models accept (`additionalModelRequestFields`:
docs/KIRO-PROTOCOL.md §2.6)."""

CLAUDE_46_REQUEST_FIELDS: Mapping[str, Any] = claude_request_fields(
    efforts=["low", "medium", "high", "max"], max_tokens=64_000
)
"""The 4.6 generation: no `xhigh` (docs/KIRO-PROTOCOL.md §2.6), `max_tokens` up to 64,000 (sunerpy
docs/audits/kiro-protocol-projection-probe-2026-08-26.md, 2026-08-26, for Opus 4.6)."""

OPUS_55_REQUEST_FIELDS: Mapping[str, Any] = claude_request_fields(
    default_effort="medium", thinking_types=("adaptive",)
)
"""Opus 5.5: only adaptive thinking (no `disabled`), effort medium by default (sunerpy
docs/audits/evidence/opus-5-5-catalog-probe-2026-09-26/management-catalog.json, 2026-09-26)."""

SONNET_55_REQUEST_FIELDS: Mapping[str, Any] = claude_request_fields(
    default_effort="high", thinking_types=("adaptive", "between_tools")
)
"""Sonnet 5.5: adaptive or between-tools thinking, no `disabled`, effort high by default
(marr-cloud/kiro-gateway-go internal/accountmanager/testdata/list_available_models.json, a
captured ListAvailableModels answer, October 2026)."""

GPT_REQUEST_FIELDS: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "reasoning": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"effort": {"type": "string", "enum": _EFFORTS}},
        },
    },
}
"""GPT-5.6 takes `reasoning` instead of `output_config`; each family rejects the other's key."""


@dataclass(frozen=True)
class Model:
    """One catalog entry.

    `honors_reasoning_effort`: `userInputMessage.reasoning` turns on native reasoning (GPT-5.6);
    Claude ignores it silently, effort and all (yupanzi/kiro2claude docs/PITFALLS.md, kiro-cli
    2.22 captures and direct probes to 2026-10-07: credits do not move with it), and reads only
    the root `output_config.effort`. `redacted_reasoning`: native reasoning arrives as an
    opaque `redactedContent` blob (GPT-5.6) instead of text + signature. `premium`: not available
    on Free plans (Opus). `cache_checkpoints`: listed with a `promptCaching` block allowing that
    many `cachePoint`s per request (docs/KIRO-PROTOCOL.md §6.2: 4 on Claude models); 0 lists none.
    `window`: the window Kiro really has when it is not the listed `max_input_tokens` (input and
    output together, as GPT-5.6's 1M: prompts to 1M less the output limit); None: the listed one.
    `cache_count_listed` False leaves the count out of the block, as the Opus 5.5 capture does.
    `refusal_fallback_models` is listed as `refusalFallbackModels` when not empty, each as
    `{"modelId": …}` (marr-cloud/kiro-gateway-go
    internal/accountmanager/testdata/list_available_models.json, a captured answer, October 2026).
    """

    model_id: str
    name: str
    max_input_tokens: int
    max_output_tokens: int
    rate_multiplier: float
    input_types: tuple[str, ...] = ("TEXT", "IMAGE")
    request_fields_schema: Mapping[str, Any] | None = field(default=None, compare=False)
    honors_reasoning_effort: bool = False
    redacted_reasoning: bool = False
    premium: bool = False
    provider: str = "anthropic"
    cache_checkpoints: int = 0
    window: int | None = None
    cache_count_listed: bool = True
    refusal_fallback_models: tuple[str, ...] = ()

    @property
    def usage_window(self) -> int:
        """What `contextUsagePercentage` is a percentage of."""
        return self.window or self.max_input_tokens

    @property
    def prompt_limit(self) -> int:
        """The most input tokens Kiro takes: GPT-5.6's 872 000 is its 1M less 128 000 output."""
        return (
            self.max_input_tokens if self.window is None else self.window - self.max_output_tokens
        )

    def to_json(self) -> dict[str, Any]:
        """The model as ListAvailableModels serializes it."""
        data: dict[str, Any] = {
            "modelId": self.model_id,
            "modelName": self.name,
            "description": f"{self.name} (fake Kiro)",
            "modelProvider": self.provider,
            "rateMultiplier": self.rate_multiplier,
            "rateUnit": "credit",
            "supportedInputTypes": list(self.input_types),
            "tokenLimits": {
                "maxInputTokens": self.max_input_tokens,
                "maxOutputTokens": self.max_output_tokens,
            },
            "supportsPromptCache": False,
        }
        if self.request_fields_schema is not None:
            data["additionalModelRequestFieldsSchema"] = self.request_fields_schema
        if self.cache_checkpoints and self.cache_count_listed:
            data["promptCaching"] = {
                "supportsPromptCaching": True,
                "maximumCacheCheckpointsPerRequest": self.cache_checkpoints,
                "minimumTokensPerCacheCheckpoint": 1024,
            }
        elif self.cache_checkpoints:
            data["promptCaching"] = {"supportsPromptCaching": True}
        if self.refusal_fallback_models:
            data["refusalFallbackModels"] = [{"modelId": m} for m in self.refusal_fallback_models]
        return data


DEFAULT_MODEL_ID = "auto"
DOCUMENT_INPUTS = ("TEXT", "IMAGE", "DOCUMENT")
"""The request model's `documents` input type; listed for some newer Claude models only, so
kirod is tested both with and without it (no capture shows which real models list it)."""

DEFAULT_MODELS: tuple[Model, ...] = (
    Model("auto", "Auto", 1_000_000, 64_000, 1.0),
    Model("claude-sonnet-4.5", "Claude Sonnet 4.5", 200_000, 64_000, 1.3, cache_checkpoints=4),
    Model(
        "claude-sonnet-4.6",
        "Claude Sonnet 4.6",
        1_000_000,
        64_000,
        1.3,
        DOCUMENT_INPUTS,
        request_fields_schema=CLAUDE_46_REQUEST_FIELDS,
        cache_checkpoints=4,
    ),
    Model("claude-sonnet-4", "Claude Sonnet 4", 200_000, 64_000, 1.3),
    Model("claude-haiku-4.5", "Claude Haiku 4.5", 200_000, 64_000, 0.4),
    Model("claude-opus-4.5", "Claude Opus 4.5", 200_000, 32_000, 2.2, premium=True),
    Model(
        "claude-opus-4.6",
        "Claude Opus 4.6",
        1_000_000,
        32_000,
        2.2,
        request_fields_schema=CLAUDE_46_REQUEST_FIELDS,
        premium=True,
    ),
    Model(
        "claude-opus-4.7",
        "Claude Opus 4.7",
        1_000_000,
        64_000,
        2.2,
        request_fields_schema=CLAUDE_REQUEST_FIELDS,
        premium=True,
    ),
    Model(
        "claude-opus-4.8",
        "Claude Opus 4.8",
        1_000_000,
        64_000,
        2.2,
        request_fields_schema=CLAUDE_REQUEST_FIELDS,
        premium=True,
    ),
    Model(
        "claude-sonnet-5",
        "Claude Sonnet 5",
        1_000_000,
        64_000,
        1.3,
        DOCUMENT_INPUTS,
        request_fields_schema=CLAUDE_REQUEST_FIELDS,
    ),
    Model("claude-sonnet-4.5-1m", "Claude Sonnet 4.5 (1M)", 1_000_000, 64_000, 1.3),
    Model("deepseek-3.2", "DeepSeek 3.2", 128_000, 8_000, 0.25, ("TEXT",), provider="deepseek"),
    Model(
        "gpt-5.6-sol",
        "GPT-5.6 Sol",
        272_000,
        128_000,
        1.5,
        request_fields_schema=GPT_REQUEST_FIELDS,
        honors_reasoning_effort=True,
        redacted_reasoning=True,
        provider="openai",
        window=1_000_000,  # listed 272 000: see the module docstring
    ),
    # sunerpy docs/audits/evidence/opus-5-5-catalog-probe-2026-09-26/management-catalog.json
    # (2026-09-26): 1M in, 128,000 out, rate 2, caching listed without a checkpoint count.
    Model(
        "claude-opus-5.5",
        "Claude Opus 5.5",
        1_000_000,
        128_000,
        2.0,
        request_fields_schema=OPUS_55_REQUEST_FIELDS,
        premium=True,
        cache_checkpoints=4,
        cache_count_listed=False,
        refusal_fallback_models=("claude-opus-4.8",),  # marr-cloud/kiro-gateway-go, 2026-10
    ),
    # marr-cloud/kiro-gateway-go internal/accountmanager/testdata/list_available_models.json
    # (a captured answer, October 2026): rate 1.3, effort high by default, caching without a
    # count, refusal fallback Sonnet 5.
    Model(
        "claude-sonnet-5.5",
        "Claude Sonnet 5.5",
        1_000_000,
        128_000,
        1.3,
        request_fields_schema=SONNET_55_REQUEST_FIELDS,
        cache_checkpoints=4,
        cache_count_listed=False,
        refusal_fallback_models=("claude-sonnet-5",),
    ),
)
"""What today's Kiro lists by default, Opus 5.5 (listed since 2026-09-26) and Sonnet 5.5 (since
October 2026) the newest of their families."""


FABLE_MODELS: tuple[Model, ...] = tuple(
    Model(
        model_id,
        name,
        1_000_000,
        128_000,
        1.6,
        request_fields_schema=CLAUDE_REQUEST_FIELDS,
        cache_checkpoints=4,
    )
    for model_id, name in (
        ("claude-fable-5", "Claude Fable 5"),
        ("claude-fable-5.1", "Claude Fable 5.1"),
    )
)
"""Kiro's fourth Claude line (docs/KIRO-PROTOCOL.md §2.7), for catalogs that offer it."""

LAUNCH_DAY_MODELS: tuple[Model, ...] = (
    Model(
        "claude-fable-6",
        "Claude Fable 6",
        2_000_000,
        128_000,
        1.8,
        DOCUMENT_INPUTS,
        request_fields_schema=CLAUDE_REQUEST_FIELDS,
        cache_checkpoints=2,
    ),
    Model("claude-mythos-5", "Claude Mythos 5", 1_000_000, 96_000, 3.0, ("TEXT",)),
    Model(
        "gpt-7-sol",
        "GPT-7 Sol",
        500_000,
        200_000,
        1.5,
        request_fields_schema=GPT_REQUEST_FIELDS,
        honors_reasoning_effort=True,
        redacted_reasoning=True,
        provider="openai",
    ),
    Model(
        "gpt-6.5-luna",
        "GPT-6.5 Luna",
        400_000,
        100_000,
        0.5,
        ("TEXT",),
        request_fields_schema=GPT_REQUEST_FIELDS,
        honors_reasoning_effort=True,
        redacted_reasoning=True,
        provider="openai",
    ),
)
"""Models no kirod release knows of: a later Fable, a new Claude line, new GPT versions and
tiers, with limits unlike any name rule's, as Kiro might list them on the day they launch."""


DRIFT_WINDOW = 1_000_000
"""`Drift.WINDOW`: the window a Claude model listed at 200 000 really has. The kind of change seen
before is GPT-5.6's: listed at 272 000 while accounts measure against 1 000 000, the catalog never
updated (docs/KIRO-PROTOCOL.md §6.2); Claude 4.5's 1M came as a separate `-1m` id
(docs/KIRO-PROTOCOL.md §2.7), so the plain id growing is the likely next one."""


def with_window_drift(model: Model) -> Model:
    """The model under `Drift.WINDOW`, on every account: a Claude model listed at 200 000 has
    `DRIFT_WINDOW`; others as they are."""
    if claude(model) and model.max_input_tokens == 200_000 and model.window is None:
        return dataclasses.replace(model, window=DRIFT_WINDOW)
    return model


DRIFT_MODEL_FIELD = ("lifecycleStatus", "PREVIEW")
DRIFT_INPUT_TYPE = "VIDEO"
DRIFT_SCHEMA_KEY = ("context_management", {"type": "object", "additionalProperties": True})


def with_catalog_drift(models: Sequence[Model], page: dict[str, Any]) -> dict[str, Any]:
    """`page` under `Drift.CATALOG_FIELD`: the newest model with a request schema (the last such
    in `models`) lists a new field, a new input type and a new schema key. Each is the kind of
    change seen before (docs/KIRO-PROTOCOL.md §6.2): fields added to the entries
    (`promptCaching`, `modelProvider`, `refusalFallbackModels`), input types added (`DOCUMENT`
    on newer Claude models), and schema keys added per generation (`max_tokens` from 5.x:
    docs/KIRO-PROTOCOL.md §2.6), each first on the newest models. The schema key takes any value;
    it names Anthropic's `context_management` request field, which Kiro's schemas mirror."""
    target = next((m.model_id for m in reversed(models) if m.request_fields_schema), None)
    for entry in page["models"]:
        if entry["modelId"] != target:
            continue
        name, value = DRIFT_MODEL_FIELD
        entry[name] = value
        entry["supportedInputTypes"] = [*entry["supportedInputTypes"], DRIFT_INPUT_TYPE]
        schema = dict(entry["additionalModelRequestFieldsSchema"])
        key, node = DRIFT_SCHEMA_KEY
        schema["properties"] = {**schema["properties"], key: node}
        entry["additionalModelRequestFieldsSchema"] = schema
    return page


def claude(model: Model) -> bool:
    """A Claude model: the ones Kiro gates by the request's egress region."""
    return model.model_id.startswith("claude-")


class InvalidNextToken(ValueError):
    """A `nextToken` the fake did not issue."""


def models_page(
    models: Sequence[Model], *, next_token: str | None, max_results: int
) -> dict[str, Any]:
    """One ListAvailableModels page; `nextToken` is opaque to clients and absent on the last."""
    start = _decode_token(next_token) if next_token else 0
    if start > len(models):
        raise InvalidNextToken(next_token)
    end = start + max(1, max_results)
    page: dict[str, Any] = {
        "models": [model.to_json() for model in models[start:end]],
        "defaultModel": {"modelId": DEFAULT_MODEL_ID},
    }
    if end < len(models):
        page["nextToken"] = base64.urlsafe_b64encode(f"offset:{end}".encode()).decode()
    return page


def _decode_token(token: str) -> int:
    try:
        kind, _, offset = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        start = int(offset)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise InvalidNextToken(token) from exc
    if kind != "offset" or start < 0:
        raise InvalidNextToken(token)
    return start
