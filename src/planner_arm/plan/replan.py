"""A replan, pure and without I/O: what it may change, and the revision merged onto the previous
plan.

The scope: the previous plan's finished (completed, running), failed and marked steps, checked
against the request before anything is planned (unknown steps, marked finished steps,
finished steps whose inputs are not finished, nothing to do, the replan limit).

The merge of a revision (the model's, or the rule-based one): finished steps come back exactly
as they were, whatever the revision did to them; a step the revision left unchanged keeps its
number; every new or changed step is numbered above the previous plan's highest, in dependency
order, so a dependency always has a lower number. The last step is a judge step that every
other step leads to. Per-step values go through `validate_plan`, so they are mended exactly as
a /plan answer's are. `plan_diff` says what changed.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from graphlib import CycleError

from planner_arm.errors import PlanValidationError, ReplanLimitReached, ReplanRejected
from planner_arm.plan.dag import (
    JUDGE_ACTION,
    JUDGE_ARM,
    JUDGE_COST_TIER,
    JUDGE_CRITERIA,
    JUDGE_DURATION_SECONDS,
    stable_topological_order,
)
from planner_arm.plan.draft import DraftPlan, DraftStep, repair, repair_code
from planner_arm.plan.edited import check_sent_back
from planner_arm.plan.endpoint_schemas import FINISHED_STATUSES, ReplanRequest, StepState
from planner_arm.plan.schemas import PlanDiff, PlanResponse, PlanStep
from planner_arm.plan.validation import (
    PlanRules,
    validate_plan,
)

_STEP_KEY = re.compile(r"[1-9][0-9]{0,8}")


@dataclass(frozen=True)
class ReplanScope:
    """The previous plan and what became of it; numbers are the previous plan's."""

    previous: tuple[PlanStep, ...]
    states: dict[int, StepState]
    marked: frozenset[int]
    reason: str | None
    # The previous plan holds only the work done and the stage being run (iterative).
    partial: bool = False
    # The replan counts toward max_replans: an iterative round that only reports finished
    # steps does not; one with a failed or marked step, or a reason, does.
    counted: bool = True

    @property
    def finished(self) -> dict[int, PlanStep]:
        """Completed and running steps: every replan keeps them exactly as they are."""
        return {
            step.step: step
            for step in self.previous
            if step.step in self.states and self.states[step.step].status in FINISHED_STATUSES
        }

    @property
    def failed(self) -> dict[int, str]:
        """Failed step -> its error ("" when none was given)."""
        return {
            number: state.error or ""
            for number, state in self.states.items()
            if state.status == "failed"
        }

    @property
    def replaced(self) -> frozenset[int]:
        """Steps that must not come back as they were: the failed and the marked ones."""
        return frozenset(self.failed) | self.marked

    @property
    def highest(self) -> int:
        """New and changed steps are numbered above this, so no number is ever reused."""
        return max((step.step for step in self.previous), default=0)


def replan_scope(
    previous: PlanResponse,
    request: ReplanRequest,
    *,
    default_max_replans: int,
    replan_count: int | None = None,
    arm_ids: Collection[str] | None = None,
) -> ReplanScope:
    """Check the request against `previous`; raise ReplanLimitReached (409: only for a
    replan that counts toward the limit) or ReplanRejected (422: unknown_step,
    completed_step, inconsistent_step_states, nothing_to_replan) or InvalidPrevious (422: a
    plan sent back that is not one to work on, `check_sent_back`); an iterative replan with a
    completed step has something to plan: the next stage.

    `replan_count` is the server's own count from the stored chain, when it has one; else the
    previous answer's `replan_count` is trusted.
    """
    count = previous.replan_count if replan_count is None else replan_count
    # A caller may ask for fewer replans than the service allows, never for more.
    limit = default_max_replans
    if request.max_replans is not None:
        limit = min(limit, request.max_replans)
    counted = counts_toward_limit(request)
    if counted and count >= limit:
        raise ReplanLimitReached(count, limit)

    check_sent_back(previous.plan, arm_ids)
    states = _known_states(previous, request)
    _reject_finished_marked(request, states)
    scope = ReplanScope(
        previous=tuple(previous.plan),
        states=states,
        marked=frozenset(request.replan_steps),
        reason=(request.reason or "").strip() or None,
        partial=not previous.complete,
        counted=counted,
    )
    _reject_orphans(scope)
    next_stage = request.strategy == "iterative" and any(
        state.status == "completed" for state in states.values()
    )
    if not scope.replaced and scope.reason is None and not next_stage:
        raise ReplanRejected(
            "nothing to replan: no step failed, none is marked in replan_steps, no reason is "
            "given and no step completed for an iterative plan's next stage",
            code="nothing_to_replan",
        )
    return scope


def _known_states(previous: PlanResponse, request: ReplanRequest) -> dict[int, StepState]:
    """The reported states by step number; rejects the request if it names an unknown step."""
    numbers = {step.step for step in previous.plan}
    states: dict[int, StepState] = {}
    unknown: list[dict[str, object]] = []
    for key, state in request.step_states.items():
        # Only the step's number as written in the plan: "01", " 1" or "²" name no step, so
        # two keys can never give one step two states.
        number = int(key) if _STEP_KEY.fullmatch(key) else None
        if number is None or number not in numbers:
            unknown.append(_problem("unknown_step", number, f"step_states names step {key!r}"))
        else:
            states[number] = state
    unknown += [
        _problem("unknown_step", number, f"replan_steps names step {number}")
        for number in dict.fromkeys(request.replan_steps)
        if number not in numbers
    ]
    if unknown:
        _reject("unknown_step", unknown, f"the plan has steps {sorted(numbers)}")
    return states


def _reject_finished_marked(request: ReplanRequest, states: dict[int, StepState]) -> None:
    finished = [
        _problem("completed_step", number, f"step {number} is {states[number].status}")
        for number in dict.fromkeys(request.replan_steps)
        if number in states and states[number].status in FINISHED_STATUSES
    ]
    if finished:
        _reject("completed_step", finished, "completed and running steps are kept as they are")


def _reject_orphans(scope: ReplanScope) -> None:
    """A step reported finished cannot depend on a step that is not."""
    kept = scope.finished
    orphans = [
        _problem(
            "inconsistent_step_states",
            step.step,
            f"step {step.step} is {scope.states[step.step].status} but depends on unfinished "
            f"step {dep}",
        )
        for step in kept.values()
        for dep in step.depends_on
        if dep not in kept
    ]
    if orphans:
        _reject("inconsistent_step_states", orphans, "a finished step needs finished inputs")


def counts_toward_limit(request: ReplanRequest) -> bool:
    """Whether the replan counts toward max_replans: every one but an iterative round that
    only reports progress (no failed step, no step marked, no reason)."""
    if request.strategy != "iterative":
        return True
    failed = any(state.status == "failed" for state in request.step_states.values())
    return failed or bool(request.replan_steps) or bool((request.reason or "").strip())


def _problem(code: str, step: int | None, message: str) -> dict[str, object]:
    return {"code": code, "step": step, "message": message}


def _reject(code: str, problems: list[dict[str, object]], why: str) -> None:
    messages = "; ".join(str(problem["message"]) for problem in problems)
    raise ReplanRejected(f"{messages} ({why})", code=code, errors=problems)


# Two actions this alike (0-1, over their words) are the same step reworded.
SAME_STEP_SIMILARITY = 0.8
# A step at a finished step's number is taken for it when at least this alike, or same arm.
SAME_NUMBER_SIMILARITY = 0.5
_WORD = re.compile(r"\w+")
_STEP_REFERENCE = re.compile(r"\bstep (\d+)")

Ref = tuple[bool, int]  # (True, a finished step's number) or (False, an index into the work)


@dataclass
class MergedPlan:
    steps: list[PlanStep]
    repairs: list[str]


@dataclass
class _Work:
    """A step still to do: the revision's draft, its model label, its resolved dependencies."""

    draft: DraftStep
    label: str
    deps: list[Ref] = field(default_factory=list)


def merge_replan(scope: ReplanScope, draft: DraftPlan, rules: PlanRules) -> MergedPlan:
    """Merge `draft` (numbered as its author chose) onto the scope's previous plan.

    Raises PlanValidationError (cycle, empty_action, missing_criteria, wrong_step_count) for
    what only the author can mend; the messages name steps by the author's numbers.
    """
    finished = scope.finished
    repairs: list[str] = []
    alias = _match_finished(draft.steps, finished, repairs)
    ids = _model_ids(draft.steps, repairs)
    work_index: dict[int, int] = {}
    work: list[_Work] = []
    for pos, step in enumerate(draft.steps):
        if alias[pos] is None:
            work_index[pos] = len(work)
            work.append(_Work(step, f"step {ids[pos] if ids[pos] is not None else pos + 1}"))
    position_of = {number: pos for pos, number in enumerate(ids) if number is not None}
    for index in work_index.values():
        _resolve(work[index], position_of, alias, work_index, finished, repairs)
        _drop_self(work[index], index, repairs)

    order = _order(work)
    # The final check appended below is outside the upper bound, as on /plan.
    bounded = len(work)
    _finish_with_judge(work, order, finished, rules, repairs)
    remaining = len(work)
    # A plan longer than max_steps (hierarchical, expanded) may keep as many steps to do.
    most = max(rules.max_steps, len(scope.previous) - len(finished))
    # And a plan sent back shorter than min_steps may stay as short.
    least = min(rules.min_steps, len(scope.previous))
    if bounded > most or len(finished) + remaining < least:
        detail = (
            f"the revised plan has {remaining} steps still to do (at most {most}) "
            f"beside {len(finished)} finished ones (at least {least} in all)"
        )
        raise PlanValidationError(detail, code="wrong_step_count")

    steps = _validated(scope, finished, work, order, rules, repairs)
    return MergedPlan(steps=sorted(steps, key=lambda step: step.step), repairs=repairs)


def plan_diff(previous: list[PlanStep], steps: list[PlanStep]) -> PlanDiff:
    before = {step.step for step in previous}
    after = {step.step for step in steps}
    return PlanDiff(
        kept=sorted(before & after), removed=sorted(before - after), added=sorted(after - before)
    )


def action_similarity(first: str, second: str) -> float:
    """0-1: how alike two actions are, over their lower-cased words."""
    a, b = _WORD.findall(first.lower()), _WORD.findall(second.lower())
    if a == b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _match_finished(
    steps: list[DraftStep], finished: dict[int, PlanStep], repairs: list[str]
) -> list[int | None]:
    """For each revised step, the finished step it is (by content, then by number), or None."""
    alias = _match_by_content(steps, finished)
    _match_by_number(steps, finished, alias)
    for number, kept in finished.items():
        matches = [steps[pos] for pos, target in enumerate(alias) if target == number]
        repairs += _restored(number, kept, matches)
    return alias


def _match_by_content(steps: list[DraftStep], finished: dict[int, PlanStep]) -> list[int | None]:
    """For each revised step, the finished step most alike (the highest number of equals),
    if alike enough. Each finished action is read once, and a pair whose shared words alone
    keep it under the threshold (or under the best so far) is never compared in order, so a
    large plan costs little."""
    kept = []
    exact: dict[tuple[str, ...], int] = {}
    # Highest number first: the first of equal scores is then the one to take.
    for number, done in sorted(finished.items(), reverse=True):
        done_words = tuple(_WORD.findall(done.action.lower()))
        exact.setdefault(done_words, number)
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(done_words)  # its index is built once, for every revised step
        kept.append((number, _Words(done_words), matcher))
    alias: list[int | None] = [None] * len(steps)
    for pos, step in enumerate(steps):
        words = _Words(tuple(_WORD.findall(step.action.lower())))
        if words.seq in exact:  # the same words: nothing is more alike
            alias[pos] = exact[words.seq]
            continue
        best, best_number = SAME_STEP_SIMILARITY, None
        for number, other, matcher in kept:
            bound = words.most_alike(other)  # what ratio() can reach at most
            if bound < best or (best_number is not None and bound == best):
                continue
            matcher.set_seq1(words.seq)
            score = matcher.ratio()
            if score > best or (best_number is None and score == best):
                best, best_number = score, number
        alias[pos] = best_number
    return alias


class _Words:
    """An action's words, with what bounds its similarity to another's cheaply."""

    def __init__(self, seq: tuple[str, ...]) -> None:
        self.seq = seq
        self.set = frozenset(seq)
        self.counts = Counter(seq) if len(self.set) < len(seq) else None

    def most_alike(self, other: _Words) -> float:
        """An upper bound of difflib's ratio: twice the words shared over all words."""
        total = len(self.seq) + len(other.seq)
        if not total:
            return 1.0
        if self.counts is None or other.counts is None:
            # A word repeated on one side only is still matched once.
            shared = len(self.set & other.set)
        else:
            shared = sum((self.counts & other.counts).values())
        return 2.0 * shared / total


def _match_by_number(
    steps: list[DraftStep], finished: dict[int, PlanStep], alias: list[int | None]
) -> None:
    """Unmatched steps at an unclaimed finished step's number, alike enough, are that step."""
    claimed = set(alias)
    for pos, step in enumerate(steps):
        kept = finished.get(step.step) if step.step is not None else None
        if alias[pos] is None and kept is not None and kept.step not in claimed:
            alike = action_similarity(step.action, kept.action) >= SAME_NUMBER_SIMILARITY
            if alike or step.required_arm == kept.required_arm:
                alias[pos] = kept.step
                claimed.add(kept.step)


def _restored(number: int, kept: PlanStep, matches: list[DraftStep]) -> list[str]:
    """The repairs for a finished step the revision left out, changed or repeated."""
    repairs = []
    if not matches:
        repairs.append(repair("finished_step_restored", f"step {number} was left out"))
    elif not _same_as(matches[0], kept):
        repairs.append(repair("finished_step_restored", f"step {number} was changed"))
    if len(matches) > 1:
        repairs.append(
            repair("finished_step_deduplicated", f"step {number} proposed {len(matches)} times")
        )
    return repairs


def _same_as(draft: DraftStep, step: PlanStep) -> bool:
    return (
        draft.step == step.step
        and draft.action == step.action
        and draft.required_arm == step.required_arm
        and draft.acceptance_criteria == step.acceptance_criteria
        and sorted(draft.depends_on) == sorted(step.depends_on)
        and draft.estimated_cost_tier == step.estimated_cost_tier
        and draft.estimated_duration_seconds == step.estimated_duration_seconds
    )


def _model_ids(steps: list[DraftStep], repairs: list[str]) -> list[int | None]:
    """The number each revised step goes by; a repeated number names none of its steps."""
    given = [step.step for step in steps]
    repeated = {n for n in given if n is not None and given.count(n) > 1}
    if repeated:
        repairs.append(repair("duplicate_step_number", f"{sorted(repeated)} name no step"))
    return [None if number in repeated else number for number in given]


def _resolve(
    item: _Work,
    position_of: dict[int, int],
    alias: list[int | None],
    work_index: dict[int, int],
    finished: dict[int, PlanStep],
    repairs: list[str],
) -> None:
    """The work step's dependencies as finished numbers or work indexes; unknown ones dropped."""
    for number in item.draft.depends_on:
        pos = position_of.get(number)
        if pos is not None:
            target = alias[pos]
            ref: Ref = (True, target) if target is not None else (False, work_index[pos])
        elif number in finished:  # a finished step the revision did not repeat
            ref = (True, number)
        else:
            repairs.append(repair("unknown_dependency", f"{item.label}: no step {number}"))
            continue
        if ref not in item.deps:
            item.deps.append(ref)


def _drop_self(item: _Work, index: int, repairs: list[str]) -> None:
    if (False, index) in item.deps:
        item.deps.remove((False, index))
        repairs.append(repair("self_dependency", f"{item.label}: dropped its dependency on itself"))


def _order(work: list[_Work]) -> list[int]:
    try:
        return stable_topological_order(
            [[target for finished, target in item.deps if not finished] for item in work]
        )
    except CycleError as exc:
        ring = [work[index].label.removeprefix("step ") for index in reversed(exc.args[1])]
        detail = "dependency cycle: " + " -> ".join(ring)
        raise PlanValidationError(detail, code="cycle") from None


def _finish_with_judge(
    work: list[_Work],
    order: list[int],
    finished: dict[int, PlanStep],
    rules: PlanRules,
    repairs: list[str],
) -> None:
    """The last step a judge every other step leads to: the revision's, or one appended."""
    if not rules.require_validation_step:
        return
    sinks = _sinks(work, order, finished)
    last = order[-1] if order else None
    if last is not None and work[last].draft.required_arm == JUDGE_ARM:
        missing = [sink for sink in sinks if sink != (False, last)]
        if missing:
            work[last].deps += missing
            repairs.append(repair("judge_depends_on_all", f"{work[last].label} now waits for all"))
        return
    judge = DraftStep(
        action=JUDGE_ACTION,
        required_arm=JUDGE_ARM,
        acceptance_criteria=list(JUDGE_CRITERIA),
        estimated_cost_tier=JUDGE_COST_TIER,
        estimated_duration_seconds=JUDGE_DURATION_SECONDS,
    )
    work.append(_Work(judge, "the appended judge step", list(sinks)))
    order.append(len(work) - 1)
    repairs.append(repair("judge_step_appended", "the revised plan ends with a final check"))


def _sinks(work: list[_Work], order: list[int], finished: dict[int, PlanStep]) -> list[Ref]:
    """The steps no other step depends on: finished ones by number, then the work in order."""
    needed = {target for item in work for target in item.deps}
    needed |= {(True, dep) for step in finished.values() for dep in step.depends_on}
    sinks = [(True, number) for number in sorted(finished) if (True, number) not in needed]
    sinks += [(False, index) for index in order if (False, index) not in needed]
    return sinks


def _validated(
    scope: ReplanScope,
    finished: dict[int, PlanStep],
    work: list[_Work],
    order: list[int],
    rules: PlanRules,
    repairs: list[str],
) -> list[PlanStep]:
    """Per-step values mended by validate_plan; then unchanged steps keep their numbers and
    the rest are numbered above the previous plan's highest."""
    temp = {index: scope.highest + 1 + rank for rank, index in enumerate(order)}
    kept_first = [finished[n] for n in sorted(finished)]
    drafts = [_draft_of(step) for step in kept_first]
    drafts += [_numbered_draft(work[index], temp[index], temp) for index in order]
    relaxed = PlanRules(1, max(len(drafts), 1), False, rules.arm_ids, writing=rules.writing)
    labels = {str(temp[index]): work[index].label.removeprefix("step ") for index in order}
    try:
        valid = validate_plan(DraftPlan(drafts), relaxed)
    except PlanValidationError as problem:
        errors = [_renamed(message, labels) for message in problem.errors]
        raise PlanValidationError("; ".join(errors), code=problem.code, errors=errors) from None
    checked = valid.steps[len(kept_first) :]

    final = _final_numbers(scope, work, order, checked)
    renamed = {str(temp[index]): str(final[index]) for index in order}
    repairs += [
        _renamed(entry, renamed) for entry in valid.repairs if repair_code(entry) != "renumbered"
    ]
    return [
        *kept_first,
        *(
            checked[rank].model_copy(
                update={
                    "step": final[index],
                    "depends_on": sorted(_number(ref, final) for ref in work[index].deps),
                }
            )
            for rank, index in enumerate(order)
        ),
    ]


def _number(ref: Ref, numbers: dict[int, int]) -> int:
    """A dependency's step number: a finished step's own, or the work step's in `numbers`."""
    return ref[1] if ref[0] else numbers[ref[1]]


def _numbered_draft(item: _Work, number: int, numbers: dict[int, int]) -> DraftStep:
    deps = [_number(ref, numbers) for ref in item.deps]
    return DraftStep(
        item.draft.action, item.draft.required_arm, list(item.draft.acceptance_criteria),
        deps, number, item.draft.estimated_cost_tier, item.draft.estimated_duration_seconds,
    )  # fmt: skip


def _final_numbers(
    scope: ReplanScope, work: list[_Work], order: list[int], checked: list[PlanStep]
) -> dict[int, int]:
    """Work index -> final number: its previous one if unchanged, else the next above all."""
    previous = {step.step: step for step in scope.previous}
    final: dict[int, int] = {}
    next_number = scope.highest + 1
    for rank, index in enumerate(order):
        deps = sorted(_number(ref, final) for ref in work[index].deps)
        candidate = checked[rank].model_copy(update={"depends_on": deps})
        old = _unchanged(candidate, work[index].draft.step, previous, scope, set(final.values()))
        if old is not None:
            final[index] = old
        else:
            final[index] = next_number
            next_number += 1
    return final


def _unchanged(
    candidate: PlanStep,
    given: int | None,
    previous: dict[int, PlanStep],
    scope: ReplanScope,
    taken: set[int],
) -> int | None:
    """The previous number of a step the revision left exactly as it was, if any."""
    options = [previous[given]] if given in previous else []
    options += [step for step in previous.values() if step.action == candidate.action]
    for old in options:
        if (
            old.step not in scope.replaced
            and old.step not in scope.finished
            and old.step not in taken
            and candidate.model_copy(update={"step": old.step})
            == old.model_copy(update={"depends_on": sorted(old.depends_on)})
        ):
            return old.step
    return None


def _draft_of(step: PlanStep) -> DraftStep:
    return DraftStep(
        step.action, step.required_arm, list(step.acceptance_criteria), list(step.depends_on),
        step.step, step.estimated_cost_tier, step.estimated_duration_seconds,
        step.parent, step.input,
    )  # fmt: skip


def _renamed(text: str, numbers: dict[str, str]) -> str:
    return _STEP_REFERENCE.sub(lambda m: f"step {numbers.get(m.group(1), m.group(1))}", text)
