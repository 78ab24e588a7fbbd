"""Which known variable name an unknown one was meant to be: a slip of the keyboard
(`LLM_BASEURL`, `TIMEOUT_SECOND`, `OPENIA_API_KEY`), so the service refuses it rather than run
without the value the operator set."""

from __future__ import annotations

from collections.abc import Iterable

# How many edits a slip may take, by the length of the name it was meant to be: none for a
# short name (HOST, PORT) but for case, underscores and a plural, which another program's
# variable a letter away from it should not be taken for.
_SHORT, _LONG = 8, 16


def folded(name: str) -> str:
    """A name with what a slip most often changes set aside: case, underscores, a plural s."""
    return name.upper().replace("_", "").removesuffix("S")


def edits_within(first: str, second: str, most: int) -> bool:
    """Whether `first` becomes `second` in at most `most` insertions, deletions,
    substitutions or swaps of neighbours (optimal string alignment), in a band of the table
    `most` wide, so a long name costs little."""
    if abs(len(first) - len(second)) > most:
        return False
    far = most + 1
    before: list[int] = []
    previous = list(range(len(second) + 1))
    for i in range(1, len(first) + 1):
        current = [far] * (len(second) + 1)
        current[0] = i
        for j in range(max(1, i - most), min(len(second), i + most) + 1):
            cost = first[i - 1] != second[j - 1]
            best = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            swapped = i > 1 and j > 1 and first[i - 1] == second[j - 2]
            if swapped and first[i - 2] == second[j - 1]:
                best = min(best, before[j - 2] + 1)
            current[j] = min(best, far)
        if min(current) > most:
            return False
        before, previous = previous, current
    return previous[len(second)] <= most


def near_miss(name: str, known: Iterable[str]) -> str | None:
    """The known name `name` is a slip away from (the closest, the first of equals), or None."""
    upper = name.upper()
    candidates = list(known)
    key = folded(name)
    for candidate in candidates:
        if folded(candidate) == key:
            return candidate
    for most in (1, 2):
        for candidate in candidates:
            allowed = 2 if len(candidate) >= _LONG else 1 if len(candidate) >= _SHORT else 0
            if most <= allowed and edits_within(upper, candidate.upper(), most):
                return candidate
    return None
