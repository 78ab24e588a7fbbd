"""The arm registry: which arm a step goes to, from a model's arm name or from the action text.

`ArmResolver.resolve` keeps a registered arm name, mends a near miss (case, an `_arm` suffix,
an alias) and otherwise picks the arm from the action with `select`: the seed's decision tree
(code -> search -> execution -> validation -> safety -> planner) asked of every arm at once,
each answer a weighted score, the tree's order breaking ties. `ArmResolver.rank` has the rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from planner_arm.config_sections import ArmSpec
from planner_arm.plan.draft import repair


def word_set(text: str) -> frozenset[str]:
    """The words of `text`, as a set: word lists are written as one string."""
    return frozenset(text.split())


def _phrases(text: str) -> tuple[str, ...]:
    return tuple(phrase.strip() for phrase in text.split(","))


# The order in which the seed's tree asks about the arms; equal scores go to the earlier arm.
# The planner is the tree's answer when nothing matched, so it comes last among ties.
TREE_ORDER = ("coder", "retriever", "executor", "judge", "guardian")
DEFAULT_ARM = "planner"

# Evidence weights. A configured keyword is the strongest signal; the built-in vocabulary below
# a little weaker; an arm's capability, id and description words let an arm without keywords
# still be chosen, but never outvote a keyword.
KEYWORD, VOCABULARY, CAPABILITY, DESCRIPTION = 1.0, 0.9, 0.5, 0.3
# A word that matches only after stemming ("tests" against "test") counts a little less, so
# the arm that named the exact form wins a tie between two arms that share a stem.
STEM_ONLY = 0.85
# An action is imperative: its leading verb says what kind of work it is, so a hit there
# counts three times ("Run the test suite" is execution although "test" is a validation word).
# A generic verb ("create", "write", "add") says little, so it counts as any other word.
HEAD, GENERIC_HEAD = 3.0, 1.0
# Long texts are cut: the arm is decided by an action's opening words.
MAX_TOKENS = 64

GENERIC_VERBS = word_set(
    "write create add make generate produce prepare draft update build do perform handle "
    "complete ensure get set use identify determine analyse analyze improve work"
)
# Words before the verb that carry no meaning for the choice ("Then, run ...", "Step 2: ...").
LEAD_FILLERS = word_set(
    "then please first next finally also now step re and to we i let lets us should will "
    "must carefully quickly thoroughly again manually automatically initially lastly once"
)
# Checking verbs: both the judge and the guardian check things. When what is checked is a
# safety matter ("Review the pull request for security issues"), the guardian is the specialist
# and gets the verb's weight too; otherwise the tie goes to the judge, as the tree orders them.
CHECK_VERBS = word_set(
    "validate verify check review confirm assess evaluate inspect audit examine scan screen test"
)

# Words for the six standard arms that the seed's keyword lists miss, applied only to arms of
# these ids that are configured. A phrase beats the single words inside it, so "release notes"
# is writing (coder), not a release (executor), and "test case" is code, not validation.
VOCABULARY_BY_ARM: dict[str, tuple[str, ...]] = {
    "coder": _phrases(
        "add, create, update, modify, change, rewrite, develop, edit, optimise, optimize, "
        "test case, regression test, integration test, add tests, write tests, feature, "
        "library, component, handler, parser, rest, frontend, backend, ui, crash, "
        "error handling, exception, type hints, lint, document, documentation, docs, docstring, "
        "readme, changelog, release notes, python, typescript, javascript, sql schema"
    ),
    "retriever": _phrases(
        "summarise, summarize, summary, synthesise, synthesize, findings, report, investigate, "
        "look into, find out, learn, understand, discover, browse, consult, knowledge base, "
        "literature, sources, references, compare"
    ),
    "executor": _phrases(
        "publish, ship, apply, invoke, trigger, reproduce, staging, production, server, "
        "container, docker, kubernetes, cluster, pipeline, scrape, crawl, compute, calculate, "
        "aggregate, load, data, dataset, csv, monitor, profile, set up, setup, configure, "
        "suite, smoke test, rollback, roll back, scale, backup, restore, migrate, delete, send, "
        "post"
    ),
    "judge": _phrases(
        "constraint, criteria, acceptance, correctness, quality, accuracy, consistency, grade, "
        "score, sign off, results, meets, expected, qa, proofread, double check, examine, "
        "audit, regressions"
    ),
    "guardian": _phrases(
        "scan, screen, leak, exposure, personal data, sensitive, encrypt, encryption, "
        "access control, injection, xss, csrf, cve, malware, harmful, toxic, moderate, "
        "moderation, mask, anonymise, anonymize, consent, hipaa, risk, unsafe"
    ),
    "planner": _phrases(
        "order, sequence, roadmap, milestone, estimate, scope, approach, choose, select, pick, "
        "weigh, tradeoffs, trade offs, options, allocate, assign, delegate, organise, organize, "
        "timeline, phase, steps"
    ),
}

_STOPWORDS = word_set(
    "a an the and or of to for in on at by as is are be it its this that with from into "
    "between then than every all each any other up down out over"
)
_IRREGULAR = {
    "ran": "run",
    "built": "build",
    "wrote": "write",
    "written": "write",
    "found": "find",
    "chose": "choose",
    "chosen": "choose",
    "sent": "send",
    "made": "make",
    "began": "begin",
}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[^\W_]+")
_ARM_SUFFIX = re.compile(r"[\s_-]+arm$")


def words(text: str) -> list[str]:
    """Lower-case words of any script; `snake_case`, `camelCase` and hyphens split apart."""
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """A light suffix stripper: "deployed", "deploys", "deploying" and "deploy" agree.

    It only has to map the forms of one word together, not to produce a real word.
    """
    word = _IRREGULAR.get(word, word)
    for suffix, replacement in (
        ("ies", "y"),
        ("ied", "y"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) + len(replacement) >= 3:
            if suffix == "s" and word[-2] in "siu":
                break  # "class", "analysis", "status"
            word = word[: len(word) - len(suffix)] + replacement
            break
    if word.endswith(("tion", "sion")) and len(word) >= 7:
        word = word[:-3]  # "validation" -> "validat", as "validate" becomes below
    if word.endswith("e") and len(word) >= 4:
        word = word[:-1]
    if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]  # "running" -> "runn" -> "run"
    if len(word) >= 6 and word.endswith(("is", "ys")):
        word = word[:-1] + "z"  # British and American spellings: "summarise", "summarize"
    return word


@dataclass(frozen=True)
class _Term:
    stems: tuple[str, ...]
    exact: tuple[str, ...]
    label: int
    weight: float


class Lexicon:
    """Words and phrases that each point at a label (an arm, a kind of goal) with a weight.

    Matching is by stems, longest phrase first; a match of the stem but not the exact words
    counts `STEM_ONLY` as much. Build it once, then `scan` each text.
    """

    def __init__(self) -> None:
        self._terms: dict[tuple[int, tuple[str, ...]], _Term] = {}
        self._index: dict[str, list[_Term]] | None = None

    def add(self, label: int, text: str, weight: float) -> None:
        exact = tuple(words(text))
        if not exact:
            return
        term = _Term(tuple(stem(w) for w in exact), exact, label, weight)
        key = (label, term.stems)
        if key in self._terms and self._terms[key].weight >= weight:
            return
        self._terms[key] = term
        self._index = None

    def _build(self) -> dict[str, list[_Term]]:
        index: dict[str, list[_Term]] = {}
        for term in self._terms.values():
            index.setdefault(term.stems[0], []).append(term)
        for terms in index.values():
            terms.sort(key=lambda term: -len(term.stems))
        self._index = index
        return index

    def scan(self, tokens: list[str], stems: list[str]) -> Iterator[tuple[int, dict[int, float]]]:
        """Each match in the text: its position and each label's weight, left to right.

        At each position the longest phrase wins and the words inside it are not matched again.
        """
        i = 0
        while i < len(stems):
            length, hits = self.match(tokens, stems, i)
            if length:
                yield i, hits
                i += length
            else:
                i += 1

    def match(self, tokens: list[str], stems: list[str], i: int) -> tuple[int, dict[int, float]]:
        """The longest phrase starting at `i` (its length in words) and each label's weight."""
        index = self._index if self._index is not None else self._build()
        length = 0
        hits: dict[int, float] = {}
        for term in index.get(stems[i], ()):
            size = len(term.stems)
            if size < length:
                break
            if tuple(stems[i : i + size]) != term.stems:
                continue
            length = size
            weight = term.weight
            if tuple(tokens[i : i + size]) != term.exact:
                weight *= STEM_ONLY
            hits[term.label] = max(hits.get(term.label, 0.0), weight)
        return length, hits


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
                if text not in _STOPWORDS and len(text) > 2:
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
