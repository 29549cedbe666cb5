"""What a ListAvailableModels answer says that kirod does not know (`catalog_unknowns`): nothing
for today's answers, names and types only for a new field, input type, schema key or enum value,
and models with the same unknowns grouped (docs/KIRO-PROTOCOL.md §6.2)."""

from __future__ import annotations

import copy
from typing import Any

from kirod.canonical.catalog import catalog_from_list_available_models
from kirod.canonical.catalog_unknowns import CatalogUnknowns, catalog_unknowns
from kirod.testing.fake_kiro.catalog import (
    DEFAULT_MODELS,
    FABLE_MODELS,
    LAUNCH_DAY_MODELS,
    models_page,
    with_catalog_drift,
)

EVERY_MODEL = (*DEFAULT_MODELS, *FABLE_MODELS, *LAUNCH_DAY_MODELS)


def page(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"models": list(entries), "defaultModel": {"modelId": "auto"}}


def entry(model_id: str = "claude-opus-5.5", **fields: Any) -> dict[str, Any]:
    [model] = [m for m in EVERY_MODEL if m.model_id == model_id]
    return model.to_json() | fields


def test_todays_catalog_has_no_unknowns() -> None:
    answer = models_page(EVERY_MODEL, next_token=None, max_results=100)
    assert catalog_unknowns([answer]) == ()


def test_a_new_field_input_type_schema_key_and_enum_value_are_named_by_shape() -> None:
    listed = entry(lifecycleStatus="PREVIEW", tokenLimits={"maxInputTokens": 1, "tier": {}})
    listed["supportedInputTypes"] = ["TEXT", "VIDEO", 3]
    schema = copy.deepcopy(listed["additionalModelRequestFieldsSchema"])
    schema["properties"]["verbosity"] = {"type": "string"}
    schema["properties"]["output_config"]["properties"]["effort"]["enum"].append("ultra")
    schema["properties"]["output_config"]["properties"]["task_budget"] = {"type": "integer"}
    listed["additionalModelRequestFieldsSchema"] = schema
    [unknowns] = catalog_unknowns([page(listed)])
    assert unknowns == CatalogUnknowns(
        models=("claude-opus-5.5",),
        fields=("lifecycleStatus:string", "tokenLimits.tier:object"),
        input_types=("VIDEO", "number"),
        schema_keys=("output_config.task_budget:integer", "verbosity:string"),
        enum_values=("output_config.effort:ultra",),
    )
    assert "PREVIEW" not in repr(unknowns)  # a value that is text, never


def test_the_same_unknowns_on_many_models_are_one_group_across_pages() -> None:
    first = page(entry("claude-opus-5.5", tier="x"), entry("claude-haiku-4.5", tier="y"))
    second = page(entry("gpt-5.6-sol", tier="z"), entry("auto")) | {"region": "us-east-1"}
    assert catalog_unknowns([first, second]) == (
        CatalogUnknowns(("claude-opus-5.5", "claude-haiku-4.5", "gpt-5.6-sol"), ("tier:string",)),
        CatalogUnknowns((), ("region:string",)),
    )


def test_the_fakes_catalog_drift_is_one_model_with_three_unknowns_and_still_read() -> None:
    answer = with_catalog_drift(
        DEFAULT_MODELS, models_page(DEFAULT_MODELS, next_token=None, max_results=100)
    )
    [unknowns] = catalog_unknowns([answer])
    assert unknowns == CatalogUnknowns(
        models=("claude-sonnet-5.5",),
        fields=("lifecycleStatus:string",),
        input_types=("VIDEO",),
        schema_keys=("context_management:object",),
    )
    # What kirod knows of the model is read as before.
    info = catalog_from_list_available_models([answer]).get("claude-sonnet-5.5")
    assert info is not None
    assert (info.context_window, info.supports_images, info.reasoning_field_style) == (
        1_000_000,
        True,
        "output_config",
    )
    assert info.default_effort == "high"
