"""Gemini model names, and the kirod model each class of them is served by.

Gemini clients name Gemini models: Gemini CLI its default (`gemini-3.1-pro-preview`) and, for
its side calls, aliases of each class (`gemini-3.5-flash-lite`, `gemini-flash-latest`). Such a
name is served by the model its class maps to in the `gemini_models` setting (pro, flash,
flash-lite → the newest Opus, Sonnet and Haiku by default), unless `model_aliases` names it
exactly; any other name (a Kiro id, `claude-sonnet-4.5`) passes as is. The class is the word
after the version: `gemini-<version>-<class>[-preview|-latest|-…]`, or `gemini-<class>-latest`.
Model resolution applies it (`resolution.ModelPolicy.gemini_classes`), so a request keeps the
name its client sent, which traces show beside the Kiro model that served it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

_GEMINI: Final = re.compile(r"^(?:models/)?gemini-(?:\d+(?:\.\d+)*-)?(?P<rest>[a-z][a-z0-9.-]*)$")
CLASSES: Final = ("flash-lite", "flash", "pro")  # the longest prefix first


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
