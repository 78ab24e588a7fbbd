"""The flat strategy and the attempt loop over the model chain: the call limit, repairs per
model, the circuits, the call slots and each call's time."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import respx

from planner_arm.plan.schemas import PlanRequest
from support.app import FakeClock, answer, good_plan
from support.factories import make_service

REQUEST = PlanRequest(goal="Fix authentication bug and add tests")


def models_called(route: respx.Route) -> list[str]:
    return [json.loads(call.request.content)["model"] for call in route.calls]


async def test_garbage_everywhere_costs_at_most_three_calls(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer("no plan here, sorry")
    planner = make_service(fake_clock, model={"name": "a", "fallback_models": ["b", "c", "d"]})
    response = await planner.plans.plan(REQUEST, "r1", use_cache=False)
    assert response.metadata.source == "fallback"
    assert response.metadata.attempts == 3
    # One repair prompt for the first model, then the next model.
    assert models_called(chat_route) == ["a", "a", "b"]


async def test_one_repair_per_model_then_fallback(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer('{"plan": []}')
    planner = make_service(fake_clock)
    response = await planner.plans.plan(REQUEST, "r2", use_cache=False)
    assert response.metadata.source == "fallback"
    assert models_called(chat_route) == ["gpt-3.5-turbo", "gpt-3.5-turbo"]
    assert any("invalid_plan" in w.detail for w in response.metadata.warnings)


async def test_configured_call_budget_is_respected(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = httpx.Response(500, json={})
    planner = make_service(fake_clock, retry={"max_llm_calls": 5})
    response = await planner.plans.plan(REQUEST, "r3", use_cache=False)
    assert response.metadata.attempts == 5
    assert len(fake_clock.sleeps) == 4


async def test_costs_add_up_across_calls(chat_route: respx.Route, fake_clock: FakeClock) -> None:
    chat_route.side_effect = [answer("nothing useful"), answer(good_plan())]
    planner = make_service(fake_clock, model={"name": "gpt-4o-mini"})
    response = await planner.plans.plan(REQUEST, "r4", use_cache=False)
    assert response.metadata.source == "llm"
    assert response.estimated_cost.prompt_tokens == 1800
    assert response.estimated_cost.completion_tokens == 600
    # 1800 * 0.15 / 1e6 + 600 * 0.60 / 1e6
    assert abs(response.estimated_cost.llm_usd - 0.00063) < 1e-9


async def test_unpriced_model_is_a_warning_not_an_error(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    planner = make_service(fake_clock, model={"name": "local-qwen"})
    response = await planner.plans.plan(REQUEST, "r5", use_cache=False)
    assert response.estimated_cost.llm_usd == 0.0
    assert [(w.code, w.detail) for w in response.metadata.warnings] == [
        ("no_price_for_model", "local-qwen: no price in `pricing`, so its calls count as $0")
    ]


LOCAL_CHAT_URL = "http://127.0.0.1:8080/v1/chat/completions"


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:8080/v1", "http://localhost:8080/v1"])
async def test_a_model_served_elsewhere_is_not_priced_at_openais_rates(
    llm_mock: respx.MockRouter, fake_clock: FakeClock, base_url: str
) -> None:
    """The default model name on a local server: the built-in prices are OpenAI's, so its
    calls cost 0 and the answer says why, once."""
    llm_mock.post(base_url + "/chat/completions").return_value = answer(good_plan())
    planner = make_service(fake_clock, model={"base_url": base_url, "priced_by_provider": None})
    response = await planner.plans.plan(REQUEST, "r5b", use_cache=False)
    assert response.metadata.source == "llm"
    assert response.metadata.model == "gpt-3.5-turbo"
    assert response.estimated_cost.prompt_tokens > 0
    assert response.estimated_cost.llm_usd == 0.0
    host = base_url.split("//")[1].split(":")[0]
    [note] = response.metadata.warnings
    assert note.code == "no_price_for_model"
    assert note.detail.startswith(
        f"gpt-3.5-turbo: served at {host}, where the built-in prices (OpenAI's) do not apply"
    )


async def test_a_price_of_the_operators_own_applies_wherever_the_model_is_served(
    llm_mock: respx.MockRouter, fake_clock: FakeClock
) -> None:
    llm_mock.post(LOCAL_CHAT_URL).return_value = answer(
        good_plan(), prompt_tokens=1000, completion_tokens=1000
    )
    own = {"input_per_million": 1.0, "output_per_million": 2.0}
    planner = make_service(
        fake_clock,
        model={
            "name": "gpt-3.5-turbo",
            "base_url": "http://127.0.0.1:8080/v1",
            "priced_by_provider": None,
        },
        pricing={"gpt-3.5-turbo": own},
    )
    response = await planner.plans.plan(REQUEST, "r5c", use_cache=False)
    assert response.estimated_cost.llm_usd == 0.003
    assert response.metadata.warnings == []


async def test_a_copy_of_the_built_in_price_is_still_openais(
    llm_mock: respx.MockRouter, fake_clock: FakeClock
) -> None:
    """The shipped planner-config.yaml repeats the built-in prices: on a local server they
    do not apply, as with no file at all."""
    llm_mock.post(LOCAL_CHAT_URL).return_value = answer(good_plan())
    shipped = {"gpt-3.5-turbo": {"input_per_million": 0.5, "output_per_million": 1.5}}
    planner = make_service(
        fake_clock,
        model={"base_url": "http://127.0.0.1:8080/v1", "priced_by_provider": None},
        pricing=shipped,
    )
    response = await planner.plans.plan(REQUEST, "r5d", use_cache=False)
    assert response.estimated_cost.llm_usd == 0.0
    assert [note.code for note in response.metadata.warnings] == ["no_price_for_model"]


async def test_a_gateway_to_openai_is_billed_at_openais_prices(
    llm_mock: respx.MockRouter, fake_clock: FakeClock
) -> None:
    llm_mock.post(LOCAL_CHAT_URL).return_value = answer(
        good_plan(), prompt_tokens=1000, completion_tokens=1000
    )
    planner = make_service(
        fake_clock, model={"base_url": "http://127.0.0.1:8080/v1", "priced_by_provider": True}
    )
    response = await planner.plans.plan(REQUEST, "r5e", use_cache=False)
    assert response.estimated_cost.llm_usd == 0.002  # gpt-3.5-turbo: $0.5 and $1.5 a million
    assert response.metadata.warnings == []


async def test_model_supplied_fields_are_kept(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    response = await make_service(fake_clock).plans.plan(REQUEST, "r6", use_cache=False)
    assert response.rationale == good_plan()["rationale"]
    assert response.complexity_score == 0.5
    assert response.confidence == 0.9
    assert response.metadata.repairs == []


async def test_open_circuit_skips_the_model_without_a_call(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = httpx.Response(503, json={})
    planner = make_service(
        fake_clock, circuit={"consecutive_failures": 2}, retry={"max_llm_calls": 1}
    )
    for _ in range(2):
        assert (
            await planner.plans.plan(REQUEST, "r", use_cache=False)
        ).metadata.source == "fallback"
    assert chat_route.call_count == 2
    skipped = await planner.plans.plan(REQUEST, "r", use_cache=False)
    assert skipped.metadata.source == "fallback"
    assert skipped.metadata.attempts == 0
    assert chat_route.call_count == 2
    assert any("circuit_open" in w.detail for w in skipped.metadata.warnings)
    # After the cooldown one probe goes through, and its success closes the circuit.
    fake_clock.time += 30
    chat_route.return_value = answer(good_plan())
    assert (await planner.plans.plan(REQUEST, "r", use_cache=False)).metadata.source == "llm"
    assert planner.model_health().circuits == {"gpt-3.5-turbo": "closed"}


async def test_open_circuit_moves_to_the_next_model(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = lambda request: (
        httpx.Response(503, json={})
        if json.loads(request.content)["model"] == "a"
        else answer(good_plan())
    )
    planner = make_service(
        fake_clock,
        model={"name": "a", "fallback_models": ["b"]},
        circuit={"consecutive_failures": 1},
        retry={"max_llm_calls": 2},
    )
    first = await planner.plans.plan(REQUEST, "r", use_cache=False)
    assert first.metadata.model == "b"
    assert models_called(chat_route) == ["a", "b"]
    second = await planner.plans.plan(REQUEST, "r", use_cache=False)
    assert second.metadata.model == "b"
    assert models_called(chat_route) == ["a", "b", "b"]  # "a" skipped while open


async def test_full_call_slots_give_the_fallback_not_a_queue(chat_route: respx.Route) -> None:
    release = asyncio.Event()

    async def held(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return answer(good_plan())

    chat_route.side_effect = held
    planner = make_service(connection={"max_in_flight": 1, "queue_timeout_seconds": 0.05})
    holder = asyncio.create_task(planner.plans.plan(REQUEST, "holder", use_cache=False))
    for _ in range(20):
        await asyncio.sleep(0)
    waiting = await planner.plans.plan(REQUEST, "waiter", use_cache=False)
    assert waiting.metadata.source == "fallback"
    assert waiting.metadata.attempts == 0
    assert any(w.detail.startswith("saturated") for w in waiting.metadata.warnings)
    release.set()
    assert (await holder).metadata.source == "llm"
    assert chat_route.call_count == 1


def two_models(first: httpx.Response | type[Exception]) -> object:
    """The chat endpoint: model "a" fails as given, model "b" answers with a good plan."""

    def respond(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["model"] != "a":
            return answer(good_plan())
        if isinstance(first, httpx.Response):
            return first
        raise first("no answer", request=request)

    return respond


async def test_a_long_retry_after_moves_on_to_the_next_model(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = two_models(httpx.Response(429, headers={"retry-after": "60"}, json={}))
    planner = make_service(fake_clock, model={"name": "a", "fallback_models": ["b"]})
    response = await planner.plans.plan(REQUEST, "r", use_cache=False)
    assert response.metadata.source == "llm"
    assert response.metadata.model == "b"
    assert models_called(chat_route) == ["a", "b"]
    assert fake_clock.sleeps == []  # no wait that the deadline could not hold


async def test_a_model_that_times_out_hands_over_to_the_next(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = two_models(httpx.ReadTimeout)
    planner = make_service(fake_clock, model={"name": "a", "fallback_models": ["b"]})
    response = await planner.plans.plan(REQUEST, "r", use_cache=False)
    assert response.metadata.model == "b"
    assert models_called(chat_route) == ["a", "b"]


async def test_each_call_keeps_time_for_the_next_model_and_the_fallback(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = two_models(httpx.Response(401, json={}))
    planner = make_service(fake_clock, model={"name": "a", "fallback_models": ["b"]})
    await planner.plans.plan(REQUEST, "r", use_cache=False)
    timeouts = [call.request.extensions["timeout"]["read"] for call in chat_route.calls]
    # Deadline 10 s: "a" may take all but the next model's 3 s and the fallback's 0.1 s;
    # "b", the last model, all but the fallback's share.
    assert timeouts == [pytest.approx(6.9), pytest.approx(9.9)]
