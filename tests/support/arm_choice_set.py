"""The labelled arm-choice set (tests/data/arm_choice.jsonl) and how a selector is scored on it.

Each line is {"action", "criteria"?, "arm", "rule"?, "split"?}: the arm the issue's rules give
the step, the deciding rule beside the ambiguous ones, and "split": "heldout" on the fifth kept
aside from tuning. Used by tests/plan/test_arm_choice.py and benchmarks/arm_choice.py.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SET_PATH = Path(__file__).resolve().parents[1] / "data" / "arm_choice.jsonl"
Part = Literal["tuning", "heldout", "all"]


@dataclass(frozen=True)
class Labelled:
    action: str
    arm: str
    criteria: tuple[str, ...] = ()
    rule: str | None = None
    heldout: bool = False


def load(part: Part = "all", path: Path = SET_PATH) -> list[Labelled]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        data = json.loads(line)
        row = Labelled(
            action=data["action"],
            arm=data["arm"],
            criteria=tuple(data.get("criteria", ())),
            rule=data.get("rule"),
            heldout=data.get("split") == "heldout",
        )
        if part == "all" or row.heldout == (part == "heldout"):
            rows.append(row)
    return rows


@dataclass(frozen=True)
class Figures:
    total: int
    correct: int
    precision: dict[str, float]
    recall: dict[str, float]
    confusions: Counter[tuple[str, str]]  # (labelled, chosen) -> count, misses only
    misses: list[tuple[Labelled, str]]

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


def score(rows: Sequence[Labelled], choose: Callable[[Labelled], str]) -> Figures:
    """Accuracy, per-arm precision and recall, and the confusion pairs of `choose` on `rows`."""
    chosen = [choose(row) for row in rows]
    arms = sorted({row.arm for row in rows})
    precision, recall = {}, {}
    for arm in arms:
        labelled = [c for row, c in zip(rows, chosen, strict=True) if row.arm == arm]
        picked = [row.arm for row, c in zip(rows, chosen, strict=True) if c == arm]
        recall[arm] = labelled.count(arm) / len(labelled) if labelled else 0.0
        precision[arm] = picked.count(arm) / len(picked) if picked else 0.0
    misses = [(row, c) for row, c in zip(rows, chosen, strict=True) if c != row.arm]
    return Figures(
        total=len(rows),
        correct=len(rows) - len(misses),
        precision=precision,
        recall=recall,
        confusions=Counter((row.arm, c) for row, c in misses),
        misses=misses,
    )
