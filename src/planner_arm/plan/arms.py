"""The arm registry: which arm a step goes to, from a model's arm name or from the action text.

`ArmResolver.resolve` keeps a registered arm name, mends a near miss (case, an `_arm` suffix,
an alias) and otherwise picks the arm from the action with `select`: the seed's decision tree
(code -> search -> execution -> validation -> safety -> planner) asked of every arm at once,
each answer a weighted score, the tree's order breaking ties. `ArmResolver.rank` has the rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planner_arm.config_sections import ArmSpec
from planner_arm.plan.draft import repair
from planner_arm.plan.lexicon import STEM_ONLY, Lexicon, stem, words
from planner_arm.plan.vocabulary import (
    CHECK_VERBS,
    GENERIC_VERBS,
    LEAD_FILLERS,
    STOPWORDS,
    VOCABULARY_BY_ARM,
)

# The order in which the seed's tree asks about the arms; equal scores go to the earlier arm.
# The planner is the tree's answer when nothing matched, so it comes last among ties.
TREE_ORDER = ("coder", "retriever", "executor", "judge", "guardian")
DEFAULT_ARM = "planner"

# Evidence weights. A configured keyword is the strongest signal; the built-in vocabulary
# (`vocabulary.py`) a little weaker; an arm's capability, id and description words let an arm
# without keywords still be chosen, but never outvote a keyword.
KEYWORD, VOCABULARY, CAPABILITY, DESCRIPTION = 1.0, 0.9, 0.5, 0.3
# An action is imperative: its leading verb says what kind of work it is, so a hit there
# counts three times ("Run the test suite" is execution although "test" is a validation word).
# A generic verb ("create", "write", "add") says little, so it counts as any other word.
HEAD, GENERIC_HEAD = 3.0, 1.0
# Long texts are cut: the arm is decided by an action's opening words.
MAX_TOKENS = 64
_ARM_SUFFIX = re.compile(r"[\s_-]+arm$")


@dataclass(frozen=True)
class ArmChoice:
    """The arm chosen for a step, and the repair entry when it differs from what was given."""

    arm: str
    repair: str | None = None


class ArmResolver:
    """Maps what a model wrote in `required_arm` (or nothing) to a registered arm id."""

    def __init__(self, arms: Sequence[ArmSpec], aliases: Mapping[str, str]) -> None:
        self.arms = list(arms)
        self.arm_ids: tuple[str, ...] = tuple(arm.id for arm in self.arms)
        ids = set(self.arm_ids)
        self.aliases = {
            name.strip().lower(): target for name, target in aliases.items() if target in ids
        }
        self.default_arm = DEFAULT_ARM if DEFAULT_ARM in ids else self.arm_ids[0]
        tree = {arm: index for index, arm in enumerate(TREE_ORDER)}
        self._tie_order = [
            tree.get(arm, len(TREE_ORDER) + (1 if arm == DEFAULT_ARM else 0))
            for arm in self.arm_ids
        ]
        self._guardian = self.arm_ids.index("guardian") if "guardian" in ids else -1
        self._check_stems = frozenset(stem(verb) for verb in CHECK_VERBS)
        self._generic_stems = frozenset(stem(verb) for verb in GENERIC_VERBS)
        self._lead_fillers = frozenset(stem(word) for word in LEAD_FILLERS)
        self._lexicon = self._compile()

    def _compile(self) -> Lexicon:
        lexicon = Lexicon()
        for arm, spec in enumerate(self.arms):
            for text in words(spec.description):
                if text not in STOPWORDS and len(text) > 2:
                    lexicon.add(arm, text, DESCRIPTION)
            for capability in spec.capabilities:
                for text in words(capability):
                    lexicon.add(arm, text, CAPABILITY)
            lexicon.add(arm, spec.id, CAPABILITY)
            for text in VOCABULARY_BY_ARM.get(spec.id, ()):
                lexicon.add(arm, text, VOCABULARY)
            for text in spec.keywords:
                lexicon.add(arm, text, KEYWORD)
        return lexicon

    def resolve(self, given: str | None, action: str) -> ArmChoice:
        """The registered arm for a step: the given name when it is one, mended if close."""
        text = (given or "").strip()
        if not text:
            arm = self.select(action)
            return ArmChoice(arm, repair("arm_missing", f"-> {arm}"))
        key = text.lower()
        for candidate in dict.fromkeys((key, _ARM_SUFFIX.sub("", key))):
            if candidate in self.arm_ids:
                note = None if given == candidate else f"'{_short(text)}' -> {candidate}"
                return ArmChoice(candidate, repair("arm_normalised", note) if note else None)
            if candidate in self.aliases:
                target = self.aliases[candidate]
                return ArmChoice(target, repair("arm_alias", f"{candidate} -> {target}"))
        arm = self.select(action)
        return ArmChoice(arm, repair("arm_selected", f"'{_short(text)}' -> {arm}"))

    def select(self, action: str) -> str:
        """The rule-based choice for an action text (the seed's decision tree, then ranking)."""
        arm, score = self.rank(action)[0]
        return arm if score > 0 else self.default_arm

    def rank(self, action: str) -> list[tuple[str, float]]:
        """Every arm with a score for this action, best first.

        Each word or phrase of the action that names an arm adds that arm's weight (keyword,
        built-in vocabulary, capability, description word), times three on the leading verb.
        At each position the longest phrase wins. A checking verb also counts for the guardian
        when a safety word follows it. Equal scores are ordered as the seed's tree asks.
        """
        tokens = words(action)[:MAX_TOKENS]
        stems = [stem(token) for token in tokens]
        head = next((i for i, s in enumerate(stems[:6]) if not _filler(s, self._lead_fillers)), -1)
        scores = [0.0] * len(self.arm_ids)
        guardian_object = False
        for i, hits in self._lexicon.scan(tokens, stems):
            factor = 1.0
            if i == head:
                factor = GENERIC_HEAD if stems[i] in self._generic_stems else HEAD
            for arm, weight in hits.items():
                scores[arm] += weight * factor
                if arm == self._guardian and i != head and weight >= VOCABULARY * STEM_ONLY:
                    guardian_object = True
        if guardian_object and head >= 0 and stems[head] in self._check_stems:
            scores[self._guardian] += HEAD * KEYWORD
        order = sorted(range(len(scores)), key=lambda arm: (-scores[arm], self._tie_order[arm]))
        return [(self.arm_ids[arm], round(scores[arm], 3)) for arm in order]


def _filler(word_stem: str, fillers: frozenset[str]) -> bool:
    return word_stem in fillers or word_stem.isdigit()


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_TYPICAL: dict[str, tuple[int, int]] = {
    "retriever": (1, 20),
    "coder": (3, 60),
    "executor": (2, 45),
    "judge": (2, 30),
    "guardian": (2, 20),
    "planner": (2, 20),
}
_TYPICAL_UNKNOWN = (2, 30)


def typical_cost_tier(arm: str) -> int:
    """The cost tier a step of this arm usually has, for steps the model gave none."""
    return _TYPICAL.get(arm, _TYPICAL_UNKNOWN)[0]


def typical_duration_seconds(arm: str) -> int:
    """The duration a step of this arm usually takes, for steps the model gave none."""
    return _TYPICAL.get(arm, _TYPICAL_UNKNOWN)[1]
