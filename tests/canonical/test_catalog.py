"""Model catalog: name resolution (docs/KIRO-PROTOCOL.md §2.7), limits, /v1/models,
ListAvailableModels."""

from __future__ import annotations

from typing import Any

import pytest

from kirod.canonical.catalog import (
    STATIC_CATALOG,
    ModelCatalog,
    ModelInfo,
    catalog_from_list_available_models,
    public_models,
)
from kirod.canonical.model_names import parse_name
from kirod.canonical.resolution import ModelPolicy, newest_of_family, resolve, resolve_model
from kirod.errors import ApiError, ErrorKind


@pytest.mark.parametrize(
    ("name", "kiro_id"),
    [
        # docs/KIRO-PROTOCOL.md §2.7's table, row by row
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
        # docs/KIRO-PROTOCOL.md §2.7's legacy row whose model Kiro no longer lists
        "CLAUDE_3_7_SONNET_20250219_V1_0",
        "gpt-4o",
        "my-sonnet",  # no fuzzy "*sonnet*" fallback: a typo must not silently change the model
        "",
    ],
)
def test_unknown_model_is_a_client_error_listing_public_ids(name: str) -> None:
    with pytest.raises(ApiError) as caught:
        resolve_model(name, STATIC_CATALOG)
    error = caught.value
    assert error.kind is ErrorKind.NOT_FOUND
    assert (error.code, error.param, error.final) == ("model_not_found", "model", True)
    assert f"'{name}'" in error.message
    for public_id in ("claude-sonnet-4-5", "claude-opus-4-6"):
        assert public_id in error.message
    assert "claude-sonnet-4.5," not in error.message  # public ids only, not Kiro spellings
    assert ", … (GET /v1/models lists them all)" in error.message  # the list is cut, visibly


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


def test_the_static_list_reads_no_schema() -> None:
    """docs/KIRO-PROTOCOL.md §2.6: without a schema Claude's root field is never sent."""
    assert not any(info.request_fields for info in STATIC_CATALOG)


@pytest.mark.parametrize(
    ("kiro_id", "window", "output", "effort"),
    [
        ("claude-opus-5.5", 1_000_000, 128_000, "medium"),
        ("claude-sonnet-5.5", 1_000_000, 128_000, "high"),
        ("claude-opus-5", 1_000_000, 64_000, None),
    ],
)
def test_the_5_5_generation_by_name(
    kiro_id: str, window: int, output: int, effort: str | None
) -> None:
    """docs/KIRO-PROTOCOL.md §2.7: Opus and Sonnet 5.5 in the static list, with their traits."""
    info = STATIC_CATALOG.get(kiro_id)
    assert info is not None
    assert (info.context_window, info.max_output_tokens, info.default_effort) == (
        window,
        output,
        effort,
    )
    assert info.reasoning_field_style == "output_config"
    assert info.public_id == kiro_id.replace(".", "-")


OPUS_55_LISTING = {
    "modelId": "claude-opus-5.5",
    "tokenLimits": {"maxInputTokens": 1_000_000, "maxOutputTokens": 128_000},
    "promptCaching": {"supportsPromptCaching": True},
    "refusalFallbackModels": ["claude-opus-5", {"modelId": "claude-sonnet-5"}, 7],
    "additionalModelRequestFieldsSchema": {
        "type": "object",
        "properties": {
            "thinking": {
                "type": "object",
                "properties": {"type": {"type": "string", "enum": ["adaptive"]}},
                "required": ["type"],
            },
            "output_config": {
                "type": "object",
                "properties": {
                    "effort": {
                        "type": "string",
                        "enum": ["low", "medium", "high", "xhigh", "max"],
                        "default": "medium",
                    }
                },
            },
            "max_tokens": {"type": "integer", "minimum": 1024, "maximum": 128000},
        },
        "additionalProperties": False,
    },
}


def test_the_schema_is_kept_as_kirod_sends_by_it() -> None:
    """docs/KIRO-PROTOCOL.md §2.6, §6.2: the Opus 5.5 capture's schema, keys to bounds."""
    [info] = catalog_from_list_available_models([{"models": [OPUS_55_LISTING]}])
    fields = info.request_fields
    assert fields is not None
    assert fields.keys == {"thinking", "output_config", "max_tokens"}
    assert (fields.effort_key, fields.default_effort, fields.thinking_types) == (
        "output_config",
        "medium",
        ("adaptive",),
    )
    assert fields.max_tokens == (1024, 128_000)
    assert [fields.clamp_max_tokens(n) for n in (1, 5_000, 500_000)] == [1024, 5_000, 128_000]
    assert info.default_effort == "medium"


def test_caching_without_a_checkpoint_count_is_not_zero() -> None:
    """docs/KIRO-PROTOCOL.md §6.2: the Opus 5.5 capture lists caching without a count."""
    [info] = catalog_from_list_available_models([{"models": [OPUS_55_LISTING]}])
    assert info.cache_checkpoints == 4
    zero = {
        **OPUS_55_LISTING,
        "promptCaching": {"supportsPromptCaching": True, "maximumCacheCheckpointsPerRequest": 0},
    }
    [none] = catalog_from_list_available_models([{"models": [zero]}])
    assert none.cache_checkpoints == 0


def test_refusal_fallback_models_are_read() -> None:
    [info] = catalog_from_list_available_models([{"models": [OPUS_55_LISTING]}])
    assert info.refusal_fallback_models == ("claude-opus-5", "claude-sonnet-5")


@pytest.mark.parametrize(("listed", "read"), [(0.25, 0.25), (2, 2.0), (-1, None), ("2", None)])
def test_the_rate_multiplier_is_read(listed: object, read: float | None) -> None:
    entry = {"modelId": "deepseek-3.2", "rateMultiplier": listed}
    [info] = catalog_from_list_available_models([{"models": [entry]}])
    assert info.rate_multiplier == read
    [unlisted] = catalog_from_list_available_models([{"models": [{"modelId": "glm-5"}]}])
    assert unlisted.rate_multiplier is None


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


def test_public_models_lists_each_model_once_by_its_public_id() -> None:
    rows = public_models(STATIC_CATALOG)
    ids = [row.id for row in rows]
    assert len(ids) == len(STATIC_CATALOG) == len(set(ids))
    assert "claude-sonnet-4.5" not in ids  # no twin of claude-sonnet-4-5
    assert {"claude-opus-4-6", "claude-opus-5", "auto", "gpt-5.6-sol"} <= set(ids)
    for row in rows:
        assert resolve_model(row.id, STATIC_CATALOG) == row.info
        assert resolve_model(row.info.kiro_id, STATIC_CATALOG) == row.info


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
    assert gpt.reasoning_field_style == "reasoning"
    new = resolve_model("brand-new-model", catalog)
    assert (new.public_id, new.display_name, new.reasoning_field_style) == (
        "brand-new-model",
        "Brand New",
        "none",
    )
    with pytest.raises(ApiError):
        resolve_model("claude-opus-4-7", catalog)  # not offered to this account


def test_document_input_for_claude_and_where_the_catalog_lists_it() -> None:
    catalog = catalog_from_list_available_models(
        [
            {
                "models": [
                    _listing("claude-sonnet-4.6", supportedInputTypes=["TEXT", "DOCUMENT"]),
                    _listing("claude-sonnet-4.5", supportedInputTypes=["TEXT", "IMAGE"]),
                    _listing("claude-haiku-4.5"),
                    _listing("gpt-5.6-sol", supportedInputTypes=["TEXT", "IMAGE"]),
                    _listing("gpt-5.6-luna", supportedInputTypes=["TEXT", "DOCUMENT"]),
                    _listing("glm-5"),
                ]
            }
        ]
    )
    # Claude reads documents though no catalog lists DOCUMENT (docs/KIRO-PROTOCOL.md §2.3);
    # another model only where its entry lists it.
    assert [info.supports_documents for info in catalog] == [True, True, True, False, True, False]
    assert not catalog.get("claude-sonnet-4.6").supports_images  # type: ignore[union-attr]
    static = {info.kiro_id: info.supports_documents for info in STATIC_CATALOG}
    assert static["claude-opus-5"]
    assert static["claude-sonnet-4.5"]
    assert not static["gpt-5.6-sol"]
    assert not static["deepseek-3.2"]


def test_advertised_schema_without_effort_keys_means_no_field() -> None:
    catalog = catalog_from_list_available_models(
        [{"models": [_listing("claude-opus-4.7", additionalModelRequestFieldsSchema={})]}]
    )
    assert resolve_model("claude-opus-4.7", catalog).reasoning_field_style == "none"


FAMILY = ModelPolicy()


def _catalog(*kiro_ids: str) -> ModelCatalog:
    return ModelCatalog(tuple(STATIC_CATALOG.get(k) or _plain(k) for k in kiro_ids))


def _plain(kiro_id: str) -> ModelInfo:
    return ModelInfo(public_id=kiro_id.replace(".", "-"), kiro_id=kiro_id, display_name=kiro_id)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("claude-opus-5-5", "opus"),  # Claude Code 2.1.332's default
        ("claude-sonnet-6", "sonnet"),
        ("claude-3-5-haiku-latest", "haiku"),
        ("claude-opus-5-5[1m]", "opus"),
        ("anthropic/claude-haiku-9", "haiku"),
        ("claude-fable-5-2", "fable"),
        ("claude-mythos-5-1-20260901", "mythos"),
        ("gpt-5.7", None),
        ("my-sonnet", None),
        ("claude-opusx", None),
        ("auto", None),
    ],
)
def test_the_claude_line_a_name_asks_for(name: str, family: str | None) -> None:
    parsed = parse_name(name)
    assert (parsed.line if parsed.vendor == "claude" else None) == family


@pytest.mark.parametrize(
    ("name", "served"),
    [
        ("claude-opus-5-5", "claude-opus-4.8"),
        ("opus", "claude-opus-4.8"),
        ("claude-sonnet-6", "claude-sonnet-5"),  # 5 (no minor) is newer than 4.6
        ("sonnet", "claude-sonnet-5"),
        ("claude-haiku-5-5", "claude-haiku-4.5"),
        ("claude-opus-5-5[1m]", "claude-opus-4.8"),  # the newest version first, variant second
    ],
)
def test_family_fallback_serves_the_newest_of_the_family(name: str, served: str) -> None:
    catalog = _catalog(
        "claude-sonnet-4.5",
        "claude-sonnet-4.6",
        "claude-sonnet-5",
        "claude-haiku-4.5",
        "claude-opus-4.6",
        "claude-opus-4.6-1m",
        "claude-opus-4.8",
        "claude-opus-4.7",
    )
    resolution = resolve(name, catalog, FAMILY)
    assert (resolution.info.kiro_id, resolution.via) == (served, "family")


def test_an_exact_name_wins_over_the_family_and_keeps_its_own_model() -> None:
    catalog = _catalog("claude-opus-4.5", "claude-opus-4.8")
    resolution = resolve("claude-opus-4-5-20251101", catalog, FAMILY)
    assert (resolution.info.kiro_id, resolution.via) == ("claude-opus-4.5", "exact")


def test_newest_of_family_prefers_the_plain_variant_of_a_version() -> None:
    catalog = _catalog("claude-sonnet-4.6-1m", "claude-sonnet-4.6", "claude-sonnet-4.5")
    plain = newest_of_family("sonnet", catalog)
    long = newest_of_family("sonnet", catalog, million=True)
    assert (plain and plain.kiro_id, long and long.kiro_id) == (
        "claude-sonnet-4.6",
        "claude-sonnet-4.6-1m",
    )
    assert newest_of_family("haiku", catalog) is None


def test_family_fallback_fails_when_the_account_lacks_the_family() -> None:
    with pytest.raises(ApiError) as caught:
        resolve("claude-opus-5-5", _catalog("claude-sonnet-4.5", "auto"), FAMILY)
    assert caught.value.kind is ErrorKind.NOT_FOUND
    assert "'claude-opus-5-5'" in caught.value.message
    assert "claude-sonnet-4-5, auto (GET" in caught.value.message  # short list: no "…"


def test_strict_policy_answers_404_for_what_the_catalog_lacks() -> None:
    with pytest.raises(ApiError) as caught:
        resolve("claude-opus-5-7", STATIC_CATALOG, ModelPolicy(fallback="strict"))
    assert (caught.value.status, caught.value.code) == (404, "model_not_found")


def test_unknown_ids_of_no_claude_line_or_gpt_are_404_even_with_family_fallback() -> None:
    for name in ("deepseek-9", "my-sonnet", "claude-opusx", "fable"):  # no fable offered here
        with pytest.raises(ApiError) as caught:
            resolve(name, _catalog("claude-sonnet-4.5", "gpt-5.6-sol", "deepseek-3.2"), FAMILY)
        assert caught.value.status == 404, name


def test_aliases_win_over_the_policy_and_may_fall_back_themselves() -> None:
    policy = ModelPolicy(aliases={"claude-opus-5-5": "claude-opus-4.7", "fast": "claude-haiku-9"})
    catalog = _catalog("claude-opus-4.7", "claude-opus-4.8", "claude-haiku-4.5")
    alias = resolve("claude-opus-5-5", catalog, policy)
    assert (alias.info.kiro_id, alias.via) == ("claude-opus-4.7", "alias")
    chained = resolve("fast", catalog, policy)
    assert (chained.info.kiro_id, chained.via) == ("claude-haiku-4.5", "family")
    with pytest.raises(ApiError):
        resolve("fast", catalog, ModelPolicy(aliases=policy.aliases, fallback="strict"))


@pytest.mark.parametrize(
    ("efforts", "asked", "sent"),
    [
        (("low", "medium", "high", "xhigh", "max"), "xhigh", "xhigh"),
        (("low", "medium", "high", "max"), "xhigh", "high"),
        (("medium", "high"), "low", "medium"),
        (("low", "medium", "high"), "max", "high"),
    ],
)
def test_effort_is_clamped_to_what_the_model_accepts(
    efforts: tuple[Any, ...], asked: Any, sent: str
) -> None:
    info = ModelInfo("m", "m", "m", efforts=efforts)
    assert info.clamp_effort(asked) == sent


def test_listed_effort_enum_becomes_the_models_efforts() -> None:
    schema = {
        "properties": {
            "output_config": {"properties": {"effort": {"enum": ["low", "high", "bogus"]}}}
        }
    }
    catalog = catalog_from_list_available_models(
        [{"models": [_listing("claude-opus-4.8", additionalModelRequestFieldsSchema=schema)]}]
    )
    info = catalog.get("claude-opus-4.8")
    assert info is not None
    assert info.efforts == ("low", "high")
