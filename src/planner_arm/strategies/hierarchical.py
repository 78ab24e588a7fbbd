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

from planner_arm.clock import Deadline
from planner_arm.llm.client import Completion
from planner_arm.llm.prompts import EXPAND_PROMPT_VERSION, initial_messages, phases_user_prompt
from planner_arm.metrics import PlannerMetrics
from planner_arm.pipeline.assembly import read_plan_answer
from planner_arm.plan.budget import Spend, budget_problems, check_answer_budget, describe_budget
from planner_arm.plan.dag import JUDGE_ARM
from planner_arm.plan.draft import DraftPlan, split_note
from planner_arm.plan.hierarchy import Node, expanded_nodes, flatten, leaf_count
from planner_arm.plan.schemas import PlanRequest, PlanResponse
from planner_arm.plan.validation import ValidPlan, validate_plan
from planner_arm.rules.planner import RuleBasedPlanner
from planner_arm.strategies.attempts import (
    MIN_CALL_SECONDS,
    ModelFailure,
    ModelPlanner,
    PlanJob,
    Question,
)
from planner_arm.strategies.expand import SubPlan, SubPlanner, SubPlanTask
from planner_arm.strategies.flat import PlanAnswer, first_answer, respond


@dataclass(kw_only=True)
class HierarchicalPlanner(ModelPlanner):
    rule_based: RuleBasedPlanner
    subplans: SubPlanner
    concurrency: int
    max_plan_steps: int
    metrics: PlannerMetrics

    async def plan(self, job: PlanJob) -> PlanResponse:
        """The hierarchical plan; PlanningFailed only with the fallback off."""
        planner = await self.prepared(job.request)
        if planner is not self:  # the request's own tools: phases and sub-plans over them
            subplans = await self.subplans.prepared(job.request)
            return await replace(planner, subplans=subplans)._plan(job)
        return await self._plan(job)

    async def _plan(self, job: PlanJob) -> PlanResponse:
        request, deadline = job.request, job.deadline
        spend = Spend()
        # The phases are not the plan a streamed answer shows: nobody watches them.
        phases = await first_answer(
            self, self.rule_based, self._phases(request), replace(job, listener=None), spend
        )
        draft, valid = phases.value
        top = [Node(step) for step in valid.steps]
        if request.max_depth >= 2:
            use_model = phases.model is not None
            run = _Expansion(self, request, deadline, spend, use_model, job.owner)
            last = top[-1] if top and top[-1].step.required_arm == JUDGE_ARM else None
            await asyncio.gather(
                *(run.expand(node, str(node.step.step), top, 1) for node in top if node is not last)
            )
            draft.repairs += run.repairs
        self._fit(top, request, spend)
        rules = self.rules
        final_check = rules.require_validation_step and rules.require_dependency_check
        steps, tree, repaired = flatten(top, final_check=final_check)
        repairs = [*valid.repairs, *([repaired] if repaired else [])]
        answer = replace(phases, value=(draft, ValidPlan(steps=steps, repairs=repairs)))
        response = respond(
            answer,
            request,
            job.request_id,
            spend,
            deadline,
            EXPAND_PROMPT_VERSION,
            self.rule_based.confidence,
        )
        return response.model_copy(update={"strategy": "hierarchical", "tree": tree})

    def _phases(self, request: PlanRequest) -> Question[PlanAnswer]:
        user = phases_user_prompt(
            request.goal, request.constraints, request.context, describe_budget(request.budget)
        )

        def checked(draft: DraftPlan) -> ValidPlan:
            valid = validate_plan(draft, self.rules)
            check_answer_budget(valid.steps, request.budget)
            return valid

        def read(completion: Completion) -> PlanAnswer:
            return read_plan_answer(
                completion.content, completion.truncated, self.resolver, checked
            )

        return Question(initial_messages(self.system_prompt, user), read)

    def _fit(self, top: list[Node], request: PlanRequest, spend: Spend) -> None:
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
            spend.warn_once(f"node_not_expanded: {node_id}: {why}")


class _Expansion:
    """One request's node expansions: the shared deadline, spend and concurrency bound."""

    def __init__(
        self,
        owner: HierarchicalPlanner,
        request: PlanRequest,
        deadline: Deadline,
        spend: Spend,
        use_model: bool,
        principal: str,
    ) -> None:
        self.owner, self.request, self.deadline, self.spend = owner, request, deadline, spend
        self.use_model, self.principal = use_model, principal
        self.slots = asyncio.Semaphore(owner.concurrency)
        self.repairs: list[str] = []

    async def expand(self, node: Node, node_id: str, level: list[Node], depth: int) -> None:
        """Give `node` (at `depth`, phases being 1) its sub-plan, then expand its compound
        children while depth remains."""
        before = [other.step for other in level if other.step.step in node.step.depends_on]
        after = [other.step for other in level if node.step.step in other.step.depends_on]
        allow_compound = depth + 1 < self.request.max_depth
        task = SubPlanTask(node.step, before, after, allow_compound)
        sub = await self._subplan(task, node_id)
        if sub is None:
            return
        node.children = [Node(step, compound=step.step in sub.compound) for step in sub.valid.steps]
        for entry in [*sub.draft.repairs, *sub.valid.repairs]:
            code, detail = split_note(entry)
            self.repairs.append(f"{code}: node {node_id}" + (f": {detail}" if detail else ""))
        metrics = self.owner.metrics
        metrics.child(metrics.expansions, sub.source).inc()
        await asyncio.gather(
            *(
                self.expand(child, f"{node_id}.{child.step.step}", node.children, depth + 1)
                for child in node.children
                if child.compound and allow_compound
            )
        )

    async def _subplan(self, task: SubPlanTask, node_id: str) -> SubPlan | None:
        subplans = self.owner.subplans
        rules = subplans.rules_within(self.owner.rules.max_steps)
        if not self.use_model:
            return subplans.rule_based(self.request, task, rules)[0]
        async with self.slots:
            if self.deadline.remaining() < MIN_CALL_SECONDS:
                self.spend.warn_once(f"node_not_expanded: {node_id}: the request deadline passed")
                return None
            # Its own count of calls (each node gets the retries a plan gets), one total.
            base = self.spend.usd
            spend = Spend(usd=base)
            outcome = await subplans.ask(
                self.request, task, self.deadline, spend, rules, owner=self.principal
            )
            _add(self.spend, spend, base)
        if isinstance(outcome, ModelFailure):
            if outcome.reason == "deadline":
                self.spend.warn_once(f"node_not_expanded: {node_id}: {outcome.detail}")
                return None
            with subplans.models.falling_back(outcome, self.spend):
                return subplans.rule_based(self.request, task, rules)[0]
        return outcome


def _add(total: Spend, part: Spend, base: float) -> None:
    """`part` (which started at `base` dollars, so max_llm_usd bounds the whole) added."""
    total.calls += part.calls
    total.prompt_tokens += part.prompt_tokens
    total.completion_tokens += part.completion_tokens
    total.usd += part.usd - base
    for warning in part.warnings:
        total.warn_once(warning)
