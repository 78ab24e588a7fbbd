"""PlanRecorder: what an answered plan leaves in the logs and the traffic figures."""

from __future__ import annotations

from structlog.testing import capture_logs

from planner_arm.plan.schemas import PlanRequest
from planner_arm.service.recorder import UNMEASURED_LATENCY_MS, TrafficStats
from support.factories import make_service


async def test_the_goal_is_logged_only_cut_short() -> None:
    goal = "Migrate the billing database to the new cluster " + "with customer data " * 40
    with capture_logs() as logs:
        planner = make_service(llm=False)
        await planner.plans.plan(PlanRequest(goal=goal), "r1", use_cache=False)
    created = [entry for entry in logs if entry["event"] == "plan_created"]
    assert len(created) == 1
    assert created[0]["goal"] == goal[:100]
    assert all(goal not in str(entry) for entry in logs)


def test_repeats_count_as_answers_but_not_in_the_planning_latency() -> None:
    stats = TrafficStats()
    assert stats.average_latency_ms == UNMEASURED_LATENCY_MS
    assert stats.model_latency_ms is None
    stats.record_plan("llm", 900.0)
    stats.record_plan("fallback", 100.0)
    stats.record_plan("cache", 0.5, repeat=True)
    stats.record_plan("fallback", 0.2, repeat=True)
    assert stats.average_latency_ms == 500.0
    assert stats.model_latency_ms == 900.0
    assert stats.plans_by_source == {"llm": 1, "fallback": 2, "cache": 1}
    assert stats.success_rate == 1.0


def test_the_models_own_success_rate_counts_a_fallback_against_it() -> None:
    stats = TrafficStats()
    assert stats.model_success_rate is None  # no model asked yet
    stats.record_plan("llm", 900.0, model_asked=True)
    stats.record_plan("fallback", 100.0, model_asked=True)  # the model failed
    stats.record_plan("fallback", 1.0)  # no model configured: not the model's failure
    stats.record_plan("cache", 0.5, repeat=True, model_asked=True)  # a repeat asks nobody
    stats.record_failure(50.0)  # fallback off: the model failed the request
    assert stats.success_rate == 0.8
    assert stats.model_success_rate == round(1 / 3, 4)
