"""The request fields whose limits come from config (goal, constraints, context), so the
checks and the OpenAPI schema say the same; and the cheap depth check of a context."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from planner_arm.config_sections import LimitsSettings


def context_depth_exceeds(value: Any, limit: int) -> bool:
    """True when objects and lists nest deeper than `limit` (the context object is level 1).

    Iterative, and it stops at the first branch over the limit, so a hostile value costs
    little.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values() if _nests(child))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item if _nests(child))
    return False


def _nests(value: Any) -> bool:
    return isinstance(value, dict | list)


def limited_fields(limits: LimitsSettings) -> dict[str, Any]:
    """The fields whose limits come from config, so the checks and the schema agree."""
    kib = limits.max_context_bytes / 1024
    return {
        "goal": (
            str,
            Field(
                min_length=1,
                max_length=limits.max_goal_chars,
                description=f"What to accomplish: not blank, at most {limits.max_goal_chars} "
                "characters",
                # Documented for clients; enforced by _goal_not_blank with a clearer message.
                json_schema_extra={"pattern": r"\S"},
            ),
        ),
        "constraints": (
            list[str],
            Field(
                default_factory=list,
                max_length=limits.max_constraints,
                description=f"Rules the plan must respect: at most {limits.max_constraints}, "
                f"each at most {limits.max_constraint_chars} characters",
                # Enforced by _constraints_short, which names the constraint that is too long.
                json_schema_extra={
                    "items": {"type": "string", "maxLength": limits.max_constraint_chars}
                },
            ),
        ),
        "context": (
            dict[str, Any],
            Field(
                default_factory=dict,
                description=f"Anything the planner should know: at most {kib:g} KiB as JSON, "
                f"nested at most {limits.max_context_depth} levels deep",
            ),
        ),
    }
