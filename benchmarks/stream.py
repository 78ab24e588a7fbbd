"""Streamed plans: time to the first step and to the final plan, and the cutter's CPU per chunk.

Starts the stub model (tests/support/stub_model.py, in this process) writing its answer at a
fixed rate and the service (`python -m planner_arm serve`) against it, asks for plans as
server-sent events and prints the medians; then feeds answers of 1, 10 and 50 KB to the step
cutter in 16-character chunks and prints the CPU time per chunk (flat: no re-parse of the
buffer).

    .venv/bin/python benchmarks/stream.py [--requests 5] [--chunk-chars 16] [--interval 0.02]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from planner_arm.pipeline.stream_cut import StepCutter  # noqa: E402
from support.stub_model import PLAN, PLAN_JSON, Streamed, StubLLM  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_service(port: int, base_url: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "sk-bench",
        "TIMEOUT_SECONDS": "60",
    }
    argv = [sys.executable, "-m", "planner_arm", "serve", "--port", str(port)]
    process = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if "Application startup complete" in line:
            # Its log goes on being read, so a full pipe never stalls the service.
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process
    raise RuntimeError("the service did not start")


def _one_stream(url: str, goal: str) -> tuple[float, float]:
    body = {"goal": goal, "options": {"use_cache": False}}
    started = time.perf_counter()
    first_step = None
    with httpx.stream(
        "POST", f"{url}/plan", json=body, headers={"accept": "text/event-stream"}, timeout=60
    ) as response:
        for line in response.iter_lines():
            if line == "event: step" and first_step is None:
                first_step = time.perf_counter() - started
            if line == "event: plan":
                break
    assert first_step is not None
    return first_step, time.perf_counter() - started


def stream_timings(requests: int, chunk_chars: int, interval: float) -> None:
    model_seconds = (len(PLAN_JSON) // chunk_chars) * interval
    print(
        f"model: {len(PLAN_JSON)} characters, {chunk_chars} per chunk every {interval * 1000:.0f}"
        f" ms (about {model_seconds:.2f} s to write)"
    )
    with StubLLM(Streamed(chunk_chars=chunk_chars, interval=interval), record=False) as stub:
        port = _free_port()
        service = _start_service(port, stub.base_url)
        try:
            url = f"http://127.0.0.1:{port}"
            _one_stream(url, "Warm up the service")
            runs = [_one_stream(url, f"Fix authentication bug number {n}") for n in range(requests)]
        finally:
            service.terminate()
            service.wait(timeout=15)
    firsts, finals = zip(*runs, strict=True)
    print(f"time to first step: median {statistics.median(firsts):.3f} s")
    print(f"time to final plan: median {statistics.median(finals):.3f} s")


def _answer_of(size: int) -> str:
    steps: list[dict[str, object]] = []
    while len(json.dumps({"plan": steps})) < size:
        steps.append({**PLAN["plan"][1], "step": len(steps) + 1})
    return json.dumps({"plan": steps, "rationale": "r"})


def cutter_cpu(chunk_chars: int = 16) -> None:
    for size in (1_000, 10_000, 50_000):
        answer = _answer_of(size)
        pieces = [answer[i : i + chunk_chars] for i in range(0, len(answer), chunk_chars)]
        best = float("inf")
        for _ in range(5):
            cutter = StepCutter()
            started = time.process_time()
            steps = sum(len(cutter.feed(piece)) for piece in pieces)
            best = min(best, time.process_time() - started)
        per_chunk_us = best / len(pieces) * 1e6
        print(
            f"cutter, {size // 1000:>2} KB answer ({steps} steps, {len(pieces)} chunks): "
            f"{per_chunk_us:.2f} us CPU per chunk"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--chunk-chars", type=int, default=16)
    parser.add_argument("--interval", type=float, default=0.02)
    args = parser.parse_args()
    stream_timings(args.requests, args.chunk_chars, args.interval)
    cutter_cpu()


if __name__ == "__main__":
    main()
