"""Exactly one answer per Idempotency-Key: a first caller whose claim was lost while it planned
answers what the store holds for the key, never its own plan; a working caller renews its
claim, so a slow request keeps it; a keyed caller that goes away still leaves its answer for
the retry. respx on the model; memory and a real redis-server."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable

import httpx
import pytest
import redis
import respx
from structlog.testing import capture_logs

from planner_arm.errors import IdempotencyInProgress
from planner_arm.plan.schemas import PlanRequest
from planner_arm.service.idempotency import CLAIM_MARGIN_SECONDS, key_hash
from support.app import FakeClock, answer, good_plan
from support.factories import make_service
from support.redis_server import RedisServer
from support.sse import pieces_of, streamed

REQUEST = PlanRequest(goal="Fix authentication bug and add tests")


def first_call_held(
    *, streamed_answer: bool = False
) -> tuple[Callable[[httpx.Request], object], asyncio.Event, asyncio.Event]:
    """The model: its first call waits for `release`, every later call answers at once (as a
    stream of chunks when `streamed_answer`)."""
    arrived, release = asyncio.Event(), asyncio.Event()
    calls = 0

    async def respond(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            arrived.set()
            await release.wait()
        if streamed_answer:
            return streamed(pieces_of(json.dumps(good_plan())))
        return answer(good_plan())

    return respond, arrived, release


async def test_a_first_caller_whose_claim_was_flushed_answers_the_keys_answer(
    chat_route: respx.Route, redis_server: RedisServer, redis_url: str
) -> None:
    respond, arrived, release = first_call_held()
    chat_route.side_effect = respond
    first, retry = make_service(store={"url": redis_url}), make_service(store={"url": redis_url})
    slow = asyncio.create_task(
        first.plans.plan(REQUEST, "first", use_cache=False, idempotency_key="k-1")
    )
    await arrived.wait()
    with redis.Redis(port=redis_server.port, socket_timeout=5) as raw:
        raw.flushall()  # Redis restarted empty: the first caller's claim is gone
    retried = await retry.plans.plan(REQUEST, "retry", use_cache=False, idempotency_key="k-1")
    release.set()
    with capture_logs() as logs:
        answered = await slow
    later = await retry.plans.plan(REQUEST, "later", use_cache=False, idempotency_key="k-1")
    assert chat_route.call_count == 2
    # One answer for the key: the one the store holds, whoever asks.
    assert answered.plan_id == retried.plan_id == later.plan_id
    assert answered.request_id == "first"
    lost = [line for line in logs if line["event"] == "idempotency_claim_lost"]
    assert lost == [
        {
            "event": "idempotency_claim_lost",
            "log_level": "warning",
            "key_hash": key_hash("k-1"),
            "answered": "stored_answer",
        }
    ]
    for service in (first, retry):
        await service.aclose()


async def test_a_slow_first_caller_renews_its_claim_and_keeps_the_key(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    respond, arrived, release = first_call_held()
    chat_route.side_effect = respond
    service = make_service(fake_clock)
    asleep: asyncio.Queue[float] = asyncio.Queue()
    wake: asyncio.Queue[None] = asyncio.Queue()

    async def renew_sleep(seconds: float) -> None:
        await asleep.put(seconds)
        await wake.get()

    idempotency = service.plans.idempotency
    idempotency.renew_sleep = renew_sleep
    lease = service.settings.planning.timeout_seconds + CLAIM_MARGIN_SECONDS
    slow = asyncio.create_task(
        service.plans.plan(REQUEST, "slow", use_cache=False, idempotency_key="k-1")
    )
    await arrived.wait()
    # Bounded waits: without a renewal task nothing ever sleeps, and the test fails, not hangs.
    assert await asyncio.wait_for(asleep.get(), 10) == pytest.approx(lease / 3)
    fake_clock.time += lease * 2 / 3
    wake.put_nowait(None)  # one renewal
    await asyncio.wait_for(asleep.get(), 10)
    fake_clock.time += lease * 2 / 3  # past the first lease, within the renewed one
    retry = asyncio.create_task(
        service.plans.plan(REQUEST, "retry", use_cache=False, idempotency_key="k-1")
    )
    for _ in range(20):
        await asyncio.sleep(0)
    release.set()
    answered, retried = await slow, await retry
    assert chat_route.call_count == 1  # the retry waited for the first caller's answer
    assert retried.plan_id == answered.plan_id


async def test_a_keyed_caller_that_goes_away_still_leaves_the_answer_for_its_retry(
    chat_route: respx.Route,
) -> None:
    respond, arrived, release = first_call_held(streamed_answer=True)
    chat_route.side_effect = respond
    service = make_service()
    plans = service.plans
    stream = plans.stream(uuid.uuid4().hex, "gone")
    gone = asyncio.create_task(
        plans.plan(REQUEST, "gone", use_cache=True, idempotency_key="k-1", listener=stream)
    )
    await arrived.wait()
    gone.cancel()  # the streamed answer's client disconnected
    with pytest.raises(asyncio.CancelledError):
        await gone
    release.set()
    retried = await plans.plan(REQUEST, "retry", use_cache=True, idempotency_key="k-1")
    assert chat_route.call_count == 1
    assert retried.metadata.source == "llm"
    assert retried.request_id == "retry"


@pytest.mark.parametrize("store_kind", ["memory", "redis"])
async def test_a_request_waiting_on_anothers_key_answers_within_its_own_deadline(
    chat_route: respx.Route, fake_clock: FakeClock, request: pytest.FixtureRequest, store_kind: str
) -> None:
    respond, arrived, release = first_call_held()
    chat_route.side_effect = respond
    store = {"url": request.getfixturevalue("redis_url")} if store_kind == "redis" else {}
    timeout = 2.0  # the first one's lease is timeout + 5 s: 7 s
    first = make_service(fake_clock, store=store, planning={"timeout_seconds": timeout})
    waiter = first
    if store_kind == "redis":  # another replica on the same Redis
        waiter = make_service(fake_clock, store=store, planning={"timeout_seconds": timeout})
    slow = asyncio.create_task(
        first.plans.plan(REQUEST, "first", use_cache=False, idempotency_key="k-1")
    )
    await arrived.wait()
    started = fake_clock.time
    waiting = asyncio.create_task(
        waiter.plans.plan(REQUEST, "waiting", use_cache=False, idempotency_key="k-1")
    )
    for _ in range(50):
        await asyncio.sleep(0)
    assert not waiting.done()  # it waits for the first one's answer
    fake_clock.time += timeout + 0.3  # past its own deadline; far from the first one's lease
    with pytest.raises(IdempotencyInProgress) as in_progress:
        await asyncio.wait_for(waiting, 5)  # bounded: a waiter on the lease fails, not hangs
    assert fake_clock.time - started < timeout + 1.5
    release.set()
    answered = await slow
    assert in_progress.value.http_status == 409
    assert in_progress.value.retry_after >= 1
    retried = await waiter.plans.plan(REQUEST, "retry", use_cache=False, idempotency_key="k-1")
    assert retried.plan_id == answered.plan_id
    assert chat_route.call_count == 1
