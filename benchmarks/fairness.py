"""One tenant must not evict another's records nor starve it of the model, measured.

    .venv/bin/python benchmarks/fairness.py [--scenario store|slots|greedy|circuit|cuts|hang|all]

Starts the stub model (tests/support/stub_model.py, in this process, on loopback) and the
service (`python -m planner_arm serve`, memory store, an API key for each of the tenants a to
i) on free ports, once per scenario:

- store: the store's bound made small (`store.max_bytes` 1 MiB of each kind, each tenant's
  cap of plan bytes two thirds of it). Tenant c stores 10 plans and makes 10 keyed requests;
  then a and b flood, within their rate and caps, each request with its own Idempotency-Key.
  Prints how many of c's plans still GET 200 and how many of its keyed retries replay (the
  same plan_id, no new plan).
- slots: a slow model (every call 1.5 s), 24 call slots. Tenant a sends at its allowed rate
  (20 a second) for 12 s; tenant b sends one request every 0.5 s. Prints b's answers by
  source and `saturated` fallbacks, and a's.
- greedy: a slow model (every call 4 s), the default 64 call slots and 8 reserved. Tenants a
  and b flood together: every 4 s each sends its whole burst (40 requests) at once, for 12 s;
  tenant c, well within its share, sends one request a second. Prints each tenant's answers
  by source; c must never get `saturated`.
- circuit: the model is slow (3 s) for tenant a's prompts only, the deadline 2 s; a sends 8
  requests, each cut off by the deadline, then b sends 10. Prints b's answers by source and
  the model's circuit as /health shows it.
- cuts: the same slow prompts, from six tenants (d to i) at once, 3 requests each, every
  call cut off by its deadline; then b sends 10. b must get the model's plans, the circuit
  must stay closed.
- hang: the model hangs for everyone, the deadline 2 s. Tenant a sends one request; prints
  how long after its answer the circuit opens (the hang check finds it), then how long b's
  request takes.

Each figure is printed beside its target with PASS or MISS; the exit status is 1 on any MISS.
Every figure comes from the service's answers over HTTP. To measure another version of the
service, run this script with `PYTHONPATH` pointing at its `src`.
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.stub_model import Hang, Reply, StubLLM  # noqa: E402 - the tests' stub, by path

HOST = "127.0.0.1"
KEYS = {tenant: f"{tenant}:key-{tenant}-0123456789" for tenant in "abcdefghi"}
MISSED: list[str] = []


def verdict(name: str, figure: str, target: str, passed: bool) -> None:
    """Print a figure beside its target; a missed one makes the exit status 1."""
    print(f"  {'PASS' if passed else 'MISS'}  {name}: {figure} (target {target})")
    if not passed:
        MISSED.append(name)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def headers(tenant: str, key: str | None = None) -> dict[str, str]:
    found = {"X-API-Key": KEYS[tenant].split(":", 1)[1]}
    if key is not None:
        found["Idempotency-Key"] = key
    return found


@contextmanager
def service(stub: StubLLM, env: dict[str, str]) -> Iterator[str]:
    """The service against `stub` with `env`; yields its base URL once it is ready."""
    port = free_port()
    settings = {
        "OPENAI_BASE_URL": stub.base_url,
        "OPENAI_API_KEY": "sk-bench",
        "LOG_LEVEL": "ERROR",
        "PLANNER_API_KEYS": ",".join(KEYS.values()),
        **env,
    }
    command = [sys.executable, "-m", "planner_arm", "serve", "--host", HOST, "--port", str(port)]
    process = subprocess.Popen(
        command, env={**os.environ, **settings}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    base = f"http://{HOST}:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None:
                assert process.stderr is not None
                raise SystemExit(f"the service did not start: {process.stderr.read()[-400:]!r}")
            time.sleep(0.05)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def source(body: dict[str, Any]) -> str:
    """`llm`, `cache`, or `fallback: <reason>`."""
    metadata = body.get("metadata") or {}
    found = str(metadata.get("source", body.get("error", "?")))
    for warning in metadata.get("warnings", []):
        if warning["code"] == "fallback_used":
            return f"{found}: {warning['detail'].split(':')[0]}"
    return found


async def store_scenario(base: str, flood: int) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        plan_ids, keyed = [], []
        for n in range(10):
            body = {"goal": f"Migrate billing service number {n} to the new ledger"}
            plain = await client.post("/plan", json=body, headers=headers("c"))
            plan_ids.append(plain.json()["plan_id"])
            kept = await client.post("/plan", json=body, headers=headers("c", f"c-{n}"))
            keyed.append(kept.json()["plan_id"])
        statuses: Counter[str] = Counter()
        started = time.monotonic()

        async def flooding(tenant: str) -> None:
            for n in range(flood):
                # Within the rate: at most 20 requests a second, a burst of 40.
                await asyncio.sleep(max(0.0, started + n / 20 - time.monotonic()))
                body = {"goal": f"Audit the access logs of region {n} for {tenant} anomalies"}
                answer = await client.post("/plan", json=body, headers=headers(tenant, f"f-{n}"))
                statuses[f"{tenant} {answer.status_code}"] += 1

        await asyncio.gather(flooding("a"), flooding("b"))
        took = time.monotonic() - started
        found = [
            (await client.get(f"/plan/{pid}", headers=headers("c"))).status_code for pid in plan_ids
        ]
        replayed = 0
        for n in range(10):
            body = {"goal": f"Migrate billing service number {n} to the new ledger"}
            again = await client.post("/plan", json=body, headers=headers("c", f"c-{n}"))
            replayed += again.json().get("plan_id") == keyed[n]
    print(f"floods: {dict(sorted(statuses.items()))} in {took:.1f} s")
    print(f"tenant c: plans still found (GET 200): {found.count(200)} of {len(found)}")
    print(f"tenant c: keyed retries replayed: {replayed} of {len(keyed)}")


async def slots_scenario(base: str, seconds: float) -> None:
    results: dict[str, Counter[str]] = {"a": Counter(), "b": Counter()}
    started = time.monotonic()

    async def one(client: httpx.AsyncClient, tenant: str, n: int) -> None:
        body = {"goal": f"Summarise incident report {n} for tenant {tenant}"}
        answer = await client.post("/plan", json=body, headers=headers(tenant))
        results[tenant][
            source(answer.json()) if answer.status_code == 200 else str(answer.status_code)
        ] += 1

    async def sending(client: httpx.AsyncClient, tenant: str, rate: float) -> None:
        tasks = []
        for n in range(int(seconds * rate)):
            await asyncio.sleep(max(0.0, started + n / rate - time.monotonic()))
            tasks.append(asyncio.create_task(one(client, tenant, n)))
        await asyncio.gather(*tasks)

    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as client:
        await asyncio.gather(sending(client, "a", 20), sending(client, "b", 2))
        health = (await client.get("/health")).json()
    for tenant, counted in results.items():
        saturated, total = counted["fallback: saturated"], sum(counted.values())
        print(f"tenant {tenant}: {dict(sorted(counted.items()))}; saturated {saturated} of {total}")
    print(f"circuits: {health['circuits']}")
    b_saturated = results["b"]["fallback: saturated"]
    verdict(
        "tenant b saturated", f"{b_saturated} of {sum(results['b'].values())}", "0", not b_saturated
    )


async def greedy_scenario(base: str, seconds: float, period: float) -> None:
    results: dict[str, Counter[str]] = {tenant: Counter() for tenant in "abc"}
    started = time.monotonic()

    async def one(client: httpx.AsyncClient, tenant: str, n: int) -> None:
        body = {"goal": f"Summarise incident report {n} for tenant {tenant}"}
        answer = await client.post("/plan", json=body, headers=headers(tenant))
        results[tenant][
            source(answer.json()) if answer.status_code == 200 else str(answer.status_code)
        ] += 1

    async def bursting(client: httpx.AsyncClient, tenant: str) -> None:
        tasks = []
        for burst in range(int(seconds / period)):
            await asyncio.sleep(max(0.0, started + burst * period - time.monotonic()))
            tasks += [asyncio.create_task(one(client, tenant, burst * 100 + n)) for n in range(40)]
        await asyncio.gather(*tasks)

    async def steady(client: httpx.AsyncClient, tenant: str) -> None:
        tasks = []
        for n in range(int(seconds)):
            await asyncio.sleep(max(0.0, started + 0.5 + n - time.monotonic()))
            tasks.append(asyncio.create_task(one(client, tenant, n)))
        await asyncio.gather(*tasks)

    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as client:
        await asyncio.gather(bursting(client, "a"), bursting(client, "b"), steady(client, "c"))
    for tenant, counted in results.items():
        print(f"tenant {tenant}: {dict(sorted(counted.items()))}")
    c_saturated = results["c"]["fallback: saturated"]
    verdict(
        "tenant c saturated", f"{c_saturated} of {sum(results['c'].values())}", "0", not c_saturated
    )


async def circuit_scenario(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        slow: Counter[str] = Counter()
        for n in range(8):
            body = {"goal": f"Compile the quarterly report {n} for the slow tenant"}
            slow[source((await client.post("/plan", json=body, headers=headers("a"))).json())] += 1
        other: Counter[str] = Counter()
        for n in range(10):
            body = {"goal": f"Rotate the credentials of service {n}"}
            other[source((await client.post("/plan", json=body, headers=headers("b"))).json())] += 1
        health = (await client.get("/health")).json()
    print(f"tenant a (each call cut off by its 2 s deadline): {dict(slow)}")
    print(f"tenant b afterwards: {dict(other)}")
    print(f"circuits: {health['circuits']}")
    verdict("tenant b from the model", f"{other['llm']} of 10", "10", other["llm"] == 10)


async def cuts_scenario(base: str) -> None:
    async def slow(client: httpx.AsyncClient, tenant: str, n: int) -> str:
        body = {"goal": f"Compile the quarterly report {n} for the slow tenant {tenant}"}
        return source((await client.post("/plan", json=body, headers=headers(tenant))).json())

    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as client:
        cut = Counter(
            await asyncio.gather(
                *(slow(client, tenant, n) for tenant in "defghi" for n in range(3))
            )
        )
        other: Counter[str] = Counter()
        for n in range(10):
            body = {"goal": f"Rotate the credentials of service {n}"}
            other[source((await client.post("/plan", json=body, headers=headers("b"))).json())] += 1
        health = (await client.get("/health")).json()
        metrics = (await client.get("/metrics")).text
    counted = "planner_llm_hang_checks_total"
    checks = [line for line in metrics.splitlines() if line.startswith(counted)]
    print(f"tenants d to i (each call cut off by its 2 s deadline): {dict(cut)}")
    print(f"hang checks: {checks}")
    print(f"tenant b afterwards: {dict(other)}")
    verdict("tenant b from the model", f"{other['llm']} of 10", "10", other["llm"] == 10)
    circuit = health["circuits"]
    verdict("the circuit", str(circuit), "closed", set(circuit.values()) == {"closed"})


async def hang_scenario(base: str, deadline: float) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        body = {"goal": "Compile the quarterly report for tenant a"}
        first = source((await client.post("/plan", json=body, headers=headers("a"))).json())
        answered = time.monotonic()
        while set((await client.get("/health")).json()["circuits"].values()) != {"open"}:
            if time.monotonic() - answered > 10 * deadline:
                break
            await asyncio.sleep(0.05)
        opened = time.monotonic() - answered
        asked = time.monotonic()
        body = {"goal": "Rotate the credentials of service b"}
        then = source((await client.post("/plan", json=body, headers=headers("b"))).json())
        took = time.monotonic() - asked
    print(f"tenant a: {first}; tenant b afterwards: {then}")
    verdict(
        "the circuit opened after a's answer",
        f"{opened:.2f} s",
        f"<= {deadline + 1:.1f} s (the hang check's budget: the deadline)",
        opened <= deadline + 1,
    )
    verdict("tenant b's answer", f"{took:.2f} s", "< 0.5 s (the model skipped)", took < 0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--flood", type=int, default=300, help="requests of each flooding tenant")
    parser.add_argument("--seconds", type=float, default=12.0, help="the slot scenarios' length")
    args = parser.parse_args()
    chosen = SCENARIOS if args.scenario == "all" else [args.scenario]
    with StubLLM(Reply(), record=False) as stub:
        for scenario in chosen:
            stub.default, stub.choose = Reply(), None
            SCENARIOS[scenario](stub, args)
    if MISSED:
        print(f"missed: {', '.join(MISSED)}")
        sys.exit(1)


def run_store(stub: StubLLM, args: argparse.Namespace) -> None:
    print("== store: two tenants flood, the third's records are checked")
    env = {
        "PLANNER_STORE__MAX_BYTES": str(1024 * 1024),
        "PLANNER_TENANTS__MAX_PLAN_BYTES": str(700 * 1024),
        "PLANNER_CACHE__ENABLED": "false",
    }
    with service(stub, env) as base:
        asyncio.run(store_scenario(base, args.flood))


def run_slots(stub: StubLLM, args: argparse.Namespace) -> None:
    print("== slots: a slow model (1.5 s a call), 24 call slots")
    stub.default = Reply(delay=1.5)
    env = {"TIMEOUT_SECONDS": "5", "PLANNER_CONNECTION__MAX_IN_FLIGHT": "24"}
    with service(stub, env) as base:
        asyncio.run(slots_scenario(base, args.seconds))


def run_greedy(stub: StubLLM, args: argparse.Namespace) -> None:
    period = 4.0
    print(f"== greedy: a slow model ({period:g} s a call), 64 call slots, 8 reserved")
    stub.default = Reply(delay=period)
    with service(stub, {"TIMEOUT_SECONDS": "8"}) as base:
        asyncio.run(greedy_scenario(base, args.seconds, period))


def answer_slow_prompts(stub: StubLLM) -> None:
    slow = Reply(delay=3.0)
    stub.choose = lambda body: slow if "slow tenant" in str(body) else None


def run_circuit(stub: StubLLM, args: argparse.Namespace) -> None:
    print("== circuit: the model is slow (3 s) for tenant a's prompts, deadline 2 s")
    answer_slow_prompts(stub)
    with service(stub, {"TIMEOUT_SECONDS": "2"}) as base:
        asyncio.run(circuit_scenario(base))


def run_cuts(stub: StubLLM, args: argparse.Namespace) -> None:
    print("== cuts: the model is slow (3 s) for six tenants' prompts, deadline 2 s")
    answer_slow_prompts(stub)
    with service(stub, {"TIMEOUT_SECONDS": "2"}) as base:
        asyncio.run(cuts_scenario(base))


def run_hang(stub: StubLLM, args: argparse.Namespace) -> None:
    print("== hang: the model hangs for everyone, deadline 2 s")
    stub.default = Hang()
    with service(stub, {"TIMEOUT_SECONDS": "2"}) as base:
        asyncio.run(hang_scenario(base, 2.0))


SCENARIOS = {
    "store": run_store,
    "slots": run_slots,
    "greedy": run_greedy,
    "circuit": run_circuit,
    "cuts": run_cuts,
    "hang": run_hang,
}


if __name__ == "__main__":
    main()
