"""Arm choice you can measure: the selector on the labelled set, and the issue's deciding rules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from planner_arm.config import load_settings
from planner_arm.plan.arms import ArmResolver
from support.arm_choice_set import Labelled, Part, load, score

ARMS = ("planner", "retriever", "coder", "executor", "judge", "guardian")


@pytest.fixture(scope="module")
def resolver() -> ArmResolver:
    settings = load_settings()
    return ArmResolver(settings.arms, settings.arm_aliases)


def choose_with(resolver: ArmResolver) -> Callable[[Labelled], str]:
    return lambda row: resolver.select(row.action, row.criteria)


def test_the_set_is_large_balanced_and_keeps_a_fifth_aside() -> None:
    rows = load()
    assert len(rows) >= 200
    counts = Counter(row.arm for row in rows)
    assert set(counts) == set(ARMS)
    assert min(counts.values()) >= len(rows) // 6 - 5
    assert len(load("heldout")) * 5 == len(rows)
    assert any(row.criteria for row in rows)
    assert len({row.action for row in rows}) == len(rows)


# Floors a little under what benchmarks/arm_choice.py measures (README "How an arm is chosen"):
# tuning part 96.4%, held-out part 93.8%, all 95.8%; the selector before issue 12: 77.5%.
@pytest.mark.parametrize(("part", "floor"), [("tuning", 0.94), ("heldout", 0.9), ("all", 0.93)])
def test_the_selector_reaches_its_accuracy_floor(
    resolver: ArmResolver, part: Part, floor: float
) -> None:
    figures = score(load(part), choose_with(resolver))
    assert figures.accuracy >= floor, figures.confusions


def test_every_arm_keeps_its_recall_and_precision_floor(resolver: ArmResolver) -> None:
    figures = score(load("all"), choose_with(resolver))
    for arm in ARMS:
        assert figures.recall[arm] >= 0.85, (arm, figures.recall)
        assert figures.precision[arm] >= 0.85, (arm, figures.precision)


# The rules, one pair of near neighbours each: the verb decides, not the topic word.
@pytest.mark.parametrize(
    ("action", "arm"),
    [
        # Running a command or a command-line tool is the executor's.
        ("Compile the service", "executor"),
        ("Fix the compile error", "coder"),
        ("Lint the new module", "executor"),
        ("Grep the access log for 500 errors", "executor"),
        ("Search the access log documentation for status codes", "retriever"),
        ("curl the status endpoint", "executor"),
        ("ssh to the bastion host", "executor"),
        ("Run the unit tests", "executor"),
        ("Write the unit tests", "coder"),
        # Producing a written artefact (code, a document, a schema, a table, an answer).
        ("Write a summary of the interviews", "coder"),
        ("Draft the answer to the support ticket", "coder"),
        ("Create a table of the benchmark figures", "coder"),
        ("Design the schema for the audit log", "coder"),
        ("Design the approach for the migration", "planner"),
        # Checking against criteria is the judge's.
        ("Test that the invoice totals match the ledger", "judge"),
        ("Verify the import against the acceptance criteria", "judge"),
        ("Fact-check the press release", "judge"),
        # Privacy, secrets, confidentiality and policy are the guardian's, whatever the verb.
        ("Check the diff for leaked credentials", "guardian"),
        ("Look for passwords in the shell history", "guardian"),
        ("Verify the report keeps the client confidential", "guardian"),
        ("Make sure the export complies with the retention policy", "guardian"),
        # Finding and gathering information is the retriever's; decomposing work the planner's.
        ("Review the literature on rate limiting", "retriever"),
        ("Collect the error budgets of every team", "retriever"),
        ("Break the launch into milestones", "planner"),
        ("Decide between Redis and Memcached", "planner"),
    ],
)
def test_the_deciding_rules(resolver: ArmResolver, action: str, arm: str) -> None:
    assert resolver.select(action) == arm, resolver.rank(action)[:3]


@pytest.mark.parametrize(
    ("action", "criteria", "arm"),
    [
        ("Prepare the customer export", ["No personal data left in the file"], "guardian"),
        ("Prepare the customer export", ["Export deployed to the staging bucket"], "executor"),
        ("Handle the follow-up", ["README section written", "Changelog entry added"], "coder"),
        ("Handle the follow-up", ["Every example matches the CLI output"], "judge"),
    ],
)
def test_the_criteria_decide_a_vague_action(
    resolver: ArmResolver, action: str, criteria: list[str], arm: str
) -> None:
    assert resolver.select(action, criteria) == arm, resolver.rank(action, criteria)[:3]


def test_criteria_are_evidence_not_the_verdict(resolver: ArmResolver) -> None:
    criteria = ["Summary written", "Sources linked"]
    assert resolver.select("Deploy the billing service", criteria) == "executor"
    assert resolver.resolve(None, "Handle it", ["No PII in the output"]).arm == "guardian"
