"""What tool sets keep and share: the bytes an object holds, a part built once on first use,
the lane builds take, and the memo of per-tool work within its bytes."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from planner_arm.plan.weighed import BuildLane, Lazy, ToolMemo, content_key, deep_size


def test_the_bytes_an_object_holds_count_each_object_once_and_leave_out_the_shared() -> None:
    word = "x" * 1000
    shared = ["y" * 5000]
    held = {"a": [word, word], "b": shared}
    expected = (
        sys.getsizeof(held)
        + sys.getsizeof("a")
        + sys.getsizeof("b")
        + sys.getsizeof(held["a"])
        + sys.getsizeof(word)
    )
    assert deep_size(held, shared=[shared]) == expected
    assert deep_size(held) == expected + sys.getsizeof(shared) + sys.getsizeof(shared[0])


def test_a_numpy_arrays_buffer_is_in_its_bytes() -> None:
    assert deep_size([np.zeros(100_000, dtype=np.float32)]) > 400_000


def test_a_part_is_built_once_however_many_threads_ask_for_it_together() -> None:
    builds: list[int] = []
    start = threading.Barrier(4)

    def build() -> list[str]:
        builds.append(1)
        return ["built"] * 100

    part: Lazy[list[str]] = Lazy(build)
    assert not part.built
    assert part.weight == 0

    def ask() -> None:
        start.wait()
        part.get()

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert builds == [1]
    assert part.built
    assert part.weight == deep_size(part.get())


def test_the_lane_lets_in_only_its_width_and_its_own_thread_again() -> None:
    lane = BuildLane(1)
    inside = threading.Event()
    leave = threading.Event()
    order: list[str] = []

    def first() -> None:
        with lane.held(), lane.held():  # entered again by the thread in it
            order.append("first in")
            inside.set()
            leave.wait(timeout=10)
            order.append("first out")

    def second() -> None:
        inside.wait(timeout=10)
        lane.run(order.append, "second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    inside.wait(timeout=10)
    assert order == ["first in"]
    leave.set()
    for thread in threads:
        thread.join()
    assert order == ["first in", "first out", "second in"]


def test_the_memo_keeps_its_entries_within_its_bytes_least_recently_used_out() -> None:
    entries = [tuple(f"{tool}word{number:02}" for number in range(50)) for tool in range(4)]
    memo = ToolMemo(max_bytes=3 * deep_size(entries[0]))
    for tool in range(3):
        memo.keep(content_key(str(tool)), entries[tool])
    assert memo.found(content_key("0")) is not None  # used again: "1" is the oldest now
    memo.keep(content_key("3"), entries[3])
    assert memo.bytes <= memo.max_bytes
    assert memo.found(content_key("1")) is None
    assert memo.found(content_key("0")) is not None


@pytest.mark.parametrize("texts", [("a", "bc"), ("ab", "c")])
def test_a_content_key_tells_apart_the_texts_it_joins(texts: tuple[str, str]) -> None:
    assert content_key(*texts) != content_key("abc")
