"""How many prompt tokens a model takes on an account whose window is not the listed one.

ListAvailableModels lists `maxInputTokens`, the prompt limit, and Kiro's context percentage is of
that on most models. A window kirod learned larger than the listing (`kirod.accounts.windows`) is
the model's whole window, prompt and answer together, as on GPT-5.6's 1M accounts: prompts to
872 000 tokens, 1 000 000 less its 128 000 output (docs/KIRO-PROTOCOL.md §6.2). Never below the
listed limit, which Kiro served before; a window learned smaller is the limit itself.
"""

from __future__ import annotations

from kirod.canonical.catalog import ModelInfo


def prompt_limit(info: ModelInfo, window: int) -> int:
    """The prompt limit of `info` (listed `context_window`) on an account whose window is
    `window`."""
    listed = info.context_window
    if window <= listed:
        return window
    return max(listed, window - info.max_output_tokens)
