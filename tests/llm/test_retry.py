from __future__ import annotations

import random

import pytest

from planner_arm.clock import Deadline
from planner_arm.config import RetrySettings
from planner_arm.errors import (
    LLMError,
    LLMRateLimited,
    LLMRejected,
    LLMTransientError,
    LLMUnsupportedFormat,
)
from planner_arm.llm.retry import Next, RetryPolicy
from support.app import FakeClock


def policy(clock: FakeClock, **settings: float) -> RetryPolicy:
    return RetryPolicy(RetrySettings(**settings), clock.as_clock(), random.Random(1))


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (LLMTransientError("t", code="timeout"), Next.SAME_MODEL),
        (LLMTransientError("c", code="connection"), Next.SAME_MODEL),
        (LLMTransientError("5xx", code="server_error", status=503), Next.SAME_MODEL),
        (LLMRateLimited("429", retry_after=2.0), Next.SAME_MODEL),
        (LLMUnsupportedFormat("400 response_format", status=400), Next.SAME_MODEL),
        (LLMRejected("401", code="auth_failed", status=401), Next.NEXT_MODEL),
        (LLMRejected("403", code="forbidden", status=403), Next.NEXT_MODEL),
        (LLMRejected("404", code="model_not_found", status=404), Next.NEXT_MODEL),
        (LLMRejected("400", code="context_length_exceeded", status=400), Next.NEXT_MODEL),
        (LLMError("?"), Next.NEXT_MODEL),
    ],
)
def test_each_error_class_has_its_decision(
    fake_clock: FakeClock, error: LLMError, expected: Next
) -> None:
    assert policy(fake_clock).decide(error, 1).next is expected


def test_rate_limit_waits_what_the_server_says(fake_clock: FakeClock) -> None:
    decision = policy(fake_clock).decide(LLMRateLimited("429", retry_after=1.25), 1)
    assert decision.wait == 1.25
    assert decision.reason == "rate_limited"


def test_rate_limit_without_header_backs_off(fake_clock: FakeClock) -> None:
    decision = policy(fake_clock, jitter=0).decide(LLMRateLimited("429"), 2)
    assert decision.wait == 0.5


def test_backoff_grows_exponentially_and_is_capped(fake_clock: FakeClock) -> None:
    p = policy(fake_clock, backoff_base_seconds=0.25, backoff_max_seconds=1.5, jitter=0)
    assert [p.backoff(n) for n in (1, 2, 3, 4, 5)] == [0.25, 0.5, 1.0, 1.5, 1.5]


def test_jitter_stays_within_its_share(fake_clock: FakeClock) -> None:
    p = policy(fake_clock, backoff_base_seconds=1.0, backoff_max_seconds=10, jitter=0.5)
    waits = [p.backoff(1) for _ in range(200)]
    assert all(0.5 <= w <= 1.0 for w in waits)
    assert len(set(waits)) > 100  # actually random, not one fixed value


def test_deadline_counts_down_on_the_injected_clock(fake_clock: FakeClock) -> None:
    deadline = Deadline(10.0, fake_clock.as_clock())
    assert deadline.remaining() == 10.0
    fake_clock.time += 4
    assert deadline.remaining() == 6.0
    fake_clock.time += 7
    assert deadline.remaining() == 0.0
    assert deadline.expired


async def test_wait_sleeps_when_the_retry_still_fits(fake_clock: FakeClock) -> None:
    deadline = Deadline(10.0, fake_clock.as_clock())
    assert await policy(fake_clock).wait(2.0, deadline)
    assert fake_clock.sleeps == [2.0]
    assert deadline.remaining() == 8.0


async def test_wait_refuses_a_wait_longer_than_the_deadline(fake_clock: FakeClock) -> None:
    deadline = Deadline(3.0, fake_clock.as_clock())
    assert not await policy(fake_clock).wait(30.0, deadline)
    assert fake_clock.sleeps == []  # the fallback answers now instead of after 30 s
