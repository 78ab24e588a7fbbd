"""What the server tunes in the interpreter once it has started."""

from __future__ import annotations

import sys

import pytest

from planner_arm.api.server import tune_thread_switching


def test_the_event_loop_waits_at_most_a_millisecond_for_a_worker_thread() -> None:
    before = sys.getswitchinterval()
    try:
        tune_thread_switching()
        assert sys.getswitchinterval() == pytest.approx(0.001)
    finally:
        sys.setswitchinterval(before)
