"""How a client's request becomes Kiro's: sampling parameters, cache points, tool-call delivery
and truncation recovery, and which model serves a client's model id."""

from __future__ import annotations

from kirod.config.option import Kind, Option

TRANSLATION: tuple[Option, ...] = (
    Option(
        "parameter_policy",
        Kind.CHOICE,
        "What to do with sampling parameters Kiro cannot honour (temperature, top_p, top_k, "
        "stop sequences): drop them (logged) or answer 400.",
        "drop",
        choices=("drop", "error"),
    ),
    Option(
        "kiro_max_body_bytes",
        Kind.INT,
        "Largest Kiro request body kirod sends, images not counted; a larger request is "
        "answered 413. kirod's own limit, from the 400 Kiro gave above about 615 KB in February "
        "2026; whether Kiro's limit has moved since is unknown.",
        600_000,
        minimum=100_000,
        maximum=100_000_000,
    ),
    Option(
        "prompt_cache_points",
        Kind.BOOL,
        "Experiment: mark message-level cachePoints in Kiro requests (on models whose catalog "
        "lists promptCaching, within its checkpoint limit). Off: conversation id reuse alone.",
        False,
    ),
    Option(
        "tool_input_delivery",
        Kind.CHOICE,
        "When a tool call reaches the client: whole, once Kiro has sent all of its input "
        "(complete: a call Kiro cuts off is never handed out), or fragment by fragment as it "
        "arrives (live: no truncation recovery).",
        "complete",
        choices=("complete", "live"),
    ),
    Option(
        "truncation_recovery",
        Kind.BOOL,
        "When Kiro cuts a tool call off, continue the turn once, telling the model in an error "
        "tool result that the call was cut and not executed (needs tool_input_delivery = "
        "complete).",
        True,
    ),
    Option(
        "model_fallback",
        Kind.CHOICE,
        "How a model id no account offers is served (claude-opus-5-5, fable, gpt-6.2-sol): by "
        "the newest offered model of its Claude line, or of its GPT tier, else the newest GPT "
        "(family), or answered with 404 (strict).",
        "family",
        choices=("family", "strict"),
    ),
    Option(
        "model_aliases",
        Kind.MAP,
        "Client model ids served by a model of your choice, before any fallback: a TOML table "
        '("claude-opus-5-5" = "claude-opus-4.7"), or id=model pairs separated by commas in '
        "the environment and on the command line.",
        {},
    ),
)
