"""A request's reasoning as Kiro is asked for it (docs/KIRO-PROTOCOL.md §2.4): natively, by the
root effort field where the model's schema allows it, or by thinking tags in the prompt, never
both. The answer to prompt tags is split out of the response text by `thinking_tags.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kirod.canonical.catalog import ModelInfo
from kirod.canonical.request import CanonicalRequest, Effort, Reasoning, Role
from kirod.upstream.conversation import Turn
from kirod.upstream.thinking_tags import ThinkingMode

TAG_BUDGET_MIN = 1_024
TAG_BUDGET_MAX = 24_576
_EFFORT_BUDGETS: tuple[tuple[int, Effort], ...] = (
    (4_096, "low"),
    (16_384, "medium"),
    (32_768, "high"),
)
_DEFAULT_EFFORT: Effort = "high"


def thinking_mode(
    request: CanonicalRequest, model: ModelInfo, *, request_fields: bool = True
) -> ThinkingMode:
    """docs/KIRO-PROTOCOL.md §2.4: native reasoning where the model reads the effort, prompt tags
    elsewhere, never both.

    GPT reads `additionalModelRequestFields.reasoning` and always answers with native reasoning
    (prompt tags are a Claude device). Claude reads only the root `output_config.effort`, so a
    Claude model reasons natively where its catalog schema allows that field and this account
    takes root fields (`request_fields`), and by tags otherwise: the static list and the 4.5
    generation have no schema, and an account that refused the root field falls back to tags.
    Tags on top of the root field would ask twice for the same thinking.
    """
    if request.reasoning is None:
        return "none"
    if model.reasoning_field_style == "reasoning":
        return "native"
    fields = model.request_fields
    claude_native = fields is not None and fields.effort_key == "output_config"
    return "native" if claude_native and request_fields else "tags"


def clamped_effort(asked: Effort, model: ModelInfo) -> tuple[Effort, str | None]:
    """The effort the model lists in `asked`'s place (the strongest not above it, else its
    lowest), and `"asked>sent"` when they differ, for the request's log line."""
    effort = model.clamp_effort(asked)
    return effort, None if effort == asked else f"{asked}>{effort}"


@dataclass(frozen=True, slots=True)
class RootFields:
    """`additionalModelRequestFields` for a request, and what was clamped to fit the schema
    (`"asked>sent"`), for the request's log line."""

    fields: dict[str, Any]
    effort_clamped: str | None = None
    max_tokens_clamped: str | None = None


def root_fields(request: CanonicalRequest, model: ModelInfo, mode: ThinkingMode) -> RootFields:
    """docs/KIRO-PROTOCOL.md §2.6: the root `additionalModelRequestFields`, only with keys, enum
    values and numbers the model's schema allows.

    GPT-5.6 takes `reasoning.effort` (by its name where no schema was read: it has always taken
    it). Claude takes `output_config.effort` with `thinking: {type: "adaptive"}` where the schema
    lists that type (never `disabled`: Opus and Sonnet 5.5 do not list it), and the client's
    `max_tokens` clamped into the schema's range where it has that key. Nothing goes in
    `userInputMessage.reasoning`, which Claude does not read. The caller sends none of it to an
    account that refused the root field.
    """
    fields: dict[str, Any] = {}
    clamped: str | None = None
    schema = model.request_fields
    if mode == "native" and request.reasoning is not None:
        asked = asked_effort(request.reasoning, model.default_effort)
        effort, clamped = clamped_effort(asked, model)
        if model.reasoning_field_style == "reasoning":
            fields["reasoning"] = {"effort": effort}
        else:
            fields["output_config"] = {"effort": effort}
            if schema is not None and "adaptive" in schema.thinking_types:
                fields["thinking"] = {"type": "adaptive"}
    limit: str | None = None
    asked_tokens = request.max_output_tokens
    if schema is not None and asked_tokens is not None:
        sent = schema.clamp_max_tokens(asked_tokens)
        if sent is not None:
            fields["max_tokens"] = sent
            limit = None if sent == asked_tokens else f"{asked_tokens}>{sent}"
    return RootFields(fields, clamped, limit)


def sends_request_fields(request: CanonicalRequest, model: ModelInfo) -> bool:
    """Does `request`'s body on `model` carry root `additionalModelRequestFields`?"""
    return bool(root_fields(request, model, thinking_mode(request, model)).fields)


def asked_effort(reasoning: Reasoning, default: Effort | None = None) -> Effort:
    """docs/KIRO-PROTOCOL.md §2.6: the effort to send natively; budgets map onto effort bands,
    and a request naming neither gets the model's default (Kiro's agent sends the schema's)."""
    if reasoning.effort is not None:
        return reasoning.effort
    if reasoning.budget_tokens is None:
        return default or _DEFAULT_EFFORT
    for ceiling, effort in _EFFORT_BUDGETS:
        if reasoning.budget_tokens <= ceiling:
            return effort
    return "max"


def thinking_tags(reasoning: Reasoning, model: ModelInfo) -> tuple[str, str | None]:
    """docs/KIRO-PROTOCOL.md §2.5: a budget asks for budgeted thinking (clamped, never above what
    the model's catalog entry lets it write), an effort for adaptive thinking at the strongest
    level the model lists. Returns the tags and, as `clamped_effort` does, any effort clamp.

    A model with no effort field (the 4.5 generation, Sonnet 4) predates adaptive thinking: its
    effort becomes the budget of that effort's band. The tags know no `xhigh`; it becomes `max`,
    which is also the level that reliably triggers thinking (kiro.rs issue #86).
    """
    budget = reasoning.budget_tokens
    if budget is None and model.reasoning_field_style == "none":
        budget = _effort_budget(reasoning.effort or _DEFAULT_EFFORT)
    if budget is not None:
        ceiling = min(TAG_BUDGET_MAX, model.max_output_tokens)
        budget = min(max(budget, TAG_BUDGET_MIN), ceiling)
        tags = (
            "<thinking_mode>enabled</thinking_mode>"
            f"<max_thinking_length>{budget}</max_thinking_length>"
        )
        return tags, None
    effort, clamped = clamped_effort(reasoning.effort or _DEFAULT_EFFORT, model)
    effort = "max" if effort == "xhigh" else effort
    tags = f"<thinking_mode>adaptive</thinking_mode><thinking_effort>{effort}</thinking_effort>"
    return tags, clamped


def _effort_budget(effort: Effort) -> int:
    """The top of the band `asked_effort` maps onto `effort`; the tag maximum above `high`."""
    return next((ceiling for ceiling, band in _EFFORT_BUDGETS if band == effort), TAG_BUDGET_MAX)


def inject_thinking_tags(tags: str, system: str, first: Turn) -> str:
    """docs/KIRO-PROTOCOL.md §2.5: tags open the system text, or else the first turn if it is the
    client's user turn, or else (a history that opens with the assistant) they are the system
    text. Returns the new system text.

    That first user turn is a plain one — rule 6 turns results without a preceding assistant
    into text — so tags never land on a turn carrying toolResults (jwadow PR #158).
    """
    if system:
        return f"{tags}\n{system}"
    if first.role is not Role.USER:
        return tags
    first.texts.insert(0, tags)
    return system
