"""A request's reasoning as Kiro is asked for it (docs/KIRO-PROTOCOL.md §2.4): natively, by an
effort field where the model reads it, or by thinking tags in the prompt, never both. The answer to
prompt tags is split out of the response text by `thinking_tags.py`.
"""

from __future__ import annotations

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


def thinking_mode(request: CanonicalRequest, model: ModelInfo) -> ThinkingMode:
    """docs/KIRO-PROTOCOL.md §2.4: native reasoning where the model honours it, prompt tags
    elsewhere, never both.

    A model taking its effort in `additionalModelRequestFields.reasoning` (GPT) reasons natively
    by that field; prompt tags are a Claude device.
    """
    if request.reasoning is None:
        return "none"
    native = model.native_reasoning or model.reasoning_field_style == "reasoning"
    return "native" if native else "tags"


def clamped_effort(asked: Effort, model: ModelInfo) -> tuple[Effort, str | None]:
    """The effort the model lists in `asked`'s place (the strongest not above it, else its
    lowest), and `"asked>sent"` when they differ, for the request's log line."""
    effort = model.clamp_effort(asked)
    return effort, None if effort == asked else f"{asked}>{effort}"


def native_effort(effort: Effort, model: ModelInfo, current: dict[str, Any]) -> dict[str, Any]:
    """docs/KIRO-PROTOCOL.md §2.6: the effort where the model reads it; returns
    `additionalModelRequestFields`.

    A model whose field is `reasoning` (GPT-5.6) takes `additionalModelRequestFields.reasoning`
    (docs/KIRO-PROTOCOL.md §2.6; sunerpy's probes saw credits rise with it), and nothing in
    `userInputMessage`, a combination no peer sends. Other models (Claude) get
    `userInputMessage.reasoning` and never a root `output_config`: the 4.5 generation rejects
    any such field and external-IdP accounts the root field itself (docs/KIRO-PROTOCOL.md §2.6),
    while the effort already reaches Claude here or through the prompt tags.
    """
    if model.reasoning_field_style == "reasoning":
        return {"reasoning": {"effort": effort}}
    current["reasoning"] = {"effort": effort}
    return {}


def asked_effort(reasoning: Reasoning) -> Effort:
    """docs/KIRO-PROTOCOL.md §2.6: the effort to send natively; budgets map onto effort bands."""
    if reasoning.effort is not None:
        return reasoning.effort
    if reasoning.budget_tokens is None:
        return _DEFAULT_EFFORT
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
