"""The service as a real process: on a free loopback port, started, spoken to and stopped.

`serving(env)` is the short way, for fixtures (`yield from serving({...})`); `start_service`
and `stop_services` are for tests that run several processes or signal them themselves;
`fault_services(stub)` starts warmed-up services with the fault scenarios' settings.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from support.invariants import assert_valid_plan
from support.stub_model import StubLLM

STARTUP_SECONDS = 30
TIMEOUT = 1.5  # TIMEOUT_SECONDS, the request deadline, for every fault scenario but the last two
# What a loaded 2-core machine may add to a request's time: bounds are the configured times
# plus this, never tight constants.
MARGIN = 1.0
GOAL = "Fix authentication bug and add tests"

# `serve(warm=True, **env) -> base URL`: one more service process for the test.
Serve = Callable[..., str]


def free_port() -> int:
    """A loopback port free when asked (another process may still take it first)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop_services(processes: list[subprocess.Popen[str]]) -> None:
    """SIGTERM to every service at once (their drains overlap), then wait; kill a straggler."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start_service(
    port: int,
    env: dict[str, str],
    *,
    base_env: dict[str, str] | None = None,
    startup_log: list[str] | None = None,
) -> tuple[subprocess.Popen[str], queue.Queue[str], threading.Thread]:
    """`python -m planner_arm serve` on `port` with `env` added to `base_env` (by default this
    environment); returns once it logged its startup, with the queue of its log lines and the
    thread filling it. The lines up to the startup are appended to `startup_log`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "planner_arm", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env={**(os.environ if base_env is None else base_env), **env},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stderr is not None
    stream = process.stderr
    reader = threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True)
    reader.start()
    seen = [] if startup_log is None else startup_log
    while True:
        try:
            line = lines.get(timeout=STARTUP_SECONDS)
        except queue.Empty:
            process.kill()
            raise AssertionError(f"service did not start; it said: {seen}") from None
        seen.append(line)
        if "Application startup complete" in line:
            return process, lines, reader


def serving(env: dict[str, str], timeout: float = 10) -> Iterator[httpx.Client]:
    """A service process with `env`, and a client of it; stopped when the client is done.
    For fixtures: `yield from serving({...})`."""
    port = free_port()
    process, _, reader = start_service(port, env)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=timeout) as http:
            yield http
    finally:
        stop_services([process])
        reader.join(timeout=5)


def wait_for_line(lines: queue.Queue[str], text: str, seen: list[str]) -> None:
    """Reads the service's log lines until one contains `text` (event-driven, no sleep)."""
    while True:
        try:
            line = lines.get(timeout=10)
        except queue.Empty:
            raise AssertionError(f"never logged {text!r}; logged: {seen}") from None
        seen.append(line)
        if text in line:
            return


def timed_plan(
    client: httpx.Client,
    goal: str = GOAL,
    *,
    headers: dict[str, str] | None = None,
    **fields: Any,
) -> tuple[dict[str, Any], float]:
    """POST /plan; asserts a 200 with a valid plan and returns the body and the seconds taken."""
    started = time.monotonic()
    response = client.post("/plan", json={"goal": goal, **fields}, headers=headers)
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert_valid_plan(body)
    return body, elapsed


@contextmanager
def fault_services(stub: StubLLM) -> Iterator[Serve]:
    """`serve(**env)` starts the service against `stub` with the fault scenarios' settings
    and `env` on top; every one started is stopped on the way out.

    Unless `warm=False`, the service first makes one plan with the stub's default reply and
    the stub is reset after it: script the stub after `serve()`.
    """
    processes = []

    def start(*, warm: bool = True, **env: str) -> str:
        port = free_port()
        settings = {
            "OPENAI_BASE_URL": stub.base_url,
            "OPENAI_API_KEY": "sk-test",
            "LOG_FORMAT": "json",
            "TIMEOUT_SECONDS": str(TIMEOUT),
            "PLANNER_RETRY__BACKOFF_BASE_SECONDS": "0.05",
            "PLANNER_RETRY__BACKOFF_MAX_SECONDS": "0.1",
            "DRAIN_SECONDS": "0",
            # The scenarios are one anonymous caller, some faster than its request rate
            # (tests/api/test_exposure.py holds that rate).
            "PLANNER_TENANTS__REQUESTS_PER_SECOND": "0",
            **env,
        }
        process, _lines, _reader = start_service(port, settings)
        processes.append(process)
        url = f"http://127.0.0.1:{port}"
        if warm:
            warm_up(url)
        return url

    def warm_up(url: str) -> None:
        # One good plan first, so that a scenario's timings measure its fault and not the
        # first request's one-off costs (test_the_first_plan_after_start_up_is_quick
        # measures those); then the stub forgets it.
        with httpx.Client(base_url=url, timeout=10) as client:
            body, _ = timed_plan(client, "Warm up the service before the scenario")
        assert body["metadata"]["source"] == "llm"
        stub.reset()

    try:
        yield start
    finally:
        stop_services(processes)
