"""CallTime: how long one model call may take within the request's deadline."""

from __future__ import annotations

import pytest

from planner_arm.llm.chain import CallTime

CALL_TIME = CallTime(call_timeout=30.0, next_model_reserve=3.0, fallback_reserve=0.1)


@pytest.mark.parametrize(
    ("remaining", "models_after", "expected"),
    [
        (10.0, 0, 9.9),  # the last model: all but the fallback's share
        (10.0, 1, 6.9),  # the next model keeps 3 s
        (1.5, 1, 0.7),  # ...but never more than half of what is left
        (100.0, 2, 30.0),  # the call's own timeout
        (0.05, 0, 0.0),  # nothing left
    ],
)
def test_a_call_gets_its_timeout_less_what_is_kept_back(
    remaining: float, models_after: int, expected: float
) -> None:
    assert CALL_TIME.for_call(remaining, models_after) == pytest.approx(expected)


def test_a_wait_fits_only_if_the_call_after_it_still_has_time() -> None:
    assert CALL_TIME.wait_fits(1.0, 10.0, 0)
    assert not CALL_TIME.wait_fits(60.0, 10.0, 0)  # a long Retry-After
    assert CALL_TIME.wait_fits(7.0, 10.0, 0)
    assert not CALL_TIME.wait_fits(7.0, 10.0, 1)  # it would eat the next model's time
