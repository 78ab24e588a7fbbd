"""Tool sets and the service's memory and event loop: RSS after many distinct tool sets,
/health while new maximal ones build, and tenants flooding new sets within their rates.

    .venv/bin/python benchmarks/tool_sets.py [--sets 64] [--maximal-sets 32] [--builds 6]
        [--concurrency 4] [--flooders 4] [--flood-seconds 20] [--stub] [--parts 123]
        [--env NAME=VALUE ...]

First builds one set of each size below in this process, as the service does, and prints its
measured weight with its index and tool graph (what every request builds) and with every
part, beside what building it allocated under `tracemalloc`. Then starts the service
(`python -m planner_arm serve`, memory store, no model: the rule-based tool planner; `--stub`:
the zero-latency stub model of tests/support/stub_model.py, whose plan names the built-in
agents, so every step's tool is mended by the index or the lexicon) on a free loopback port,
three times (`--parts` picks which):

1. with the default limits: sends `--sets` POST /plan, each with its own 300-tool set, as
   large as the 64 KiB body limit lets it be, `--concurrency` at a time; prints the RSS before,
   after and at its highest (sampled every 20 ms);
2. with `server.max_body_bytes` raised to 1 MiB: sends `--maximal-sets` maximal sets (500
   tools, 512 KiB of tools as the service counts them, `limits.max_tools_bytes`), and prints
   the RSS the same way; then asks /health every 10 ms from a process of its own, first for
   2 s with nothing else running, then while `--builds` new maximal sets are sent at once,
   then while the same sets come again (kept: what reading and checking bodies of 500 KB
   costs the event loop without any build), and prints the slowest, the 99th percentile and
   the median /health answer of each;
3. with API keys, one per tenant, and the default limits: `--flooders` tenants each send a
   new 300-tool set (64 KiB) every 1/20 s, their allowed rate (`tenants.requests_per_second`),
   for `--flood-seconds`, without waiting for the answers, while a fifth tenant sends a new
   set of 10 small tools, one at a time, and /health is asked every 10 ms throughout; prints
   the flooders' answers by status and their slowest, the fifth tenant's times, the RSS and
   /health.

Every tool is new (its own name, 20,000 made-up words drawn at random for its description):
no two sets share a tool, the heaviest case for the index. The targets: the highest RSS at
most 400 MiB in the first part, 450 MiB in the second, /health at most 100 ms while the sets
build; in the third, the highest RSS at most 450 MiB, the fifth tenant's median at most 1 s,
/health at most 100 ms, and no answer after the 10 s deadline (with 0.5 s for the way there
and back). Exits 0 when every target is met, else 1.
Prints the service's `planner_tool_sets_kept` and `planner_tool_sets_kept_bytes` after each
part, the measured weight of the sets it keeps.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from planner_arm.config import ArmSpec, load_settings
from planner_arm.plan.weighed import BuildLane, SharedWork, ToolMemo
from planner_arm.strategies.toolbox import build_toolbox
from planner_arm.tools.index import ExampleIndex

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "tests" / "support" / "stub_model.py"
HOST = "127.0.0.1"
DEFAULT_BODY = 64 * 1024
RAISED_BODY = 1024 * 1024
MAX_TOOLS_BYTES = 512 * 1024
TARGET_DEFAULT_MIB = 400
TARGET_MAXIMAL_MIB = 450
TARGET_HEALTH_MS = 100
TARGET_FLOOD_MIB = 450
TARGET_FIFTH_SECONDS = 1.0
# The defaults of `tenants.requests_per_second` and `planning.timeout_seconds`.
TENANT_RATE = 20.0
DEADLINE_SECONDS = 10.0
# What an answer may take past the deadline on its way to the client over loopback.
DEADLINE_SLACK_SECONDS = 0.5
WORDS = random.Random(0)
VOCABULARY = [
    "".join(WORDS.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(WORDS.randint(3, 10)))
    for _ in range(20_000)
]
# A tool's fields the service counts besides these two (`limits.max_tools_bytes` measures
# each tool with its defaults: `"input_schema": null, "consumes": [], "produces": []`).
COUNTED_EXTRA = len(', "input_schema": null, "consumes": [], "produces": []')


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


def tool_set_body(name: str, tools: int, max_body: int, max_tools_bytes: int) -> bytes:
    """A /plan body with `tools` new tools, as large as both limits let it be."""
    rng = random.Random(name)
    goal = f"{name}: " + " ".join(rng.choice(VOCABULARY) for _ in range(12))
    ids = [f"{name}_{number}_{rng.choice(VOCABULARY)}" for number in range(tools)]
    frame = json.dumps({"goal": goal, "tools": [{"id": tool, "description": ""} for tool in ids]})
    room = min(
        (max_body - len(frame) - 256) // tools,
        (max_tools_bytes - len(frame) - tools * COUNTED_EXTRA - 256) // tools,
        2000,
    )
    descriptions = []
    for _ in ids:
        text = ""
        while len(text) < room:
            text += rng.choice(VOCABULARY) + " "
        descriptions.append(text[:room].strip())
    body = {
        "goal": goal,
        "tools": [
            {"id": tool, "description": text} for tool, text in zip(ids, descriptions, strict=True)
        ],
    }
    return json.dumps(body).encode()


class Sampler:
    """The service's RSS every 20 ms, in a thread: its highest since `start`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.highest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.highest = max(self.highest, rss_mib(self.pid))
            self._stop.wait(0.02)


def _probe(base: str, stop: Any, answers: Any) -> None:
    seconds = []
    with httpx.Client(base_url=base, timeout=30) as client:
        while not stop.is_set():
            started = time.perf_counter()
            client.get("/health").raise_for_status()
            seconds.append(time.perf_counter() - started)
            stop.wait(0.01)
    answers.send(seconds)


class HealthProbe:
    """GET /health every 10 ms from a process of its own, as a liveness probe would (a
    thread of this one would wait on this process's own work for the interpreter lock)."""

    def __init__(self, base: str) -> None:
        self.seconds: list[float] = []
        self._stop = multiprocessing.Event()
        self._answers, answers = multiprocessing.Pipe(duplex=False)
        self._process = multiprocessing.Process(target=_probe, args=(base, self._stop, answers))

    def __enter__(self) -> HealthProbe:
        self._process.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self.seconds = self._answers.recv()
        self._process.join()

    def figures(self) -> tuple[float, float, float]:
        """The slowest, the 99th percentile and the median, in ms."""
        ordered = sorted(self.seconds)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return ordered[-1] * 1000, p99 * 1000, statistics.median(ordered) * 1000


async def send_all(base: str, bodies: list[bytes], concurrency: int) -> Counter[str]:
    """POSTs each body to /plan, `concurrency` at a time; the answers that were not 200."""
    failures: Counter[str] = Counter()
    pending = iter(bodies)

    async def worker(client: httpx.AsyncClient) -> None:
        for body in pending:
            headers = {"content-type": "application/json"}
            response = await client.post("/plan", content=body, headers=headers)
            if response.status_code != 200:
                failures[f"{response.status_code} {response.json().get('error')}"] += 1

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return failures


def kept_figures(base: str) -> str:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    found = dict(re.findall(r"^(planner_tool_sets_kept(?:_bytes)?) (\S+)$", text, re.M))
    count = float(found.get("planner_tool_sets_kept", "nan"))
    kept_bytes = float(found.get("planner_tool_sets_kept_bytes", "nan"))
    return f"{count:.0f} tool sets kept, {kept_bytes / 2**20:.1f} MiB measured"


class Service:
    """The service as its own process on a free port (and the stub model with `--stub`)."""

    def __init__(self, env: dict[str, str], stub: bool) -> None:
        self.children: list[subprocess.Popen[str]] = []
        settings = {"LOG_LEVEL": "ERROR", **env}
        if stub:
            model = self._start([sys.executable, str(STUB), "--port", str(free_port())], {})
            assert model.stdout is not None
            url = model.stdout.readline().strip().removeprefix("ready ").strip()
            settings |= {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-bench"}
        port = free_port()
        command = [sys.executable, "-m", "planner_arm", "serve", "--host", HOST]
        self.process = self._start([*command, "--port", str(port)], settings)
        self.base = f"http://{HOST}:{port}"
        for _ in range(1200):
            try:
                if httpx.get(f"{self.base}/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("the service did not get ready")

    def _start(self, command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_"))}
        child = subprocess.Popen(
            command,
            env={**clean, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.children.append(child)
        return child

    def stop(self) -> None:
        for child in reversed(self.children):
            child.terminate()
            child.wait(timeout=20)


def show_health(label: str, probe: HealthProbe) -> None:
    worst, p99, median = probe.figures()
    print(f"  {label}: max {worst:.1f} ms, p99 {p99:.1f}, median {median:.1f}")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def many_sets(args: argparse.Namespace, extra: dict[str, str]) -> bool:
    service = Service(extra, args.stub)
    try:
        pid = service.process.pid
        bodies = [
            tool_set_body(f"set{n}", 300, DEFAULT_BODY, MAX_TOOLS_BYTES) for n in range(args.sets)
        ]
        idle = rss_mib(pid)
        print(f"default limits: {args.sets} distinct 300-tool sets of {len(bodies[0]):,} bytes")
        started = time.monotonic()
        with Sampler(pid) as sampler:
            failures = asyncio.run(send_all(service.base, bodies, args.concurrency))
        took = time.monotonic() - started
        after = rss_mib(pid)
        print(f"  RSS idle {idle:.1f} MiB, after {after:.1f} MiB, highest {sampler.highest:.1f}")
        print(f"  {took:.1f} s; {kept_figures(service.base)}")
        if failures:
            print(f"  not answered 200: {dict(failures)}")
        ok = sampler.highest <= TARGET_DEFAULT_MIB and not failures
        print(f"  target: RSS at most {TARGET_DEFAULT_MIB} MiB: {verdict(ok)}")
        return ok
    finally:
        service.stop()


def maximal_sets(args: argparse.Namespace, extra: dict[str, str]) -> bool:
    env = {"PLANNER_SERVER__MAX_BODY_BYTES": str(RAISED_BODY), **extra}
    service = Service(env, args.stub)
    try:
        pid = service.process.pid
        count = args.maximal_sets + args.builds
        bodies = [tool_set_body(f"max{n}", 500, RAISED_BODY, MAX_TOOLS_BYTES) for n in range(count)]
        idle = rss_mib(pid)
        size = len(bodies[0])
        print(f"body limit 1 MiB: {args.maximal_sets} distinct 500-tool sets of {size:,} bytes")
        started = time.monotonic()
        with Sampler(pid) as sampler:
            failures = asyncio.run(
                send_all(service.base, bodies[: args.maximal_sets], args.concurrency)
            )
            took = time.monotonic() - started
            after = rss_mib(pid)
            print(
                f"  RSS idle {idle:.1f} MiB, after {after:.1f} MiB, highest {sampler.highest:.1f}"
            )
            print(f"  {took:.1f} s; {kept_figures(service.base)}")
            with HealthProbe(service.base) as quiet:
                time.sleep(2)
            new = bodies[args.maximal_sets :]
            with HealthProbe(service.base) as busy:
                started = time.monotonic()
                failures += asyncio.run(send_all(service.base, new, len(new)))
                took = time.monotonic() - started
            with HealthProbe(service.base) as again:
                failures += asyncio.run(send_all(service.base, new, len(new)))
        print(f"  RSS at the end {rss_mib(pid):.1f} MiB, highest {sampler.highest:.1f}")
        if failures:
            print(f"  not answered 200: {dict(failures)}")
        show_health("/health alone", quiet)
        show_health(
            f"/health while {args.builds} new maximal sets build at once ({took:.1f} s)", busy
        )
        show_health(f"/health while the same {args.builds} come again (kept: no build)", again)
        worst = busy.figures()[0]
        memory_ok = sampler.highest <= TARGET_MAXIMAL_MIB and not failures
        health_ok = worst <= TARGET_HEALTH_MS
        print(f"  target: RSS at most {TARGET_MAXIMAL_MIB} MiB: {verdict(memory_ok)}")
        print(f"  target: /health at most {TARGET_HEALTH_MS} ms: {verdict(health_ok)}")
        return memory_ok and health_ok
    finally:
        service.stop()


def small_set_body(name: str, tools: int = 10) -> bytes:
    """A /plan body with `tools` new tools of 30 made-up words each."""
    rng = random.Random(name)
    goal = f"{name}: " + " ".join(rng.choice(VOCABULARY) for _ in range(12))
    body = {
        "goal": goal,
        "tools": [
            {"id": f"{name}_{n}", "description": " ".join(rng.sample(VOCABULARY, 30))}
            for n in range(tools)
        ],
    }
    return json.dumps(body).encode()


class Answers:
    """What one tenant's requests were answered with, and how long each took."""

    def __init__(self) -> None:
        self.statuses: Counter[str] = Counter()
        self.seconds: list[float] = []

    async def send(self, client: httpx.AsyncClient, body: bytes, key: str) -> None:
        headers = {"content-type": "application/json", "x-api-key": key}
        started = time.monotonic()
        try:
            response = await client.post("/plan", content=body, headers=headers)
        except httpx.HTTPError as error:
            self.statuses[type(error).__name__] += 1
            return
        self.seconds.append(time.monotonic() - started)
        code = "" if response.status_code == 200 else f" {response.json().get('error')}"
        self.statuses[f"{response.status_code}{code}"] += 1


async def flood_tenant(base: str, key: str, bodies: list[bytes], answers: Answers) -> None:
    """Sends `bodies` at the tenant's allowed rate, each without waiting for the one before."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=50)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        sent: list[asyncio.Task[None]] = []
        started = time.monotonic()
        for number, body in enumerate(bodies):
            await asyncio.sleep(max(0.0, started + number / TENANT_RATE - time.monotonic()))
            sent.append(asyncio.create_task(answers.send(client, body, key)))
        await asyncio.gather(*sent)


async def fifth_tenant(base: str, key: str, stop: asyncio.Event, answers: Answers) -> None:
    """A new small set at a time, each once the one before is answered, until `stop`."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        number = 0
        while not stop.is_set():
            await answers.send(client, small_set_body(f"fifth{number}"), key)
            number += 1
            await asyncio.sleep(0.2)


async def flood_and_fifth(
    base: str, keys: list[str], bodies: list[list[bytes]]
) -> tuple[list[Answers], Answers]:
    floods = [Answers() for _ in bodies]
    fifth = Answers()
    stop = asyncio.Event()
    watched = asyncio.create_task(fifth_tenant(base, keys[-1], stop, fifth))
    await asyncio.gather(
        *(
            flood_tenant(base, key, sets, answers)
            for key, sets, answers in zip(keys, bodies, floods, strict=False)
        )
    )
    stop.set()
    await watched
    return floods, fifth


def tenants_flooding(args: argparse.Namespace, extra: dict[str, str]) -> bool:
    keys = [f"bench-tenant-{number}-0123456789abcdef" for number in range(args.flooders + 1)]
    env = {"PLANNER_API_KEYS": ",".join(keys), **extra}
    count = round(args.flood_seconds * TENANT_RATE)
    print(
        f"with API keys: {args.flooders} tenants each send a new 300-tool set every "
        f"{1 / TENANT_RATE:.2f} s for {args.flood_seconds:g} s; a fifth, new 10-tool sets"
    )
    bodies = [
        [tool_set_body(f"t{tenant}s{n}", 300, DEFAULT_BODY, MAX_TOOLS_BYTES) for n in range(count)]
        for tenant in range(args.flooders)
    ]
    service = Service(env, args.stub)
    try:
        pid = service.process.pid
        idle = rss_mib(pid)
        with Sampler(pid) as sampler, HealthProbe(service.base) as probe:
            floods, fifth = asyncio.run(flood_and_fifth(service.base, keys, bodies))
        after = rss_mib(pid)
        print(f"  RSS idle {idle:.1f} MiB, after {after:.1f} MiB, highest {sampler.highest:.1f}")
        print(f"  {kept_figures(service.base)}")
        slowest = 0.0
        for number, answers in enumerate(floods):
            worst = max(answers.seconds, default=0.0)
            slowest = max(slowest, worst)
            statuses = ", ".join(f"{n} {s}" for s, n in answers.statuses.most_common())
            print(f"  tenant {number}: {statuses}; slowest {worst:.2f} s")
        fifth_median = statistics.median(fifth.seconds) if fifth.seconds else float("inf")
        statuses = ", ".join(f"{n} {s}" for s, n in fifth.statuses.most_common())
        print(
            f"  the fifth tenant: {statuses}; median {fifth_median:.2f} s, "
            f"slowest {max(fifth.seconds, default=0.0):.2f} s"
        )
        show_health("/health throughout", probe)
        late = slowest > DEADLINE_SECONDS + DEADLINE_SLACK_SECONDS
        answered = fifth.statuses.get("200", 0) == sum(fifth.statuses.values())
        checks = [
            (f"RSS at most {TARGET_FLOOD_MIB} MiB", sampler.highest <= TARGET_FLOOD_MIB),
            (
                f"the fifth tenant's new sets answered 200, median at most "
                f"{TARGET_FIFTH_SECONDS:g} s",
                answered and fifth_median <= TARGET_FIFTH_SECONDS,
            ),
            (f"/health at most {TARGET_HEALTH_MS} ms", probe.figures()[0] <= TARGET_HEALTH_MS),
            (f"no answer after the {DEADLINE_SECONDS:g} s deadline", not late),
        ]
        for label, ok in checks:
            print(f"  target: {label}: {verdict(ok)}")
        return all(ok for _, ok in checks)
    finally:
        service.stop()


def one_set_weighed(name: str, tools: int, max_body: int) -> None:
    """One set built in this process as the service builds it: its measured weight with its
    index and tool graph (what every request over it builds) and with every part, and what
    building it allocated and kept under tracemalloc (its tools and its words for the shared
    memo included), after a small set built first has imported what a build imports."""
    settings = load_settings()
    shared = SharedWork(ToolMemo(settings.tool_sets.shared_bytes), BuildLane(1))
    examples = ExampleIndex(settings.examples)
    warm = json.loads(small_set_body(f"{name}-warm"))["tools"]
    for part in build_toolbox([ArmSpec(**tool) for tool in warm], {}, settings.planning, 0.35,
                              examples, shared).parts:  # fmt: skip
        part.get()
    data = json.loads(tool_set_body(name, tools, max_body, MAX_TOOLS_BYTES))
    gc.collect()
    tracemalloc.start()
    try:
        specs = [ArmSpec(**tool) for tool in data["tools"]]
        box = build_toolbox(specs, {}, settings.planning, 0.35, examples, shared)
        for part in box.tool_parts:
            part.get()
        gc.collect()
        used, allocated = box.weight, tracemalloc.get_traced_memory()[0]
        for part in box.parts:
            part.get()
        gc.collect()
        whole, all_allocated = box.weight, tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    print(
        f"  {tools} tools, {len(json.dumps(data['tools'])):,} bytes of tools: weight with its "
        f"index and graph {used / 2**20:.2f} MiB ({allocated / 2**20:.2f} allocated), with "
        f"every part {whole / 2**20:.2f} MiB ({all_allocated / 2**20:.2f} allocated)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", type=int, default=64)
    parser.add_argument("--maximal-sets", type=int, default=32)
    parser.add_argument("--builds", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--flooders", type=int, default=4)
    parser.add_argument("--flood-seconds", type=float, default=20.0)
    parser.add_argument(
        "--parts", default="123", help="which parts to run (1: many sets, 2: maximal, 3: flood)"
    )
    parser.add_argument("--stub", action="store_true", help="plan with the stub model")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the service")
    args = parser.parse_args()
    extra: dict[str, Any] = dict(item.split("=", 1) for item in args.env)
    print("one tool set, built in this process:")
    one_set_weighed("weighed", 300, DEFAULT_BODY)
    one_set_weighed("weighed", 500, RAISED_BODY)
    ok = True
    if "1" in args.parts:
        ok = many_sets(args, extra) and ok
    if "2" in args.parts:
        ok = maximal_sets(args, extra) and ok
    if "3" in args.parts:
        ok = tenants_flooding(args, extra) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
