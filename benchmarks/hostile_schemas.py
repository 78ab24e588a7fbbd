"""Tool schemas written to hurt, and what they cost the service: /health, probed every 10 ms
from a process of its own, while each hostile request runs, and the request's own answer.

    .venv/bin/python benchmarks/hostile_schemas.py [--rounds 3]

Starts the service (`python -m planner_arm serve`, memory store, no model: every step's
arguments by rule, the path where a caller's values meet its own schema) on a free loopback
port and sends, `--rounds` times each, a `POST /plan` with `specialize: true` over one tool
whose schema is one of:

- a `$ref` to a loopback port that takes connections and never answers;
- `uniqueItems` over 5,500 items that do not sort (numbers and strings), given in `context`;
- `allOf` over two references to the next definition, 30 levels (2**30 subschemas, 1.3 KB);
- `patternProperties` `^(a+)+$` beside `additionalProperties: false`, with 4 keys that make
  the pattern backtrack, given in `context`;
- a recursive schema whose every level applies eight references to the next, with a value
  nested as deep as `context` may be;
- a schema pydantic writes (an enum and a nested model under `$defs`): the ordinary case.

Each case has a service of its own, warmed by one ordinary request first (the process's
first request with tools loads the search index's libraries, whatever its schema).

Prints each case's answer status, its slowest and median time, and the slowest and 99th
percentile /health answer meanwhile, beside the targets: /health within 100 ms, every answer
within the request deadline (10 s) and none a 5xx. Exits 0 when every target is met, else 1.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx

from tool_sets import HealthProbe, Service

HEALTH_TARGET_MS = 100.0
DEADLINE_S = 10.0


def _tool(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "hostile_tool",
        "description": "Do the thing the goal asks",
        "inputSchema": schema,
    }


def _never_answers(port: int) -> tuple[dict[str, Any], dict[str, Any]]:
    schema = {
        "type": "object",
        "properties": {"unit": {"$ref": f"http://127.0.0.1:{port}/unit.json"}},
        "required": ["unit"],
    }
    return _tool(schema), {"unit": "celsius"}


def _unique_items() -> tuple[dict[str, Any], dict[str, Any]]:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "uniqueItems": True}},
        "required": ["items"],
    }
    # Numbers and one string: they do not sort, so the library compared every pair.
    items: list[Any] = [*range(5_499), "x"]
    return _tool(schema), {"items": items}


def _doubling() -> tuple[dict[str, Any], dict[str, Any]]:
    defs: dict[str, Any] = {
        f"d{n}": {"allOf": [{"$ref": f"#/$defs/d{n + 1}"}, {"$ref": f"#/$defs/d{n + 1}"}]}
        for n in range(30)
    }
    defs["d30"] = {"type": "string"}
    schema = {"type": "object", "$defs": defs, "properties": {"v": {"$ref": "#/$defs/d0"}}}
    return _tool(schema), {"v": "x"}


def _backtracking() -> tuple[dict[str, Any], dict[str, Any]]:
    schema = {
        "type": "object",
        "properties": {
            "options": {
                "type": "object",
                "patternProperties": {"^(a+)+$": {"type": "integer"}},
                "additionalProperties": False,
            }
        },
        "required": ["options"],
    }
    keys = {"a" * (28 + n) + "b": n for n in range(4)}
    return _tool(schema), {"options": keys}


def _fan_out() -> tuple[dict[str, Any], dict[str, Any]]:
    node = {"allOf": [{"$ref": "#/$defs/N"} for _ in range(8)]}
    schema = {
        "type": "object",
        "$defs": {"N": {"type": "object", "properties": {"a": node}}},
        "properties": {"tree": {"$ref": "#/$defs/N"}},
        "required": ["tree"],
    }
    value: dict[str, Any] = {}
    for _ in range(6):  # with `tree` and the context itself: 8 levels, the context's limit
        value = {"a": value}
    return _tool(schema), {"tree": value}


def _pydantic() -> tuple[dict[str, Any], dict[str, Any]]:
    schema = {
        "$defs": {
            "Place": {
                "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
                "required": ["city"],
                "type": "object",
            },
            "Unit": {"enum": ["celsius", "fahrenheit"], "type": "string"},
        },
        "properties": {"place": {"$ref": "#/$defs/Place"}, "unit": {"$ref": "#/$defs/Unit"}},
        "required": ["place", "unit"],
        "type": "object",
    }
    return _tool(schema), {"place": {"city": "Paris"}, "unit": "celsius"}


def run_case(
    base: str, tool: dict[str, Any], context: dict[str, Any], rounds: int
) -> dict[str, Any]:
    body = {"goal": "Do the thing", "context": context, "tools": [tool], "specialize": True}
    content = json.dumps(body).encode()
    seconds: list[float] = []
    statuses: list[int] = []
    headers = {"content-type": "application/json"}
    probe = HealthProbe(base)
    try:
        with probe, httpx.Client(base_url=base, timeout=60) as client:
            for _ in range(rounds):
                started = time.perf_counter()
                try:
                    response = client.post("/plan", content=content, headers=headers)
                    statuses.append(response.status_code)
                except httpx.TimeoutException:
                    statuses.append(0)  # no answer within a minute
                seconds.append(time.perf_counter() - started)
    except EOFError:
        probe.seconds = []  # the probe gave up: one /health waited past its 30 s
    # No /health answer while the case ran: /health waited as long as the case took.
    worst, p99, _ = probe.figures() if probe.seconds else (sum(seconds) * 1000,) * 3
    return {
        "bytes": len(content),
        "statuses": sorted(set(statuses)),
        "slowest": max(seconds),
        "median": statistics.median(seconds),
        "health_max": worst,
        "health_p99": p99,
    }


def _stop(service: Service) -> None:
    try:
        service.stop()
    except subprocess.TimeoutExpired:  # a loop frozen by a case does not stop when asked
        for child in service.children:
            child.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    cases = {
        "$ref to a port that never answers": _never_answers(listener.getsockname()[1]),
        "uniqueItems over 5,500 unsortable": _unique_items(),
        "allOf doubling over 30 $defs": _doubling(),
        "patternProperties ^(a+)+$, 4 keys": _backtracking(),
        "recursive fan-out of 8, 8 deep": _fan_out(),
        "pydantic enum and nested model": _pydantic(),
    }
    ok = True
    print(
        f"{'case':<36}{'bytes':>8}{'status':>10}{'median s':>10}{'slowest s':>11}"
        f"{'/health max ms':>16}{'p99 ms':>8}"
    )
    try:
        for name, (tool, context) in cases.items():
            # A service of its own for each case: what one case leaves running (a retrieval
            # that never ends) does not count against the next.
            service = Service({}, stub=False)
            try:
                # The first request with tools loads the search index's libraries (numpy,
                # bm25s): a cost of the process's first tool set, whatever its schema.
                run_case(service.base, *_pydantic(), rounds=1)
                found = run_case(service.base, tool, context, args.rounds)
            finally:
                _stop(service)
            statuses = ",".join(str(status) for status in found["statuses"])
            print(
                f"{name:<36}{found['bytes']:>8}{statuses:>10}{found['median']:>10.3f}"
                f"{found['slowest']:>11.3f}{found['health_max']:>16.1f}{found['health_p99']:>8.1f}"
            )
            ok = ok and found["health_max"] <= HEALTH_TARGET_MS
            ok = ok and found["slowest"] <= DEADLINE_S and 0 < max(found["statuses"]) < 500
        try:
            listener.setblocking(False)
            listener.accept()
            print("the port that never answers was connected to: a schema was fetched")
            ok = False
        except BlockingIOError:
            print("the port that never answers was never connected to")
    finally:
        listener.close()
    print(
        f"targets: /health at most {HEALTH_TARGET_MS:.0f} ms, every answer within "
        f"{DEADLINE_S:.0f} s and no 5xx: {'PASS' if ok else 'MISS'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
