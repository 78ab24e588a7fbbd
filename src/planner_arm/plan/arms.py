"""The arm registry: which arm a step goes to, from a model's arm name or from the step's text.

`ArmResolver.resolve` keeps a registered arm name, mends a near miss (case, an `_arm` suffix,
an alias) and otherwise picks the arm from what the step *does* with `select`: its leading verb
weighs most, then its object, then the other words, then its acceptance criteria; a fixed
order of the arms (code -> search -> execution -> validation -> safety -> planner) breaks ties.
`ArmResolver.rank` has the rules; README "How an arm is chosen" has the figures.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from planner_arm.config import ArmSpec
from planner_arm.plan.draft import repair
from planner_arm.plan.lexicon import (
    GENERIC_VERBS,
    LEAD_FILLERS,
    OBJECTS_BY_ARM,
    SCREENING_VERBS,
    STEM_ONLY,
    VERBS_BY_ARM,
    Lexicon,
)
from planner_arm.plan.tools import name_words
from planner_arm.plan.weighed import BuildLane, Lazy
from planner_arm.text import ARTICLES, STOPWORDS, stem, words

# Equal scores go to the arm earlier here: does the step write code, look something up, run
# something, check results, guard safety? The planner is the answer when nothing matched (the
# default arm), so it comes last among ties.
TREE_ORDER = ("coder", "retriever", "executor", "judge", "guardian")
DEFAULT_ARM = "planner"

# Evidence weights. A configured keyword is the strongest signal; the built-in verb and object
# tables (`vocabulary.py`) a little weaker; an arm's capability, id and description words let
# an arm without keywords still be chosen, but never outvote a keyword.
KEYWORD, VOCABULARY, CAPABILITY, DESCRIPTION = 1.0, 0.9, 0.5, 0.3
# Where a word stands says how much it tells. An action is imperative: its leading verb says
# what kind of work it is, so a hit there counts three times ("Run the test suite" is execution
# although "test" is a validation word). A generic verb ("write", "create") says little, so it
# counts once and the object decides. The first hit after the verb is the object: it counts
# twice. The criteria describe the outcome, not the work: each of their hits counts a third.
HEAD, GENERIC_HEAD, OBJECT, CRITERIA = 3.0, 1.0, 2.0, 1 / 3
# Long texts are cut: the arm is decided by an action's opening words.
MAX_TOKENS = 64
_ARM_SUFFIX = re.compile(r"[\s_-]+arm$")
# What a model writes for a step that calls no tool.
NO_TOOL_WORDS = frozenset({"none", "null", "n/a", "na", "no tool", "no_tool", "-", "nothing"})


@dataclass(frozen=True)
class ArmChoice:
    """The arm chosen for a step, and the repair entry when it differs from what was given."""

    arm: str
    repair: str | None = None


class ToolLookup(Protocol):
    """How a resolver finds a caller's tool by its words (`tools/index.py:ToolIndex`)."""

    def ranked(self, text: str) -> list[tuple[str, float]]:
        """Every tool id with its score for `text`, best first."""

    def named_in(self, text: str) -> list[str]:
        """The tools whose names `text` holds."""

    def closest_name(self, name: str) -> str | None:
        """The tool whose name `name` is a misspelling of, if one is close."""


class ArmResolver:
    """Maps what a model wrote in `required_arm` (or nothing) to a registered arm id."""

    def __init__(
        self,
        arms: Sequence[ArmSpec],
        aliases: Mapping[str, str],
        *,
        index: ToolLookup | None = None,
        lane: BuildLane | None = None,
    ) -> None:
        """`index`: the arms are a caller's tools (the tools profile), found by their words
        through it: a misspelt name maps to the closest tool's, a tool named in the action
        counts, a "no tool" step is none. `lane`: where the lexicon's build runs.

        The lexicon of the arms' words (and a tool set's index) is built on first use: most
        steps of a tool plan name their tool, and never need it."""
        self.arms = list(arms)
        self.arm_ids: tuple[str, ...] = tuple(arm.id for arm in self.arms)
        ids = set(self.arm_ids)
        self._lower = {arm.lower(): arm for arm in reversed(self.arm_ids)}
        self.index = index
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
        self._screening = frozenset(stem(verb) for verb in SCREENING_VERBS)
        self._generic = frozenset(stem(verb) for verb in GENERIC_VERBS)
        self._lead_fillers = frozenset(stem(word) for word in LEAD_FILLERS)
        self.lexicon: Lazy[Lexicon] = Lazy(functools.partial(_compile, self.arms), lane)

    @property
    def over_tools(self) -> bool:
        """Whether the arms are a caller's tools."""
        return self.index is not None

    def resolve(self, given: str | None, action: str, criteria: Sequence[str] = ()) -> ArmChoice:
        """The registered arm for a step: the given name when it is one, mended if close."""
        text = (given or "").strip()
        reconciled = self._tool_in_action(text, action) if self.index is not None else None
        if reconciled is not None:
            return reconciled
        if not text:
            described = self._best_described("", action) if self.index is not None else None
            arm = described or self.select(action, criteria)
            return ArmChoice(arm, repair("arm_missing", f"-> {arm}"))
        if text in self.arm_ids:
            note = None if given == text else f"'{_short(text)}' -> {text}"
            return ArmChoice(text, repair("arm_normalised", note) if note else None)
        return self._named(text) or self._unknown(text, action, criteria)

    def resolve_all(self, asked: Sequence[tuple[str | None, str]]) -> list[ArmChoice]:
        """`resolve` for every step of an answer at once: (required_arm, action) each."""
        return [self.resolve(given, action) for given, action in asked]

    def _named(self, text: str) -> ArmChoice | None:
        """The arm a name means when it is one written differently, or an alias."""
        key = text.lower()
        for candidate in dict.fromkeys((key, _ARM_SUFFIX.sub("", key))):
            if candidate in self._lower:
                arm = self._lower[candidate]
                return ArmChoice(arm, repair("arm_normalised", f"'{_short(text)}' -> {arm}"))
            if candidate in self.aliases:
                target = self.aliases[candidate]
                return ArmChoice(target, repair("arm_alias", f"{candidate} -> {target}"))
        return None

    def _unknown(self, text: str, action: str, criteria: Sequence[str]) -> ArmChoice:
        """An unknown name: the closest tool (by name, then by name and description), or for
        the built-in arms the arm the step's text points at."""
        if self.index is not None:
            closest = self.index.closest_name(text) or self._best_described(text, action)
            if closest is not None:
                return ArmChoice(closest, repair("tool_closest", f"'{_short(text)}' -> {closest}"))
        arm = self.select(action, criteria)
        return ArmChoice(arm, repair("arm_selected", f"'{_short(text)}' -> {arm}"))

    def _best_described(self, name: str, action: str) -> str | None:
        """The tool whose name and description best match an unknown name and its action."""
        assert self.index is not None
        tool, score = self.index.ranked(f"{name_words(name)} {action}")[0]
        return tool if score > 0 else None

    def names_no_tool(self, given: object) -> bool:
        """Whether a tool plan's step says it calls no tool (`none`, `n/a`, ...)."""
        if self.index is None or not isinstance(given, str):
            return False
        return given.strip().lower() in NO_TOOL_WORDS

    def _tool_in_action(self, given: str, action: str) -> ArmChoice | None:
        """A tool the action names, where it tells more than `required_arm`: the action is
        a tool's name itself, or `required_arm` names no tool and the action names one."""
        written = action.strip().strip("`'\".")
        if written in self.arm_ids and written != given:
            note = f"action names {written}, required_arm {_short(given) or 'none'}"
            return ArmChoice(written, repair("tool_reconciled", note))
        if given in self.arm_ids or given.lower() in self._lower or self.index is None:
            return None
        named = self.index.named_in(action)
        if len(named) == 1:
            note = f"'{_short(given) or 'none'}' -> {named[0]} (named in the action)"
            return ArmChoice(named[0], repair("tool_reconciled", note))
        return None

    def select(self, action: str, criteria: Sequence[str] = ()) -> str:
        """The rule-based choice for a step: what its action does, its criteria as evidence."""
        arm, score = self.rank(action, criteria)[0]
        return arm if score > 0 else self.default_arm

    def rank(self, action: str, criteria: Sequence[str] = ()) -> list[tuple[str, float]]:
        """Every arm with a score for this step, best first.

        Each word or phrase that points at an arm (configured keyword, built-in verb or object,
        capability, description word; the longest phrase at each position) adds its weight,
        times three on the leading verb (once for a generic verb), twice on the object (the
        first hit after the verb), a third in the criteria. When the object is a privacy,
        secret, confidentiality or policy matter and the verb only checks, looks for or is
        generic, the guardian gets the verb's weight too. Equal scores go in TREE_ORDER.
        """
        scores = [0.0] * len(self.arm_ids)
        tokens = _content(action)
        stems = [stem(token) for token in tokens]
        head = next((i for i, s in enumerate(stems[:6]) if not _filler(s, self._lead_fillers)), -1)
        head_weak, topic = self._score_action(tokens, stems, head, scores)
        topic = self._score_criteria(criteria, scores) or topic
        if topic and (head_weak or stems[head] in self._screening):
            scores[self._guardian] += HEAD * KEYWORD
        order = sorted(range(len(scores)), key=lambda arm: (-scores[arm], self._tie_order[arm]))
        return [(self.arm_ids[arm], round(scores[arm], 3)) for arm in order]

    def _score_action(
        self, tokens: list[str], stems: list[str], head: int, scores: list[float]
    ) -> tuple[bool, bool]:
        """Add the action's hits to `scores`, weighed by where they stand.

        Returns whether the leading verb is weak (none, or a generic verb that does not open a
        longer phrase) and whether a guardian topic comes after it.
        """
        head_weak = head < 0 or stems[head] in self._generic
        seen_object = topic = False
        lexicon = self.lexicon.get()
        i = 0
        while i < len(stems):
            length, hits = lexicon.match(tokens, stems, i)
            if not length:
                i += 1
                continue
            if i == head:
                factor = GENERIC_HEAD if length == 1 and head_weak else HEAD
                head_weak = factor == GENERIC_HEAD
            elif i > head and not seen_object:
                factor, seen_object = OBJECT, True
            else:
                factor = 1.0
            _add_hits(scores, hits, factor)
            topic = topic or (i > head and self._is_topic(hits))
            i += length
        return head_weak, topic

    def _score_criteria(self, criteria: Sequence[str], scores: list[float]) -> bool:
        """Add the criteria's hits to `scores`; whether any of them is a guardian topic."""
        topic = False
        lexicon = self.lexicon.get()
        for text in criteria[:8]:
            criterion = _content(text)
            for _, hits in lexicon.scan(criterion, [stem(token) for token in criterion]):
                _add_hits(scores, hits, CRITERIA)
                topic = topic or self._is_topic(hits)
        return topic

    def _is_topic(self, hits: dict[int, float]) -> bool:
        """Whether a hit is a guardian topic (a keyword or a built-in word, not a description)."""
        return hits.get(self._guardian, 0.0) >= VOCABULARY * STEM_ONLY


def _compile(arms: Sequence[ArmSpec]) -> Lexicon:
    lexicon = Lexicon()
    for arm, spec in enumerate(arms):
        for text in words(spec.description):
            if text not in STOPWORDS and len(text) > 2:
                lexicon.add(arm, text, DESCRIPTION)
        for capability in spec.capabilities:
            for text in words(capability):
                lexicon.add(arm, text, CAPABILITY)
        lexicon.add(arm, spec.id, CAPABILITY)
        for table in (VERBS_BY_ARM, OBJECTS_BY_ARM):
            for text in table.get(spec.id, ()):
                lexicon.add(arm, _plain(text), VOCABULARY)
        for text in spec.keywords:
            lexicon.add(arm, _plain(text), KEYWORD)
    return lexicon.sealed()


def _add_hits(scores: list[float], hits: dict[int, float], factor: float) -> None:
    for arm, weight in hits.items():
        scores[arm] += weight * factor


def _content(text: str) -> list[str]:
    """The words that count: articles dropped, so "review the literature" is "review literature"."""
    return [word for word in words(text) if word not in ARTICLES][:MAX_TOKENS]


def _plain(text: str) -> str:
    return " ".join(_content(text))


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
