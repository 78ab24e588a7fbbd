"""Checks of a valid plan against the request: is every constraint addressed, and does any
step copy the prompt's example?

A prohibition ("No schema change") that no step mentions is kept by not doing the thing: the
plan is mended locally, its last step (the final check) gets a criterion that checks it
(`constraint_check_added`). A constraint that asks for work ("Deploy to Kubernetes") that no
step addresses, or a step copied from the example, only the model can mend. Neither makes a
plan unusable, so neither is an error: the planner asks the model once (a repair prompt
naming each problem) and, failing that, keeps the plan with a warning per problem
(`constraint_not_addressed`, `example_copied`). A constraint on the answer's form or style
("Be brief", "Use plain English") is not work a step or a criterion can address: it is not
checked, and never costs a model call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from planner_arm.plan.schemas import PlanStep
from planner_arm.text import STOPWORDS, stem, word_set, words

# Words that say how a constraint applies, not what it is about ("do not touch the schema"
# is about the schema); a plan need not repeat them.
_MODAL = word_set(
    "do does don dont not no never must should shall may can cannot only any without keep "
    "always ensure make sure use using all t"
)
# Words that make a constraint a prohibition: respected by not doing something.
_NEGATIONS = word_set("no not never don dont without avoid nothing neither nor none cannot")
# A constraint counts as addressed when a step's text holds this share of its content words:
# "Deploy to Kubernetes" is met by "Deploy the API to the cluster" (one of two), not by a plan
# that never deploys.
_SHARE_NEEDED = 0.5
# What a constraint about the form of the answer is made of: no step does such a thing.
_FORM = frozenset(
    stem(word)
    for word in word_set(
        "be brief concise short shorter terse succinct simple simpler clear plain formal "
        "informal friendly polite professional casual detailed verbose readable tone style "
        "wording words language english british american french german spanish sentence "
        "sentences bullet bullets format formatting markdown length answer answers reply "
        "response plan plans step steps it them this minimal jargon please"
    )
)


@dataclass(frozen=True)
class QualityProblem:
    code: str  # constraint_not_addressed | example_copied
    message: str  # for the repair prompt and the warning's detail


def quality_problems(
    steps: Sequence[PlanStep], constraints: Sequence[str], example_texts: Iterable[str]
) -> list[QualityProblem]:
    """Every constraint asking for work that the plan leaves unaddressed, and every step that
    copies the example. (Prohibitions are `checked_prohibitions`' part.)"""
    asks = [text for text in constraints if not is_prohibition(text) and not is_about_form(text)]
    return [*_unaddressed(steps, asks), *_copied(steps, example_texts)]


def checked_prohibitions(
    steps: list[PlanStep], constraints: Sequence[str]
) -> tuple[list[PlanStep], list[str]]:
    """`steps` whose last step checks every prohibition no step mentions, and the repairs."""
    prohibitions = [text for text in constraints if is_prohibition(text)]
    stems = step_stems(steps) if prohibitions else []
    missing = [text for text in prohibitions if not _addressed(stems, content_stems(text))]
    if not missing or not steps:
        return steps, []
    last = steps[-1]
    criteria = [*last.acceptance_criteria, *(f"Constraint respected: {text}" for text in missing)]
    repairs = [f"constraint_check_added: step {last.step} checks {text!r}" for text in missing]
    return [*steps[:-1], last.model_copy(update={"acceptance_criteria": criteria})], repairs


def is_prohibition(constraint: str) -> bool:
    return any(word in _NEGATIONS for word in words(constraint))


def is_about_form(constraint: str) -> bool:
    """A constraint on how the answer reads ("Be brief", "Keep it simple", "Use plain
    English"), not on the work: every word it has is a word of form or style."""
    stems = frozenset(stem(word) for word in words(constraint) if word not in STOPWORDS)
    return bool(stems) and stems <= _FORM | {stem(word) for word in _MODAL}


def content_stems(text: str) -> frozenset[str]:
    return frozenset(
        stem(word) for word in words(text) if word not in STOPWORDS and word not in _MODAL
    )


def step_stems(steps: Sequence[PlanStep]) -> list[frozenset[str]]:
    """Each step's content words (its action and criteria), read once for every constraint."""
    return [content_stems(" ".join([step.action, *step.acceptance_criteria])) for step in steps]


def _addressed(stems: Sequence[frozenset[str]], wanted: frozenset[str]) -> bool:
    """Does some step's action or criteria (`step_stems`) hold enough of `wanted`? (Nothing
    wanted: yes.)"""
    return (
        not wanted
        or max((len(wanted & text) for text in stems), default=0) >= len(wanted) * _SHARE_NEEDED
    )


# A warning quotes a constraint at most this long: the caller has the whole text, and every
# answer (and every stored copy of it) would otherwise repeat each constraint in full.
QUOTED_CONSTRAINT_CHARS = 120


def _quoted(constraint: str) -> str:
    if len(constraint) <= QUOTED_CONSTRAINT_CHARS:
        return repr(constraint)
    return repr(constraint[: QUOTED_CONSTRAINT_CHARS - 1] + "\u2026")


def _unaddressed(steps: Sequence[PlanStep], constraints: Sequence[str]) -> list[QualityProblem]:
    problems = []
    stems = step_stems(steps) if constraints else []
    for constraint in constraints:
        if not _addressed(stems, content_stems(constraint)):
            message = (
                "no step or acceptance criterion addresses the constraint "
                f"{_quoted(constraint)}: add the step it needs, or a criterion that checks it"
            )
            problems.append(QualityProblem("constraint_not_addressed", message))
    return problems


def _fold(text: str) -> str:
    return " ".join(words(text))


@lru_cache(maxsize=8)
def _folded(texts: tuple[str, ...]) -> frozenset[str]:
    """The example's texts as compared (the same few for every plan: folded once)."""
    return frozenset(_fold(text) for text in texts) - {""}


def _copied(steps: Sequence[PlanStep], example_texts: Iterable[str]) -> list[QualityProblem]:
    example = _folded(tuple(example_texts))
    problems = []
    for step in steps:
        copied = [
            text for text in [step.action, *step.acceptance_criteria] if _fold(text) in example
        ]
        if copied:
            message = (
                f"step {step.step} repeats the rules' example text ({copied[0]!r}) instead of "
                "saying what this goal needs"
            )
            problems.append(QualityProblem("example_copied", message))
    return problems
