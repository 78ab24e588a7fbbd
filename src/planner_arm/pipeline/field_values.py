"""Reading one value of a step the way a model wrote it, and keeping the record of each fix.

`FieldValues` holds the repairs of one answer (one entry per code, with the distinct details of
every occurrence) and coerces the scalar fields: numbers in strings, cost words, duration text,
percentages, criteria written as one string or a mapping. The normaliser builds on it.
"""

from __future__ import annotations

import math
from typing import Any

from planner_arm.pipeline import value_text
from planner_arm.pipeline.well_formed import usable_criterion
from planner_arm.plan.draft import repair

_MAX_DETAILS = 5


class FieldValues:
    """The repairs of one answer, and the coercions that record them."""

    def __init__(self) -> None:
        self.repairs: dict[str, list[str]] = {}  # code -> distinct details, first seen first

    def add(self, code: str, detail: str | None = None) -> None:
        details = self.repairs.setdefault(code, [])
        if detail and (detail := detail.strip()[:80]) not in details:  # bounded: model text
            details.append(detail)

    def entries(self) -> list[str]:
        entries = []
        for code, details in self.repairs.items():
            more = f" (+{len(details) - _MAX_DETAILS} more)" if len(details) > _MAX_DETAILS else ""
            entries.append(repair(code, ", ".join(details[:_MAX_DETAILS]) + more))
        return entries

    def criteria(self, value: Any) -> list[str]:
        if value is None:
            return []
        items = value if isinstance(value, list) else [value]
        if isinstance(value, str):
            self.add("criteria_from_string")
            items = value_text.split_list_text(value)
        elif isinstance(value, dict):
            self.add("criteria_from_mapping")
            texts = [text for text in value.values() if isinstance(text, str)]
            items = texts or [str(key) for key, flag in value.items() if flag]
        criteria = []
        for item in items:
            text = item.strip() if isinstance(item, str) else ""
            if usable_criterion(text):
                criteria.append(text)
            else:
                self.add("criteria_dropped", repr(text or item))
        return criteria

    def number(self, value: Any, field: str, *, quiet: bool = False) -> float | None:
        """A finite number from a number or a numeric string; None (unrecorded) otherwise."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value) if math.isfinite(value) else None
        try:
            number = float(value.strip()) if isinstance(value, str) else math.nan
        except ValueError:
            number = math.nan
        if math.isfinite(number) and not quiet:
            self.add("number_from_string", f"{field} {value!r} -> {number:g}")
        return number if math.isfinite(number) else None

    def whole(self, number: float, field: str) -> int:
        whole = math.floor(number + 0.5)
        if whole != number:
            self.add("value_rounded", f"{field} {number:g} -> {whole}")
        return whole

    def cost_tier(self, value: Any) -> int | None:
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        if (number := self.number(value, "estimated_cost_tier")) is not None:
            return self.whole(number, "estimated_cost_tier")
        if isinstance(value, str) and (tier := value_text.parse_cost_word(value)) is not None:
            self.add("cost_word", f"{value.strip().lower()} -> {tier}")
            return tier
        self.add("value_dropped", f"estimated_cost_tier {value!r}")
        return None

    def duration(self, value: Any) -> int | None:
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        number = self.number(value, "estimated_duration_seconds")
        if number is None and isinstance(value, str):
            number = value_text.parse_duration(value)
            if number is not None:
                self.add("duration_text", f"{value.strip()!r} -> {math.floor(number + 0.5)}")
        if number is None:
            self.add("value_dropped", f"estimated_duration_seconds {value!r}")
            return None
        return self.whole(number, "estimated_duration_seconds")

    def score(self, value: Any, field: str) -> float | None:
        """A 0-1 score. Above 1, confidence is read as a percentage; complexity as a 0-10
        scale up to 10 and a percentage above. Anything else out of range is dropped."""
        if value is None:
            return None
        percent = isinstance(value, str) and value.strip().endswith("%")
        number = self.number(value.strip()[:-1] if percent else value, field, quiet=percent)
        if number is not None and (percent or 1 < number <= 100):
            scale = 10 if field == "complexity_score" and not percent and number <= 10 else 100
            code = "confidence_percent" if field == "confidence" else "complexity_rescaled"
            self.add(code, f"{value!r} -> {number / scale:g}")
            number /= scale
        if number is None or not 0 <= number <= 1:
            self.add("value_dropped", f"{field} {value!r}")
            return None
        return number
