"""kirod's models as Ollama describes models: `/api/version`, `/api/tags` rows, `/api/show`.

Nothing is stored locally, so the fields about weights say so: `size` 0, `format` and
`quantization_level` empty. The `digest` is the SHA-256 of the Kiro id, stable across restarts,
and `modified_at` a fixed date (Kiro's catalog dates nothing). The family is the model's maker as
its id says it (`claude`, `gpt`), else the catalog's provider; it names the architecture in
`model_info`, whose `<family>.context_length` is the catalog's context window (what VS Code reads
for a model's limits, with `capabilities` for tools and images, and `general.basename` for its
name). Every model completes, calls tools and takes `think` (natively or through prompt tags);
`vision` is listed where the catalog says it takes images.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from kirod.canonical.catalog import ListedModel, ModelInfo
from kirod.canonical.model_names import parse_name

VERSION: Final = "0.12.10"
"""The Ollama release whose chat API this codec speaks (its tool calls carry ids since then);
VS Code Copilot's Ollama provider needs at least 0.6.4."""
MODIFIED_AT: Final = "2025-01-01T00:00:00Z"


def family(info: ModelInfo) -> str:
    return parse_name(info.kiro_id).vendor or info.provider


def capabilities(info: ModelInfo) -> list[str]:
    listed = ["completion", "tools", "thinking"]
    return [*listed, "vision"] if info.supports_images else listed


def details(info: ModelInfo) -> dict[str, Any]:
    name = family(info)
    return {
        "parent_model": "",
        "format": "",
        "family": name,
        "families": [name],
        "parameter_size": "",
        "quantization_level": "",
        "context_length": info.context_window,
    }


def tags_entry(listed: ListedModel) -> dict[str, Any]:
    """One `/api/tags` row, named by the id clients send."""
    return {
        "name": listed.id,
        "model": listed.id,
        "modified_at": MODIFIED_AT,
        "size": 0,
        "digest": hashlib.sha256(listed.info.kiro_id.encode()).hexdigest(),
        "details": details(listed.info),
        "capabilities": capabilities(listed.info),
    }


def show_json(info: ModelInfo) -> dict[str, Any]:
    """The `/api/show` answer."""
    name = family(info)
    return {
        "modified_at": MODIFIED_AT,
        "details": details(info),
        "model_info": {
            "general.architecture": name,
            "general.basename": info.display_name,
            f"{name}.context_length": info.context_window,
        },
        "capabilities": capabilities(info),
    }
