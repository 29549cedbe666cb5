"""The side APIs' drift observations (`kirod.accounts.side_drift`): one per catalog read and
shape, one per usage answer with unknown fields, facts that `kirod.drift` keeps as names."""

from __future__ import annotations

from kirod.accounts.side_drift import listed, observe_catalog, observe_usage
from kirod.drift import MAX_VALUE_CHARS, Drift, Kind, shape_value


def test_listed_joins_names_that_stay_readable_and_cuts_what_does_not_fit() -> None:
    assert listed([]) is None
    assert listed(["a:string", "b.c:object"]) == "a:string/b.c:object"
    assert shape_value(listed(["a:string", "b.c:object"])) == "a:string/b.c:object"
    # Free text is never kept, not even inside a list.
    assert listed(["free text here", "x:number"]) == "_/x:number"
    many = listed(f"field{n}:string" for n in "abcdefghijklmnop")
    assert many is not None
    assert many.endswith("/...")
    assert len(many) <= MAX_VALUE_CHARS
    assert shape_value(many) == many


def test_a_catalog_read_is_one_observation_per_shape_and_repeats_are_summed() -> None:
    drift = Drift()
    answer = {
        "models": [
            {"modelId": "claude-opus-5.5", "tier": "secret words"},
            {"modelId": "claude-sonnet-5.5", "tier": "other words"},
        ]
    }
    observe_catalog(drift, "us-east-1", [answer])
    observe_catalog(drift, "us-east-1", [answer])
    [record] = drift.pending()
    assert (record.kind, record.where, record.count, record.region) == (
        Kind.CATALOG_FIELD,
        "ListAvailableModels",
        2,
        "us-east-1",
    )
    assert dict(record.shape) == {
        "fields": "tier:string",
        "model": "claude-opus-5.5",
        "models": "2",
    }


def test_a_usage_answer_without_unknowns_is_no_observation() -> None:
    drift = Drift()
    observe_usage(drift, "us-east-1", {"usageBreakdownList": []})
    assert drift.pending() == []
    observe_usage(drift, "eu-central-1", {"usageBreakdownList": [], "plan": "x"})
    [record] = drift.pending()
    assert (record.kind, record.where, dict(record.shape)) == (
        Kind.USAGE_FIELD,
        "getUsageLimits",
        {"count": "1", "fields": "plan:string"},
    )
