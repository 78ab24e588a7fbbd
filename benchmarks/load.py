"""Load benchmark: the service against the floor, over real HTTP, on this machine.

    .venv/bin/python benchmarks/load.py [--requests N] [--concurrency C] [--rounds R] [--quick]

Starts a zero-latency stub model (tests/support/stub_model.py), the service (`python -m
planner_arm serve`) and the floor (benchmarks/floor_app.py: FastAPI + the same openai client
and prompts, nothing else) on free loopback ports, and drives them from this process with a
raw asyncio HTTP/1.1 keep-alive client at a fixed concurrency, in alternating rounds after a
warm-up round each. Every goal is unique, so the service's cache never answers. Then it
measures the service's resident memory over many more requests, runs benchmarks/micro.py,
and prints each figure next to its target with PASS or MISS (exit status 1 on any MISS).
Every child process is stopped on the way out, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import queue
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "tests" / "support" / "stub_model.py"
FLOOR = ROOT / "benchmarks" / "floor_app.py"
MICRO = ROOT / "benchmarks" / "micro.py"
HOST = "127.0.0.1"

START_TIMEOUT_SECONDS = 30.0
REQUEST_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 20.0
MICRO_TIMEOUT_SECONDS = 300.0

# The targets this benchmark reports against.
MIN_THROUGHPUT_RATIO = 0.95
MAX_PIPELINE_MEDIAN_US = 1000.0
MAX_FALLBACK_MEDIAN_US = 2000.0
MAX_RSS_MIB = 150.0
MAX_RSS_GROWTH_MIB = 5.0
MAX_READY_SECONDS = 1.0
# Under this, a CPU-bound server was starved by other load on the machine.
BUSY_TARGET_CPU_PERCENT = 90

CONSTRAINTS = ["Do not modify the database schema"]
CONTEXT = {"affected_files": ["auth/login.py"]}
_GOAL_NUMBERS = itertools.count(1)  # one sequence for the whole run: no goal is sent twice


def plan_body() -> bytes:
    n = next(_GOAL_NUMBERS)
    goal = f"Fix bug #{n} in module {n % 97}"
    return json.dumps({"goal": goal, "constraints": CONSTRAINTS, "context": CONTEXT}).encode()


STUB_BODY = json.dumps(
    {
        "model": "gpt-3.5-turbo",
        "messages": [{"role": "user", "content": "ping"}],
        "response_format": {"type": "json_object"},
    }
).encode()


# ---------------------------------------------------------------- child processes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


class Child:
    """A server process in its own session, its output in a log file; stop() always ends it."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log: IO[bytes] = self.log_path.open("wb")
        self.lines: queue.Queue[str] = queue.Queue()
        self.started = time.perf_counter()
        # Own session: Ctrl-C reaches only this script, which then stops the children itself.
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace"))
            self._log.write(raw)
            self._log.flush()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}\n{self.tail()}")

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(f"  {self.name}| {line}" for line in text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT_SECONDS)
        self._reader.join(timeout=5)  # the pipe is at its end once the process is gone
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # These would win over OPENAI_BASE_URL / OPENAI_API_KEY in the service's settings.
    for name in ("LLM_BASE_URL", "LLM_API_KEY"):
        env.pop(name, None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class Fleet:
    """The children started so far; `stop_all()`, run in a `finally`, ends every one."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[Child] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> Child:
        child = Child(name, argv, env, self.log_dir)
        self.children.append(child)
        return child

    def stop_all(self) -> None:
        for child in reversed(self.children):
            try:
                child.stop()
            except (OSError, subprocess.SubprocessError) as exc:
                print(f"could not stop {child.name} (pid {child.pid}): {exc}", file=sys.stderr)

    def tails(self) -> str:
        return "\n".join(child.tail() for child in self.children)


def start_stub(fleet: Fleet, stub: Path) -> tuple[Child, str]:
    child = fleet.start(
        "stub", [sys.executable, str(stub), "--port", str(free_port())], child_env()
    )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        child.check_alive()
        try:
            line = child.lines.get(timeout=0.1).strip()
        except queue.Empty:
            continue
        if line.startswith("ready "):
            return child, line.removeprefix("ready ").strip()
    raise RuntimeError(f"the stub did not print 'ready <base_url>'\n{child.tail()}")


def http_get_status(port: int, path: str) -> int | None:
    """One GET on a fresh connection; None if nothing answers yet."""
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as sock:
            sock.sendall(
                f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode()
            )
            head = sock.recv(64)
    except OSError:
        return None
    if not head.startswith(b"HTTP/1.1 ") or len(head) < 12:
        return None
    return int(head[9:12])


def wait_ready(child: Child, port: int) -> float:
    """Seconds from the process's start to its first 200 from GET /ready (tight polling)."""
    deadline = child.started + START_TIMEOUT_SECONDS
    while time.perf_counter() < deadline:
        child.check_alive()
        if http_get_status(port, "/ready") == 200:
            return time.perf_counter() - child.started
        time.sleep(0.002)
    raise RuntimeError(f"{child.name} was not ready within {START_TIMEOUT_SECONDS:.0f}s")


def start_server(
    fleet: Fleet, name: str, argv: list[str], env: dict[str, str]
) -> tuple[Child, int, float]:
    port = free_port()
    child = fleet.start(name, [*argv, "--host", HOST, "--port", str(port)], env)
    return child, port, wait_ready(child, port)


# ---------------------------------------------------------------- /proc figures


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


# ---------------------------------------------------------------- the load driver


class Connection:
    """HTTP/1.1 keep-alive over asyncio streams: just enough for these servers' answers."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(HOST, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            await self.open()
        assert self.reader is not None
        assert self.writer is not None
        self.writer.write(head + body)
        header_block = await self.reader.readuntil(b"\r\n\r\n")
        status = int(header_block[9:12])
        length = -1
        chunked = close = False
        for line in header_block.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                close = b"close" in value.lower()
        if chunked:
            payload = await self._read_chunked(self.reader)
        elif length >= 0:
            payload = await self.reader.readexactly(length)
        else:
            payload = await self.reader.read()
            close = True
        if close:
            self.close()
        return status, payload

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)


@dataclass
class Target:
    name: str
    port: int
    path: str
    make_body: Callable[[], bytes]
    # True when an answer is what it should be (a plan from the model, not the fallback).
    check: Callable[[bytes], bool]
    pid: int  # the server's process, for its CPU figure


@dataclass
class RoundResult:
    target: str
    requests: int
    seconds: float  # from the first request sent to the last answer read
    latencies: list[float]
    failures: int  # transport errors, non-200s and answers that fail the target's check
    wall: float = 0.0  # the window the CPU figures cover (the round and its connection set-up)
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds per process in `wall`

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def cpu_percent(self, name: str) -> float:
        return 100 * self.cpu[name] / self.wall

    @property
    def cpu_ms_per_request(self) -> float:
        """The target's own CPU per request: unlike req/s, blind to time spent waiting for a
        CPU that another process held (not to a host that runs the whole machine slower)."""
        return 1000 * self.cpu[self.target] / self.requests

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def _drive(
    target: Target, bodies: list[bytes], concurrency: int
) -> tuple[float, list[float], int]:
    head_prefix = (
        f"POST {target.path} HTTP/1.1\r\nHost: {HOST}:{target.port}\r\n"
        "Content-Type: application/json\r\nContent-Length: "
    ).encode()
    requests = [(head_prefix + str(len(b)).encode() + b"\r\n\r\n", b) for b in bodies]
    connections = [Connection(target.port) for _ in range(min(concurrency, len(requests)))]
    await asyncio.gather(*(c.open() for c in connections))  # outside the timed part
    latencies: list[float] = []
    failures = 0
    pending = iter(requests)
    clock = time.perf_counter

    async def worker(connection: Connection) -> None:
        nonlocal failures
        for head, body in pending:  # the workers share one iterator: each request once
            started = clock()
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                    status, payload = await connection.request(head, body)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError):
                failures += 1
                connection.close()
                continue
            latencies.append(clock() - started)
            if status != 200 or not target.check(payload):
                failures += 1

    started = clock()
    try:
        await asyncio.gather(*(worker(c) for c in connections))
    finally:
        for connection in connections:
            connection.close()
    return clock() - started, latencies, failures


def run_round(
    target: Target, n: int, concurrency: int, watch: dict[str, int], limit_seconds: float
) -> RoundResult:
    """n requests at a fixed concurrency; CPU use of the watched processes over the round."""
    bodies = [target.make_body() for _ in range(n)]
    cpu_before = {name: cpu_seconds(pid) for name, pid in watch.items()}
    own_before = time.process_time()
    wall_before = time.perf_counter()

    async def bounded() -> tuple[float, list[float], int]:
        async with asyncio.timeout(limit_seconds):
            return await _drive(target, bodies, concurrency)

    try:
        seconds, latencies, failures = asyncio.run(bounded())
    except TimeoutError:
        raise RuntimeError(f"{target.name}: {n} requests took over {limit_seconds:.0f}s") from None
    wall = time.perf_counter() - wall_before
    cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in watch.items()}
    cpu["driver"] = time.process_time() - own_before
    return RoundResult(target.name, n, seconds, latencies, failures, wall, cpu)


def round_limit_seconds(n: int) -> float:
    return 60.0 + n * 0.05  # 20 requests/s at the very least, or something is broken


# ---------------------------------------------------------------- reporting


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f}"


def show_round(label: str, result: RoundResult) -> None:
    cpu = "  ".join(f"{name} {result.cpu_percent(name):3.0f}%" for name in result.cpu)
    print(
        f"  {label:<8} {result.target:<8} {result.rps:7.0f} {ms(result.percentile(0.5))} "
        f"{ms(result.percentile(0.99))} {result.failures:6d} {result.cpu_ms_per_request:7.2f}"
        f"   {cpu}",
        flush=True,
    )


ROUND_HEADER = (
    f"  {'round':<8} {'target':<8} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'failed':>6} "
    f"{'CPU ms':>7}   CPU, % of one core\n"
    f"  {'':<8} {'':<8} {'':>7} {'':>7} {'':>7} {'':>6} {'per req':>7}"
)


@dataclass
class Verdict:
    name: str
    figure: str
    passed: bool


def run_micro(rounds: int) -> tuple[str, float | None, float | None]:
    result = subprocess.run(
        [sys.executable, str(MICRO), "--rounds", str(rounds)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=MICRO_TIMEOUT_SECONDS,
        check=False,
    )
    output = result.stdout + result.stderr

    def median_of(label: str) -> float | None:
        found = re.search(rf"{label}\s+median\s+([\d.]+)\s*µs", output)
        return float(found.group(1)) if found else None

    return output, median_of("ALL ANSWERS"), median_of("ALL GOALS")


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args],  # noqa: S607 - git from PATH, no outside input
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    ).stdout


def source_state() -> str:
    """The commit measured, and whether the working tree differs from it."""
    try:
        commit = _git("rev-parse", "--short", "HEAD").strip()
        changed = _git("status", "--porcelain", "--", "src").splitlines()
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"
    return f"commit {commit}" + (
        f", {len(changed)} uncommitted change(s) in src/" if changed else ""
    )


def service_check(payload: bytes) -> bool:
    # A unique goal must be planned by the model: a fallback or cache answer is a failure.
    return b'"source":"llm"' in payload


def floor_check(payload: bytes) -> bool:
    return payload.startswith(b'{"content":"')


def stub_check(payload: bytes) -> bool:
    return b'"choices"' in payload


# ---------------------------------------------------------------- the run


@dataclass
class Options:
    requests: int
    concurrency: int
    rounds: int
    memory_checkpoints: tuple[int, int]
    micro_rounds: int
    stub: Path


def parse_options(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, help="requests per round (default 2000)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--rounds", type=int, help="measured rounds, alternating (default 5)")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 300 requests, 2 rounds, memory 1k/2k"
    )
    parser.add_argument("--stub", type=Path, default=STUB, help="the stub model's script")
    args = parser.parse_args(argv)
    quick = args.quick
    options = Options(
        requests=(300 if quick else 2000) if args.requests is None else args.requests,
        concurrency=args.concurrency,
        rounds=(2 if quick else 5) if args.rounds is None else args.rounds,
        memory_checkpoints=(1_000, 2_000) if quick else (10_000, 20_000),
        micro_rounds=300 if quick else 2000,
        stub=args.stub,
    )
    if not 1 <= options.requests <= 200_000:
        parser.error("--requests must be between 1 and 200000")
    if not 1 <= options.concurrency <= 1024:
        parser.error("--concurrency must be between 1 and 1024")
    if not 2 <= options.rounds <= 50:
        parser.error("--rounds must be between 2 and 50 (one service and one floor at least)")
    if not options.stub.is_file():
        parser.error(f"no stub model at {options.stub}")
    return options


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the `finally` that stops the children runs."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class Servers:
    stub: Child
    service: Child
    floor: Child
    service_ready: float  # seconds from process start to the first 200 from /ready
    direct: Target  # the stub itself: the driver's ceiling
    targets: dict[str, Target]  # service and floor

    def watch(self, target: Target) -> dict[str, int]:
        """The processes whose CPU a round reports (the driver's own is always added)."""
        if target is self.direct:
            return {"stub": self.stub.pid}
        return {target.name: target.pid, "stub": self.stub.pid}


def start_servers(options: Options, fleet: Fleet) -> Servers:
    stub, stub_url = start_stub(fleet, options.stub)
    print(f"\nstub model {stub_url} (pid {stub.pid}), zero latency")
    env = child_env(OPENAI_BASE_URL=stub_url, OPENAI_API_KEY="sk-bench", LOG_LEVEL="WARNING")
    # The driver is the one anonymous caller: its request rate would cap what is measured.
    env["PLANNER_TENANTS__REQUESTS_PER_SECOND"] = "0"
    service, service_port, service_ready = start_server(
        fleet, "service", [sys.executable, "-m", "planner_arm", "serve"], env
    )
    floor, floor_port, floor_ready = start_server(fleet, "floor", [sys.executable, str(FLOOR)], env)
    for child, ready_seconds in ((service, service_ready), (floor, floor_ready)):
        print(
            f"{child.name:<8} pid {child.pid}: ready {ready_seconds:.3f}s after start, "
            f"RSS {rss_mib(child.pid):.1f} MiB"
        )
    direct = Target(
        "stub",
        urlsplit(stub_url).port or 80,
        "/v1/chat/completions",
        lambda: STUB_BODY,
        stub_check,
        stub.pid,
    )
    targets = {
        "service": Target("service", service_port, "/plan", plan_body, service_check, service.pid),
        "floor": Target("floor", floor_port, "/plan", plan_body, floor_check, floor.pid),
    }
    return Servers(stub, service, floor, service_ready, direct, targets)


@dataclass
class Throughput:
    ratio: float  # service/floor req/s: the median of the ratios of adjacent rounds
    served: int  # requests the service has answered so far, warm-up included
    failures: int


def throughput_phase(options: Options, servers: Servers) -> Throughput:
    n, concurrency = options.requests, options.concurrency
    limit = round_limit_seconds(n)
    print(f"\nthroughput: {n} requests per round, concurrency {concurrency}")
    print(ROUND_HEADER)
    ceiling = run_round(servers.direct, n, concurrency, servers.watch(servers.direct), limit)
    show_round("ceiling", ceiling)
    failures = 0
    for target in servers.targets.values():
        warm_up = run_round(target, n, concurrency, servers.watch(target), limit)
        show_round("warm-up", warm_up)
        failures += warm_up.failures
    served = n  # the service's warm-up round
    results: list[RoundResult] = []
    for index in range(options.rounds):
        target = servers.targets["service" if index % 2 == 0 else "floor"]
        result = run_round(target, n, concurrency, servers.watch(target), limit)
        show_round(f"{index + 1}", result)
        results.append(result)
        failures += result.failures
        served += n if target.name == "service" else 0

    print()
    medians = show_medians(results, list(servers.targets))
    ratio = show_adjacent_ratios(results, medians)
    show_doubts(ceiling, results, medians)
    return Throughput(ratio, served, failures)


def show_medians(results: list[RoundResult], names: list[str]) -> dict[str, float]:
    """Each target's median figures over its rounds; returns the median req/s by target."""
    by_target = {name: [r for r in results if r.target == name] for name in names}
    medians = {name: statistics.median(r.rps for r in rs) for name, rs in by_target.items()}
    for name, rounds in by_target.items():
        print(
            f"  median {name:<8} {medians[name]:7.0f} req/s   "
            f"p50 {statistics.median(r.percentile(0.5) for r in rounds) * 1000:6.1f} ms   "
            f"p99 {statistics.median(r.percentile(0.99) for r in rounds) * 1000:6.1f} ms   "
            f"CPU {statistics.median(r.cpu_ms_per_request for r in rounds):5.2f} ms/req   "
            f"({len(rounds)} rounds)"
        )
    return medians


def show_adjacent_ratios(results: list[RoundResult], medians: dict[str, float]) -> float:
    """The service/floor throughput ratio: the median of the ratios of adjacent rounds."""
    # Each service round against each floor round next to it, so drift hits both sides.
    pairs = [(a, b) if a.target == "service" else (b, a) for a, b in itertools.pairwise(results)]
    ratios = [s.rps / f.rps for s, f in pairs]
    cpu_ratios = [f.cpu_ms_per_request / s.cpu_ms_per_request for s, f in pairs]
    ratio = statistics.median(ratios)
    print(
        f"  service/floor throughput {ratio:.3f}: the median of the {len(ratios)} ratios of "
        f"adjacent rounds ({', '.join(f'{x:.2f}' for x in ratios)}); "
        f"the ratio of the medians is {medians['service'] / medians['floor']:.3f}"
    )
    print(
        f"  floor/service CPU per request {statistics.median(cpu_ratios):.3f} (median of "
        "adjacent rounds): the same comparison by CPU time, blind to time spent waiting for a CPU"
    )
    return ratio


def show_doubts(
    ceiling: RoundResult, results: list[RoundResult], medians: dict[str, float]
) -> None:
    """Notes on what may have limited the figures: the driver, or a busy machine."""
    if ceiling.rps < 2 * max(medians.values()):
        print(
            "  NOTE: the driver -> stub ceiling is under twice the targets' rate: the driver "
            "or the stub may be limiting these figures"
        )
    starved = [r for r in results if r.cpu_percent(r.target) < BUSY_TARGET_CPU_PERCENT]
    if starved:
        print(
            f"  NOTE: in {len(starved)} of {len(results)} rounds the target used under "
            f"{BUSY_TARGET_CPU_PERCENT}% of a core, so something else took CPU (load average "
            f"now {os.getloadavg()[0]:.1f}); the CPU-per-request ratio is the steadier figure"
        )


@dataclass
class Memory:
    at_ready: float
    checkpoints: list[tuple[int, float]]  # (requests served, VmRSS MiB)
    failures: int

    @property
    def growth(self) -> float:
        return self.checkpoints[-1][1] - self.checkpoints[0][1]


def memory_phase(options: Options, servers: Servers, served: int, at_ready: float) -> Memory:
    """The service's RSS at two request counts, driving it with more unique goals between."""
    service = servers.targets["service"]
    print("\nmemory: service VmRSS, unique goals")
    print(f"  after start-up           {at_ready:7.1f} MiB")
    print(f"  after {served:>7,} requests {rss_mib(service.pid):7.1f} MiB   (the rounds above)")
    first, second = options.memory_checkpoints
    if served >= first:
        first, second = served, served + (second - first)
    checkpoints: list[tuple[int, float]] = []
    failures = 0
    for checkpoint in (first, second):
        sent = served < checkpoint
        while served < checkpoint:
            batch = min(options.requests, checkpoint - served)
            result = run_round(service, batch, options.concurrency, {}, round_limit_seconds(batch))
            failures += result.failures
            served += batch
        servers.service.check_alive()
        checkpoints.append((served, rss_mib(service.pid)))
        if sent:  # else the line above is this checkpoint
            print(f"  after {served:>7,} requests {checkpoints[-1][1]:7.1f} MiB")
    memory = Memory(at_ready, checkpoints, failures)
    print(f"  growth from {first:,} to {second:,}: {memory.growth:+.1f} MiB")
    return memory


def verdicts(
    servers: Servers,
    throughput: Throughput,
    memory: Memory,
    pipeline_us: float | None,
    fallback_us: float | None,
) -> list[Verdict]:
    found: list[Verdict] = [
        Verdict(
            f"throughput >= {MIN_THROUGHPUT_RATIO} x floor",
            f"{throughput.ratio:.3f}",
            throughput.ratio >= MIN_THROUGHPUT_RATIO,
        )
    ]
    for label, value, bound in (
        ("parse-to-estimate median", pipeline_us, MAX_PIPELINE_MEDIAN_US),
        ("fallback plan median", fallback_us, MAX_FALLBACK_MEDIAN_US),
    ):
        figure = "not found in micro.py's output" if value is None else f"{value:.1f} µs"
        found.append(
            Verdict(f"{label} < {bound / 1000:g} ms", figure, value is not None and value < bound)
        )
    (first, _), (second, rss) = memory.checkpoints
    failures = throughput.failures + memory.failures
    found += [
        Verdict(f"service RSS < {MAX_RSS_MIB:g} MiB", f"{rss:.1f} MiB", rss < MAX_RSS_MIB),
        Verdict(
            f"RSS growth {first:,} -> {second:,} < {MAX_RSS_GROWTH_MIB:g} MiB",
            f"{memory.growth:+.1f} MiB",
            memory.growth < MAX_RSS_GROWTH_MIB,
        ),
        Verdict(
            f"ready < {MAX_READY_SECONDS:g} s",
            f"{servers.service_ready:.3f} s",
            servers.service_ready < MAX_READY_SECONDS,
        ),
        Verdict(
            "every answer a 200 plan from the model",
            f"{failures} failed",
            failures == 0,
        ),
    ]
    return found


def benchmark(options: Options, fleet: Fleet) -> list[Verdict]:
    print(
        f"planner-arm load benchmark: {options.requests} requests x {options.rounds} rounds, "
        f"concurrency {options.concurrency}, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}"
    )
    print(f"source: {source_state()}")
    # First, while the machine is quiet: no server is running yet.
    print(f"\nin-process micro figures (benchmarks/micro.py --rounds {options.micro_rounds})")
    micro_output, pipeline_us, fallback_us = run_micro(options.micro_rounds)
    for line in micro_output.rstrip().splitlines():
        print(f"  | {line}")

    servers = start_servers(options, fleet)
    at_ready = rss_mib(servers.service.pid)
    throughput = throughput_phase(options, servers)
    memory = memory_phase(options, servers, throughput.served, at_ready)
    return verdicts(servers, throughput, memory, pipeline_us, fallback_us)


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="planner-load-") as tmp:
        fleet = Fleet(Path(tmp))
        try:
            verdicts = benchmark(options, fleet)
        except RuntimeError as exc:
            print(f"\nbenchmark failed: {exc}\n{fleet.tails()}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("\ninterrupted", file=sys.stderr)
            return 130
        finally:
            fleet.stop_all()
    print("\ntargets")
    for verdict in verdicts:
        print(f"  {'PASS' if verdict.passed else 'MISS'}  {verdict.name:<44} {verdict.figure}")
    return 0 if all(v.passed for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
