"""POST /plan as a stream (in process, the model's SSE mocked with respx): the events, their
order, the reset rule, and the JSON answer's promises kept."""

from __future__ import annotations

import json
from typing import Any

import httpx
import respx

from support.app import FakeClock, answer, good_plan, make_settings, running_app
from support.invariants import assert_valid_plan
from support.sse import check_reset_rule, parse_sse, pieces_of, streamed

SSE = {"accept": "text/event-stream"}
GOAL = {"goal": "Fix authentication bug and add tests"}


def model_answer(plan: dict[str, Any]) -> respx.MockResponse:
    return streamed(pieces_of(json.dumps(plan)))


async def stream_events(client: Any, body: dict[str, Any], **headers: str) -> list[Any]:
    response = await client.post("/plan", json=body, headers={**SSE, **headers})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.text)


async def test_the_steps_stream_then_the_plan_the_json_endpoint_gives(
    chat_route: respx.Route,
) -> None:
    chat_route.side_effect = [model_answer(good_plan()), answer(good_plan())]
    async with running_app(make_settings()) as client:
        events = await stream_events(client, GOAL)
        plain = (await client.post("/plan", json={**GOAL, "options": {"use_cache": False}})).json()
    assert [name for name, _ in events] == ["plan.started", "step", "step", "step", "step", "plan"]
    plan = check_reset_rule(events)
    assert_valid_plan(plan)
    assert events[0][1]["model"] == "gpt-3.5-turbo"
    assert events[0][1]["request_id"] == plan["request_id"]
    assert plan["metadata"]["source"] == "llm"
    assert plan["estimated_cost"]["prompt_tokens"] == 12  # the usage came in the stream
    ignored = {"plan_id", "request_id", "metadata", "estimated_cost", "confidence"}
    assert {k: v for k, v in plan.items() if k not in ignored} == {
        k: v for k, v in plain.items() if k not in ignored
    }
    assert json.loads(chat_route.calls[0].request.content)["stream"] is True


async def test_a_step_the_final_checks_change_is_withdrawn_and_sent_again(
    chat_route: respx.Route,
) -> None:
    plan = good_plan()
    plan["plan"][3]["depends_on"] = [3]  # the judge must also wait for step 2
    chat_route.return_value = model_answer(plan)
    async with running_app(make_settings()) as client:
        events = await stream_events(client, GOAL)
    names = [name for name, _ in events]
    assert names == ["plan.started", *["step"] * 4, "plan.reset", *["step"] * 4, "plan"]
    assert events[5][1] == {"reason": "final_checks"}
    final = check_reset_rule(events)
    assert final["plan"][3]["depends_on"] == [2, 3]


async def test_a_step_that_depends_on_a_later_one_holds_back_the_rest(
    chat_route: respx.Route,
) -> None:
    plan = good_plan()
    plan["plan"][1]["depends_on"] = [3]  # a forward reference: the final plan reorders
    chat_route.return_value = model_answer(plan)
    async with running_app(make_settings()) as client:
        events = await stream_events(client, GOAL)
    names = [name for name, _ in events]
    # Step 1 went out early; nothing after the held step did until the final plan.
    assert names[:2] == ["plan.started", "step"]
    check_reset_rule(events)


async def test_a_repair_prompt_withdraws_what_the_first_answer_sent(
    chat_route: respx.Route,
) -> None:
    bad = good_plan()
    bad["plan"] = bad["plan"][:1]  # one step: too few, the model is asked again
    chat_route.side_effect = [model_answer(bad), model_answer(good_plan())]
    async with running_app(make_settings()) as client:
        events = await stream_events(client, GOAL)
    names = [name for name, _ in events]
    assert names == ["plan.started", "step", "plan.reset", *["step"] * 4, "plan"]
    assert events[2][1] == {"reason": "repair"}
    assert check_reset_rule(events)["metadata"]["attempts"] == 2


async def test_a_cache_hit_streams_all_its_steps_at_once(chat_route: respx.Route) -> None:
    chat_route.return_value = model_answer(good_plan())
    async with running_app(make_settings()) as client:
        first = check_reset_rule(await stream_events(client, GOAL))
        events = await stream_events(client, GOAL)
    again = check_reset_rule(events)
    assert again["metadata"]["source"] == "cache"
    assert again["metadata"]["cached_plan_id"] == first["plan_id"]
    assert [name for name, _ in events] == ["plan.started", *["step"] * 4, "plan"]
    assert chat_route.call_count == 1


async def test_an_idempotent_replay_streams_the_stored_plan(chat_route: respx.Route) -> None:
    chat_route.return_value = model_answer(good_plan())
    key = {"Idempotency-Key": "order-42"}
    async with running_app(make_settings()) as client:
        first = check_reset_rule(await stream_events(client, GOAL, **key))
        replay = check_reset_rule(await stream_events(client, GOAL, **key))
        json_replay = (await client.post("/plan", json=GOAL, headers=key)).json()
    assert replay["plan_id"] == first["plan_id"] == json_replay["plan_id"]
    assert chat_route.call_count == 1


async def test_ndjson_carries_the_same_events_one_per_line(chat_route: respx.Route) -> None:
    chat_route.return_value = model_answer(good_plan())
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json=GOAL, headers={"accept": "application/x-ndjson"})
    assert response.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert all(set(line) == {"event", "data"} for line in lines)
    check_reset_rule([(line["event"], line["data"]) for line in lines])


async def test_a_bad_request_is_a_json_error_not_a_stream(chat_route: respx.Route) -> None:
    async with running_app(make_settings()) as client:
        bad_body = await client.post("/plan", json={"goal": ""}, headers=SSE)
        no_plan_fits = await client.post(
            "/plan", json={**GOAL, "budget": {"max_steps": 2}}, headers=SSE
        )
    assert bad_body.status_code == 422
    assert bad_body.json()["error"] == "invalid_request"
    assert no_plan_fits.status_code == 422
    assert no_plan_fits.json()["error"] == "budget_exceeded"
    assert chat_route.call_count == 0


async def test_an_error_after_the_start_ends_the_stream_with_the_error_body(
    chat_route: respx.Route,
) -> None:
    def refusal(request: Any) -> Any:  # streamed when asked for a stream, as a server does
        text = "I cannot help with that."
        wants_stream = json.loads(request.content).get("stream")
        return streamed(pieces_of(text)) if wants_stream else answer(text)

    chat_route.side_effect = refusal
    settings = make_settings(fallback={"enabled": False})
    async with running_app(settings) as client:
        response = await client.post("/plan", json=GOAL, headers=SSE)
        plain = await client.post("/plan", json=GOAL)
    events = parse_sse(response.text)
    assert [name for name, _ in events] == ["plan.started", "error"]
    error = events[-1][1]
    assert set(error) >= {"error", "detail", "request_id"}
    assert error["error"] == plain.json()["error"] == "invalid_plan"
    assert plain.status_code == 502


async def test_without_a_model_the_rule_based_steps_stream(chat_route: respx.Route) -> None:
    async with running_app(make_settings(llm=False)) as client:
        events = await stream_events(client, GOAL)
        metrics = (await client.get("/metrics")).text
    plan = check_reset_rule(events)
    assert plan["metadata"]["source"] == "fallback"
    assert events[0][1]["model"] is None
    assert 'planner_streams_total{outcome="plan"} 1.0' in metrics
    assert "planner_stream_first_step_seconds_count 1.0" in metrics


async def test_a_replan_streams_its_steps_and_refuses_a_bad_request_as_json() -> None:
    async with running_app(make_settings(llm=False)) as client:
        first = (await client.post("/plan", json=GOAL)).json()
        body = {
            **GOAL,
            "plan_id": first["plan_id"],
            "step_states": {"1": {"status": "completed"}, "2": {"status": "failed"}},
        }
        response = await client.post("/replan", json=body, headers=SSE)
        unknown = await client.post("/replan", json={**body, "plan_id": "nope"}, headers=SSE)
        stored = (await client.get(f"/plan/{parse_sse(response.text)[-1][1]['plan_id']}")).json()
    plan = check_reset_rule(parse_sse(response.text))
    assert plan["parent_plan_id"] == first["plan_id"]
    assert plan == stored
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "plan_not_found"


async def test_a_held_answer_that_fails_the_checks_resets_for_repair(
    chat_route: respx.Route,
) -> None:
    bad = good_plan()
    bad["plan"][1]["depends_on"] = [3]  # held after step 1: the rest is not sent early
    filler = [{**bad["plan"][0], "step": n, "depends_on": [1]} for n in range(5, 12)]
    bad["plan"] += filler  # 11 steps: over max_steps, so the whole answer is sent back
    chat_route.side_effect = [model_answer(bad), model_answer(good_plan())]
    async with running_app(make_settings()) as client:
        events = await stream_events(client, GOAL)
    names = [name for name, _ in events]
    reset = names.index("plan.reset")
    assert names[:reset] == ["plan.started", "step"]
    # The answer was whole and read: it failed the checks, the stream did not break.
    assert events[reset][1] == {"reason": "repair"}
    assert check_reset_rule(events)["metadata"]["source"] == "llm"


async def test_a_fallback_after_a_broken_stream_announces_itself(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    text = json.dumps(good_plan())
    broken = streamed(pieces_of(text[: len(text) // 2]), finish=None)  # ends mid-answer
    chat_route.side_effect = [broken, httpx.ConnectError("down"), httpx.ConnectError("down")]
    settings = make_settings(model={"fallback_models": []})
    async with running_app(settings, fake_clock) as client:  # retry waits on the fake clock
        events = await stream_events(client, GOAL)
    names = [name for name, _ in events]
    plan = check_reset_rule(events)
    assert plan["metadata"]["source"] == "fallback"
    last_reset = max(i for i, name in enumerate(names) if name == "plan.reset")
    assert events[last_reset][1] == {"reason": "fallback"}
    # Every step after the last reset is the fallback plan's.
    assert [data for name, data in events[last_reset:] if name == "step"] == plan["plan"]


async def test_a_streamed_plan_over_the_requests_tools_checks_each_step_with_them(
    chat_route: respx.Route,
) -> None:
    tools = [
        {"id": "search_movie", "description": "Search movies by title and return their ids"},
        {"id": "GetMovieCredit", "description": "Get the cast and crew of a movie by its id"},
    ]
    plan = {
        "plan": [
            {"step": 1, "tool": "search_movie", "action": "find the id", "depends_on": []},
            {"step": 2, "tool": "get_movie_credit", "action": "list the cast", "depends_on": [1]},
        ]
    }
    chat_route.return_value = model_answer(plan)
    body = {"goal": "Find the movie Titanic, then list its cast", "tools": tools}
    async with running_app(make_settings()) as client:
        events = await stream_events(client, body)
    # Each step went out as written, its tool read among the request's: none withdrawn.
    assert [name for name, _ in events] == ["plan.started", "step", "step", "plan"]
    assert [data["required_arm"] for name, data in events if name == "step"] == [
        "search_movie",
        "GetMovieCredit",
    ]
