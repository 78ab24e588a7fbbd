"""A service others can reach, over real HTTP: key guessing, the anonymous caller's rate,
and the memory the wrong-key limit holds.

    .venv/bin/python benchmarks/exposure.py [--seconds 10] [--addresses 10000]

1. Starts the service (`python -m planner_arm serve`, one API key, the default limits: 10
   wrong keys at once, then one every 6 s, per client address) on a free loopback port and
   sends wrong keys from one address, one after another over a keep-alive connection, for
   --seconds: the attempts, the keys checked (401) against what the limit allows, the ones
   refused unchecked (429), and whether the right key passes right after.
2. Starts it without keys (rule-based planner, the default rate: 20 plans a second, burst
   40) and sends POST /plan as fast as one connection goes for --seconds: the plans made
   (200) against what the rate allows, and the ones refused (429).
3. In this process, fills the wrong-key table with one wrong key from each of --addresses
   addresses: the addresses it keeps (at most `auth.tracked_addresses`) and the memory it
   holds (tracemalloc).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpx

HOST = "127.0.0.1"
KEY = "bench-key-0123456789abcdef"
GOAL = {"goal": "Fix authentication bug and add tests"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def service(env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "planner_arm", "serve", "--host", HOST, "--port", str(port)]
    process = subprocess.Popen(
        command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://{HOST}:{port}"
    try:
        ends = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > ends:
                raise RuntimeError("the service did not start")
            time.sleep(0.05)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=20)


def hammer(base: str, seconds: float, key: str | None) -> dict[str, Any]:
    """POST /plan from one address for `seconds`, each with a new wrong key (or none when
    `key` is None), then once with `key`: the statuses."""
    statuses: dict[int, int] = {}
    n = 0
    with httpx.Client(base_url=base, timeout=10) as client:
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < seconds:
            n += 1
            headers = {"X-API-Key": f"guess-{n:012d}"} if key else {}
            body = {"goal": f"{GOAL['goal']} #{n}"}  # never a cache hit
            status = client.post("/plan", json=body, headers=headers).status_code
            statuses[status] = statuses.get(status, 0) + 1
        after = client.post("/plan", json=GOAL, headers={"X-API-Key": key} if key else {})
    return {"attempts": n, "elapsed": elapsed, "statuses": statuses, "after": after.status_code}


def counts(run: dict[str, Any], passed: int) -> tuple[int, int, int]:
    """The answers with status `passed`, with 429, and with any other status."""
    ok, refused = run["statuses"].get(passed, 0), run["statuses"].get(429, 0)
    return ok, refused, sum(run["statuses"].values()) - ok - refused


def table_memory(addresses: int) -> tuple[int, int, int]:
    """Bytes the wrong-key table holds after one wrong key from each of `addresses`
    addresses, the addresses it keeps, and its bound."""
    from fastapi import Request

    from planner_arm.api.auth import KeyCheck, KeyRing
    from planner_arm.clock import Clock
    from planner_arm.config import load_settings
    from planner_arm.errors import Unauthorized

    settings = load_settings(auth={"api_keys": [KEY]})
    check = KeyCheck(KeyRing.from_settings(settings.auth), settings.auth, Clock())
    wrong = [(b"x-api-key", b"wrong-key")]
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for number in range(addresses):
        client = (f"10.{number >> 16 & 255}.{number >> 8 & 255}.{number & 255}", 1)
        with suppress(Unauthorized):
            check.principal_for(Request({"type": "http", "headers": wrong, "client": client}))
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    kept = len(check._failures._buckets)  # the table itself: what the bound is about
    return held, kept, settings.auth.tracked_addresses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--addresses", type=int, default=10_000)
    options = parser.parse_args()
    with service({"PLANNER_API_KEYS": KEY, "LOG_LEVEL": "WARNING"}) as base:
        run = hammer(base, options.seconds, KEY)
    checked, refused, other = counts(run, 401)
    elapsed = run["elapsed"]
    print(f"1. wrong keys from one address for {elapsed:.1f} s, one keep-alive connection")
    print(f"  attempts                 {run['attempts']:>8} ({run['attempts'] / elapsed:.0f}/s)")
    print(f"  keys checked (401)       {checked:>8} ({checked / elapsed:.1f}/s)")
    allowed = min(run["attempts"], 10 + int(elapsed / 6))
    print(f"  allowed by the limit     {allowed:>8} (10 at once, then one every 6 s)")
    print(f"  refused unchecked (429)  {refused:>8}")
    print(f"  other statuses           {other:>8}")
    print(f"  the right key after it   {run['after']:>8} (429: not checked either)")
    with service({"LOG_LEVEL": "WARNING"}) as base:
        run = hammer(base, options.seconds, None)
    planned, refused, other = counts(run, 200)
    elapsed = run["elapsed"]
    print(f"\n2. no keys: POST /plan from one connection for {elapsed:.1f} s")
    print(f"  attempts                 {run['attempts']:>8} ({run['attempts'] / elapsed:.0f}/s)")
    print(f"  planned (200)            {planned:>8} ({planned / elapsed:.1f}/s)")
    allowed = min(run["attempts"], 40 + int(elapsed * 20))
    print(f"  allowed by the rate      {allowed:>8} (40 at once, then 20 a second)")
    print(f"  refused (429)            {refused:>8}")
    print(f"  other statuses           {other:>8}")
    held, kept, bound = table_memory(options.addresses)
    print(
        f"\n3. the wrong-key table after one wrong key from each of {options.addresses} addresses"
    )
    print(f"  addresses kept           {kept:>8} (bound: auth.tracked_addresses = {bound})")
    print(f"  memory held              {held / 1024:>8.0f} KiB ({held / max(kept, 1):.0f} B each)")


if __name__ == "__main__":
    main()
