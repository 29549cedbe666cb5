"""Model catalog: name resolution (kiro-protocol §2.5), limits, /v1/models, ListAvailableModels."""

from __future__ import annotations

from typing import Any

import pytest

from kirod.canonical.models import (
    STATIC_CATALOG,
    ModelCatalog,
    ModelInfo,
    catalog_from_list_available_models,
    public_models,
    resolve_model,
)
from kirod.errors import ApiError, ErrorKind


@pytest.mark.parametrize(
    ("name", "kiro_id"),
    [
        # §2.5 table, row by row
        ("claude-sonnet-4-5", "claude-sonnet-4.5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4.5"),
        ("claude-sonnet-4-6", "claude-sonnet-4.6"),
        ("claude-sonnet-4", "claude-sonnet-4"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-haiku-4-5", "claude-haiku-4.5"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4.5"),
        ("claude-opus-4-5", "claude-opus-4.5"),
        ("claude-opus-4-5-20251101", "claude-opus-4.5"),
        ("claude-opus-4-6", "claude-opus-4.6"),
        ("claude-opus-4-7", "claude-opus-4.7"),
        ("claude-opus-4-8", "claude-opus-4.8"),
        ("claude-opus-5", "claude-opus-5"),
        ("claude-sonnet-5", "claude-sonnet-5"),
        ("claude-sonnet-4-5-1m", "claude-sonnet-4.5-1m"),
        ("claude-sonnet-4-6-1m", "claude-sonnet-4.6-1m"),
        ("claude-opus-4-6-1m", "claude-opus-4.6-1m"),
        ("auto", "auto"),
        ("auto-kiro", "auto"),
        ("deepseek-3.2", "deepseek-3.2"),
        ("glm-5", "glm-5"),
        ("minimax-m2.1", "minimax-m2.1"),
        ("minimax-m2.5", "minimax-m2.5"),
        ("qwen3-coder-next", "qwen3-coder-next"),
        ("gpt-5.6-sol", "gpt-5.6-sol"),
        ("gpt-5.6-terra", "gpt-5.6-terra"),
        ("gpt-5.6-luna", "gpt-5.6-luna"),
        ("CLAUDE_SONNET_4_5_20250929_V1_0", "claude-sonnet-4.5"),
        ("CLAUDE_SONNET_4_20250514_V1_0", "claude-sonnet-4"),
        ("CLAUDE_OPUS_4_5_20251101_V1_0", "claude-opus-4.5"),
        # jwadow's normalizer
        ("claude-sonnet-4-5[1m]", "claude-sonnet-4.5"),
        ("claude-opus-4-6[200k]", "claude-opus-4.6"),
        ("Claude-Sonnet-4-5", "claude-sonnet-4.5"),
        ("  claude-haiku-4-5  ", "claude-haiku-4.5"),
        ("claude-sonnet-4-5-latest", "claude-sonnet-4.5"),
        ("claude-opus-5-20260101", "claude-opus-5"),
        ("claude-4-5-sonnet", "claude-sonnet-4.5"),
        ("claude-4.5-opus-high", "claude-opus-4.5"),
        ("AUTO", "auto"),
        # Kiro ids pass through
        ("claude-sonnet-4.5", "claude-sonnet-4.5"),
        ("claude-opus-4.7", "claude-opus-4.7"),
        ("claude-sonnet-4.6-1m", "claude-sonnet-4.6-1m"),
    ],
)
def test_resolve(name: str, kiro_id: str) -> None:
    assert resolve_model(name, STATIC_CATALOG).kiro_id == kiro_id


@pytest.mark.parametrize(
    "name",
    [
        "claude-3-7-sonnet-20250219",
        "CLAUDE_3_7_SONNET_20250219_V1_0",  # §2.5 legacy row whose model Kiro no longer lists
        "gpt-4o",
        "my-sonnet",  # no fuzzy "*sonnet*" fallback: a typo must not silently change the model
        "",
    ],
)
def test_unknown_model_is_a_client_error_listing_public_ids(name: str) -> None:
    with pytest.raises(ApiError) as caught:
        resolve_model(name, STATIC_CATALOG)
    error = caught.value
    assert error.kind is ErrorKind.INVALID_REQUEST
    assert (error.code, error.param) == ("model_not_found", "model")
    assert f"'{name}'" in error.message
    for public_id in ("claude-sonnet-4-5", "claude-opus-4-6", "auto", "gpt-5.6-sol"):
        assert public_id in error.message
    assert "claude-sonnet-4.5," not in error.message  # public ids only, not Kiro spellings


def test_unknown_model_message_truncates_huge_names() -> None:
    with pytest.raises(ApiError) as caught:
        resolve_model("x" * 5000, STATIC_CATALOG)
    assert len(caught.value.message) < 1000


def test_inverted_legacy_spelling_prefers_an_exact_catalog_entry() -> None:
    catalog = ModelCatalog(
        (
            ModelInfo("claude-3-7-sonnet", "claude-3.7-sonnet", "Claude 3.7 Sonnet"),
            ModelInfo("claude-sonnet-3-7", "claude-sonnet-3.7", "Never preferred"),
        )
    )
    assert resolve_model("claude-3-7-sonnet-20250219", catalog).kiro_id == "claude-3.7-sonnet"
    assert resolve_model("claude-3.7-sonnet", catalog).kiro_id == "claude-3.7-sonnet"


@pytest.mark.parametrize(
    ("kiro_id", "window"),
    [
        ("claude-sonnet-4.5", 200_000),
        ("claude-sonnet-4", 200_000),
        ("claude-haiku-4.5", 200_000),
        ("claude-opus-4.5", 200_000),
        ("auto", 200_000),
        ("deepseek-3.2", 200_000),
        ("claude-sonnet-4.6", 1_000_000),
        ("claude-opus-4.6", 1_000_000),
        ("claude-opus-4.7", 1_000_000),
        ("claude-opus-4.8", 1_000_000),
        ("claude-opus-5", 1_000_000),
        ("claude-sonnet-5", 1_000_000),
        ("claude-sonnet-4.5-1m", 1_000_000),
        ("claude-sonnet-4.6-1m", 1_000_000),
        ("claude-opus-4.6-1m", 1_000_000),
        ("gpt-5.6-sol", 272_000),
        ("gpt-5.6-luna", 272_000),
    ],
)
def test_static_context_windows(kiro_id: str, window: int) -> None:
    info = STATIC_CATALOG.get(kiro_id)
    assert info is not None
    assert info.context_window == window


def test_native_reasoning_models() -> None:
    native = {info.kiro_id for info in STATIC_CATALOG if info.native_reasoning}
    assert native == {
        "claude-opus-4.7",
        "claude-opus-4.8",
        "claude-opus-5",
        "gpt-5.6-sol",
        "gpt-5.6-terra",
        "gpt-5.6-luna",
    }


@pytest.mark.parametrize(
    ("kiro_id", "style"),
    [
        ("claude-sonnet-4.5", "none"),
        ("claude-haiku-4.5", "none"),
        ("claude-sonnet-4", "none"),
        ("claude-sonnet-4.5-1m", "none"),
        ("claude-sonnet-4.6", "output_config"),
        ("claude-opus-4.7", "output_config"),
        ("claude-opus-5", "output_config"),
        ("gpt-5.6-terra", "reasoning"),
        ("glm-5", "none"),
    ],
)
def test_static_reasoning_field_style(kiro_id: str, style: str) -> None:
    info = STATIC_CATALOG.get(kiro_id)
    assert info is not None
    assert info.reasoning_field_style == style


def test_public_models_lists_public_ids_then_distinct_kiro_ids() -> None:
    rows = public_models(STATIC_CATALOG)
    ids = [row.id for row in rows]
    assert len(ids) == len(set(ids))
    assert ids.index("claude-sonnet-4-5") < ids.index("claude-sonnet-4.5")
    assert ids.count("auto") == 1
    assert {"claude-opus-4-6", "claude-opus-4.6", "claude-opus-5", "gpt-5.6-sol"} <= set(ids)
    for row in rows:
        assert resolve_model(row.id, STATIC_CATALOG) == row.info


def _listing(model_id: str, **fields: Any) -> dict[str, Any]:
    return {"modelId": model_id, **fields}


def test_catalog_from_list_available_models() -> None:
    pages: list[dict[str, Any]] = [
        {
            "models": [
                _listing(
                    "claude-sonnet-4.6",
                    modelName="Claude Sonnet 4.6",
                    supportedInputTypes=["TEXT", "IMAGE"],
                    tokenLimits={"maxInputTokens": 900_000, "maxOutputTokens": 64_000},
                    additionalModelRequestFieldsSchema={
                        "type": "object",
                        "properties": {"output_config": {"type": "object"}},
                    },
                ),
                _listing("glm-5", supportedInputTypes=["TEXT"], tokenLimits={}),
                {"modelName": "no id, skipped"},
            ],
            "nextToken": "page-2",
        },
        {
            "models": [
                _listing(
                    "gpt-5.6-sol",
                    tokenLimits={"maxInputTokens": 272_000},
                    additionalModelRequestFieldsSchema={
                        "properties": {"reasoning": {"type": "object"}}
                    },
                ),
                _listing("claude-sonnet-4.6", modelName="duplicate, first page wins"),
                _listing("brand-new-model", modelName="Brand New"),
            ]
        },
        {"models": None},
    ]
    catalog = catalog_from_list_available_models(pages)
    assert [info.kiro_id for info in catalog] == [
        "claude-sonnet-4.6",
        "glm-5",
        "gpt-5.6-sol",
        "brand-new-model",
    ]
    sonnet = resolve_model("claude-sonnet-4-6", catalog)
    assert sonnet.display_name == "Claude Sonnet 4.6"
    assert (sonnet.context_window, sonnet.max_output_tokens) == (900_000, 64_000)
    assert sonnet.supports_images
    assert sonnet.reasoning_field_style == "output_config"
    glm = resolve_model("glm-5", catalog)
    assert not glm.supports_images
    assert glm.context_window == 200_000  # missing limit: the static figure
    gpt = resolve_model("gpt-5.6-sol", catalog)
    assert gpt.native_reasoning
    assert gpt.reasoning_field_style == "reasoning"
    new = resolve_model("brand-new-model", catalog)
    assert (new.public_id, new.display_name, new.native_reasoning) == (
        "brand-new-model",
        "Brand New",
        False,
    )
    with pytest.raises(ApiError):
        resolve_model("claude-opus-4-7", catalog)  # not offered to this account


def test_advertised_schema_without_effort_keys_means_no_field() -> None:
    catalog = catalog_from_list_available_models(
        [{"models": [_listing("claude-opus-4.7", additionalModelRequestFieldsSchema={})]}]
    )
    assert resolve_model("claude-opus-4.7", catalog).reasoning_field_style == "none"
