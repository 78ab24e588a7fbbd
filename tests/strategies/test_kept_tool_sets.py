"""Which kept tool set goes when the bounds are passed: never one in use, and the principal
holding the most (beyond its fair share) loses its least recently used set first."""

from __future__ import annotations

from planner_arm.strategies.kept_tool_sets import KeptToolSets


def kept(max_sets: int = 64, max_bytes: int = 100) -> KeptToolSets[str]:
    return KeptToolSets(max_sets, max_bytes)


def test_past_the_bytes_the_least_recently_used_set_goes() -> None:
    sets = kept(max_bytes=100)
    sets.put("one", "1", "a", 40)
    sets.put("two", "2", "a", 40)
    assert sets.hold("one") == "1"  # used again: "two" is now the least recent
    sets.release("one", 40)
    sets.put("three", "3", "a", 40)
    assert ("one" in sets, "two" in sets, "three" in sets) == (True, False, True)
    assert sets.bytes == 80


def test_a_set_in_use_is_never_evicted_and_the_bounds_hold_again_when_it_is_let_go() -> None:
    sets = kept(max_bytes=100)
    sets.put("big", "B", "a", 90, held=True)
    sets.put("more", "M", "a", 30, held=True)
    assert sets.bytes == 120  # both in use: over the bound for now
    sets.release("big", 95)  # it grew while in use (a part built on first use)
    assert "big" not in sets
    assert sets.bytes == 30


def test_the_count_is_a_bound_too() -> None:
    sets = kept(max_sets=2, max_bytes=10_000)
    for name in ("one", "two", "three"):
        sets.put(name, name, "a", 1)
    assert len(sets) == 2
    assert "one" not in sets


def test_the_principal_holding_the_most_loses_its_own_set_first() -> None:
    sets = kept(max_bytes=100)
    sets.put("b1", "b", "b", 30)  # the least recently used of all
    for number in range(5):
        sets.put(f"a{number}", "a", "a", 20)
    assert "b1" in sets
    assert sets.held_by("a") == (3, 60)


def test_a_principal_within_its_share_keeps_its_sets_while_others_use_theirs() -> None:
    sets = kept(max_bytes=100)
    sets.put("b1", "b", "b", 40)
    sets.put("a1", "a", "a", 50, held=True)
    sets.put("a2", "a", "a", 50, held=True)
    # a's sets are in use, b holds less than half: nothing goes until a lets go.
    assert "b1" in sets
    sets.release("a1", 50)
    assert ("a1" in sets, "b1" in sets) == (False, True)


def test_among_equals_the_most_recent_builder_loses_a_set() -> None:
    sets = kept(max_sets=2, max_bytes=10_000)
    sets.put("b1", "b", "b", 1)
    sets.put("a1", "a", "a", 1)
    sets.put("c1", "c", "c", 1, held=True)  # each holds one: a built last of the two free
    assert ("b1" in sets, "a1" in sets, "c1" in sets) == (True, False, True)
