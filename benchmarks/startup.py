"""Start-up benchmark: from process start to /ready 200, and the first plan requests after it.

    .venv/bin/python benchmarks/startup.py [--runs N] [--requests K] [--no-model] [--imports]

Starts the zero-latency stub model (tests/support/stub_model.py) once, then the service
(`python -m planner_arm serve`, a model configured at the stub) N times. Each run measures the
seconds from the process's start to its first 200 from GET /ready, then sends K plan requests
one after another (each goal new, so the cache never answers) and times each. It prints the
median, lowest and highest ready time against the target; when the first plan was answered,
counted from the process's start (with a model, the first request waits for the SDK, which
loads once the service is ready); and the second request against the tenth (the second must be
no slower: whatever must be warm was warmed by then).
`--imports` also prints the modules that cost most to import (`python -X importtime`).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from load import HOST, STUB, Fleet, child_env, start_server, start_stub

MAX_READY_MEDIAN_SECONDS = 1.0
# The second request may be a little slower than the tenth from noise alone; more is a cold path.
FIRST_REQUEST_SLACK = 1.5
SERVE = [sys.executable, "-m", "planner_arm", "serve"]


def plan_latency_ms(port: int, n: int) -> float:
    """One POST /plan on a fresh connection, as a new caller would send it."""
    body = json.dumps({"goal": f"Fix bug #{n} in the billing service", "request_id": f"s{n}"})
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    started = time.perf_counter()
    try:
        connection.request("POST", "/plan", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
    finally:
        connection.close()
    elapsed = (time.perf_counter() - started) * 1000
    if response.status != 200:
        raise RuntimeError(f"/plan answered {response.status}: {answer}")
    return elapsed


def one_run(
    fleet: Fleet, env: dict[str, str], run: int, requests: int
) -> tuple[float, list[float]]:
    service, port, ready = start_server(fleet, f"service-{run}", SERVE, env)
    try:
        latencies = [plan_latency_ms(port, run * 1000 + n) for n in range(requests)]
    finally:
        service.stop()
    return ready, latencies


def heaviest_imports(limit: int = 12) -> list[tuple[float, str]]:
    """The packages the serve path imports, by cumulative milliseconds: each package's line
    in `-X importtime` (a package is imported once) with whatever it pulled in first."""
    code = "import planner_arm.cli, planner_arm.api.app, planner_arm.api.server"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        name = name.strip()
        if cumulative.strip().isdigit() and "." not in name and not name.startswith("_"):
            rows.append((int(cumulative) / 1000, name))
    return sorted(rows, reverse=True)[:limit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--no-model", action="store_true", help="serve the rule-based planner")
    parser.add_argument("--imports", action="store_true", help="print the heaviest imports")
    options = parser.parse_args()

    runs = measure(options.runs, options.requests, with_model=not options.no_model)
    model = "no model (rule-based)" if options.no_model else "a model configured (stub)"
    print(f"start-up, {options.runs} runs, {model}")
    for run, (ready, latencies) in enumerate(runs, 1):
        shown = " ".join(f"{ms:.0f}" for ms in latencies)
        print(f"  run {run}: ready {ready:.3f} s; plan requests (ms): {shown}")
    failed = not ready_in_time([ready for ready, _ in runs])
    if options.requests >= 1:
        first_plan_answered(runs)
    if options.requests >= 10:
        failed = not second_request_warm(runs) or failed
    if options.imports:
        print("heaviest imports of the serve path (cumulative ms, one process):")
        for milliseconds, name in heaviest_imports():
            print(f"  {milliseconds:8.1f}  {name}")
    return 1 if failed else 0


def measure(runs: int, requests: int, *, with_model: bool) -> list[tuple[float, list[float]]]:
    """Each run's ready time and plan request latencies; every process stopped after."""
    with tempfile.TemporaryDirectory(prefix="planner-startup-") as log_dir:
        fleet = Fleet(Path(log_dir))
        try:
            env = child_env(LOG_LEVEL="WARNING")
            if with_model:
                _, stub_url = start_stub(fleet, STUB)
                env = child_env(OPENAI_BASE_URL=stub_url, OPENAI_API_KEY="sk-bench")
                env["LOG_LEVEL"] = "WARNING"
            return [one_run(fleet, env, run, requests) for run in range(runs)]
        finally:
            fleet.stop_all()


def ready_in_time(readies: list[float]) -> bool:
    median = statistics.median(readies)
    verdict = "PASS" if median < MAX_READY_MEDIAN_SECONDS else "MISS"
    print(
        f"ready: median {median:.3f} s (lowest {min(readies):.3f}, highest {max(readies):.3f})"
        f"   target < {MAX_READY_MEDIAN_SECONDS} s   {verdict}"
    )
    return verdict == "PASS"


def first_plan_answered(runs: list[tuple[float, list[float]]]) -> None:
    """When the first plan was answered, from the process's start: ready, then the request."""
    first = statistics.median(latencies[0] for _, latencies in runs)
    answered = statistics.median(ready + latencies[0] / 1000 for ready, latencies in runs)
    print(f"first plan request: median {first:.1f} ms; answered {answered:.3f} s after start")


def second_request_warm(runs: list[tuple[float, list[float]]]) -> bool:
    """Whether the second plan request is no slower than the tenth (noise allowed for)."""
    second = statistics.median(latencies[1] for _, latencies in runs)
    tenth = statistics.median(latencies[9] for _, latencies in runs)
    warm = second <= tenth * FIRST_REQUEST_SLACK
    print(
        f"second plan request: median {second:.1f} ms; tenth: {tenth:.1f} ms"
        f"   target second <= {FIRST_REQUEST_SLACK:g} x tenth   {'PASS' if warm else 'MISS'}"
    )
    return warm


if __name__ == "__main__":
    sys.exit(main())
