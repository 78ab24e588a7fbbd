"""The memory store's bound, measured: the service's resident memory after N maximal requests.

    .venv/bin/python benchmarks/memory_bound.py [--requests 12000] [--concurrency 16]
        [--emoji] [--env NAME=VALUE ...]

Starts the zero-latency stub model (tests/support/stub_model.py) and the service (`python -m
planner_arm serve`, memory store, the built-in limits) on free loopback ports, then sends
`--requests` POST /plan, each as large as the limits allow (an 8,000-character goal, 24
constraints of 1,000 characters, a context as large as its own limit and the body limit let
it be), each with a new goal and its own Idempotency-Key, so every kind of record grows:
plans, idempotency records and the plan cache. Prints the service's RSS as it
goes and at the end, with the bytes of RSS per request, and the verdict against the
Deployment's memory limit (k8s/deployment.yaml: 512 Mi) with a quarter of it kept free.
`--emoji` puts one emoji in each goal: the same bytes but three, so the same flood should
take the same memory (a record kept as a Python `str` took four bytes for each of its
characters then). `--env` passes settings to the service (`--env PLANNER_STORE__MAX_BYTES=...`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "tests" / "support" / "stub_model.py"
HOST = "127.0.0.1"
LIMIT_MIB = 512
# Kept free under the limit: the allocator's slack, a burst of requests in flight.
HEADROOM = 0.25


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def largest_body(
    n: int, max_body: int = 64 * 1024, max_context: int = 32 * 1024, emoji: bool = False
) -> dict[str, object]:
    mark = "\N{GRINNING FACE} " if emoji else ""
    goal = (
        f"{mark}Request {n}: migrate the billing service to the new ledger "
        + "and verify it " * 600
    )
    body: dict[str, object] = {
        "goal": goal[:8000],
        "constraints": [f"Constraint {c} of request {n}: " + "x" * 940 for c in range(24)],
        "context": {"notes": ""},
    }
    room = max_body - len(httpx.Request("POST", "/", json=body).content) - 64
    body["context"] = {"notes": "n" * min(room, max_context - 32)}
    return body


def start(command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


async def drive(base: str, pid: int, requests: int, concurrency: int, emoji: bool) -> int:
    """Sends the requests; returns how many were not answered 200."""
    sent = 0
    failures: Counter[str] = Counter()
    lock = asyncio.Lock()
    checkpoints = {requests * k // 6 for k in range(1, 7)}
    started = time.monotonic()

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal sent, failures
        while True:
            async with lock:
                if sent >= requests:
                    return
                sent += 1
                n = sent
            response = await client.post(
                "/plan",
                json=largest_body(n, emoji=emoji),
                headers={"Idempotency-Key": f"bench-{n}"},
            )
            if response.status_code != 200:
                failures[f"{response.status_code} {response.json().get('error')}"] += 1
            if n in checkpoints:
                took = time.monotonic() - started
                print(f"{n:>7} requests  RSS {rss_mib(pid):7.1f} MiB  ({took:.0f} s)", flush=True)

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    if failures:
        print(f"not answered 200: {dict(failures)}")
    return sum(failures.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=12_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--emoji", action="store_true", help="one emoji in each request's goal")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the service")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    stub = start([sys.executable, str(STUB), "--port", str(free_port())], {})
    service: subprocess.Popen[str] | None = None
    try:
        assert stub.stdout is not None
        stub_url = stub.stdout.readline().strip().removeprefix("ready ").strip()
        port = free_port()
        env = {
            "OPENAI_BASE_URL": stub_url,
            "OPENAI_API_KEY": "sk-bench",
            "LOG_LEVEL": "ERROR",
            **extra,
        }
        command = [sys.executable, "-m", "planner_arm", "serve", "--host", HOST]
        service = start([*command, "--port", str(port)], env)
        base = f"http://{HOST}:{port}"
        for _ in range(600):
            try:
                if httpx.get(f"{base}/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        before = rss_mib(service.pid)
        text = ", one emoji in each" if args.emoji else ""
        print(f"idle RSS {before:.1f} MiB; {args.requests} requests of ~64 KiB each{text}")
        refused = asyncio.run(drive(base, service.pid, args.requests, args.concurrency, args.emoji))
        after = rss_mib(service.pid)
        per_request = (after - before) * 1024 / args.requests
        budget = LIMIT_MIB * (1 - HEADROOM)
        # A refused request stores nothing: the figure would say nothing of the bound.
        verdict = "PASS" if after <= budget and not refused else "MISS"
        print(f"final RSS {after:.1f} MiB, {per_request:.1f} KiB per request over idle")
        target = f"{LIMIT_MIB} Mi limit less {HEADROOM:.0%}"
        print(f"target: at most {budget:.0f} MiB ({target}): {verdict}")
    finally:
        for process in (service, stub):
            if process is not None:
                process.terminate()
                process.wait(timeout=20)


if __name__ == "__main__":
    main()
