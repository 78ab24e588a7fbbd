"""The specifics a goal names, as the rule-based planner reads them."""

from __future__ import annotations

import pytest

from planner_arm.rules.goals import GoalDetails, goal_details, goal_parts


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        ("Deploy the billing service to staging", GoalDetails(environments=("staging",))),
        ("Upgrade the payments service to Python 3.12 in eu-west-1",
         GoalDetails(environments=("eu-west-1",), versions=("Python 3.12",))),
        ("Release v2.3.1 to production", GoalDetails(("production",), ("v2.3.1",))),
        ("Upgrade Postgres 16 to 17.2", GoalDetails(versions=("Postgres 16", "17.2"))),
        ("Fix the crash in auth/login.py (JIRA-123)",
         GoalDetails(paths=("auth/login.py",), tickets=("JIRA-123",))),
        ("Read https://example.com/a.html, then fix #42 in src/app/main.ts",
         GoalDetails(paths=("src/app/main.ts",), urls=("https://example.com/a.html",),
                     tickets=("#42",))),
        ("Fix bug 1234 in the Dockerfile",
         GoalDetails(paths=("Dockerfile",), tickets=("bug 1234",))),
        # Look-alikes that are not specifics.
        ("Check UTF-8 handling in the CI/CD pipeline and/or I/O", GoalDetails()),
        ("Audit the login flow against the OWASP Top 10", GoalDetails()),
        ("Make the page load in 2.5 seconds", GoalDetails()),
    ],
)  # fmt: skip
def test_specifics_are_found(goal: str, expected: GoalDetails) -> None:
    assert goal_details(goal) == expected


def test_at_most_three_of_each_and_no_repeats() -> None:
    found = goal_details("Deploy to staging, Staging, prod, qa, uat and dev")
    assert found.environments == ("staging", "prod", "qa")


@pytest.mark.parametrize(
    ("goal", "kinds"),
    [
        ("Build the billing service and then deploy it to staging", ["feature", "deployment"]),
        ("Build the billing service and deploy it to staging", ["feature", "deployment"]),
        ("Research caching, then implement a cache, then deploy it",
         ["research", "feature", "deployment"]),
        ("Fix the login bug and add tests", ["bug_fix"]),
        ("Deploy to staging, then deploy to production", ["deployment"]),
        ("Analyse Q3 sales data and report the main trends", ["data_analysis"]),
        ("What are the tradeoffs between Postgres and MySQL?", ["research"]),
        ("a; b; c; d; fix the bug; deploy it", ["generic", "bug_fix", "deployment"]),
    ],
)  # fmt: skip
def test_compound_goals_are_cut_into_parts(goal: str, kinds: list[str]) -> None:
    assert [part.kind for part in goal_parts(goal)] == kinds


def test_a_part_about_it_has_no_subject_of_its_own() -> None:
    first, second = goal_parts("Build the billing service, then deploy it to staging")
    assert first.subject == "billing service"
    assert second.subject == ""
