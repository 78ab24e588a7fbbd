"""Value text: what a model writes where the plan wants a number, a name or a list.

Durations ("1m30s", "about 2 minutes"), step references ("step 2"), cost words ("medium"),
identifiers written as names, and lists written as one string.
"""

from __future__ import annotations

import re

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
