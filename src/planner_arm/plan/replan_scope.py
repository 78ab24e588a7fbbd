"""What a replan may change: the previous plan's finished, failed and marked steps, checked
against the request before anything is planned (unknown steps, marked finished steps, the
replan limit, nothing to do)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner_arm.errors import ReplanLimitReached, ReplanRejected
from planner_arm.plan.endpoint_schemas import FINISHED_STATUSES, ReplanRequest, StepState
from planner_arm.plan.schemas import PlanResponse, PlanStep

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
) -> ReplanScope:
    """Check the request against `previous`; raise ReplanLimitReached (409: only for a
    replan that counts toward the limit) or ReplanRejected (422: unknown_step,
    completed_step, inconsistent_step_states, nothing_to_replan; an iterative replan with a
    completed step has something to plan: the next stage).

    `replan_count` is the server's own count from the stored chain, when it has one; else the
    previous answer's `replan_count` is trusted.
    """
    count = previous.replan_count if replan_count is None else replan_count
    limit = default_max_replans if request.max_replans is None else request.max_replans
    counted = counts_toward_limit(request)
    if counted and count >= limit:
        raise ReplanLimitReached(count, limit)

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
