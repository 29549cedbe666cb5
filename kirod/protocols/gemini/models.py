"""kirod's models as the Gemini API describes them, and Gemini CLI's compression setting.

Gemini model names are served by their class (`kirod.canonical.gemini_names`, applied by model
resolution), so a request keeps the name its client sent.

Gemini CLI believes every model has a window of `ASSUMED_WINDOW` tokens and compresses its
history when a prompt passes `model.compressionThreshold` of it (docs/CLIENTS.md §4.4);
`compression_threshold` is the setting that compresses in time for the window kirod serves.

A model row is Google's `Model`: `name` (`models/<id>`), limits, the methods it serves, and
whether it thinks; the temperature bounds are the ones the decoder accepts.
"""

from __future__ import annotations

from typing import Any, Final

from kirod.canonical.catalog import ModelInfo

METHODS: Final = ("generateContent", "streamGenerateContent", "countTokens")
ASSUMED_WINDOW: Final = 1_048_576
"""The window Gemini CLI 0.61.0 assumes for any model (`tokenLimit`)."""
DEFAULT_THRESHOLD: Final = 0.5
"""Its own `model.compressionThreshold`."""
FILL_BEFORE_COMPRESSING: Final = 0.8
"""How full the served window may get before Gemini CLI compresses: room for one more turn."""


def compression_threshold(window: int) -> float:
    """`model.compressionThreshold` for a served `window`: Gemini CLI compresses at that fraction
    of `ASSUMED_WINDOW`, so by 80 % of the real window, and never later than its default (0.5):
    0.15 for 200,000 tokens, 0.5 for 1,000,000."""
    fitted = int(100 * FILL_BEFORE_COMPRESSING * window / ASSUMED_WINDOW) / 100
    return max(0.01, min(DEFAULT_THRESHOLD, fitted))


def model_json(name: str, info: ModelInfo) -> dict[str, Any]:
    """One `Model`, named as the client asked for it (`models/` + `name`)."""
    return {
        "name": "models/" + name.removeprefix("models/"),
        "baseModelId": info.public_id,
        "version": info.kiro_id,
        "displayName": info.display_name,
        "description": f"{info.display_name}, served by kirod as {info.kiro_id}",
        "inputTokenLimit": info.context_window,
        "outputTokenLimit": info.max_output_tokens,
        "supportedGenerationMethods": list(METHODS),
        "temperature": 1.0,
        "maxTemperature": 2.0,
        "topP": 1.0,
        "thinking": True,
    }
