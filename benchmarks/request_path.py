"""The path of one request through the package: which modules run, and how often it changes folder.

    .venv/bin/python benchmarks/request_path.py [--stream] [--no-model] [--tools]

Serves one flat POST /plan in process (the app with its lifespan, a model answered by an in-
memory transport with a valid plan, so the model path runs end to end) under `sys.setprofile`,
and prints every `planner_arm` module whose code ran, in the order first entered, then the
number of modules, the number of switches between folders (`api`, `service`, `strategies`,
`pipeline`, `llm`, `store`, `plan`, `rules`, `tools`, and the top-level modules as `-`), and how
many times each folder was entered. `--tools`: the request brings four tools of its own (MCP's
shape) and is planned by rule (no model), and the switches between the folders of the tool
planner and what it reads are counted apart. Only calls count: a coroutine that resumes after an
await (the profiler reports it as a call too, for every frame of the chain that waited) enters
nothing anew. Start-up and shutdown are outside the count: only the request is profiled.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dis
import itertools
import json
import sys
import threading
from types import FrameType
from typing import Any

import httpx

from planner_arm.api.app import create_app
from planner_arm.config import load_settings

PACKAGE = "planner_arm"
GOAL = "Fix authentication bug and add tests"
TOOLS_GOAL = "Find the book Dune and place a hold on it for member M-7, then email me the due date"


def _tool(name: str, description: str, properties: dict[str, str], required: list[str]) -> Any:
    schema = {
        "type": "object",
        "properties": {key: {"type": kind} for key, kind in properties.items()},
        "required": required,
    }
    return {"name": name, "description": description, "inputSchema": schema}


TOOLS = [
    _tool("search_books", "Search the catalogue by title or author", {"query": "string"},
          ["query"]),
    _tool("get_member", "Look up a library member by id", {"member_id": "string"},
          ["member_id"]),
    _tool("place_hold", "Place a hold on a book for a member",
          {"book_id": "string", "member_id": "string"}, ["book_id", "member_id"]),
    _tool("send_email", "Send an email to a recipient", {"to": "string", "body": "string"},
          ["to", "body"]),
]  # fmt: skip
ANSWER = {
    "plan": [
        {
            "step": i,
            "action": action,
            "required_arm": arm,
            "acceptance_criteria": [f"{action} is done and recorded"],
            "depends_on": [i - 1] if i > 1 else [],
            "estimated_cost_tier": 2,
            "estimated_duration_seconds": 60,
        }
        for i, (action, arm) in enumerate(
            [
                ("Find the code that checks the login token", "retriever"),
                ("Fix the token check in the login handler", "coder"),
                ("Write tests for the fixed token check", "coder"),
                ("Run the whole test suite", "executor"),
                ("Check every step against the goal and constraints", "judge"),
            ],
            start=1,
        )
    ],
    "rationale": "Find, fix, test, run, check.",
    "confidence": 0.8,
    "complexity_score": 0.4,
}


def _completion(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    text = json.dumps(ANSWER)
    if body.get("stream"):
        chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
        data = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
        return httpx.Response(200, text=data, headers={"content-type": "text/event-stream"})
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-path",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 900, "completion_tokens": 300, "total_tokens": 1200},
        },
    )


RESUME = dis.opmap.get("RESUME")


def resumed(frame: FrameType) -> bool:
    """Whether a "call" event is a coroutine (or generator) going on after an await: its
    frame stands at a RESUME that is not the one a function starts with (oparg 0)."""
    code, at = frame.f_code.co_code, frame.f_lasti
    return (
        RESUME is not None and 0 <= at < len(code) - 1 and code[at] == RESUME and code[at + 1] != 0
    )


class PathRecorder:
    """The package modules entered by calls, in order, while it is installed."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str]] = []  # (thread, module), in call order
        self.resumptions = 0
        self.active = False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.active or event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module == PACKAGE or module.startswith(PACKAGE + "."):
            if resumed(frame):
                self.resumptions += 1
            else:
                self.calls.append((threading.get_ident(), module))


def folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else "-"


def switches(folders: list[str]) -> int:
    return sum(1 for before, after in itertools.pairwise(folders) if before != after)


def summary(calls: list[tuple[int, str]]) -> tuple[list[str], int, int, dict[str, int]]:
    """The modules in order of first entry; the switches between folders along each thread's
    calls (the event loop's, and the worker threads' that take the CPU work); the same
    without the top-level modules every folder uses (the clock, metrics, errors); and how many
    times each folder was entered along them."""
    modules = list(dict.fromkeys(module for _, module in calls))
    every = inner = 0
    entered: collections.Counter[str] = collections.Counter()
    for thread in dict.fromkeys(thread for thread, _ in calls):
        folders = [folder(module) for ident, module in calls if ident == thread]
        every += switches(folders)
        runs = [name for name, _ in itertools.groupby(n for n in folders if n != "-")]
        inner += len(runs) - 1 if runs else 0
        entered.update(runs)
    return modules, every, inner, dict(entered)


async def one_request(stream: bool, with_model: bool, tools: bool = False) -> PathRecorder:
    overrides: dict[str, Any] = {"cache": {"enabled": False}}
    if with_model:
        overrides["model"] = {"base_url": "http://model.invalid/v1"}
        overrides["api_key"] = "sk-path"
    settings = load_settings(**overrides)
    model_client = httpx.AsyncClient(transport=httpx.MockTransport(_completion))
    app = create_app(settings, http_client=model_client)
    recorder = PathRecorder()
    # Worker threads too (the CPU work on a plan runs off the event loop): every thread
    # started from here on carries the recorder, which counts only while `active`.
    threading.setprofile(recorder)
    async with app.router.lifespan_context(app) as state:

        async def served(scope: Any, receive: Any, send: Any) -> None:
            # As a server does: each request's scope carries the state the lifespan yielded.
            if scope["type"] == "http":
                scope = {**scope, "state": dict(state or {})}
            await app(scope, receive, send)

        transport = httpx.ASGITransport(app=served)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            # A streamed answer is asked for by its media type (server-sent events).
            headers = {"accept": "text/event-stream"} if stream else {}
            # One request first, so that lazy set-up (imports, caches) is not on the path.
            body: dict[str, Any] = {"goal": TOOLS_GOAL, "tools": TOOLS} if tools else {"goal": GOAL}
            warm = {**body, "goal": "Warm the path up"}
            await client.post("/plan", json=warm, headers=headers)
            sys.setprofile(recorder)
            recorder.active = True
            try:
                response = await client.post("/plan", json=body, headers=headers)
            finally:
                recorder.active = False
                sys.setprofile(None)
            response.raise_for_status()
    threading.setprofile(None)
    await model_client.aclose()
    return recorder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--stream", action="store_true", help="a streamed answer (server-sent events)"
    )
    parser.add_argument("--no-model", action="store_true", help="no model: the rule-based plan")
    parser.add_argument(
        "--tools", action="store_true", help="four tools of the request's own, planned by rule"
    )
    args = parser.parse_args()
    with_model = not (args.no_model or args.tools)
    recorder = asyncio.run(one_request(args.stream, with_model, args.tools))
    modules, every_switch, folder_switches, entered = summary(recorder.calls)
    for module in modules:
        print(f"  {module}")
    kind = "streamed" if args.stream else "flat"
    source = "model" if with_model else "rule-based"
    if args.tools:
        source += " tool"
    folders = ", ".join(f"{name} {count}" for name, count in sorted(entered.items()))
    print(
        f"one {kind} POST ({source} plan): {len(modules)} modules; "
        f"{folder_switches} switches between folders "
        f"({every_switch} counting calls into the top-level modules); "
        f"folders entered: {folders} ({recorder.resumptions} resumptions after an await "
        "not counted)"
    )
    if args.tools:
        print(f"between the tool planner's folders: {planner_switches(recorder.calls)}")


def planner_switches(calls: list[tuple[int, str]]) -> str:
    """Switches between the folders a tool plan is made in (`rules`, `plan`, `tools`),
    each pair counted apart, the other folders and the top-level modules left out."""
    pairs: collections.Counter[str] = collections.Counter()
    for thread in dict.fromkeys(thread for thread, _ in calls):
        folders = [folder(module) for ident, module in calls if ident == thread]
        kept = [name for name in folders if name in ("rules", "plan", "tools")]
        for before, after in itertools.pairwise(kept):
            if before != after:
                pairs[" <-> ".join(sorted((before, after)))] += 1
    return ", ".join(f"{pair} {count}" for pair, count in sorted(pairs.items())) or "none"


if __name__ == "__main__":
    main()
