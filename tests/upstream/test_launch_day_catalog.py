"""Models kirod has never heard of, read from the fake's ListAvailableModels over loopback: their
traits come from the listing, their lines and tiers from their ids, with no change to kirod."""

from __future__ import annotations

import pytest

from kirod.canonical.catalog import ModelCatalog, catalog_from_list_available_models, describe
from kirod.canonical.model_names import NAME_RULES, parse_name
from kirod.canonical.resolution import ModelPolicy, line_defaults, resolve
from kirod.errors import ApiError
from kirod.testing.fake_kiro import (
    DEFAULT_MODELS,
    FABLE_MODELS,
    LAUNCH_DAY_MODELS,
    FakeKiro,
    Model,
)
from kirod.upstream.client import KiroClient, UpstreamAccount

Loopback = tuple[FakeKiro, KiroClient, UpstreamAccount]  # the `loopback` fixture's

FAMILY = ModelPolicy()


async def _listed(loopback: Loopback, models: tuple[Model, ...]) -> ModelCatalog:
    """The catalog kirod builds from what the fake lists (paged, as the real service pages)."""
    service, client, account = loopback
    service.set_models(models)
    pages = await client.list_models(account)
    assert len(pages) > 1
    return catalog_from_list_available_models(pages)


@pytest.fixture
async def launch_day(loopback: Loopback) -> ModelCatalog:
    return await _listed(loopback, DEFAULT_MODELS + FABLE_MODELS + LAUNCH_DAY_MODELS)


async def test_a_future_models_limits_inputs_and_caching_come_from_the_listing(
    launch_day: ModelCatalog,
) -> None:
    for model in LAUNCH_DAY_MODELS:
        info = launch_day.get(model.model_id)
        assert info is not None, model.model_id
        assert info.display_name == model.name
        assert (info.context_window, info.max_output_tokens) == (
            model.max_input_tokens,
            model.max_output_tokens,
        )
        assert info.supports_images == ("IMAGE" in model.input_types)
        claude = model.model_id.startswith("claude-")  # reads documents unlisted (rule 21)
        assert info.supports_documents == ("DOCUMENT" in model.input_types or claude)
        assert info.cache_checkpoints == model.cache_checkpoints
        assert info.provider == model.provider


@pytest.mark.parametrize(
    ("kiro_id", "public_id", "style", "root_field", "line", "version"),
    [
        ("claude-fable-6", "claude-fable-6", "output_config", True, "fable", (6,)),
        ("claude-mythos-5", "claude-mythos-5", "none", False, "mythos", (5,)),  # lists no schema
        ("gpt-7-sol", "gpt-7-sol", "reasoning", True, "sol", (7,)),
        ("gpt-6.5-luna", "gpt-6.5-luna", "reasoning", True, "luna", (6, 5)),
    ],
)
async def test_a_future_models_reasoning_style_comes_from_its_schema_and_name(
    launch_day: ModelCatalog,
    kiro_id: str,
    public_id: str,
    style: str,
    root_field: bool,
    line: str,
    version: tuple[int, ...],
) -> None:
    info = launch_day.get(kiro_id)
    assert info is not None
    root = info.request_fields is not None and info.request_fields.effort_key is not None
    assert (info.public_id, info.reasoning_field_style, root) == (public_id, style, root_field)
    assert (launch_day.name_of(info).line, launch_day.name_of(info).version) == (line, version)


@pytest.mark.parametrize(
    ("name", "served", "via"),
    [
        ("fable", "claude-fable-6", "family"),  # Claude Code's subagent word
        ("Fable", "claude-fable-6", "family"),
        ("claude-fable-5-1", "claude-fable-5.1", "exact"),
        ("claude-fable-5-1-20260601", "claude-fable-5.1", "exact"),
        ("claude-fable-5-1[1m]", "claude-fable-5.1", "exact"),
        ("claude-fable-5-2", "claude-fable-6", "family"),  # Claude Code 2.1.332's fable id
        ("claude-fable-7[1m]", "claude-fable-6", "family"),
        ("mythos", "claude-mythos-5", "family"),  # a line no rule names
        ("claude-mythos-5-1", "claude-mythos-5", "family"),
        ("gpt-7-sol", "gpt-7-sol", "exact"),
        ("gpt-6.2-sol", "gpt-7-sol", "tier"),  # Codex 0.171's default
        ("gpt-6-luna", "gpt-6.5-luna", "tier"),
        ("gpt-6.1-terra", "gpt-7-sol", "newest"),  # no terra: the newest GPT
        ("gpt-6.2-astra", "gpt-7-sol", "newest"),
        ("gpt-5.5", "gpt-7-sol", "newest"),
        ("codex-auto-review", "gpt-7-sol", "newest"),
    ],
)
async def test_launch_day_names_resolve_by_line_and_tier(
    launch_day: ModelCatalog, name: str, served: str, via: str
) -> None:
    resolution = resolve(name, launch_day, FAMILY)
    assert (resolution.info.kiro_id, resolution.via) == (served, via)


async def test_the_lines_offered_are_the_catalogs_own(launch_day: ModelCatalog) -> None:
    assert line_defaults(launch_day) == {
        "sonnet": "claude-sonnet-5.5",
        "haiku": "claude-haiku-4.5",
        "opus": "claude-opus-5.5",
        "fable": "claude-fable-6",
        "mythos": "claude-mythos-5",
    }


async def test_without_gpt_models_a_gpt_name_is_a_404_and_strict_refuses_tiers(
    loopback: Loopback,
) -> None:
    catalog = await _listed(loopback, tuple(m for m in DEFAULT_MODELS if m.provider != "openai"))
    with pytest.raises(ApiError) as caught:
        resolve("gpt-6.2-sol", catalog, FAMILY)
    assert (caught.value.status, caught.value.code) == (404, "model_not_found")
    with pytest.raises(ApiError):
        resolve(
            "gpt-6.2-sol", await _listed(loopback, DEFAULT_MODELS), ModelPolicy(fallback="strict")
        )


def test_name_rules_alone_give_a_future_model_sensible_traits() -> None:
    """Where no catalog can be read, the one rule table still reads new names right."""
    fable, gpt = describe("claude-fable-6"), describe("gpt-7-sol")
    # No schema read: Claude thinks by tags (they work on every Claude model), GPT by its field.
    assert (fable.context_window, fable.reasoning_field_style, fable.request_fields) == (
        1_000_000,
        "output_config",
        None,
    )
    assert (gpt.context_window, gpt.reasoning_field_style) == (272_000, "reasoning")
    assert (fable.display_name, gpt.display_name) == ("Claude Fable 6", "GPT-7 Sol")
    assert (
        describe("claude-opus-6").max_output_tokens,
        describe("claude-opus-6").default_effort,
    ) == (
        128_000,
        "medium",
    )


def test_every_name_rule_is_used_by_some_model() -> None:
    """No dead rows in the table: each rule matches some model the fake lists."""
    ids = [m.model_id for m in DEFAULT_MODELS + FABLE_MODELS + LAUNCH_DAY_MODELS]
    for rule in NAME_RULES:
        assert any(rule.matches(kiro_id, parse_name(kiro_id)) for kiro_id in ids), rule.why
