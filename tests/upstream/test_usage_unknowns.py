"""The getUsageLimits fields kirod does not know (`usage_unknowns`): none in today's answer, names
and types only for new ones at the top, in a known object, in the usage entries and in their free
trial; the answer is read as before (docs/KIRO-PROTOCOL.md §6.1)."""

from __future__ import annotations

from kirod.testing.fake_kiro.usage import FreeTrial, Usage, with_usage_drift
from kirod.upstream.usage import parse_usage_limits, usage_unknowns

NOW = 1_796_342_400.0


def answer(usage: Usage | None = None) -> dict[str, object]:
    usage = usage or Usage.for_plan("KIRO PRO", NOW)
    return usage.to_json(email="someone@example.com", user_id="d-9067.abc", now=NOW)


def test_todays_answer_has_no_unknowns() -> None:
    trial = FreeTrial(10.0, 500.0, NOW + 86_400)
    assert usage_unknowns(answer()) == ()
    assert usage_unknowns(answer(Usage("KIRO FREE", 1.0, 50.0, NOW, free_trial=trial))) == ()


def test_an_account_in_overage_has_no_unknowns_and_nothing_left() -> None:
    usage = Usage("KIRO POWER", 13603.49, 10000.0, NOW, overage_status="ENABLED", overages=3603.49)
    doc = answer(usage)
    # What a live capture of an account in overage adds (docs/KIRO-PROTOCOL.md §6.5).
    doc["overageConfiguration"]["__type"] = "OverageConfiguration"  # type: ignore[index]
    doc["usageBreakdownList"][0]["overageCredits"] = []  # type: ignore[index]
    assert usage_unknowns(doc) == ()
    read = parse_usage_limits(doc)
    assert (read.remaining, read.used, read.overage) == (0.0, 13603.49, "enabled")


def test_new_fields_are_named_by_path_and_type() -> None:
    doc = answer(Usage("KIRO FREE", 1.0, 50.0, NOW, free_trial=FreeTrial(1.0, 5.0, NOW)))
    doc["spendLimit"] = {"amount": 5}
    doc["subscriptionInfo"]["renewsAt"] = "2027-01-01"  # type: ignore[index]
    doc["usageBreakdownList"][0]["freeTrialInfo"]["rollover"] = True  # type: ignore[index]
    assert usage_unknowns(doc) == (
        "spendLimit:object",
        "subscriptionInfo.renewsAt:string",
        "usageBreakdownList.*.freeTrialInfo.rollover:boolean",
    )


def test_the_fakes_usage_drift_is_one_unknown_and_the_answer_is_read_as_before() -> None:
    usage = Usage("KIRO PRO", 250.5, 1000.0, NOW + 86_400)
    doc = with_usage_drift(answer(usage))
    assert usage_unknowns(doc) == ("usageBreakdownList.*.overageChargesWithPrecision:number",)
    assert parse_usage_limits(doc) == parse_usage_limits(answer(usage))
    assert parse_usage_limits(doc).remaining == 749.5
