"""The plan as it moves through the pipeline, before it becomes an API response.

parsing produces a `DraftPlan` (loosely typed fields already normalised), validation turns it
into `PlanStep`s that keep every rule, estimation adds the figures. Each local fix on the way
is recorded as a repair string `"<code>"` or `"<code>: <detail>"`; the code is from a small
fixed set, so it can label a metric, and the detail says what was changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class DraftStep:
    """One step as the model described it, after synonyms and value shapes are normalised.

    `None` means the model did not say; validation and estimation fill those in.
    """

    action: str
    required_arm: str
    acceptance_criteria: list[str] = field(default_factory=list)
    depends_on: list[int] = field(default_factory=list)
    step: int | None = None
    estimated_cost_tier: int | None = None
    estimated_duration_seconds: int | None = None
    # Carried to the PlanStep as they are: the node a step details, its arm's input.
    parent: str | None = None
    input: dict[str, Any] | None = None
    # Read back from a PlanStep; the rules set a validated step's own (`PlanRules.marked`).
    writes: bool | None = None
    # hierarchical: the model marked the step as too big for one go, to be expanded again.
    compound: bool = False


@dataclass
class DraftPlan:
    steps: list[DraftStep]
    rationale: str | None = None
    confidence: float | None = None
    complexity_score: float | None = None
    repairs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def repair(code: str, detail: str | None = None) -> str:
    """Format one repair entry; `code` is the bounded part used as a metric label."""
    return code if not detail else f"{code}: {detail}"


def repair_code(entry: str) -> str:
    return entry.split(":", 1)[0]


def split_note(entry: str) -> tuple[str, str]:
    """A repair or warning entry as (code, detail); the detail is "" when there is none."""
    code, _, detail = entry.partition(":")
    return code.strip(), detail.strip()
