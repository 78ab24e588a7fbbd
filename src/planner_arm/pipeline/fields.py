"""What a model writes for a plan's fields: the names it gives them and the text it writes where
the plan wants a value.

The names: `description` for `action`, `deps` for `depends_on`, ..., ranked so the canonical
name wins when a step carries several; the keys that may hold the step list, and steps keyed by
number. The values: durations ("1m30s", "about 2 minutes"), step references ("step 2"), cost
words ("medium"), identifiers written as names, and lists written as one string.
"""

from __future__ import annotations

import re
from typing import Any

# "3", "step 2", "Step #2", "s2", "task-2", "2.", "#2"
_REF = re.compile(
    r"(?:(?:steps?|tasks?|subtasks?|stages?|s|t|no\.?|number)[-_:.#\s]*|#\s*)?(\d+)[.):]?", re.I
)
# Seconds per unit; the empty unit is a bare number of seconds.
_UNIT_SECONDS = {
    unit: seconds
    for seconds, units in ((1.0, " s sec secs second seconds"), (0.001, "ms msec milliseconds"),
                           (60.0, "m min mins minute minutes"), (3600.0, "h hr hrs hour hours"),
                           (86400.0, "d day days"))
    for unit in units.split(" ")
}  # fmt: skip
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")
_DURATION_FILLER = re.compile(r"\b(?:and|about|approx|approximately|around|roughly)\b|[~,.]")
_ISO_DURATION = re.compile(r"^p(?:\d+(?:\.\d+)?d)?(?:t(?:\d+(?:\.\d+)?[hms])+)?$")
# Cost words on the 1-5 tier scale. The prompt offers low/medium/high, which land on 2/3/4 so
# a model that says "very" (or "minimal", "critical") can still reach the ends of the scale.
_COST_WORDS = {
    word: tier
    for tier, words in enumerate(("very low|minimal|trivial|negligible|very cheap|free",
                                  "low|cheap|small|minor",
                                  "medium|med|moderate|mid|average|normal|standard",
                                  "high|expensive|large|significant|major",
                                  "very high|very expensive|critical|extreme|huge|maximum"), 1)
    for word in words.split("|")
}  # fmt: skip
_IDENTIFIER = re.compile(
    r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+"
)
_IDENTIFIER_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+")
_BULLET = re.compile(r"^\s*(?:[-*\u2022\u00b7+]|\d+[.)])\s+")


def parse_step_reference(text: str) -> int | None:
    """The step number in '3', 'step 2', 'Step #2', 's2', 'task-2', '2.'; None otherwise."""
    match = _REF.fullmatch(text.strip()) if len(text) < 40 else None
    return int(match.group(1)) if match else None


def parse_duration(text: str) -> float | None:
    """Seconds in '45s', '45 sec', '2 minutes', '1m30s', '1.5 hours', 'PT1M30S'; else None."""
    text = text.strip().lower()[:80]
    if len(text) > 1 and _ISO_DURATION.match(text):
        text = text[1:].replace("t", " ")
    pieces: list[tuple[str, str]] = _DURATION_PART.findall(text)
    if not pieces or _DURATION_FILLER.sub("", _DURATION_PART.sub("", text)).strip():
        return None
    if any(unit not in _UNIT_SECONDS for _, unit in pieces):
        return None
    return sum(float(amount) * _UNIT_SECONDS[unit] for amount, unit in pieces)


def parse_cost_word(text: str) -> int | None:
    """The cost tier a word names ('medium' -> 3, 'very high' -> 5, '$$' -> 2); else None."""
    text = " ".join(text.lower().replace("_", " ").replace("-", " ").split())
    text = text.removesuffix(" cost").removesuffix(" tier")
    return _COST_WORDS.get(text) or (len(text) if text and set(text) == {"$"} else None)


def readable_identifier(text: str) -> str | None:
    """'check_login' -> 'Check login', 'checkAPIKey' -> 'Check API key'; None for other text."""
    if " " in text or not _IDENTIFIER.fullmatch(text):
        return None
    words = [
        word if word.isupper() and len(word) > 1 else word.lower()
        for part in text.split("_")
        for word in _IDENTIFIER_WORD.findall(part)
    ]
    readable = " ".join(words)
    return readable[:1].upper() + readable[1:]


def split_list_text(text: str) -> list[str]:
    """The items of a string that clearly lists several (lines, bullets, ';'), else itself."""
    items = [line for line in (_BULLET.sub("", ln).strip() for ln in text.splitlines()) if line]
    for separator in (";", "\u2022"):
        parts = [part.strip() for part in " ".join(items).split(separator) if part.strip()]
        if len(items) == 1 and len(parts) > 1:
            return parts
    return items


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
        if (number := parse_step_reference(str(key))) is None:
            return None
        pairs.append((number, item))
    return pairs if all(isinstance(item, dict | str) for _, item in pairs) else None
