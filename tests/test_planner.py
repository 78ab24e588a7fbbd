"""PlannerArm's loop on its own: the call budget, the model chain, repairs per model."""

from __future__ import annotations

import json
import random

import httpx
import respx

from conftest import FakeClock, answer, good_plan, make_settings
from planner_arm.llm import LLMClient
from planner_arm.metrics import PlannerMetrics
from planner_arm.planner import PlannerArm
from planner_arm.schemas import PlanRequest

REQUEST = PlanRequest(goal="Fix authentication bug and add tests")


def build(settings_overrides: dict[str, object], clock: FakeClock) -> PlannerArm:
    settings = make_settings(**settings_overrides)
    return PlannerArm(
        settings,
        LLMClient(settings, httpx.AsyncClient()),
        PlannerMetrics("test", "test"),
        clock.as_clock(),
        random.Random(3),
    )


def models_called(route: respx.Route) -> list[str]:
    return [json.loads(call.request.content)["model"] for call in route.calls]


async def test_garbage_everywhere_costs_at_most_three_calls(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer("no plan here, sorry")
    planner = build({"model": {"name": "a", "fallback_models": ["b", "c", "d"]}}, fake_clock)
    response = await planner.plan(REQUEST, "r1")
    assert response.metadata.source == "fallback"
    assert response.metadata.attempts == 3
    # One repair prompt for the first model, then the next model.
    assert models_called(chat_route) == ["a", "a", "b"]


async def test_one_repair_per_model_then_fallback(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer('{"plan": []}')
    planner = build({}, fake_clock)
    response = await planner.plan(REQUEST, "r2")
    assert response.metadata.source == "fallback"
    assert models_called(chat_route) == ["gpt-3.5-turbo", "gpt-3.5-turbo"]
    assert any("invalid_plan" in w for w in response.metadata.warnings)


async def test_configured_call_budget_is_respected(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = httpx.Response(500, json={})
    planner = build({"retry": {"max_llm_calls": 5}}, fake_clock)
    response = await planner.plan(REQUEST, "r3")
    assert response.metadata.attempts == 5
    assert len(fake_clock.sleeps) == 4


async def test_costs_add_up_across_calls(chat_route: respx.Route, fake_clock: FakeClock) -> None:
    chat_route.side_effect = [answer("nothing useful"), answer(good_plan())]
    planner = build({"model": {"name": "gpt-4o-mini"}}, fake_clock)
    response = await planner.plan(REQUEST, "r4")
    assert response.metadata.source == "llm"
    assert response.estimated_cost.prompt_tokens == 1800
    assert response.estimated_cost.completion_tokens == 600
    # 1800 * 0.15 / 1e6 + 600 * 0.60 / 1e6
    assert abs(response.estimated_cost.llm_usd - 0.00063) < 1e-9


async def test_unpriced_model_is_a_warning_not_an_error(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    planner = build({"model": {"name": "local-qwen"}}, fake_clock)
    response = await planner.plan(REQUEST, "r5")
    assert response.estimated_cost.llm_usd == 0.0
    assert "no_price_for_model: local-qwen" in response.metadata.warnings


async def test_model_supplied_fields_are_kept(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    response = await build({}, fake_clock).plan(REQUEST, "r6")
    assert response.rationale == good_plan()["rationale"]
    assert response.complexity_score == 0.5
    assert response.confidence == 0.9
    assert response.metadata.repairs == []
