"""Gemini model names, and kirod's models as the Gemini API describes them.

Gemini clients name Gemini models: Gemini CLI its default (`gemini-3.1-pro-preview`) and, for
its side calls, aliases of each class (`gemini-3.5-flash-lite`, `gemini-flash-latest`). Such a
name is served by the model its class maps to in the `gemini_models` setting (pro, flash,
flash-lite → the newest Opus, Sonnet and Haiku by default), unless `model_aliases` names it
exactly; any other name (a Kiro id, `claude-sonnet-4.5`) passes as is. The class is the word
after the version: `gemini-<version>-<class>[-preview|-latest|-…]`, or `gemini-<class>-latest`.

A model row is Google's `Model`: `name` (`models/<id>`), limits, the methods it serves, and
whether it thinks; the temperature bounds are the ones the decoder accepts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from kirod.canonical.catalog import ModelInfo

_GEMINI: Final = re.compile(r"^(?:models/)?gemini-(?:\d+(?:\.\d+)*-)?(?P<rest>[a-z][a-z0-9.-]*)$")
CLASSES: Final = ("flash-lite", "flash", "pro")  # the longest prefix first
METHODS: Final = ("generateContent", "streamGenerateContent", "countTokens")


def gemini_class(name: str) -> str | None:
    """`pro`, `flash` or `flash-lite` for a Gemini model name, else None."""
    match = _GEMINI.match(name.strip().lower())
    if match is None:
        return None
    rest = match["rest"]
    return next((c for c in CLASSES if rest == c or rest.startswith(c + "-")), None)


def serving_name(name: str, classes: Mapping[str, str], aliases: Mapping[str, str]) -> str:
    """The model name kirod resolves for a Gemini client's `name`."""
    if name in aliases or name.strip().lower() in aliases:
        return name
    kind = gemini_class(name)
    return classes.get(kind, name) if kind is not None else name


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
