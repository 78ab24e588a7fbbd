"""A frozen Redis against the request deadline: answer times of every endpoint, over real HTTP.

    .venv/bin/python benchmarks/frozen_store.py [--timeout 2] [--socket-timeout 0.5]

Starts a redis-server and the service (`python -m planner_arm serve`, rule-based planner, so
the store is the only slow part) on free loopback ports with TIMEOUT_SECONDS=--timeout, makes
one plan, then freezes Redis with SIGSTOP (it keeps its socket and answers nothing) and times
POST /plan (with an Idempotency-Key), /replan and /plan/expand (by the plan sent back), GET
/plan/{id} and /health, twice each. It also times one store command on the frozen Redis
through the store the service builds, against `store.socket_timeout_seconds`. Prints each
figure next to the bound (deadline + 0.5 s; the socket timeout for one command).
Requires redis-server on PATH (Debian package `redis-server`). Everything started is stopped
on the way out (SIGCONT first).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpx

HOST = "127.0.0.1"
GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(check: Any, seconds: float = 30.0) -> None:
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        try:
            if check():
                return
        except (OSError, httpx.HTTPError):
            pass
        time.sleep(0.05)
    raise RuntimeError("did not start in time")


@contextmanager
def redis_server(directory: str) -> Iterator[subprocess.Popen[bytes]]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    args = [binary, "--port", str(port), "--bind", HOST, "--save", "", "--dir", directory]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process.port = port  # type: ignore[attr-defined]
    try:
        wait_until(lambda: socket.create_connection((HOST, port), timeout=0.5).close() is None)
        yield process
    finally:
        process.send_signal(signal.SIGCONT)
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def service(env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "planner_arm", "serve", "--host", HOST, "--port", str(port)]
    process = subprocess.Popen(
        command,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://{HOST}:{port}"
    try:
        wait_until(lambda: httpx.get(f"{base}/ready", timeout=1).status_code == 200)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=20)


def timed(client: httpx.Client, method: str, path: str, **kwargs: Any) -> tuple[int, float]:
    started = time.monotonic()
    response = client.request(method, path, **kwargs)
    return response.status_code, time.monotonic() - started


async def one_command(url: str, socket_timeout: float, redis: subprocess.Popen[bytes]) -> float:
    """Seconds one store command takes on the frozen Redis, through the store as built."""
    from planner_arm.clock import Clock
    from planner_arm.config import load_settings
    from planner_arm.errors import StoreUnavailable
    from planner_arm.service.wiring import build_store

    settings = load_settings(store={"url": url, "socket_timeout_seconds": socket_timeout})
    store = build_store(settings, Clock())
    await store.ping()
    redis.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        with suppress(StoreUnavailable):
            await store.ping()
        return time.monotonic() - started
    finally:
        redis.send_signal(signal.SIGCONT)
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=2.0, help="TIMEOUT_SECONDS")
    parser.add_argument("--socket-timeout", type=float, default=0.5)
    args = parser.parse_args()
    bound = args.timeout + 0.5
    with tempfile.TemporaryDirectory() as directory, redis_server(directory) as redis:
        url = f"redis://{HOST}:{redis.port}/0"  # type: ignore[attr-defined]
        took = asyncio.run(one_command(url, args.socket_timeout, redis))
        print(f"one command, frozen Redis: {took:.2f} s (socket timeout {args.socket_timeout} s)")
        env = {
            "TIMEOUT_SECONDS": str(args.timeout),
            "PLANNER_STORE_URL": url,
            "PLANNER_STORE__SOCKET_TIMEOUT_SECONDS": str(args.socket_timeout),
            "LOG_LEVEL": "ERROR",
        }
        with service(env) as base, httpx.Client(base_url=base, timeout=60) as client:
            first = client.post("/plan", json=GOAL).json()
            redis.send_signal(signal.SIGSTOP)
            calls = [
                (
                    "POST /plan",
                    "POST",
                    "/plan",
                    {"json": GOAL, "headers": {"Idempotency-Key": "k"}},
                ),
                (
                    "POST /replan",
                    "POST",
                    "/replan",
                    {"json": {**GOAL, "previous": first, "reason": "the tests changed"}},
                ),
                (
                    "POST /plan/expand",
                    "POST",
                    "/plan/expand",
                    {"json": {**GOAL, "previous": first, "step": 2}},
                ),
                ("GET /plan/{id}", "GET", f"/plan/{first['plan_id']}", {}),
                ("GET /health", "GET", "/health", {}),
            ]
            worst = 0.0
            for round_number in (1, 2):
                for name, method, path, kwargs in calls:
                    status, seconds = timed(client, method, path, **kwargs)
                    worst = max(worst, seconds)
                    print(f"round {round_number}  {name:<18} {status}  {seconds:5.2f} s")
            verdict = "PASS" if worst <= bound else "MISS"
            print(
                f"slowest answer {worst:.2f} s, bound {bound:.2f} s (deadline + 0.5 s): {verdict}"
            )


if __name__ == "__main__":
    main()
