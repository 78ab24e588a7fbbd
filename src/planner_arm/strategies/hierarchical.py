"""The hierarchical strategy: the goal in phases (one model call), each phase expanded into
its own sub-plan (one call per node, in parallel, bounded by `expansion.concurrency`, all in
the one request deadline), a step the model marks compound expanded again while `max_depth`
allows. A node not expanded in time stays a single step (`node_not_expanded`); a node whose
model answer fails gets the rule-based sub-plan. The answer is the flat DAG of the leaves
 with its `tree`, fitted to the budget and `expansion.max_plan_steps` by
folding the last expansions back into single steps.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from planner_arm.llm.chain import MIN_CALL_SECONDS, ModelFailure, Question
from planner_arm.llm.client import Completion
from planner_arm.metrics import PlannerMetrics
from planner_arm.pipeline.assembly import read_plan_answer
from planner_arm.plan.budget import budget_problems, check_answer_budget, describe_budget
from planner_arm.plan.dag import JUDGE_ARM
from planner_arm.plan.draft import DraftPlan, split_note
from planner_arm.plan.hierarchy import Node, expanded_nodes, flatten, leaf_count
from planner_arm.plan.schemas import PlanRequest, PlanResponse
from planner_arm.plan.validation import ValidPlan, validate_plan
from planner_arm.strategies.answering import Answers
from planner_arm.strategies.expand import SubPlan, SubPlanner, SubPlanTask, rules_within
from planner_arm.strategies.flat import PlanAnswer, first_answer, respond
from planner_arm.strategies.job import Job, Notes
from planner_arm.strategies.prompts.expand import EXPAND_PROMPT_VERSION, phases_user_prompt
from planner_arm.strategies.prompts.messages import with_repair


@dataclass(kw_only=True)
class HierarchicalPlanner:
    answers: Answers
    subplans: SubPlanner
    concurrency: int
    max_plan_steps: int
    metrics: PlannerMetrics

    async def plan(self, job: Job[PlanRequest]) -> PlanResponse:
        """The hierarchical plan; PlanningFailed only with the fallback off."""
        request = job.request
        # The phases are not the plan a streamed answer shows: nobody watches them.
        phases = await first_answer(self.answers, self._phases(job), job.quiet())
        draft, valid = phases.value
        top = [Node(step) for step in valid.steps]
        if request.max_depth >= 2:
            run = _Expansion(self, job, use_model=phases.model is not None)
            last = top[-1] if top and top[-1].step.required_arm == JUDGE_ARM else None
            await asyncio.gather(
                *(run.expand(node, str(node.step.step), top, 1) for node in top if node is not last)
            )
            draft.repairs += run.repairs
        self._fit(top, request, job.notes)
        rules = job.toolbox.rules
        final_check = rules.require_validation_step and rules.require_dependency_check
        steps, tree, repaired = flatten(top, final_check=final_check)
        repairs = [*valid.repairs, *([repaired] if repaired else [])]
        answer = replace(phases, value=(draft, ValidPlan(steps=steps, repairs=repairs)))
        response = respond(answer, job, EXPAND_PROMPT_VERSION)
        return response.model_copy(update={"strategy": "hierarchical", "tree": tree})

    def _phases(self, job: Job[PlanRequest]) -> Question[PlanAnswer]:
        request, box = job.request, job.toolbox
        rules, resolver = box.rules, box.resolver
        user = phases_user_prompt(
            request.goal, request.constraints, request.context, describe_budget(request.budget)
        )

        def checked(draft: DraftPlan) -> ValidPlan:
            valid = validate_plan(draft, rules)
            check_answer_budget(valid.steps, request.budget)
            return valid

        def read(completion: Completion) -> PlanAnswer:
            return read_plan_answer(completion.content, completion.truncated, resolver, checked)

        messages = box.opening.messages(user)
        return Question(messages, read, with_repair, answer_schema=box.answer_schema, light=True)

    def _fit(self, top: list[Node], request: PlanRequest, notes: Notes) -> None:
        """Fold the last expansions back into single steps until the plan fits the budget
        and the size cap (the phases alone fit: their answer was checked)."""
        cap = self.max_plan_steps
        budget = request.budget
        while True:
            size = leaf_count(top)
            steps = flatten(top, final_check=False)[0] if budget is not None else []
            problems = budget_problems(steps, budget)
            if size <= cap and not problems:
                return
            inner = [(node_id, node) for node_id, node in expanded_nodes(top)
                     if not any(child.children for child in node.children)]  # fmt: skip
            if not inner:
                return
            node_id, node = inner[-1]
            node.children = []
            why = "; ".join(problems) or f"the plan would pass {cap} steps"
            notes.warn_once(f"node_not_expanded: {node_id}: {why}")


class _Expansion:
    """One request's node expansions: the job's deadline, bill and notes, and the bound on
    the nodes expanded at once."""

    def __init__(
        self, planner: HierarchicalPlanner, job: Job[PlanRequest], use_model: bool
    ) -> None:
        self.planner, self.job, self.use_model = planner, job, use_model
        self.slots = asyncio.Semaphore(planner.concurrency)
        self.repairs: list[str] = []

    async def expand(self, node: Node, node_id: str, level: list[Node], depth: int) -> None:
        """Give `node` (at `depth`, phases being 1) its sub-plan, then expand its compound
        children while depth remains."""
        before = [other.step for other in level if other.step.step in node.step.depends_on]
        after = [other.step for other in level if node.step.step in other.step.depends_on]
        allow_compound = depth + 1 < self.job.request.max_depth
        task = SubPlanTask(node.step, before, after, allow_compound)
        sub = await self._subplan(task, node_id)
        if sub is None:
            return
        node.children = [Node(step, compound=step.step in sub.compound) for step in sub.valid.steps]
        for entry in [*sub.draft.repairs, *sub.valid.repairs]:
            code, detail = split_note(entry)
            self.repairs.append(f"{code}: node {node_id}" + (f": {detail}" if detail else ""))
        metrics = self.planner.metrics
        metrics.child(metrics.expansions, sub.source).inc()
        await asyncio.gather(
            *(
                self.expand(child, f"{node_id}.{child.step.step}", node.children, depth + 1)
                for child in node.children
                if child.compound and allow_compound
            )
        )

    async def _subplan(self, task: SubPlanTask, node_id: str) -> SubPlan | None:
        job, subplans = self.job, self.planner.subplans
        box_rules = job.toolbox.rules
        rules = rules_within(box_rules, box_rules.max_steps)
        if not self.use_model:
            return subplans.rule_based(job, task, rules)[0]
        async with self.slots:
            if job.deadline.remaining() < MIN_CALL_SECONDS:
                job.notes.warn_once(f"node_not_expanded: {node_id}: the request deadline passed")
                return None
            # Its own count of calls (each node gets the retries a plan gets), one bill.
            node = job.beside()
            outcome = await subplans.ask(node, task, rules)
            job.usage.absorb(node.usage)
        if isinstance(outcome, ModelFailure):
            if outcome.reason == "deadline":
                job.notes.warn_once(f"node_not_expanded: {node_id}: {outcome.detail}")
                return None
            with self.planner.answers.falling_back(outcome, job.notes):
                return subplans.rule_based(job, task, rules)[0]
        return outcome
