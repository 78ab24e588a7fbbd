"""The rule-based planner: a plan for any goal without a model, for when the model fails.

`classify_goal` names the kind of goal, `goal_subject` pulls out a short phrase for what it is
about, and `fallback_plan` fills that kind's template with it, fitted to the configured step
limits and ending with a judge step that checks the caller's constraints. Pure, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, NamedTuple

from planner_arm.config_sections import PlanningSettings
from planner_arm.plan import arms
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.draft import DraftPlan, DraftStep
from planner_arm.plan.lexicon import Lexicon, stem, word_set, words
from planner_arm.plan.vocabulary import GENERIC_VERBS, LEAD_FILLERS
from planner_arm.planning.fallback_templates import TEMPLATES

MAX_CONSTRAINT_CHARS = 500  # at most 32 constraints (the API's limit) are carried
SUBJECT_WORDS, SUBJECT_CHARS, GOAL_ACTION_CHARS = 8, 64, 120


_QUESTION = word_set("what why how which who when where should does do is are can could")
# Words dropped from the front of a goal before its subject: fillers, one verb, determiners.
_LEADING = _QUESTION | word_set(
    "please kindly would will you we i need needs want to help me us let's lets let must was "
    "were there it be go and then first now also just quickly urgently asap task goal todo"
)
_DETERMINERS = word_set("the a an our my your their its this that these those some all any")
_VERBS = word_set(
    "fix add implement build create write develop make research investigate analyse analyze "
    "deploy release ship document review audit check find compare explore study evaluate assess "
    "design plan refactor update upgrade migrate set install configure debug resolve repair "
    "improve optimise optimize test verify validate secure scan summarise summarize explain "
    "draft prepare generate integrate support enable run execute launch provision roll publish "
    "remove clean speed learn understand look figure identify estimate measure report gather "
    "search read translate rewrite extend harden patch diagnose monitor decide choose get do"
)
_PARTICLES = word_set("up out down into over through")
_JOINERS = word_set("and then also plus &")
_CUTS = word_set("for to so because without while using via before after by when if unless")
_TRAILING = _DETERMINERS | _CUTS | _JOINERS | word_set("of in on at with")
# "documentation for the CLI" is about the CLI: such a head is dropped before a cut word.
_GENERIC_HEADS = _DETERMINERS | word_set(
    "documentation docs doc guide tutorial readme manual tests test unit support report "
    "analysis review audit deployment overview summary research study fix patch feature plan new"
)
_DOC_NOUNS = word_set("documentation docs doc guide tutorial readme manual notes changelog wiki")
_CLAUSE_END = re.compile(r"[.!?;:]+(?=\s|$)|[\n;,(\[]|\s[-–—]+\s")
_EDGE = re.compile(r"^\W+|\W+$")


class _Step(NamedTuple):
    key: str
    arm: str
    tier: int
    seconds: int
    keep: int
    after: tuple[str, ...]
    action: str
    criteria: tuple[str, ...]


class _Kind(NamedTuple):
    label: str
    complexity: float
    cues: list[str]
    steps: list[_Step]


def classify_goal(goal: str) -> str:
    """The kind of goal ("bug_fix", "feature", ...; see TEMPLATES), "generic" if no cue fits."""
    tokens = words(goal[:2000])[:200]
    stems = [stem(token) for token in tokens]
    kinds, lexicon, skip, generic_verbs = _kinds(), *_kind_lexicon()
    head = next((i for i, s in enumerate(stems[:6]) if s not in skip), -1)
    scores = dict.fromkeys(range(len(kinds)), 0.0)
    for i, hits in lexicon.scan(tokens, stems):
        factor = 3.0 if i == head and stems[i] not in generic_verbs else 1.0
        for kind, weight in hits.items():
            scores[kind] += weight * factor
    if goal.rstrip().endswith("?") or (tokens and tokens[0] in _QUESTION):
        scores[list(kinds).index("research")] += 1.5
    best = max(scores, key=lambda kind: (scores[kind], -kind))
    return list(kinds)[best] if scores[best] >= 0.5 else "generic"


def goal_subject(goal: str) -> str:
    """A short phrase for what the goal is about ("authentication bug"), or "" if none."""
    clauses = _CLAUSE_END.split(goal[:1000])[:4]
    return next(filter(None, (_subject_of(clause.split()) for clause in clauses)), "")


def fallback_plan(
    goal: str,
    constraints: Sequence[str],
    context: Mapping[str, Any],
    *,
    planning: PlanningSettings,
    resolver: ArmResolver,
) -> DraftPlan:
    """A valid plan for `goal` from the template of its kind, within the planning limits."""
    kind, subject = classify_goal(goal), goal_subject(goal)
    template = _kinds()[kind]
    *work, check = template.steps
    with_check = planning.require_validation_step or "judge" in resolver.arm_ids
    size = min(max(len(work) + with_check, planning.min_steps), planning.max_steps)
    with_check = with_check and (size > 1 or planning.require_validation_step)
    kept = _fit(work, size - with_check)
    # A subject in another script reads better quoted than after "the".
    foreign = any(char.isalpha() and not char.isascii() for char in subject)
    the = f'"{subject}"' if foreign else f"the {subject or 'task'}"
    named = any(_clean(word) in _DOC_NOUNS for word in subject.split())
    clause = _clip(next(filter(_has_word, _CLAUSE_END.split(goal[:1000])), ""), GOAL_ACTION_CHARS)
    fill = {"the": the, "doc": the if named else f"the documentation for {the}",
            "goal": clause[:1].upper() + clause[1:] if clause else f"Carry out {the}"}  # fmt: skip
    number = {step.key: index for index, step in enumerate(kept, 1)}
    reach: dict[str, set[int]] = {}  # the kept steps a step stands for: itself, or its inputs
    after: dict[str, list[int]] = {}
    for step in [*work, *kept]:
        after[step.key] = sorted(set().union(*(reach[key] for key in step.after)))
        reach[step.key] = {number[step.key]} if step.key in number else set(after[step.key])
    steps = [_draft(step, number[step.key], after[step.key], fill, resolver) for step in kept]
    if with_check:
        needed = {dep for draft in steps for dep in draft.depends_on}
        sinks = [index for index in range(1, len(steps) + 1) if index not in needed]
        steps.append(_draft(check, len(steps) + 1, sinks, fill, resolver))
    note, found = _context_note(context)
    steps[0].action += note
    steps[0].acceptance_criteria = [*steps[0].acceptance_criteria[: 3 - len(found)], *found]
    limits = [*dict.fromkeys(filter(None, (_clip(c, MAX_CONSTRAINT_CHARS) for c in constraints)))]
    steps[-1].acceptance_criteria += [f"Constraint respected: {text}" for text in limits[:32]]
    rationale = (
        f"Rule-based planner (no usable model plan): the goal reads as {template.label} (kind "
        f"'{kind}'), so the {kind} template was applied to {the} and fitted to {len(steps)} "
        "steps, independent ones in parallel, the last checking the result and the constraints."
    )
    complexity = template.complexity + min(0.15, len(goal.split()) / 200) + 0.03 * len(limits[:5])
    return DraftPlan(steps, rationale, complexity_score=round(min(1.0, complexity), 2))


@cache
def _kinds() -> dict[str, _Kind]:
    kinds: dict[str, _Kind] = {}
    lines = [line for line in TEMPLATES.strip().splitlines() if line.strip()]
    for line, criteria in zip(lines, [*lines[1:], ""], strict=True):
        if line.startswith("["):
            name, _, about = line[1:].partition("]")
            label, _, complexity = about.strip().partition(", complexity ")
            kind = kinds[name] = _Kind(label, float(complexity or 0), [], [])
        elif line.startswith("cues:"):
            kind.cues.extend(cue.strip() for cue in line[5:].split(","))
        elif not line.startswith(" "):
            fields, action = line.split(" : ", 1)
            key, arm, tier, seconds, keep, after = fields.split()
            kind.steps.append(
                _Step(key, arm, int(tier), int(seconds), int(keep),
                      tuple(after.split(",")) if after != "-" else (), action,
                      tuple(text.strip() for text in criteria.split(" | ")))
            )  # fmt: skip
    return kinds


@cache
def _kind_lexicon() -> tuple[Lexicon, frozenset[str], frozenset[str]]:
    lexicon = Lexicon()
    for index, kind in enumerate(_kinds().values()):
        for cue in kind.cues:
            lexicon.add(index, cue, 1.0)
    skip = frozenset(stem(word) for word in LEAD_FILLERS | _QUESTION)
    return lexicon, skip, frozenset(stem(verb) for verb in GENERIC_VERBS)


def _fit(work: list[_Step], size: int) -> list[_Step]:
    """`size` steps: the template's most essential ones, or all of them and padding steps."""
    if size <= len(work):
        keep = {step.key for step in sorted(work, key=lambda step: step.keep)[:size]}
        return [step for step in work if step.key in keep]
    main = min(work, key=lambda step: step.keep).key
    pads = _kinds()["pad"].steps
    extra = []
    for index in range(size - len(work)):
        pad, rounds = pads[index % len(pads)], index // len(pads)
        action = pad.action + (f" (round {rounds + 1})" if rounds else "")
        extra.append(pad._replace(key=f"pad{index}", after=(main,), action=action))
    return [*work, *extra]


def _draft(
    step: _Step, number: int, after: list[int], fill: dict[str, str], resolver: ArmResolver
) -> DraftStep:
    action = step.action.format_map(fill)
    criteria = [text.format_map(fill) for text in step.criteria]
    if step.arm in resolver.arm_ids:
        arm, tier, seconds = step.arm, step.tier, step.seconds
    else:  # "*", or an arm this registry does not have
        arm = resolver.select(action, criteria)
        tier, seconds = arms.typical_cost_tier(arm), arms.typical_duration_seconds(arm)
    return DraftStep(action, arm, criteria, after, number, tier, seconds)


def _clean(word: str) -> str:
    return _EDGE.sub("", word).lower()


def _subject_of(raw: list[str]) -> str:
    raw = raw[:40]
    clean = [*map(_clean, raw), ""]
    position, verb_allowed = 0, True  # one leading verb, or one more after "and"
    while position < len(raw):
        word = clean[position]
        if word in _VERBS and verb_allowed:
            verb_allowed = False
            position += 2 if clean[position + 1] in _PARTICLES else 1
        elif word in _LEADING or word in _DETERMINERS or not word:
            verb_allowed = verb_allowed or word in _JOINERS
            position += 1
        else:
            break
    kept: list[int] = []
    for index in range(position, len(raw)):
        word = clean[index]
        if kept and word in _JOINERS and clean[index + 1] in _VERBS:
            break
        if kept and word in _CUTS:
            if any(clean[head] not in _GENERIC_HEADS for head in kept):
                break
            kept = []
        elif word and (kept or word not in _DETERMINERS) and len(kept) < SUBJECT_WORDS:
            kept.append(index)
    while kept and clean[kept[-1]] in _TRAILING:
        kept.pop()
    text = " ".join(raw[index] for index in kept).strip(" ,.;:!?-–—'\"")
    text = _clip(text, SUBJECT_CHARS).rstrip(" ,.;:")
    return text if _has_word(text) else ""


def _has_word(text: str) -> bool:
    return any(char.isalnum() for char in text)


def _context_note(context: Mapping[str, Any]) -> tuple[str, list[str]]:
    """A suffix for the first action naming what the context points at, and a criterion."""
    files = next(filter(None, map(context.get, ("affected_files", "files", "paths"))), None)
    if files:
        names = files if isinstance(files, list) else [files]
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        shown = _clip(", ".join(str(name) for name in names[:3]), 150) + more
        return f" (starting with {shown})", [f"{shown} examined"]
    if context:
        return f" (using the context's {_clip(', '.join(map(str, context)), 100)})", []
    return "", []


def _clip(text: str, limit: int) -> str:
    """`text` on one line, cut at a word to at most `limit` characters, "…" marking a cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    space = text.rfind(" ", 0, limit - 1)
    return text[: space if space > 0 else limit - 1] + "…"
