"""Selection strategies over candidate accounts (pure)."""

from __future__ import annotations

from kirod.accounts.strategy import Candidate, Selector, Strategy


def candidates(*in_flight: int, remaining: tuple[float | None, ...] = ()) -> list[Candidate]:
    return [
        Candidate(f"a{i}", i, n, remaining[i] if remaining else None)
        for i, n in enumerate(in_flight)
    ]


def test_sticky_keeps_the_last_account_while_it_is_a_candidate() -> None:
    selector = Selector(Strategy.STICKY)
    assert selector.choose(candidates(0, 0, 0)).account_id == "a0"
    assert selector.choose(candidates(5, 0, 0)).account_id == "a0"
    # a0 full (not a candidate): the least occupied other one, which then sticks
    others = [Candidate("a1", 1, 1, None), Candidate("a2", 2, 0, None)]
    assert selector.choose(others).account_id == "a2"
    assert selector.choose(candidates(0, 0, 4)).account_id == "a2"
    assert selector.keeps() == "a2"  # what the pool may take without listing candidates


def test_only_sticky_keeps_an_account() -> None:
    assert Selector(Strategy.STICKY).keeps() is None  # nothing chosen yet
    for strategy in (Strategy.ROUND_ROBIN, Strategy.LOWEST_USAGE):
        selector = Selector(strategy)
        selector.choose(candidates(0, 0))
        assert selector.keeps() is None


def test_round_robin_takes_turns_in_a_fixed_order() -> None:
    selector = Selector(Strategy.ROUND_ROBIN)
    chosen = [selector.choose(candidates(0, 0, 0)).account_id for _ in range(6)]
    assert chosen == ["a0", "a1", "a2", "a0", "a1", "a2"]
    # a1 missing (busy or cooling): its turn passes to the next
    only = [c for c in candidates(0, 0, 0) if c.account_id != "a1"]
    assert [selector.choose(only).account_id for _ in range(2)] == ["a0", "a2"]


def test_lowest_usage_prefers_most_remaining_then_least_occupied() -> None:
    selector = Selector(Strategy.LOWEST_USAGE)
    assert selector.choose(candidates(0, 0, 0, remaining=(10, 90, 50))).account_id == "a1"
    assert selector.choose(candidates(3, 1, 0, remaining=(50, 50, 20))).account_id == "a1"
    # unknown usage ranks after any known figure, ties to the oldest
    assert selector.choose(candidates(0, 0, remaining=(None, 1))).account_id == "a1"
    assert selector.choose(candidates(0, 0, remaining=(None, None))).account_id == "a0"


def test_the_bound_account_wins_without_moving_the_strategy() -> None:
    selector = Selector(Strategy.ROUND_ROBIN)
    assert selector.choose(candidates(0, 0, 0)).account_id == "a0"
    assert selector.choose(candidates(0, 0, 0), prefer="a2").account_id == "a2"
    assert selector.choose(candidates(0, 0, 0)).account_id == "a1"
    # a bound account that is not a candidate is ignored
    assert selector.choose(candidates(0, 0, 0), prefer="gone").account_id == "a2"
