"""What a stored record weighs in its caller's caps, beside what it holds, measured.

    .venv/bin/python benchmarks/record_weight.py [--records 2000] [--no-redis]

Each row floods one kind of record, in this process, through the store's own code: plans
of 1, 4 and 16 KB of JSON in the memory store, in ASCII and with one emoji in each (a Python
`str` with an emoji takes four bytes for every character, so a record kept as text holds up
to four times its UTF-8 bytes); answers of the plan cache (real plans of the rule-based
planner); and, when `redis-server` is on PATH, the same plans, answers kept for
Idempotency-Keys and cache entries in a Redis of its own. Memory is measured with tracemalloc
(the bytes Python allocated and still holds for the records), Redis by the growth of its
`used_memory`. Prints, per record, what the store counts and what was measured, and the
verdict against the target: the count within a factor of 1.25 of what is held, either way.
To measure another version of the service, run this script with `PYTHONPATH` pointing at its
`src`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis

from planner_arm.plan.schemas import PlanRequest, PlanResponse
from planner_arm.principal import Principal
from planner_arm.service.cache import PlanCache
from planner_arm.store.base import Claimed, OwnerCaps
from planner_arm.store.memory import MemoryStore
from planner_arm.store.redis_backend import RedisStore, redis_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.app import FakeClock  # noqa: E402 - the tests' clock and helpers, by path
from support.factories import make_service  # noqa: E402
from support.service import free_port  # noqa: E402

FACTOR = 1.25
OWNER = Principal(id="f" * 64)  # a principal's id is a 64-character hash
UNBOUNDED = 1 << 40


def record(size: int, n: int, emoji: bool) -> dict[str, Any]:
    """A plan record of about `size` bytes of JSON, ASCII but for one emoji when asked."""
    text = f"step {n} " + "x" * size
    return {"response": {"plan_id": uuid.uuid4().hex, "text": text[: size - 60]}} | (
        {"note": "\N{GRINNING FACE}"} if emoji else {}
    )


def verdict(counted: float, held: float) -> str:
    ratio = held / counted
    mark = "PASS" if 1 / FACTOR <= ratio <= FACTOR else "MISS"
    return f"counted {counted:8.0f}  held {held:8.0f}  held/counted {ratio:4.2f}  {mark}"


def traced(fill: Callable[[], Awaitable[int]]) -> tuple[int, int]:
    """(what `fill` says it counted, the bytes still allocated after it), by tracemalloc."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    counted = asyncio.run(fill())
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return counted, held


def memory_rows(records: int) -> list[str]:
    rows = []
    for size in (1024, 4096, 16384):
        for emoji in (False, True):
            store = MemoryStore(
                ttl_seconds=3600,
                max_entries=10 * records,
                caps=OwnerCaps(plan_bytes=UNBOUNDED),
                clock=FakeClock().as_clock(),
            )
            plans = [record(size, n, emoji) for n in range(records)]
            ids = [uuid.uuid4().hex for _ in range(records)]

            async def fill(
                store: MemoryStore = store, plans: list[Any] = plans, ids: list[str] = ids
            ) -> int:
                for plan_id, plan in zip(ids, plans, strict=True):
                    await store.put_plan(OWNER, plan_id, plan)
                return store.held_bytes(OWNER)

            counted, held = traced(fill)
            kind = "emoji" if emoji else "ASCII"
            name = f"memory  plan {size // 1024:>2} KB {kind}"
            rows.append(f"{name:28} {verdict(counted / records, held / records)}")
    return rows


async def rule_based_plans(count: int) -> list[PlanResponse]:
    service = make_service(FakeClock(), llm=False)
    plans = []
    for n in range(count):
        goal = f"Migrate billing service {n} to the new ledger, verify balances and report"
        request = PlanRequest(goal=goal, constraints=[f"No downtime for region {n}"])
        plans.append(await service.plans.plan(request, f"r-{n}", use_cache=False))
    return plans


def cache_row(records: int) -> str:
    texts = [plan.model_dump_json() for plan in asyncio.run(rule_based_plans(records))]
    cache = PlanCache(300, 10 * records, FakeClock().as_clock(), max_bytes=UNBOUNDED)
    keys = [uuid.uuid4().hex * 2 for _ in range(records)]  # a request key: 64 hex characters

    async def fill() -> int:
        # Each plan made in the measured span, as planning makes it: whatever the cache keeps
        # of it is measured, and the rest is let go.
        for key, text in zip(keys, texts, strict=True):
            cache.keep(OWNER.id, key, PlanResponse.model_validate_json(text))
        return cache.bytes

    counted, held = traced(fill)
    return f"{'memory  plan cache':28} {verdict(counted / records, held / records)}"


class Redis:
    """A redis-server of this run, on a free loopback port."""

    def __init__(self, binary: str) -> None:
        self.directory = tempfile.mkdtemp(prefix="record-weight-")
        self.port = free_port()
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no", "--dir", self.directory]
        self.process = subprocess.Popen(
            [binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.client = redis.Redis(port=self.port, socket_timeout=5)
        for _ in range(200):
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)

    def used(self) -> int:
        used: int = self.client.info("memory")["used_memory"]
        return used

    def counted(self) -> int:
        """The sum of the accounts' sums (also in the layout before the sum had a key)."""
        sums = [int(self.client.get(key) or 0) for key in self.client.keys("*:total:*")]
        old = [self.client.hget(key, "#total") for key in self.client.keys("*sizes:*")]
        return sum(sums) + sum(int(found) for found in old if found is not None)

    def close(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


async def redis_fill(server: Redis, records: int, put: Callable[[int], Awaitable[None]]) -> str:
    server.client.flushall()
    store_warm = server.used()
    for n in range(records):
        await put(n)
    held = server.used() - store_warm
    return verdict(server.counted() / records, held / records)


def redis_rows(records: int, binary: str) -> list[str]:
    server = Redis(binary)
    caps = OwnerCaps(plan_bytes=UNBOUNDED, idempotency_bytes=UNBOUNDED, cache_bytes=UNBOUNDED)
    store = RedisStore(
        redis_client(f"redis://127.0.0.1:{server.port}/0", 5),
        clock=FakeClock().as_clock(),
        ttl_seconds=3600,
        key_prefix="planner-arm",
        poll_interval_seconds=0.05,
        operation_timeout_seconds=5,
        caps=caps,
    )
    plans = asyncio.run(rule_based_plans(min(records, 200)))
    answers = [plan.model_dump(mode="json") for plan in plans]

    async def run() -> list[str]:
        # A first flood grows Redis's tables to their size for this many records; then each
        # row measures the records alone.
        await redis_fill(server, records, lambda n: store.put_plan(OWNER, f"w-{n}", {"n": n}))
        rows = []
        for size in (1024, 4096, 16384):
            for emoji in (False, True):

                async def put_plan(n: int, size: int = size, emoji: bool = emoji) -> None:
                    await store.put_plan(OWNER, uuid.uuid4().hex, record(size, n, emoji))

                name = f"redis   plan {size // 1024:>2} KB {'emoji' if emoji else 'ASCII'}"
                rows.append(f"{name:28} {await redis_fill(server, records, put_plan)}")

        async def complete(n: int) -> None:
            claim = await store.claim(OWNER, f"retry-{uuid.uuid4()}", "body", lease_seconds=30)
            assert isinstance(claim, Claimed)
            await store.complete(claim, answers[n % len(answers)])

        async def cache_put(n: int) -> None:
            await store.cache_put(OWNER, uuid.uuid4().hex * 2, answers[n % len(answers)], 300)

        rows.append(f"{'redis   answers kept':28} {await redis_fill(server, records, complete)}")
        rows.append(f"{'redis   cache entries':28} {await redis_fill(server, records, cache_put)}")
        await store.close()
        return rows

    try:
        return asyncio.run(run())
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--no-redis", action="store_true", help="measure the memory store only")
    args = parser.parse_args()
    print(f"{args.records} records of each kind; bytes per record")
    rows = [*memory_rows(args.records), cache_row(min(args.records, 500))]
    binary = shutil.which("redis-server")
    if not args.no_redis and binary is not None:
        rows += redis_rows(args.records, binary)
    for row in rows:
        print(row)
    missed = sum("MISS" in row for row in rows)
    within = f"{len(rows) - missed} of {len(rows)} rows"
    print(f"target: held within {FACTOR}x of counted, either way: {within}: ", end="")
    print("PASS" if not missed else "MISS")


if __name__ == "__main__":
    main()
