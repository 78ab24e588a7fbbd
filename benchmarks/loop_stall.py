"""The event loop's longest stall while large plans are replanned, expanded, specialized and
validated, and how long /health waits meanwhile.

    .venv/bin/python benchmarks/loop_stall.py [--steps 300] [--rounds 5] [--served]

Runs the app in this process with no model (every answer by rule, the CPU-heaviest path),
behind httpx's ASGI transport; with `--served`, the service as its own process
(`python -m planner_arm serve`), asked over loopback, with /health probed from another thread,
as an orchestrator and a liveness probe would, with the idle figure beside.

A plan of `--steps` steps (a fan of chains ending in a judge step that reads every chain's
end) is sent inline, half of it completed, to /replan (with and without `specialize`),
/plan/expand, /plan/specialize (the judge step) and /plan/validate (the first 200 steps, its
cap), once unmeasured and then `--rounds` times. In process, a ticker on the loop records how
late each 1 ms sleep wakes and /health is asked every 10 ms. Prints, per endpoint, the median
request time and the longest stall (or the slowest /health answer).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from planner_arm.api.app import create_app
from planner_arm.api.server import tune_garbage_collector
from planner_arm.config import load_settings

CHAINS = 6


def big_plan(steps: int) -> dict[str, Any]:
    """A /plan answer of `steps` steps: chains of coder/executor steps and a last judge step
    that depends on each chain's end (so its rule-based input reads many outputs)."""
    arms = ["retriever", "coder", "executor"]
    plan = []
    for number in range(1, steps):
        previous = number - CHAINS
        plan.append(
            {
                "step": number,
                "action": f"Change module {number} of the billing service and run its tests",
                "required_arm": arms[number % len(arms)],
                "acceptance_criteria": [f"Module {number} changed", "Its tests pass"],
                "depends_on": [previous] if previous >= 1 else [],
                "estimated_cost_tier": 2,
                "estimated_duration_seconds": 30,
            }
        )
    ends = list(range(max(1, steps - CHAINS), steps))
    plan.append(
        {
            "step": steps,
            "action": "Check every change against the goal",
            "required_arm": "judge",
            "acceptance_criteria": ["Every change meets the goal"],
            "depends_on": ends,
            "estimated_cost_tier": 1,
            "estimated_duration_seconds": 20,
        }
    )
    return {
        "plan": plan,
        "rationale": "A large plan for the loop-stall benchmark.",
        "confidence": 0.5,
        "total_estimated_duration": 30 * steps,
        "complexity_score": 0.9,
        "plan_id": uuid.uuid4().hex,
        "request_id": "loop-stall",
        "parallel_stages": [],
        "critical_path_duration": 30 * steps,
        "estimated_cost": {"llm_usd": 0, "prompt_tokens": 0, "completion_tokens": 0},
        "metadata": {
            "source": "fallback",
            "model": None,
            "attempts": 0,
            "repairs": [],
            "warnings": [],
            "latency_ms": 1.0,
            "prompt_version": "bench",
        },
    }


def requests(steps: int) -> dict[str, tuple[str, dict[str, Any]]]:
    goal = "Refactor the billing service module by module"
    plan = big_plan(steps)
    # Completed steps must have completed dependencies: the first half of each chain.
    done = {str(n): {"status": "completed"} for n in range(1, steps // 2 + 1)}
    return {
        "replan": ("/replan", {"goal": goal, "previous": plan, "step_states": done,
                               "reason": "the tests must not touch the database"}),
        "replan+specialize": ("/replan", {"goal": goal, "previous": plan, "step_states": done,
                                          "reason": "requirements changed", "specialize": True}),
        "expand": ("/plan/expand", {"goal": goal, "previous": plan, "step": steps - 1}),
        "specialize": ("/plan/specialize", {"previous": plan, "step": steps, "goal": goal}),
        "validate": ("/plan/validate", {"plan": plan["plan"][:200], "fix": True}),
    }  # fmt: skip


class Ticker:
    """How late the loop wakes a task that sleeps 1 ms at a time."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._stop = False

    def reset(self) -> None:
        self.longest = 0.0

    async def run(self) -> None:
        while not self._stop:
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            self.longest = max(self.longest, time.perf_counter() - start - 0.001)

    def stop(self) -> None:
        self._stop = True


async def main(steps: int, rounds: int) -> None:
    # A 300-step plan sent whole is larger than the default body limit (64 KiB), and than
    # the default expansion.max_plan_steps (50).
    # Every request is the one anonymous caller's: no request rate, whatever --rounds asks.
    settings = load_settings(
        server={"max_body_bytes": 1024 * 1024},
        expansion={"max_plan_steps": 500},
        tenants={"requests_per_second": 0},
    )
    app = create_app(settings)
    ticker = Ticker()
    health_worst = 0.0
    async with app.router.lifespan_context(app) as state:

        async def served(scope: Any, receive: Any, send: Any) -> None:
            # As a server does: each request's scope carries the state the lifespan yielded.
            if scope["type"] == "http":
                scope = {**scope, "state": dict(state or {})}
            await app(scope, receive, send)

        tune_garbage_collector()  # as the server does once it has started
        transport = httpx.ASGITransport(app=served)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            stop_health = asyncio.Event()

            async def probe_health() -> None:
                nonlocal health_worst
                while not stop_health.is_set():
                    start = time.perf_counter()
                    (await client.get("/health")).raise_for_status()
                    health_worst = max(health_worst, time.perf_counter() - start)
                    await asyncio.sleep(0.01)

            tick = asyncio.create_task(ticker.run())
            prober = asyncio.create_task(probe_health())
            print(f"{steps}-step plan, {rounds} rounds each, no model")
            print(f"{'endpoint':<20}{'status':>8}{'median ms':>12}{'longest stall ms':>18}")
            for name, (path, body) in requests(steps).items():
                # One request first, not counted: the first of a kind imports what it uses.
                await client.post(path, json=body, timeout=60)
                times, stalls, status = [], [], 0
                for _ in range(rounds):
                    ticker.reset()
                    start = time.perf_counter()
                    answer = await client.post(path, json=body, timeout=60)
                    times.append(time.perf_counter() - start)
                    await asyncio.sleep(0.005)
                    stalls.append(ticker.longest)
                    status = answer.status_code
                if status >= 400:
                    print(f"  {name}: {answer.text[:300]}")
                median = statistics.median(times) * 1000
                print(f"{name:<20}{status:>8}{median:>12.1f}{max(stalls) * 1000:>18.1f}")
            stop_health.set()
            await prober
            ticker.stop()
            await tick
    print(f"slowest /health answer meanwhile: {health_worst * 1000:.1f} ms")


CONFIG = (
    "server:\n  max_body_bytes: 1048576\nexpansion:\n  max_plan_steps: 500\n"
    "tenants:\n  requests_per_second: 0\n"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_service(port: int, config: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PLANNER_CONFIG"] = str(config)
    argv = [sys.executable, "-m", "planner_arm", "serve", "--port", str(port)]
    process = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if "Application startup complete" in line:
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process
    raise RuntimeError("the service did not start")


def served(steps: int, rounds: int) -> None:
    """The slowest /health answer while each kind of request runs, over loopback."""
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "planner-config.yaml"
        config.write_text(CONFIG)
        port = _free_port()
        service = _start_service(port, config)
        url = f"http://127.0.0.1:{port}"
        worst = [0.0]
        stop = threading.Event()

        def probe() -> None:
            with httpx.Client(base_url=url, timeout=10) as prober:
                while not stop.is_set():
                    start = time.perf_counter()
                    prober.get("/health").raise_for_status()
                    worst[0] = max(worst[0], time.perf_counter() - start)
                    time.sleep(0.01)

        try:
            with httpx.Client(base_url=url, timeout=60) as client:
                thread = threading.Thread(target=probe, daemon=True)
                thread.start()
                print(f"{steps}-step plan, {rounds} rounds each, no model, served on loopback")
                print(f"{'endpoint':<20}{'status':>8}{'median ms':>12}{'slowest /health ms':>20}")
                time.sleep(1.0)  # no other request: what the machine itself costs /health
                print(f"{'(idle)':<20}{'':>8}{'':>12}{worst[0] * 1000:>20.1f}")
                for name, (path, body) in requests(steps).items():
                    client.post(path, json=body)  # not counted: the first imports its code
                    times, status = [], 0
                    worst[0] = 0.0
                    for _ in range(rounds):
                        start = time.perf_counter()
                        status = client.post(path, json=body).status_code
                        times.append(time.perf_counter() - start)
                    time.sleep(0.02)
                    median = statistics.median(times) * 1000
                    print(f"{name:<20}{status:>8}{median:>12.1f}{worst[0] * 1000:>20.1f}")
                stop.set()
                thread.join()
        finally:
            service.terminate()
            service.wait(timeout=15)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--served", action="store_true", help="run the service as a process")
    args = parser.parse_args()
    if args.served:
        served(args.steps, args.rounds)
    else:
        asyncio.run(main(args.steps, args.rounds))
