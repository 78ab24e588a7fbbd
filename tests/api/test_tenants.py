"""Tenants: with several API keys, each caller sees only its own plans, idempotency keys and
cache entries; another's plan id answers exactly like an unknown one; keys of one named tenant
share its plans; each caller has its own request rate and cap of stored plan bytes; no key
reaches /metrics or the logs. In process, on memory and on a real redis-server."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import respx
from anyio import to_thread

from planner_arm.strategies.toolbox import build_toolbox
from support.app import FakeClock, answer, good_plan, make_settings, running_app
from support.tool_sets import WatchedLane, made_up_tools

GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}
KEY_A = "key-a-0123456789abcdef"
KEY_B = "key-b-0123456789abcdef"
A = {"X-API-Key": KEY_A}
B = {"Authorization": f"Bearer {KEY_B}"}
# A Redis store with keys needs one; the same for every replica.
SECRET = "tenants-test-principal-secret"


@pytest.fixture(params=["memory", "redis"])
def store_section(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "redis":
        return {"url": request.getfixturevalue("redis_url")}
    return {}


def replan_body(plan_id: str) -> dict[str, Any]:
    return {
        **GOAL,
        "plan_id": plan_id,
        "step_states": {
            "1": {"status": "completed", "output": "auth/login.py:42"},
            "2": {"status": "failed", "error": "the patch breaks the session tests"},
        },
    }


def without_ids(body: dict[str, Any], plan_id: str) -> dict[str, Any]:
    """An error body with what differs between two requests taken out."""
    return {
        k: (v.replace(plan_id, "<id>") if isinstance(v, str) else v)
        for k, v in body.items()
        if k != "request_id"
    }


async def test_another_callers_plan_answers_like_an_unknown_one(
    store_section: dict[str, Any],
) -> None:
    settings = make_settings(
        llm=False,
        auth={"principal_secret": SECRET, "api_keys": [KEY_A, KEY_B]},
        store=store_section,
    )
    async with running_app(settings) as client:
        mine = (await client.post("/plan", json=GOAL, headers=A)).json()
        plan_id = mine["plan_id"]
        unknown = "0" * len(plan_id)
        calls = {
            "get": lambda pid: client.get(f"/plan/{pid}", headers=B),
            "replan": lambda pid: client.post("/replan", json=replan_body(pid), headers=B),
            "expand": lambda pid: client.post(
                "/plan/expand", json={**GOAL, "plan_id": pid, "step": 2}, headers=B
            ),
            "specialize": lambda pid: client.post(
                "/plan/specialize", json={"plan_id": pid, "step": 1}, headers=B
            ),
        }
        for name, call in calls.items():
            theirs, missing = await call(plan_id), await call(unknown)
            assert theirs.status_code == missing.status_code == 404, name
            assert theirs.json()["error"] == "plan_not_found"
            assert without_ids(theirs.json(), plan_id) == without_ids(missing.json(), unknown)
            assert plan_id not in str(theirs.json()["detail"]).replace(plan_id, "", 1)
        # The owner still has it, and may replan it.
        assert (await client.get(f"/plan/{plan_id}", headers=A)).status_code == 200
        replanned = await client.post("/replan", json=replan_body(plan_id), headers=A)
        assert replanned.status_code == 200, replanned.text


async def test_an_idempotency_key_is_each_callers_own(
    store_section: dict[str, Any],
) -> None:
    settings = make_settings(
        llm=False,
        auth={"principal_secret": SECRET, "api_keys": [KEY_A, KEY_B]},
        store=store_section,
    )
    key = {"Idempotency-Key": "order-42"}
    async with running_app(settings) as client:
        first = await client.post("/plan", json=GOAL, headers={**A, **key})
        # B uses the same key for another body: not A's key, so neither refused nor A's plan.
        other_goal = {"goal": "Write the release notes for version 2"}
        theirs = await client.post("/plan", json=other_goal, headers={**B, **key})
        again = await client.post("/plan", json=GOAL, headers={**B, **key})
        replayed = await client.post("/plan", json=GOAL, headers={**A, **key})
    assert first.status_code == theirs.status_code == replayed.status_code == 200
    assert theirs.json()["plan_id"] != first.json()["plan_id"]
    assert again.status_code == 422  # B's own key, now with another body than B sent
    assert again.json()["error"] == "idempotency_key_reused"
    assert replayed.json()["plan_id"] == first.json()["plan_id"]


async def test_a_cache_hit_never_hands_one_caller_anothers_plan(
    chat_route: respx.Route, store_section: dict[str, Any]
) -> None:
    chat_route.side_effect = lambda request: answer(good_plan())
    settings = make_settings(
        auth={"principal_secret": SECRET, "api_keys": [KEY_A, KEY_B]}, store=store_section
    )
    async with running_app(settings) as client:
        mine = (await client.post("/plan", json=GOAL, headers=A)).json()
        theirs = (await client.post("/plan", json=GOAL, headers=B)).json()
        repeat = (await client.post("/plan", json=GOAL, headers=A)).json()
    assert chat_route.call_count == 2  # B's request was planned for B
    assert theirs["metadata"]["source"] == "llm"
    assert theirs["metadata"]["cached_plan_id"] is None
    assert repeat["metadata"]["cached_plan_id"] == mine["plan_id"]  # A's own cache still works


async def test_keys_of_one_tenant_share_its_plans(store_section: dict[str, Any]) -> None:
    old, new = "acme:old-key-0123456789", "acme:new-key-0123456789"
    settings = make_settings(
        llm=False,
        auth={"principal_secret": SECRET, "api_keys": [old, new, KEY_B]},
        store=store_section,
    )
    async with running_app(settings) as client:
        planned = await client.post("/plan", json=GOAL, headers={"X-API-Key": "old-key-0123456789"})
        plan_id = planned.json()["plan_id"]
        rotated = await client.get(f"/plan/{plan_id}", headers={"X-API-Key": "new-key-0123456789"})
        other = await client.get(f"/plan/{plan_id}", headers=B)
        whole_entry = await client.get(f"/plan/{plan_id}", headers={"X-API-Key": old})
    assert planned.status_code == 200
    assert rotated.status_code == 200
    assert rotated.json()["plan_id"] == plan_id
    assert other.status_code == 404
    assert whole_entry.status_code == 401  # the key is what follows the tenant's name


async def test_each_caller_has_its_own_request_rate(fake_clock: FakeClock) -> None:
    settings = make_settings(
        llm=False,
        auth={"principal_secret": SECRET, "api_keys": [KEY_A, KEY_B]},
        tenants={"requests_per_second": 1, "burst": 2},
    )
    async with running_app(settings, fake_clock) as client:
        passed = [(await client.post("/plan", json=GOAL, headers=A)).status_code for _ in "ab"]
        refused = await client.post("/plan", json=GOAL, headers=A)
        other = await client.post("/plan", json=GOAL, headers=B)
        fake_clock.time += 1.0
        later = await client.post("/plan", json=GOAL, headers=A)
    assert passed == [200, 200]
    assert refused.status_code == 429
    assert refused.json()["error"] == "rate_limited"
    assert refused.headers["Retry-After"] == "1"
    assert other.status_code == 200  # B is not slowed by A
    assert later.status_code == 200


async def test_a_caller_past_its_cap_of_plan_bytes_is_refused(
    store_section: dict[str, Any],
) -> None:
    settings = make_settings(
        llm=False,
        auth={"principal_secret": SECRET, "api_keys": [KEY_A, KEY_B]},
        tenants={"max_plan_bytes": 12_000},
        store=store_section,
    )
    async with running_app(settings) as client:
        statuses = []
        for n in range(20):
            body = {"goal": f"Fix authentication bug number {n} and add tests"}
            response = await client.post("/plan", json=body, headers=A)
            statuses.append(response.status_code)
            if response.status_code == 429:
                break
        other = await client.post("/plan", json=GOAL, headers=B)
    assert statuses[0] == 200
    assert statuses[-1] == 429, statuses
    assert response.json()["error"] == "tenant_quota_exceeded"
    assert int(response.headers["Retry-After"]) > 80_000  # its first plan's TTL, a day
    assert other.status_code == 200


async def test_no_key_reaches_the_metrics_or_the_logs(
    store_section: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(
        llm=False,
        auth={"principal_secret": SECRET, "api_keys": [KEY_A, f"acme:{KEY_B}"]},
        tenants={"requests_per_second": 1, "burst": 1},
        store=store_section,
    )
    async with running_app(settings, FakeClock()) as client:
        await client.post("/plan", json=GOAL, headers=A)
        await client.post("/plan", json=GOAL, headers=A)  # rate limited
        await client.post("/plan", json=GOAL, headers={"X-API-Key": "wrong-key-0123"})
        await client.get("/plan/nope", headers=B)
        metrics = (await client.get("/metrics")).text
    logs = capsys.readouterr().err
    assert "rate_limited" in logs
    assert "plan_created" in logs
    text = metrics + logs
    for secret in (KEY_A, KEY_B, "wrong-key-0123"):
        assert secret not in text


async def test_two_flooding_callers_within_their_caps_leave_a_third_its_plans_and_keys(
    fake_clock: FakeClock,
) -> None:
    key_c = "key-c-0123456789abcdef"
    c = {"X-API-Key": key_c}
    settings = make_settings(
        llm=False,
        auth={"api_keys": [KEY_A, KEY_B, key_c]},
        # Each caller may hold two thirds of the process-wide bound of each kind.
        store={"max_bytes": 128 * 1024},
        tenants={"max_plan_bytes": 85 * 1024, "max_idempotency_bytes": 85 * 1024},
    )
    async with running_app(settings, fake_clock) as client:
        plan_ids, keyed = [], []
        for n in range(5):  # about 30 KB of plans: within a third of the bound
            body = {"goal": f"Migrate billing service number {n} to the new ledger"}
            plan_ids.append((await client.post("/plan", json=body, headers=c)).json()["plan_id"])
            headers = {**c, "Idempotency-Key": f"retry-{n}"}
            keyed.append((await client.post("/plan", json=body, headers=headers)).json())
        for n in range(150):  # within their rate (a request a second) and their caps
            fake_clock.time += 1
            for flooder in (A, B):
                body = {"goal": f"Audit the access logs of region {n} for anomalies"}
                headers = {**flooder, "Idempotency-Key": f"flood-{n}"}
                flooded = await client.post("/plan", json=body, headers=headers)
                assert flooded.status_code in (200, 429)
        found = [
            (await client.get(f"/plan/{plan_id}", headers=c)).status_code for plan_id in plan_ids
        ]
        replays = []
        for n in range(5):
            body = {"goal": f"Migrate billing service number {n} to the new ledger"}
            headers = {**c, "Idempotency-Key": f"retry-{n}"}
            replays.append((await client.post("/plan", json=body, headers=headers)).json())
    assert found == [200] * 5
    assert [r["plan_id"] for r in replays] == [k["plan_id"] for k in keyed]


async def test_a_caller_holding_its_model_slots_leaves_another_a_model_plan(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    release, both_held = asyncio.Event(), asyncio.Event()
    held = 0

    async def respond(request: httpx.Request) -> httpx.Response:
        nonlocal held
        if "slow tenant" in request.content.decode():
            held += 1
            if held == 2:
                both_held.set()
            await release.wait()
        return answer(good_plan())

    chat_route.side_effect = respond
    settings = make_settings(
        auth={"api_keys": [KEY_A, KEY_B]},
        connection={"max_in_flight": 3, "reserved_slots": 1, "queue_timeout_seconds": 0},
    )
    async with running_app(settings, fake_clock) as client:
        slow = [
            asyncio.create_task(
                client.post("/plan", json={"goal": f"Report {n} for the slow tenant"}, headers=A)
            )
            for n in range(3)
        ]
        await asyncio.wait_for(both_held.wait(), 10)  # A's two calls hold their slots
        other = await client.post("/plan", json=GOAL, headers=B)
        release.set()
        answers = [(await task).json() for task in slow]
    assert other.status_code == 200
    assert other.json()["metadata"]["source"] == "llm"  # not `saturated`
    sources = sorted(body["metadata"]["source"] for body in answers)
    assert sources == ["fallback", "llm", "llm"]  # A's third found no slot of its own


async def test_one_callers_requests_cut_off_by_the_deadline_leave_the_model_to_another(
    chat_route: respx.Route,
) -> None:
    async def respond(request: httpx.Request) -> httpx.Response:
        if "slow tenant" in request.content.decode():
            await asyncio.Event().wait()  # its requests are too much for the model in time
        return answer(good_plan())

    chat_route.side_effect = respond
    settings = make_settings(
        auth={"api_keys": [KEY_A, KEY_B]},
        planning={"timeout_seconds": 0.3},
        circuit={"consecutive_failures": 5},
    )
    async with running_app(settings) as client:
        for n in range(6):
            body = {"goal": f"Report {n} for the slow tenant"}
            slow = await client.post("/plan", json=body, headers=A)
            assert slow.json()["metadata"]["source"] == "fallback"
        other = await client.post("/plan", json=GOAL, headers=B)
        health = (await client.get("/health")).json()
    assert other.json()["metadata"]["source"] == "llm"
    assert health["circuits"] == {"gpt-3.5-turbo": "closed"}


def _is_build(work: Any) -> bool:
    return getattr(work, "func", None) is build_toolbox


async def test_a_caller_flooding_new_tool_sets_is_refused_before_its_body_is_read() -> None:
    lane = WatchedLane(gated=_is_build)
    settings = make_settings(
        llm=False,
        auth={"principal_secret": SECRET, "api_keys": [KEY_A, KEY_B]},
        tool_sets={"max_waiting_per_principal": 1, "max_builds": 2},
    )
    lane.close()
    async with running_app(settings, build_lane=lane) as client:
        first = asyncio.create_task(
            client.post("/plan", json={**GOAL, "tools": made_up_tools("a1", 8)}, headers=A)
        )
        await to_thread.run_sync(lane.entered.wait)
        # A's next set is not even valid: it is refused before its tools are read.
        flooded = await client.post("/plan", json={**GOAL, "tools": [{"id": ""}]}, headers=A)
        other = asyncio.create_task(
            client.post("/plan", json={**GOAL, "tools": made_up_tools("b1", 8)}, headers=B)
        )
        await to_thread.run_sync(lane.wait_until, lambda lane: sum(map(_is_build, lane.works)) == 2)
        lane.open()
        answered = await asyncio.gather(first, other)
    assert flooded.status_code == 429
    refused = flooded.json()
    assert refused["error"] == "tool_sets_busy"
    assert "1 of this caller's requests already wait" in refused["detail"]
    assert refused["request_id"]
    assert flooded.headers["Retry-After"] == "1"
    assert [response.status_code for response in answered] == [200, 200]
