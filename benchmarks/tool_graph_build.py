"""What the rule-based tool planner's tool graph costs to build, to keep and to plan with.

    .venv/bin/python benchmarks/tool_graph_build.py [--tools 500] [--examples 10000]
        [--rounds 3] [--plans 200]

Makes a synthetic tool set at the limits (`--tools`, 500: a search, a get-by-id, an update
and a delete tool per entity, with ids in their descriptions) and `--examples` worked
examples over it (2 to 5 steps each, one in a hundred at the limit of 50 steps), then prints:
the time to build the graph (`ToolGraph.build`, median of `--rounds`), the memory the built
graph holds (tracemalloc, what stays allocated after the build) and its peak during the
build, and the median time of one rule-based tool plan over it (`--plans` goals, the BM25
index built before timing).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from planner_arm.config import ArmSpec, WorkedExample
from planner_arm.tools.graph import ToolGraph
from planner_arm.tools.index import tool_resolver
from planner_arm.tools.planner import ToolPlanner

NOUNS = (
    "customer", "order", "invoice", "ticket", "shipment", "refund", "product", "movie", "person",
    "collection", "flight", "hotel", "train", "table", "service", "backup", "report", "document",
    "meeting", "room", "alarm", "account", "card", "payment", "review",
)  # fmt: skip
VERBS = ("search", "get", "update", "delete")


def tool_set(size: int) -> list[ArmSpec]:
    """`size` tools: per entity (a noun with a number), a search, a get, an update, a delete."""
    specs: list[ArmSpec] = []
    for number in range(size):
        noun = f"{NOUNS[number // len(VERBS) % len(NOUNS)]}{number // (len(VERBS) * len(NOUNS))}"
        verb = VERBS[number % len(VERBS)]
        text = {
            "search": f"Search {noun}s by name and return their ids",
            "get": f"Get the details of a {noun} by its {noun} id",
            "update": f"Update a {noun}, given the {noun} id",
            "delete": f"Delete a {noun} by its id",
        }[verb]
        specs.append(ArmSpec(id=f"{verb}_{noun}", description=text))
    return specs


def examples(specs: list[ArmSpec], count: int, seed: int) -> list[WorkedExample]:
    rng = random.Random(seed)
    ids = [spec.id for spec in specs]
    made = []
    for number in range(count):
        length = 50 if number % 100 == 0 else rng.randint(2, 5)
        tools = [rng.choice(ids) for _ in range(length)]
        steps = [
            {"tool": tool, "depends_on": [position] if position else []}
            for position, tool in enumerate(tools)
        ]
        made.append(WorkedExample.model_validate({"request": f"request {number}", "steps": steps}))
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=500)
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plans", type=int, default=200)
    options = parser.parse_args(argv)
    specs = tool_set(options.tools)
    worked = examples(specs, options.examples, seed=1)
    steps = sum(len(example.steps) for example in worked)
    print(f"{len(specs)} tools, {len(worked)} worked examples ({steps} steps)")

    seconds = []
    for _ in range(options.rounds):
        started = time.perf_counter()
        ToolGraph.build(specs, worked)
        seconds.append(time.perf_counter() - started)
    print(f"build: median {statistics.median(seconds) * 1000:.0f} ms over {options.rounds}")

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    graph = ToolGraph.build(specs, worked)
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    mib = 2**20
    print(f"memory: {(held - before) / mib:.1f} MiB held by the graph, peak {peak / mib:.1f} MiB")

    resolver = tool_resolver(specs)
    planner = ToolPlanner(resolver, graph)
    rng = random.Random(2)
    goals = [
        f"Find the {rng.choice(NOUNS)}0 called Ada and delete the {rng.choice(NOUNS)}0 42"
        for _ in range(options.plans)
    ]
    planner.plan(goals[0], max_steps=10)  # the BM25 index is built on first use
    timings = []
    for goal in goals:
        started = time.perf_counter()
        planner.plan(goal, max_steps=10)
        timings.append(time.perf_counter() - started)
    print(f"one plan: median {statistics.median(timings) * 1000:.1f} ms over {len(goals)} goals")
    return 0


if __name__ == "__main__":
    sys.exit(main())
