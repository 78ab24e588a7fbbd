"""What reading a request's tools costs in each shape, and a tool step's input check.

    .venv/bin/python benchmarks/tool_shapes.py [--tools N] [--rounds N]

Prints the median and p99 time of reading `--tools` tools (500, the most a request may bring)
as the request's `tools` (shape detection, validation, the tools as arms), for our shape,
OpenAI's, MCP's (as tools/list gives them) and Anthropic's; then of checking one tool step's
arguments against its input schema with jsonschema, and of the rule-based arguments. Not part
of the test suite's pass/fail.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from planner_arm.plan.schemas import PlanRequest, PlanStep
from planner_arm.plan.tool_inputs import check_tool_input, tool_schema
from planner_arm.tools.arguments import rule_tool_input

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "movie_id": {"type": "string"},
        "language": {"type": "string", "enum": ["en", "fr", "de"]},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
    },
    "required": ["movie_id", "limit"],
}


def tools_in(shape: str, count: int) -> list[dict[str, Any]]:
    """`count` tools in one shape, each with a description and an input schema."""
    tools = []
    for n in range(count):
        name, text = f"tool_{n}", f"Get the record {n} of a movie by its movie id"
        tools.append(
            {
                "ours": {"id": name, "description": text, "input_schema": SCHEMA},
                "openai": {
                    "type": "function",
                    "function": {"name": name, "description": text, "parameters": SCHEMA},
                },
                "mcp": {
                    "name": name,
                    "title": f"Tool {n}",
                    "description": text,
                    "inputSchema": SCHEMA,
                    "annotations": {"readOnlyHint": True},
                },
                "anthropic": {"name": name, "description": text, "input_schema": SCHEMA},
            }[shape]
        )
    return tools


def timed(fn: Callable[[], object], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def show(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    median = statistics.median(ordered)
    print(f"{name:<48} median {median * 1000:8.3f} ms   p99 {p99 * 1000:8.3f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tools", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=50)
    options = parser.parse_args(argv)
    print(f"reading {options.tools} tools as a request's `tools` ({options.rounds} rounds)")
    for shape in ("ours", "openai", "mcp", "anthropic"):
        body = {"goal": "List the cast of movie 603", "tools": tools_in(shape, options.tools)}

        def read(body: dict[str, Any] = body) -> object:
            tool_set = PlanRequest.model_validate(body).tool_set
            if tool_set is None or len(tool_set[1]) != options.tools:
                raise SystemExit("the tools were not all read")
            return tool_set

        show(shape, timed(read, options.rounds))
    step = PlanStep(step=2, action="List the cast of movie 603", required_arm="tool_1",
                    acceptance_criteria=["done"], depends_on=[1])  # fmt: skip
    arguments = {"movie_id": "{{steps.1.output}}", "language": "en", "limit": 5}
    checked = tool_schema(SCHEMA)
    assert checked is not None
    rounds = options.rounds * 20
    print(f"\na tool step's input ({rounds} rounds)")
    show(
        "jsonschema check of the arguments",
        timed(lambda: check_tool_input(checked, arguments, frozenset({1})), rounds),
    )
    show(
        "rule-based arguments",
        timed(lambda: rule_tool_input(step, checked, "goal", {"language": "fr"}), rounds),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
