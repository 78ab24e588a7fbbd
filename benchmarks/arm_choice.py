"""How well the rule-based selector picks a step's arm, on the labelled set in the tests' data.

    .venv/bin/python benchmarks/arm_choice.py [--part tuning|heldout|all] [--misses]

Prints overall accuracy, per-arm precision and recall, and the confusion pairs (labelled arm ->
chosen arm) for the tuning part and the held-out fifth (tests/data/arm_choice.jsonl), with the
default arm registry. Not part of the test suite's pass/fail (tests/plan/test_arm_choice.py is).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from planner_arm.config import load_settings
from planner_arm.plan.arms import ArmResolver
from support.arm_choice_set import Figures, Labelled, Part, load, score


def report(title: str, figures: Figures, *, misses: bool) -> None:
    print(f"{title}: {figures.correct}/{figures.total} = {figures.accuracy:.1%}")
    print(f"  {'arm':<10} {'precision':>9} {'recall':>7}")
    for arm in figures.recall:
        print(f"  {arm:<10} {figures.precision[arm]:>9.0%} {figures.recall[arm]:>7.0%}")
    if figures.confusions:
        pairs = ", ".join(f"{a}->{b} {n}" for (a, b), n in figures.confusions.most_common())
        print(f"  confusions: {pairs}")
    if misses:
        for row, chosen in figures.misses:
            print(f"    {row.arm:>9} -> {chosen:<9} {row.action!r} {list(row.criteria) or ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["tuning", "heldout", "all"], default=None)
    parser.add_argument("--misses", action="store_true", help="list every wrong choice")
    args = parser.parse_args()
    settings = load_settings()
    resolver = ArmResolver(settings.arms, settings.arm_aliases)

    def choose(row: Labelled) -> str:
        return resolver.select(row.action, row.criteria)

    parts: list[Part] = [args.part] if args.part else ["tuning", "heldout", "all"]
    for part in parts:
        report(part, score(load(part), choose), misses=args.misses)
    rows = load("all")
    started = time.perf_counter()
    rounds = 20
    for _ in range(rounds):
        for row in rows:
            choose(row)
    per_choice = (time.perf_counter() - started) / (rounds * len(rows))
    print(f"time per choice: {per_choice * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
