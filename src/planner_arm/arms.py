"""The arm registry: which arm a step goes to, from a model's arm name or from the action text.

STUB: interface fixed, implementation to be completed (rule-based selector, ranking).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planner_arm.config import ArmSpec


@dataclass(frozen=True)
class ArmChoice:
    """The arm chosen for a step, and the repair entry when it differs from what was given."""

    arm: str
    repair: str | None = None


class ArmResolver:
    """Maps what a model wrote in `required_arm` (or nothing) to a registered arm id."""

    def __init__(self, arms: Sequence[ArmSpec], aliases: Mapping[str, str]) -> None:
        self.arms = list(arms)
        self.aliases = dict(aliases)

    def resolve(self, given: str | None, action: str) -> ArmChoice:
        raise NotImplementedError

    def select(self, action: str) -> str:
        """The rule-based choice for an action text (the seed's decision tree, then ranking)."""
        raise NotImplementedError

    def rank(self, action: str) -> list[tuple[str, float]]:
        """Every arm with a score for this action, best first."""
        raise NotImplementedError


def typical_cost_tier(arm: str) -> int:
    """The cost tier a step of this arm usually has, for steps the model gave none."""
    raise NotImplementedError


def typical_duration_seconds(arm: str) -> int:
    """The duration a step of this arm usually takes, for steps the model gave none."""
    raise NotImplementedError
