"""The CPU one POST /plan costs the service, in process, the model answered without a network.

    .venv/bin/python benchmarks/request_cpu.py [--requests N] [--profile FILE]

Starts the app with its lifespan (a model configured; its answer, the stub model's 4-step
plan, comes from an in-process transport under the real openai client), sends 300 plan
requests to warm it, then N more (2,000), each goal new so the cache never answers, one after
another, and prints the process's CPU time per request (the client's share included: the same
for any code this is run against). `--profile FILE` also writes a cProfile of the N requests,
to read with `python -m pstats FILE`. Running the same script against an older checkout
(`PYTHONPATH=<checkout>/src`) compares the two on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from stub_model import completion  # the stub model's answer, not its server

from planner_arm.api.app import create_app
from planner_arm.config import load_settings

WARM_UP = 300
ANSWER = json.dumps(completion()).encode()


def _answer(_: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=ANSWER, headers={"content-type": "application/json"})


async def cpu_per_request(requests: int, profile: Path | None) -> float:
    """Seconds of this process's CPU per plan request, over `requests` after the warm-up."""
    # As variables, which every version of the settings reads: the same script measures an
    # older checkout too.
    os.environ.update(
        OPENAI_BASE_URL="http://model.invalid/v1",
        OPENAI_API_KEY="sk-cpu",
        PLANNER_TENANTS__REQUESTS_PER_SECOND="0",
        LOG_LEVEL="WARNING",
    )
    settings = load_settings()
    model = httpx.AsyncClient(transport=httpx.MockTransport(_answer))
    app = create_app(settings, http_client=model)
    numbers = itertools.count()
    async with app.router.lifespan_context(app) as state:

        async def served(scope: Any, receive: Any, send: Any) -> None:
            await app({**scope, "state": dict(state or {})}, receive, send)

        transport = httpx.ASGITransport(app=served)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:

            async def one() -> None:
                goal = f"Fix bug #{next(numbers)} in the billing service"
                body = {"goal": goal, "constraints": ["Do not modify the database schema"]}
                answer = await client.post("/plan", json=body)
                if answer.status_code != 200 or answer.json()["metadata"]["source"] != "llm":
                    raise RuntimeError(f"not a model plan: {answer.status_code} {answer.text}")

            for _ in range(WARM_UP):
                await one()
            gc.collect()
            profiler = cProfile.Profile() if profile is not None else None
            if profiler is not None:
                profiler.enable()
            started = time.process_time()
            for _ in range(requests):
                await one()
            spent = time.process_time() - started
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(profile)
    await model.aclose()
    return spent / requests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the measured requests")
    args = parser.parse_args(argv)
    seconds = asyncio.run(cpu_per_request(args.requests, args.profile))
    note = " (under cProfile)" if args.profile is not None else ""
    print(f"CPU per POST /plan, in process, client included: {seconds * 1e6:.0f} µs{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
