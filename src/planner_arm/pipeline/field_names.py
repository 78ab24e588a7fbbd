"""The names a model may give the plan's fields (`description` for `action`, `deps` for
`depends_on`, ...), ranked so the canonical name wins when a step carries several; the keys
that may hold the step list, and steps keyed by number."""

from __future__ import annotations

import re
from typing import Any

from planner_arm.pipeline import value_text

# field -> every (rank, key as the model wrote it, value) naming it, best rank first
Found = dict[str, list[tuple[int, str, Any]]]
Table = dict[str, tuple[str, int]]  # a name a model may use -> (field, rank)


def field_table(synonyms: dict[str, str]) -> Table:
    """Name -> (field, rank) from space-separated names, the canonical name first."""
    return {
        name: (field, rank)
        for field, names in synonyms.items()
        for rank, name in enumerate(names.split())
    }


STEP_FIELDS = field_table({
    "step": "step id step_number step_id step_no number index num",
    "action": "action task step_description description title name instruction what",
    "required_arm": "required_arm arm agent arm_id tool assignee assigned_arm assigned_to",
    "depends_on": "depends_on dependencies deps depends requires after prerequisites "
    "dependency blocked_by",
    "acceptance_criteria": "acceptance_criteria success_criteria criteria acceptance "
    "done_when acceptance_criterion definition_of_done",
    "estimated_cost_tier": "estimated_cost_tier cost_tier cost estimated_cost tier",
    "estimated_duration_seconds": "estimated_duration_seconds duration_seconds duration "
    "estimated_duration time seconds eta estimated_time estimated_seconds",
    "compound": "compound is_compound composite",
})  # fmt: skip
TOP_FIELDS = field_table({
    "rationale": "rationale reasoning explanation summary justification reason approach",
    "confidence": "confidence confidence_score certainty",
    "complexity_score": "complexity_score complexity difficulty complexity_rating",
})  # fmt: skip

STEP_LIST_KEYS = ("plan", "steps", "tasks", "subtasks", "plan_steps", "execution_plan")
WRAPPER_KEYS = ("response", "result", "output", "data", "answer", "json", "content", "body")

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_KEY_SEPARATORS = re.compile(r"[\s.\-]+")


def normalised_key(key: str) -> str:
    return _KEY_SEPARATORS.sub("_", _CAMEL_BOUNDARY.sub("_", key.strip())).lower().strip("_")


def collect_fields(item: dict[str, Any], table: Table, ignored: dict[str, None]) -> Found:
    found: Found = {}
    for raw, value in item.items():
        key = str(raw)
        if (hit := table.get(key) or table.get(normalised_key(key))) is None:
            ignored[key] = None
        else:
            found.setdefault(hit[0], []).append((hit[1], key, value))
    for options in found.values():
        if len(options) > 1:
            options.sort(key=lambda option: option[0])
    return found


def keyed_steps(value: dict[str, Any]) -> list[tuple[Any, Any]] | None:
    """`{"1": {...}, "step2": {...}}` as (number, step) pairs; None for any other dict."""
    pairs = []
    for key, item in value.items():  # stops at the first key that is not a step number
        if (number := value_text.parse_step_reference(str(key))) is None:
            return None
        pairs.append((number, item))
    return pairs if all(isinstance(item, dict | str) for _, item in pairs) else None
