"""In-process figures for the work the service does around the LLM call.

    .venv/bin/python benchmarks/micro.py [--rounds N]

Prints the median and p99 time of parse + normalise + validate + estimate over a set of
well-formed and malformed answers (the real small-model answers in tests/fixtures among
them), of one rule-based fallback plan per goal, and of the checks a request meets before any
planning: the one check of a plan sent back (/replan, /plan/expand, /plan/specialize) and the
nesting scan of a JSON body. Not part of the test suite's pass/fail.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from planner_arm.api.middleware import json_nesting_over
from planner_arm.config import load_settings
from planner_arm.llm.usage import Usage
from planner_arm.pipeline.assembly import assemble_response
from planner_arm.pipeline.normalise import normalise_plan
from planner_arm.pipeline.parsing import extract_json
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.edited import sent_back_problems
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.validation import PlanRules, validate_plan
from planner_arm.rules.planner import rule_based_plan

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real-model-answers"

WELL_FORMED = {
    "plan": [
        {
            "step": i,
            "action": f"Do part {i} of the work on the login flow",
            "required_arm": arm,
            "acceptance_criteria": [f"Part {i} done", "Result recorded"],
            "depends_on": [i - 1] if i > 1 else [],
            "estimated_cost_tier": 2,
            "estimated_duration_seconds": 30,
        }
        for i, arm in enumerate(["retriever", "coder", "coder", "executor", "judge"], start=1)
    ],
    "rationale": "Find, change, run, check.",
    "confidence": 0.8,
    "complexity_score": 0.4,
}

GOALS = [
    "Fix authentication bug and add tests",
    "Add CSV export to the reports page",
    "What are the tradeoffs between Kafka and RabbitMQ?",
    "Analyse churn in last quarter's sales data",
    "Deploy the billing service to staging",
    "Write the user guide for the CLI",
    "Review the payment flow for PII leaks",
    "Organise the team offsite",
]


def answers() -> dict[str, str]:
    texts = {"well-formed": json.dumps(WELL_FORMED)}
    texts["fenced+chatty"] = "Here is the plan:\n```json\n" + json.dumps(WELL_FORMED) + "\n```"
    texts["trailing commas"] = json.dumps(WELL_FORMED, indent=1).replace("\n}", ",\n}")
    texts["single quotes"] = str(WELL_FORMED)
    for path in sorted(FIXTURES.glob("*.txt")):
        texts[path.stem] = path.read_text(encoding="utf-8")
    return texts


def timed(fn: Callable[[], object], rounds: int) -> list[float]:
    for _ in range(20):
        fn()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def show(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    print(
        f"  {name:58s} median {statistics.median(samples) * 1e6:8.1f} µs   p99 {p99 * 1e6:8.1f} µs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2000)
    rounds = parser.parse_args().rounds
    settings = load_settings()
    resolver = ArmResolver(settings.arms, settings.arm_aliases)
    rules = PlanRules.from_settings(settings)

    print(f"parse + normalise + validate + estimate ({rounds} rounds each)")
    everything: list[float] = []
    for name, text in answers().items():

        def pipeline(text: str = text) -> object:
            data, parse_repairs = extract_json(text)
            draft = normalise_plan(data, resolver)
            draft.repairs[:0] = parse_repairs
            valid = validate_plan(draft, rules)
            return assemble_response(
                draft=draft,
                valid=valid,
                goal="g",
                source="llm",
                model="m",
                usage=Usage(),
                request_id="r",
                latency_ms=0.0,
                prompt_version="p",
            )

        samples = timed(pipeline, rounds)
        everything.extend(samples)
        show(name, samples)
    show("ALL ANSWERS", everything)

    print(f"\nrule-based fallback plan, validated ({rounds} rounds each)")
    all_goals: list[float] = []
    for goal in GOALS:

        def plan(goal: str = goal) -> object:
            draft = rule_based_plan(
                goal, ["Keep the API stable"], {}, planning=settings.planning, resolver=resolver
            )
            return validate_plan(draft, rules)

        samples = timed(plan, rounds)
        all_goals.extend(samples)
        show(goal, samples)
    show("ALL GOALS", all_goals)
    edge_checks(max(rounds // 10, 20))


def chain(size: int) -> list[PlanStep]:
    """A plan sent back: `size` steps, each after the one before."""
    return [
        PlanStep(step=n, action=f"Do part {n} of the work", required_arm="coder",
                 acceptance_criteria=["Part done", "Result recorded"],
                 depends_on=[n - 1] if n > 1 else [])
        for n in range(1, size + 1)
    ]  # fmt: skip


def edge_checks(rounds: int) -> None:
    print(f"\nchecks before any planning ({rounds} rounds each)")
    for size in (7, 50, 500):
        steps = chain(size)
        show(
            f"plan sent back, {size} steps",
            timed(lambda steps=steps: sent_back_problems(steps), rounds),
        )
    small = json.dumps({"goal": "g", "context": {"a": [1, 2]}}).encode()
    plans = json.dumps({"plan": [step.model_dump() for step in chain(500)]}).encode()
    for name, body in ((f"{len(small)} B body", small), (f"{len(plans) // 1024} KiB body", plans)):
        show(
            f"JSON nesting scan, {name}",
            timed(lambda body=body: json_nesting_over(body, 64), rounds),
        )


if __name__ == "__main__":
    main()
