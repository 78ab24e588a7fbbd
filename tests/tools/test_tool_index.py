"""The search index over a tool set: a set that shares its tools' words with sets built before
ranks them exactly as a set built alone."""

from __future__ import annotations

from planner_arm.config import ArmSpec
from planner_arm.plan.weighed import BuildLane, SharedWork, ToolMemo
from planner_arm.tools.index import ToolIndex
from support.tool_sets import made_up_tools

GOALS = [" ".join(tool["description"].split()[:4]) for tool in made_up_tools("goals", 6)]


def specs(name: str, count: int) -> list[ArmSpec]:
    return [ArmSpec(**tool) for tool in made_up_tools(name, count)]


def test_tools_shared_with_sets_built_before_rank_as_in_a_set_built_alone() -> None:
    shared = SharedWork(ToolMemo(8 * 1024 * 1024), BuildLane(1))
    first, second = specs("first", 30), specs("second", 30)
    ToolIndex(first, shared=shared).scores("warm the memo")
    mixed = first[:15] + second[:15]
    alone, sharing = ToolIndex(mixed), ToolIndex(mixed, shared=shared)
    for goal in GOALS:
        assert sharing.scores(goal) == alone.scores(goal)
        assert sharing.shortlist(goal, 5) == alone.shortlist(goal, 5)
    assert len(shared.memo) == 45  # the first set's 30 tools, and the 15 new ones


def test_the_index_is_built_on_first_use() -> None:
    index = ToolIndex(specs("lazy", 10))
    assert not index.retriever.built
    index.named_in("nothing is built for a name")
    assert not index.retriever.built
    index.ranked(GOALS[0])
    assert index.retriever.built


def test_the_bm25_library_is_loaded_only_when_an_index_is_needed() -> None:
    """Plans over the configured arms (no worked examples) never load the BM25 library or
    numpy under it; the first request that brings its own tools does."""
    import json
    import subprocess
    import sys

    script = """
import asyncio, json, sys
sys.path.insert(0, "tests")
from support.factories import make_service
from support.tool_sets import tool_request
from planner_arm.plan.schemas import PlanRequest

def loaded():
    return [name in sys.modules for name in ("bm25s", "numpy")]

async def main():
    runtime = make_service(llm=False)
    plain = await runtime.plans.plan(PlanRequest(goal="Fix the login bug"), "r1", use_cache=False)
    before = loaded()
    tools = await runtime.plans.plan(tool_request("own", 8), "r2", use_cache=False)
    print(json.dumps([len(plain.plan) > 0, before, len(tools.plan) > 0, loaded()]))

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [True, [False, False], True, [True, True]]
