"""Thinking: whether and how hard the model reasons, and which earlier thinking is kept.

`thinking` decides whether to reason and `output_config.effort` how hard. `thinking.display`
is the client's display preference, passed on as `Reasoning.summary`: `summarized`, `omitted`,
or `updates`, which Anthropic accepts only under the beta `thinking-display-updates-2026-08-18`
(Claude Code asks for it under the Claude Agent SDK: docs/CLIENTS.md §5.4). Kiro's reasoning
comes back as it is under every display. Of `context_management`, `clear_thinking_*` edits are
honoured (thinking older than the turns to keep is not sent upstream); other edits are accepted
and logged at debug level.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final, get_args

from kirod import log
from kirod.canonical.request import (
    Effort,
    Message,
    Reasoning,
    RedactedThinkingBlock,
    Role,
    ThinkingBlock,
)
from kirod.protocols.anthropic.checks import check, choices, invalid, unsupported

_EFFORTS: Final[Mapping[str, Effort]] = {effort: effort for effort in get_args(Effort)}
_DISPLAYS: Final = frozenset({"summarized", "omitted", "updates"})
UPDATES_BETA: Final = "thinking-display-updates-2026-08-18"
"""The `anthropic-beta` value without which Anthropic refuses `display: "updates"`."""

logger = logging.getLogger(__name__)


def requested_reasoning(
    thinking: object, output_config: object, betas: frozenset[str] = frozenset()
) -> Reasoning | None:
    """`thinking` decides whether to reason; `output_config.effort` tunes it when it does;
    `betas` are the request's `anthropic-beta` values.

    Adaptive thinking without an effort leaves the default to the payload builder, so the
    default lives in one place.
    """
    effort: Effort | None = None
    if output_config is not None:
        config = check.mapping(output_config, "output_config")
        if config.get("format") is not None:
            raise unsupported("output_config.format", "structured output is not supported")
        if (value := config.get("effort")) is not None:
            effort = _EFFORTS.get(value) if isinstance(value, str) else None
            if effort is None:
                raise invalid("output_config.effort", f"must be one of {choices(_EFFORTS)}")
    if thinking is None:
        return None
    config = check.mapping(thinking, "thinking")
    kind = check.text(config.get("type"), "thinking.type")
    display = config.get("display")
    if display is not None and (not isinstance(display, str) or display not in _DISPLAYS):
        raise invalid("thinking.display", f"must be one of {choices(_DISPLAYS)}")
    if display == "updates" and UPDATES_BETA not in betas:
        raise invalid(
            "thinking.display",
            f"'updates' needs the beta {UPDATES_BETA} (add it to the anthropic-beta header)",
        )
    if kind == "disabled":
        return None
    if kind == "enabled":
        # Anthropic wants at least 1 024; any positive budget is meaningful here.
        budget = check.positive_integer(config.get("budget_tokens"), "thinking.budget_tokens")
        return Reasoning(effort=effort, budget_tokens=budget, summary=display)
    if kind == "adaptive":
        return Reasoning(effort=effort, summary=display)
    raise invalid("thinking.type", "must be 'enabled', 'adaptive' or 'disabled'")


def beta_values(headers: Mapping[str, str]) -> frozenset[str]:
    """The comma-separated values of the `anthropic-beta` header (it may come more than once)."""
    lines = [value for name, value in headers.items() if name.lower() == "anthropic-beta"]
    return frozenset(item.strip() for line in lines for item in line.split(",") if item.strip())


def thinking_turns_to_keep(value: object) -> int | None:
    """From `context_management.edits`: how many recent assistant turns keep their thinking.

    None keeps all. A `clear_thinking_*` edit's `keep` is "all" or `{"type": "thinking_turns",
    "value": N}`; other edits (clearing tool uses) are accepted without effect.
    """
    if value is None:
        return None
    edits = check.mapping(value, "context_management").get("edits")
    if edits is None:
        return None
    keep: int | None = None
    for i, item in enumerate(check.array(edits, "context_management.edits")):
        path = f"context_management.edits.{i}"
        edit = check.mapping(item, path)
        kind = check.text(edit.get("type"), f"{path}.type")
        if not kind.startswith("clear_thinking_"):
            log.event(logger, "context_management_ignored", level=logging.DEBUG, edit=kind[:64])
            continue
        rule = edit.get("keep")
        if rule is None or rule == "all":
            continue
        rule = check.mapping(rule, f"{path}.keep")
        if rule.get("type") != "thinking_turns":
            raise invalid(f"{path}.keep.type", "must be 'thinking_turns'")
        turns = check.integer(rule.get("value"), f"{path}.keep.value")
        if turns < 0:
            raise invalid(f"{path}.keep.value", "must not be negative")
        keep = turns if keep is None else min(keep, turns)
    return keep


def clear_thinking(messages: tuple[Message, ...], keep: int | None) -> tuple[Message, ...]:
    """Drop thinking from all but the last `keep` assistant turns that carry it."""
    if keep is None:
        return messages
    thinking = (ThinkingBlock, RedactedThinkingBlock)
    carriers = [
        i
        for i, message in enumerate(messages)
        if message.role is Role.ASSISTANT and any(isinstance(b, thinking) for b in message.content)
    ]
    cleared = set(carriers[: max(0, len(carriers) - keep)])
    return tuple(
        Message(m.role, tuple(b for b in m.content if not isinstance(b, thinking)))
        if i in cleared
        else m
        for i, m in enumerate(messages)
    )
