"""The console's models page shows each model's window: the learned ones by account name, else
the listed one (`kirod.accounts.windows`)."""

from __future__ import annotations

from typing import Any

from kirod.http.console.pages import models_page
from kirod.report_types import Models


def row(kiro_id: str, listed: int, limit: int, learned: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": kiro_id,
        "kiro_id": kiro_id,
        "context_window": limit,
        "listed_window": listed,
        "learned_windows": learned,
        "max_output_tokens": 64_000,
        "accounts": ["a1", "a2"],
    }


def test_the_models_page_shows_learned_and_listed_windows() -> None:
    learned = [{"account": "a1", "window": 1_000_000, "learned_at": 0.0}]
    models = Models.from_json(
        {
            "source": "accounts",
            "models": [
                row("gpt-5.6-sol", 272_000, 272_000, learned),
                row("claude-sonnet-4.5", 200_000, 200_000, []),
            ],
            "fallback": "family",
        }
    )
    html = models_page(models, {"a1": "work"}, "csrf")
    assert "1,000,000 (work)" in html
    assert "200,000 (listed)" in html
