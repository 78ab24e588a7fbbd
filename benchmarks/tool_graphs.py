"""Planning over a caller's own tools, scored against gold tool graphs.

    .venv/bin/python benchmarks/tool_graphs.py --model-url http://127.0.0.1:8080/v1 [--model M]
        [--data DIR] [--split dev|heldout|all] [--cases N] [--seed S]
        [--systems service,direct,rules] [--tool-shortlist N] [--concurrency N]
        [--json out.json]
    .venv/bin/python benchmarks/tool_graphs.py --stub --data benchmarks/data/tiny-tools
    .venv/bin/python benchmarks/tool_graphs.py --domains --systems rules [--examples 3] [--verbose]

DIR holds `tools.json` (`{"nodes": [{"id", "desc"}, ...]}`) and `cases.jsonl` (one request a
line: `id`, `user_request`, `task_nodes` `[{"task": tool id}]`, `task_links`
`[{"source", "target"}]`); the default is `../shared/benchmarks/tool-graphs/ultratool` from the
repository root. `--data` may be given more than once, and `--domains` adds the four everyday
MCP domains of `benchmarks/data` (library, clinic, bike-share, box-office): one row of figures
per data set. A seeded sample of N cases of the split goes through each system:

- service: POST /plan of the app built in this process (create_app, served through httpx's
  ASGITransport), the model at --model-url, the case's tools in the `tools` field;
- direct: the same model prompted directly, the usual baseline for this data: the tools as
  JSON lines, one worked example (a dev case outside the sample), the request, and the answer
  asked as strict JSON `{"task_steps", "task_nodes", "task_links"}`; an answer that does not
  parse gets one follow-up call asking for it as strict JSON;
- rules: the service with no model configured (its rule-based planner).

`--tool-shortlist N` sets the service's `planning.tool_shortlist` (0: its prompt lists every
tool, the same opening for every request; default: the shortlist of the 40 tools most
relevant to each request), to measure prompt size and time per plan both ways.
`--concurrency N` keeps N requests in flight at once (the next starts as one ends), as users
share one model server; each plan's seconds are its own, waiting included.

Scoring, per request: node F1 between the predicted and the gold sets of tool ids, link F1
between the sets of (source, target) pairs (requests whose gold graph has no link are left out
of it); a prediction that does not parse or names a tool outside the set scores 0. Accuracy is
the share of requests with node F1 >= 0.99. A service plan's nodes are its steps'
`required_arm`s; its links, for each step and each step it depends on, (that step's tool, this
step's tool). `--stub` serves a stub model on loopback that answers each request with its gold
graph, so the whole harness runs without a real model.

An MCP domain is a DIR with `server.py` instead of `tools.json`: a FastMCP server object named
`server` and `WRITE_TOOLS`, the names of its tools that change something. Its tools are listed
through the MCP protocol in this process (an in-memory client session over the server) and
sent to POST /plan as `tools/list` gives them (`name`, `description`, `inputSchema`,
`outputSchema`), with `specialize: true`, so each step carries its arguments. Its cases may
also hold `arguments` (`{tool: {argument: value}}`, values a careful reader is sure of) and
`unplanned` (the words of the goal that ask for what no tool does). Every case of a domain is
scored (the split is for UltraTool's thousands), except the `--examples` K chosen by seed,
which are sent as the request's worked examples (its `examples` field). Besides the F1s, a
domain reports `writes_added` (steps over a write tool that the gold plan does not have),
`dropped` (plans missing a gold tool with no `goal_part_unplanned` warning), `unplanned_hit`
(the share of `unplanned` parts such a warning names: most of the part's words are in its
detail) and `arguments` (the share of expected values a step of that tool has: equal, or for
text, the expected text within the planned value, case aside).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import json
import logging
import os
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import openai
from mcp.shared.memory import create_connected_server_and_client_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from planner_arm.api.app import create_app
from planner_arm.config import ArmSpec, Settings, WorkedExample, load_settings
from planner_arm.tools.index import ExampleIndex, ToolIndex
from support.app import with_lifespan
from support.stub_model import DEFAULT_MODEL, Reply, StubLLM

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "benchmarks" / "tool-graphs" / "ultratool"
SYSTEMS = ("service", "direct", "rules")
SPLITS = ("dev", "heldout", "all")
DOMAINS = [
    ROOT / "benchmarks" / "data" / name
    for name in ("library", "clinic", "bike-share", "box-office")
]
DEFAULT_EXAMPLES = 1000  # worked examples of a tools.json set, in the service's configuration
HELDOUT_BUCKETS = 5  # a fifth of the cases, by a hash of their id, is held out
FULL_MARKS = 0.99  # node F1 at or above this counts as an exact plan
MAX_BODY_BYTES = 4 * 1024 * 1024  # a large tool set is well past the default body limit


# ---------------------------------------------------------------- data


@dataclass(frozen=True)
class Tool:
    id: str
    description: str


@dataclass(frozen=True)
class Graph:
    nodes: frozenset[str]
    links: frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Case:
    id: str
    request: str
    gold: Graph
    order: tuple[str, ...]  # the gold nodes in their listed order
    # (tool, argument, value) a step of that tool should be given; the goal's words that ask
    # for what no tool does.
    arguments: tuple[tuple[str, str, Any], ...] = ()
    unplanned: tuple[str, ...] = ()


def load_data(directory: Path) -> tuple[list[Tool], list[Case]]:
    """The tools and cases of a data directory (tools.json and cases.jsonl)."""
    nodes = json.loads((directory / "tools.json").read_text(encoding="utf-8"))["nodes"]
    tools = [Tool(str(node["id"]), str(node.get("desc", ""))) for node in nodes]
    return tools, load_cases(directory)


def load_cases(directory: Path) -> list[Case]:
    """The cases of a data directory's cases.jsonl."""
    cases = []
    with (directory / "cases.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            row = json.loads(line)
            order = tuple(str(node["task"]) for node in row["task_nodes"])
            links = frozenset((str(ln["source"]), str(ln["target"])) for ln in row["task_links"])
            gold = Graph(frozenset(order), links)
            arguments = tuple(
                (str(tool), str(name), value)
                for tool, values in (row.get("arguments") or {}).items()
                for name, value in values.items()
            )
            unplanned = tuple(str(part) for part in row.get("unplanned") or ())
            request = str(row["user_request"]).strip()
            cases.append(Case(str(row["id"]), request, gold, order, arguments, unplanned))
    return cases


def is_mcp_domain(directory: Path) -> bool:
    return (directory / "server.py").is_file()


def import_server(directory: Path) -> ModuleType:
    """A domain's server.py, imported by path under a name of its own (pydantic resolves its
    models' annotations through the module, so it is registered in sys.modules)."""
    name = "tool_graphs_domain_" + "".join(c if c.isalnum() else "_" for c in directory.name)
    spec = importlib.util.spec_from_file_location(name, directory / "server.py")
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot import {directory / 'server.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # FastMCP sets up the root logger (a handler at INFO) when a server is made: the import
    # leaves the process's logging as it was.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        spec.loader.exec_module(module)
    finally:
        root.handlers[:], root.level = handlers, level
    return module


MCP_TOOL_KEYS = ("name", "description", "inputSchema", "outputSchema")


async def list_mcp_tools(server: Any) -> list[dict[str, Any]]:
    """The server's tools as an MCP client gets them from `tools/list`, through an in-memory
    session (the whole protocol, in this process)."""
    async with create_connected_server_and_client_session(server._mcp_server) as session:
        listed = await session.list_tools()
    tools = []
    for tool in listed.tools:
        item = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        tools.append({key: item[key] for key in MCP_TOOL_KEYS if key in item})
    return tools


@dataclass
class DataSet:
    """A data directory, read: its tools (for the direct prompt and the shortlist), its cases
    and, for an MCP domain, its tools as `tools/list` gives them and its write tools."""

    path: Path
    tools: list[Tool]
    cases: list[Case]
    mcp_tools: list[dict[str, Any]] | None = None
    write_tools: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self.path.name


async def load_set(directory: Path) -> DataSet:
    if not is_mcp_domain(directory):
        tools, cases = load_data(directory)
        return DataSet(directory, tools, cases)
    module = import_server(directory)
    mcp_tools = await list_mcp_tools(module.server)
    tools = [Tool(item["name"], str(item.get("description", ""))) for item in mcp_tools]
    writes = frozenset(getattr(module, "WRITE_TOOLS", ()))
    return DataSet(directory, tools, load_cases(directory), mcp_tools, writes)


def split_of(case_id: str) -> str:
    """`heldout` for about a fifth of the cases, fixed by the id alone; `dev` for the rest."""
    digest = int(hashlib.sha256(case_id.encode()).hexdigest(), 16)
    return "heldout" if digest % HELDOUT_BUCKETS == 0 else "dev"


def choose_cases(cases: list[Case], split: str, count: int, seed: int) -> tuple[list[Case], Case]:
    """A seeded sample of `count` cases of `split`, and the worked example for the direct
    prompt: a dev case that is not in the sample."""
    rng = random.Random(seed)
    dev = [case for case in cases if split_of(case.id) == "dev"]
    if not dev:
        raise ValueError("no dev case to take the worked example from")
    example = rng.choice(dev)
    pool = [c for c in cases if c is not example and split in ("all", split_of(c.id))]
    return rng.sample(pool, min(count, len(pool))), example


# ---------------------------------------------------------------- scoring


def f1(predicted: frozenset[Any], gold: frozenset[Any]) -> float:
    if not predicted or not gold:
        return 0.0
    hits = len(predicted & gold)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(predicted), hits / len(gold)
    return 2 * precision * recall / (precision + recall)


def names_only(graph: Graph, known: set[str]) -> bool:
    """True when every node and link end of `graph` is a tool of the set."""
    ends = {end for link in graph.links for end in link}
    return graph.nodes <= known and ends <= known


@dataclass(frozen=True)
class Score:
    node_f1: float
    link_f1: float | None  # None when the gold graph has no link
    valid: bool


def score(predicted: Graph | None, gold: Graph, known: set[str]) -> Score:
    """One request's score; an unparseable prediction (None) or one that names a tool outside
    `known` scores 0."""
    no_link = None if not gold.links else 0.0
    if predicted is None or not names_only(predicted, known):
        return Score(0.0, no_link, valid=False)
    link_f1 = f1(predicted.links, gold.links) if gold.links else None
    return Score(f1(predicted.nodes, gold.nodes), link_f1, valid=True)


# ---------------------------------------------------------------- an MCP domain's further figures

UNPLANNED = "goal_part_unplanned"
NAMED_SHARE = 0.6  # a warning names a part when it holds this share of the part's words


def unplanned_details(warnings: list[dict[str, Any]]) -> list[str]:
    return [str(note.get("detail", "")) for note in warnings if note.get("code") == UNPLANNED]


def writes_added(plan: list[dict[str, Any]], gold: Graph, write_tools: frozenset[str]) -> int:
    """The plan's steps over a write tool that the gold plan does not call."""
    return sum(
        step.get("required_arm") in write_tools and step.get("required_arm") not in gold.nodes
        for step in plan
    )


def silently_dropped(predicted: Graph | None, gold: Graph, warnings: list[dict[str, Any]]) -> bool:
    """A gold tool is missing from the plan and no warning says a part of the goal went
    unplanned."""
    missing = gold.nodes - (predicted.nodes if predicted is not None else frozenset())
    return bool(missing) and not unplanned_details(warnings)


def _words(text: str) -> list[str]:
    return "".join(c.lower() if c.isalnum() else " " for c in text).split()


def unplanned_named(parts: tuple[str, ...], warnings: list[dict[str, Any]]) -> int:
    """How many of `parts` a `goal_part_unplanned` warning names: one whose detail holds most
    of the part's words (a detail is cut at 80 characters, so its last words may be missing)."""
    details = [set(_words(detail)) for detail in unplanned_details(warnings)]
    named = 0
    for part in parts:
        words = _words(part)
        if words and any(sum(w in d for w in words) >= NAMED_SHARE * len(words) for d in details):
            named += 1
    return named


def step_arguments(step: dict[str, Any]) -> dict[str, Any]:
    """A step's arguments: its `input`, or what a `needs` input found so far."""
    given = step.get("input")
    if not isinstance(given, dict):
        return {}
    if "needs" in given:
        found = given.get("arguments")
        return found if isinstance(found, dict) else {}
    return given


def value_matches(expected: Any, planned: Any) -> bool:
    if isinstance(expected, str):
        return isinstance(planned, str) and expected.casefold() in planned.casefold()
    if isinstance(expected, bool) or isinstance(planned, bool):  # True is not 1
        return expected is planned
    return bool(expected == planned)


def arguments_matched(
    expected: tuple[tuple[str, str, Any], ...], plan: list[dict[str, Any]]
) -> int:
    """How many expected (tool, argument, value) a step over that tool has."""
    return sum(
        any(
            step.get("required_arm") == tool
            and value_matches(value, step_arguments(step).get(name))
            for step in plan
        )
        for tool, name, value in expected
    )


def _strict_json(text: str) -> Any:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the answer")
    return json.loads(text[start : end + 1])


def graph_from_answer(text: str | None) -> Graph | None:
    """The tool graph of a direct answer `{"task_nodes", "task_links", ...}`; None when it
    does not parse or does not have that shape."""
    try:
        answer = _strict_json(text or "")
        nodes = [node["task"] if isinstance(node, dict) else node for node in answer["task_nodes"]]
        links = [(link["source"], link["target"]) for link in answer.get("task_links") or []]
    except (ValueError, LookupError, TypeError):
        return None
    if not all(isinstance(name, str) for name in [*nodes, *(end for ln in links for end in ln)]):
        return None
    return Graph(frozenset(nodes), frozenset(links))


def graph_from_plan(plan: Any) -> Graph | None:
    """The tool graph of a service plan (the `plan` list of POST /plan's answer): its steps'
    `required_arm`s, and (dependency's tool, step's tool) for each `depends_on`."""
    try:
        tool_of = {step["step"]: step["required_arm"] for step in plan}
        links = {
            (tool_of[dep], step["required_arm"]) for step in plan for dep in step["depends_on"]
        }
    except (LookupError, TypeError):
        return None
    return Graph(frozenset(tool_of.values()), frozenset(links))


# ---------------------------------------------------------------- the direct prompt

ANSWER_SHAPE = (
    '{"task_steps": ["Step 1: Call <tool id> to ...", ...], '
    '"task_nodes": [{"task": "<tool id from # TOOLS #>"}, ...], '
    '"task_links": [{"source": "<tool id>", "target": "<tool id>"}, ...]}'
)


def tool_lines(tools: list[Tool]) -> str:
    return "".join(json.dumps({"id": t.id, "desc": t.description}) + "\n" for t in tools)


def gold_answer(case: Case) -> dict[str, Any]:
    """A case's gold graph as a direct answer (what the worked example shows)."""

    first = {tool: n for n, tool in reversed(list(enumerate(case.order)))}

    def at(link: tuple[str, str]) -> tuple[int, int]:  # links in the order of their calls
        return first.get(link[0], len(first)), first.get(link[1], len(first))

    return {
        "task_steps": [f"Step {n}: Call {tool}" for n, tool in enumerate(case.order, 1)],
        "task_nodes": [{"task": tool} for tool in case.order],
        "task_links": [{"source": s, "target": t} for s, t in sorted(case.gold.links, key=at)],
    }


def direct_prompt(tools: list[Tool], example: Case, request: str) -> str:
    return (
        f"# TOOLS #:\n{tool_lines(tools)}\n"
        "# TASK #: Using only the tools above, break the # REQUEST # down into tool calls and "
        "say which calls need which. Answer in strict JSON, exactly this shape:\n"
        f"{ANSWER_SHAPE}\n\n"
        "# RULES #:\n"
        "1. Every task must be a tool id listed in # TOOLS #, and the calls together must "
        "fully satisfy the request.\n"
        "2. One step per node, in the same order: as many task_steps as task_nodes.\n"
        "3. A link from A to B means B runs after A and uses what A did; the links give the "
        "order in which the tools are called.\n\n"
        "A worked example:\n"
        f"# REQUEST #: {example.request}\n"
        f"# ANSWER #: {json.dumps(gold_answer(example))}\n\n"
        f"# REQUEST #: {request}\n"
        "Write your answer now, as strict JSON only.\n# ANSWER #:"
    )


def reformat_prompt(answer: str) -> str:
    return (
        "The # ANSWER # below was meant to be strict JSON but does not parse. Write it again "
        "as strict JSON that json.loads() accepts, without changing its steps, nodes or links, "
        f"in this shape:\n{ANSWER_SHAPE}\n\n# ANSWER #: {answer}\n# STRICT JSON #:"
    )


# ---------------------------------------------------------------- running the systems


@dataclass
class Outcome:
    """One request through one system."""

    case: str
    graph: Graph | None
    seconds: float
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    source: str | None = None
    note: str | None = None  # an error, or why the service fell back
    plan: list[dict[str, Any]] = field(default_factory=list)  # a service plan's steps
    warnings: list[dict[str, Any]] = field(default_factory=list)  # a service plan's warnings


@dataclass
class Run:
    tools: list[Tool]
    example: Case
    model: str
    model_url: str | None
    api_key: str
    timeout: float
    max_tokens: int
    # Worked examples for the service (dev cases outside the sample), in its config shape.
    examples: list[dict[str, Any]] = field(default_factory=list)
    # The service's `planning.tool_shortlist` (0: every tool listed); None: the default.
    tool_shortlist: int | None = None
    # An MCP domain's tools as tools/list gives them (sent instead of `tools`, with
    # `specialize: true`), and the worked examples sent in each request's `examples`.
    mcp_tools: list[dict[str, Any]] | None = None
    request_examples: list[dict[str, Any]] = field(default_factory=list)
    # How many requests are in flight at once, each system on its own.
    concurrency: int = 1


class Direct:
    """The model prompted directly, with the published template's structure."""

    def __init__(self, run: Run, client: openai.AsyncOpenAI) -> None:
        self.run = run
        # Before any timing: the SDK imports its resources on first use (about a second).
        self.completions = client.chat.completions

    async def ask(self, prompt: str, outcome: Outcome) -> str:
        answer = await self.completions.create(
            model=self.run.model,
            messages=[{"role": "user", "content": prompt}],
            temperature=0.2,
            top_p=0.1,
            max_tokens=self.run.max_tokens,
        )
        outcome.calls += 1
        if answer.usage is not None:
            outcome.prompt_tokens += answer.usage.prompt_tokens
            outcome.completion_tokens += answer.usage.completion_tokens
        return answer.choices[0].message.content or ""

    async def plan(self, case: Case) -> Outcome:
        outcome = Outcome(case.id, None, 0.0)
        started = time.perf_counter()
        try:
            text = await self.ask(
                direct_prompt(self.run.tools, self.run.example, case.request), outcome
            )
            outcome.graph = graph_from_answer(text)
            if outcome.graph is None:
                outcome.graph = graph_from_answer(await self.ask(reformat_prompt(text), outcome))
        except openai.OpenAIError as exc:
            outcome.note = f"{type(exc).__name__}: {exc}"[:200]
        outcome.seconds = time.perf_counter() - started
        return outcome


def tool_items(tools: list[Tool]) -> list[dict[str, str]]:
    return [{"id": tool.id, "description": tool.description} for tool in tools]


def fallback_reason(metadata: dict[str, Any]) -> str | None:
    """The reason the rule-based planner answered: the `fallback_used` warning's detail opens
    with it (`invalid_plan: ...`)."""
    for note in metadata.get("warnings", []):
        if note.get("code") == "fallback_used":
            return str(note.get("detail", "")).split(":", 1)[0].strip() or "fallback_used"
    return None


class Service:
    """POST /plan of the app in this process, with the case's tools in the `tools` field."""

    def __init__(self, run: Run, client: httpx.AsyncClient) -> None:
        self.body: dict[str, Any] = {"tools": tool_items(run.tools)}
        if run.mcp_tools is not None:
            self.body = {"tools": run.mcp_tools, "specialize": True}
        if run.request_examples:
            self.body["examples"] = run.request_examples
        self.client = client

    async def plan(self, case: Case) -> Outcome:
        body = {"goal": case.request, **self.body, "options": {"use_cache": False}}
        started = time.perf_counter()
        response = await self.client.post("/plan", json=body)
        outcome = Outcome(case.id, None, time.perf_counter() - started)
        answer = response.json()
        if response.status_code != 200:
            outcome.note = f"{response.status_code} {answer.get('error')}: {answer.get('detail')}"
            return outcome
        metadata = answer["metadata"]
        outcome.graph = graph_from_plan(answer["plan"])
        outcome.plan = list(answer["plan"])
        outcome.warnings = list(metadata.get("warnings", []))
        outcome.calls = int(metadata.get("attempts", 0))
        outcome.prompt_tokens = int(answer["estimated_cost"]["prompt_tokens"])
        outcome.completion_tokens = int(answer["estimated_cost"]["completion_tokens"])
        outcome.source = str(metadata.get("source"))
        outcome.note = fallback_reason(metadata)
        return outcome


def service_settings(run: Run, *, with_model: bool) -> Settings:
    """The service's settings: the model at the run's URL, or none (the rule-based planner).
    A worked example for the service, when wanted, comes from a config file (PLANNER_CONFIG)."""
    overrides: dict[str, Any] = {
        "server": {"log_level": "WARNING", "max_body_bytes": MAX_BODY_BYTES},
        "planning": {"timeout_seconds": run.timeout}
        | ({} if run.tool_shortlist is None else {"tool_shortlist": run.tool_shortlist}),
        # Every plan comes from the one anonymous caller, faster than its request rate.
        "tenants": {"requests_per_second": 0},
    }
    if run.examples:
        overrides["examples"] = run.examples
    if with_model:
        # The same answer length as the direct prompt's (--max-tokens).
        model = {
            "base_url": run.model_url,
            "name": run.model,
            "call_timeout_seconds": run.timeout,
            "max_tokens": run.max_tokens,
        }
        return load_settings(**overrides, model=model, api_key=run.api_key)
    return load_settings(**overrides, model={"base_url": None}, api_key=None)


def serve_gold(stub: StubLLM, system: str, case: Case) -> None:
    """Every model call from now on answers the case's gold graph, in the shape `system` asks
    for."""
    stub.default = Reply(content=json.dumps(stub_answer(system, case)))


def stub_answer(system: str, case: Case) -> dict[str, Any]:
    if system == "direct":
        return gold_answer(case)
    step_of = {tool: n for n, tool in reversed(list(enumerate(case.order, 1)))}
    steps = [
        {
            "step": n,
            "action": f"Call {tool}",
            "required_arm": tool,
            "acceptance_criteria": [f"{tool} has answered"],
            "depends_on": sorted({step_of[s] for s, t in case.gold.links if t == tool}),
        }
        for n, tool in enumerate(case.order, 1)
    ]
    return {
        "plan": steps,
        "rationale": "The gold graph.",
        "confidence": 0.9,
        "complexity_score": 0.3,
    }


async def run_system(
    system: str, run: Run, cases: list[Case], stub: StubLLM | None
) -> list[Outcome]:
    async with AsyncExitStack() as stack:
        if system == "direct":
            client = openai.AsyncOpenAI(
                base_url=run.model_url, api_key=run.api_key, timeout=run.timeout, max_retries=0
            )
            stack.push_async_callback(client.close)
            planner: Direct | Service = Direct(run, client)
        else:
            app = create_app(service_settings(run, with_model=system == "service"))
            served = await stack.enter_async_context(with_lifespan(app))
            transport = httpx.ASGITransport(app=served, raise_app_exceptions=False)
            # The service's own deadline (--timeout) bounds each plan; this is a backstop.
            backstop = run.timeout + 30
            http = httpx.AsyncClient(
                transport=transport, base_url="http://localhost", timeout=backstop
            )
            stack.push_async_callback(http.aclose)
            planner = Service(run, http)
        ended = 0

        async def plan(case: Case) -> Outcome:
            nonlocal ended
            if stub is not None:
                serve_gold(stub, system, case)
            done = await planner.plan(case)
            # A live run takes minutes: each plan is reported as it ends.
            ended += 1
            note = f", {done.note}" if done.note else ""
            said = f"{system} {ended}/{len(cases)}: {done.seconds:.1f} s, {done.calls} call(s)"
            print(said + note, file=sys.stderr, flush=True)
            return done

        # The stub answers the gold graph of the case being planned: one case at a time.
        concurrency = 1 if stub is not None else run.concurrency
        started = time.perf_counter()
        outcomes = await in_flight(cases, plan, concurrency)
        took = time.perf_counter() - started
        print(f"{system}: {len(cases)} plans in {took:.1f} s, {concurrency} at once",
              file=sys.stderr, flush=True)  # fmt: skip
        return outcomes


async def in_flight(
    cases: list[Case], plan: Callable[[Case], Awaitable[Outcome]], concurrency: int
) -> list[Outcome]:
    """Each case through `plan`, `concurrency` of them in flight at once (the next starts as
    one ends), the outcomes in the cases' order."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(case: Case) -> Outcome:
        async with gate:
            return await plan(case)

    return list(await asyncio.gather(*(one(case) for case in cases)))


# ---------------------------------------------------------------- figures


@dataclass
class Figures:
    system: str
    plans: int
    node_f1: float
    link_f1: float | None
    accuracy: float
    valid: float
    calls_per_plan: float
    prompt_tokens_per_plan: float
    completion_tokens_per_plan: float
    median_seconds: float
    p90_seconds: float
    sources: dict[str, int] = field(default_factory=dict)
    notes: dict[str, int] = field(default_factory=dict)
    # An MCP domain's further figures (None elsewhere): see the module's docstring.
    writes_added: int | None = None
    dropped: int | None = None
    unplanned_hit: float | None = None
    arguments: float | None = None


@dataclass(frozen=True)
class DomainCounts:
    """One plan's further figures over an MCP domain."""

    writes_added: int
    dropped: bool
    unplanned_named: int
    arguments_matched: int


def domain_counts(outcome: Outcome, case: Case, write_tools: frozenset[str]) -> DomainCounts:
    return DomainCounts(
        writes_added=writes_added(outcome.plan, case.gold, write_tools),
        dropped=silently_dropped(outcome.graph, case.gold, outcome.warnings),
        unplanned_named=unplanned_named(case.unplanned, outcome.warnings),
        arguments_matched=arguments_matched(case.arguments, outcome.plan),
    )


def add_domain_figures(figs: Figures, counts: list[DomainCounts], cases: list[Case]) -> None:
    parts = sum(len(case.unplanned) for case in cases)
    values = sum(len(case.arguments) for case in cases)
    figs.writes_added = sum(c.writes_added for c in counts)
    figs.dropped = sum(c.dropped for c in counts)
    figs.unplanned_hit = sum(c.unplanned_named for c in counts) / parts if parts else None
    figs.arguments = sum(c.arguments_matched for c in counts) / values if values else None


def p90(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def figures(system: str, outcomes: list[Outcome], scores: list[Score]) -> Figures:
    n = len(outcomes) or 1
    links = [s.link_f1 for s in scores if s.link_f1 is not None]
    seconds = [o.seconds for o in outcomes]
    return Figures(
        system=system,
        plans=len(outcomes),
        node_f1=sum(s.node_f1 for s in scores) / n,
        link_f1=sum(links) / len(links) if links else None,
        accuracy=sum(s.node_f1 >= FULL_MARKS for s in scores) / n,
        valid=sum(s.valid for s in scores) / n,
        calls_per_plan=sum(o.calls for o in outcomes) / n,
        prompt_tokens_per_plan=sum(o.prompt_tokens for o in outcomes) / n,
        completion_tokens_per_plan=sum(o.completion_tokens for o in outcomes) / n,
        median_seconds=statistics.median(seconds) if seconds else 0.0,
        p90_seconds=p90(seconds),
        sources=dict(Counter(o.source for o in outcomes if o.source)),
        notes=dict(Counter(o.note for o in outcomes if o.note).most_common(5)),
    )


COLUMNS = ("system", "node F1", "link F1", "accuracy", "valid", "calls/plan",
           "prompt tok/plan", "completion tok/plan", "median s", "p90 s")  # fmt: skip


def table(rows: list[Figures]) -> str:
    lines = ["  ".join(f"{c:>{max(len(c), 8)}}" for c in COLUMNS)]
    for f in rows:
        link = "n/a" if f.link_f1 is None else f"{f.link_f1:.3f}"
        cells = (f.system, f"{f.node_f1:.3f}", link, f"{f.accuracy:.1%}", f"{f.valid:.1%}",
                 f"{f.calls_per_plan:.2f}", f"{f.prompt_tokens_per_plan:.0f}",
                 f"{f.completion_tokens_per_plan:.0f}", f"{f.median_seconds:.2f}",
                 f"{f.p90_seconds:.2f}")  # fmt: skip
        lines.append(
            "  ".join(f"{v:>{max(len(c), 8)}}" for c, v in zip(COLUMNS, cells, strict=True))
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- command line


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        type=Path,
        action="append",
        help="tools.json (or an MCP server.py) + cases.jsonl; repeat for more (default: UltraTool)",
    )
    parser.add_argument(
        "--domains",
        action="store_true",
        help="add the four everyday MCP domains of benchmarks/data",
    )
    parser.add_argument("--verbose", action="store_true", help="a line per case: planned vs gold")
    parser.add_argument("--split", choices=SPLITS, default="dev")
    parser.add_argument("--cases", type=int, default=50, help="how many cases to sample")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="any of service,direct,rules")
    parser.add_argument("--model-url", help="an OpenAI-compatible base URL (…/v1)")
    parser.add_argument("--model", help="the model name (default: the first the server lists)")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("OPENAI_API_KEY", "sk-local"),
        help="for a server that wants one (default: OPENAI_API_KEY)",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per plan (≤ 300)")
    parser.add_argument(
        "--max-tokens", type=int, default=1000, help="the longest answer, direct and service"
    )
    parser.add_argument("--stub", action="store_true", help="a stub model answering gold graphs")
    parser.add_argument("--json", type=Path, help="write the figures and every case here")
    parser.add_argument(
        "--examples",
        type=int,
        help="worked examples: on tools.json data, dev cases outside the sample in the "
        f"configuration (default {DEFAULT_EXAMPLES}); on an MCP domain, cases chosen by seed in "
        "each request's `examples` and not scored (default 0)",
    )
    parser.add_argument(
        "--shortlist", type=int, default=40, help="the shortlist size whose recall is printed"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="requests in flight at once (the next starts as one ends; --stub: 1)",
    )
    parser.add_argument(
        "--tool-shortlist",
        type=int,
        help="service: planning.tool_shortlist (0: list every tool; default: the service's)",
    )
    options = parser.parse_args(argv)
    systems = [s.strip() for s in options.systems.split(",") if s.strip()]
    if not systems or set(systems) - set(SYSTEMS):
        parser.error(f"--systems: choose among {','.join(SYSTEMS)}")
    options.systems = systems
    if not 0 < options.timeout <= 300:
        parser.error("--timeout: more than 0 and at most 300 seconds")
    if options.cases < 1:
        parser.error("--cases: at least 1")
    options.data = [*(options.data or ([] if options.domains else [DEFAULT_DATA]))]
    options.data += DOMAINS if options.domains else []
    if "direct" in systems and not options.examples and any(map(is_mcp_domain, options.data)):
        parser.error("direct on an MCP domain shows a worked example: give --examples 1 or more")
    if options.concurrency < 1:
        parser.error("--concurrency: at least 1")
    needs_model = bool(set(systems) - {"rules"})
    if needs_model and not options.stub and not options.model_url:
        parser.error("service and direct need --model-url (or --stub)")
    return options


def worked_examples(
    cases: list[Case], sample: list[Case], count: int, seed: int
) -> list[dict[str, Any]]:
    """`count` dev cases outside the sample, as the service's worked examples (config shape)."""
    if count <= 0:
        return []
    taken = {case.id for case in sample}
    pool = [case for case in cases if split_of(case.id) == "dev" and case.id not in taken]
    chosen = random.Random(seed + 1).sample(pool, min(count, len(pool)))
    return [example_of(case) for case in chosen]


def example_of(case: Case) -> dict[str, Any]:
    """A gold graph as a worked example: its tools in order, each after its gold sources."""
    step_of = {tool: n for n, tool in reversed(list(enumerate(case.order, 1)))}
    steps: list[dict[str, Any]] = []
    for n, tool in enumerate(case.order, 1):
        sources = {step_of[s] for s, t in case.gold.links if t == tool}
        steps.append({"tool": tool, "depends_on": sorted(dep for dep in sources if dep < n)})
    return {"request": case.request, "steps": steps}


def shortlist_recall(
    tools: list[Tool], sample: list[Case], size: int, examples: list[dict[str, Any]]
) -> float:
    """The share of the gold tools that the service's shortlist of `size` keeps in the prompt,
    with the same worked examples the service is given."""
    specs = [ArmSpec(id=tool.id, description=tool.description) for tool in tools]
    known = ExampleIndex([WorkedExample.model_validate(example) for example in examples])
    index = ToolIndex(specs, known.notes([spec.id for spec in specs]))
    kept = total = 0
    for case in sample:
        shortlist = set(index.shortlist(case.request, size))
        kept += len(case.gold.nodes & shortlist)
        total += len(case.gold.nodes)
    return kept / total if total else 1.0


async def first_model(url: str, api_key: str) -> str:
    async with openai.AsyncOpenAI(base_url=url, api_key=api_key, max_retries=0) as client:
        page = await client.models.list()
        return page.data[0].id if page.data else "default"


def domain_cases(
    cases: list[Case], examples: int, count: int, seed: int
) -> tuple[list[Case], list[Case]]:
    """An MCP domain's worked examples (`examples` cases chosen by seed) and the cases scored:
    the others, in file order (a seeded sample of `count` when there are more)."""
    rng = random.Random(seed)
    shown = rng.sample(cases, min(examples, len(cases)))
    rest = [case for case in cases if case not in shown]
    if count < len(rest):
        chosen = {case.id for case in rng.sample(rest, count)}
        rest = [case for case in rest if case.id in chosen]
    return shown, rest


def case_record(o: Outcome, s: Score, counts: DomainCounts | None) -> dict[str, Any]:
    record = {**asdict(s), "id": o.case, "calls": o.calls, "prompt_tokens": o.prompt_tokens,
              "completion_tokens": o.completion_tokens, "seconds": round(o.seconds, 3),
              "source": o.source, "note": o.note,
              "nodes": sorted(o.graph.nodes) if o.graph else None}  # fmt: skip
    if counts is not None:
        record |= asdict(counts) | {
            "steps": [
                {key: step.get(key) for key in ("step", "required_arm", "depends_on", "input")}
                for step in o.plan
            ],
            "warnings": o.warnings,
        }
    return record


async def run_set(
    options: argparse.Namespace, stub: StubLLM | None, data: DataSet
) -> dict[str, Any]:
    """Every system over one data set: its figures and every case."""
    mcp = data.mcp_tools is not None
    if mcp:
        shown, sample = domain_cases(data.cases, options.examples or 0, options.cases, options.seed)
        # Only the direct prompt reads `example`; parse_args wants examples for it on a domain.
        example, config_examples = (shown or sample)[0], []
        split = "all"
    else:
        sample, example = choose_cases(data.cases, options.split, options.cases, options.seed)
        count = DEFAULT_EXAMPLES if options.examples is None else options.examples
        config_examples = worked_examples(data.cases, sample, count, options.seed)
        shown, split = [], options.split
    url = stub.base_url if stub is not None else options.model_url
    model = options.model or (DEFAULT_MODEL if stub is not None else None)
    if model is None and url is not None:
        model = await first_model(url, options.api_key)
    run = Run(data.tools, example, model or "none", url, options.api_key, options.timeout,
              options.max_tokens, config_examples, options.tool_shortlist, data.mcp_tools,
              [example_of(case) for case in shown], options.concurrency)  # fmt: skip
    given = (
        f"{len(shown)} worked examples in each request" if mcp else f"worked example {example.id}"
    )
    print(f"{data.path}: {len(data.tools)} tools; {len(sample)} {split} cases "
          f"(seed {options.seed}), {given}; model {run.model} at {url}", flush=True)  # fmt: skip
    recall = shortlist_recall(data.tools, sample, options.shortlist, config_examples)
    print(f"shortlist of {options.shortlist} tools: {recall:.1%} of the gold tools are in it",
          flush=True)  # fmt: skip
    known = {tool.id for tool in data.tools}
    results: dict[str, Any] = {"systems": {}, "cases": {}, "shortlist_recall": recall}
    for system in options.systems:
        outcomes = await run_system(system, run, sample, stub)
        pairs = list(zip(outcomes, sample, strict=True))
        scores = [score(o.graph, case.gold, known) for o, case in pairs]
        figs = figures(system, outcomes, scores)
        counts = [domain_counts(o, case, data.write_tools) for o, case in pairs] if mcp else None
        if counts is not None:
            add_domain_figures(figs, counts, sample)
        results["systems"][system] = asdict(figs)
        results["cases"][system] = [
            case_record(o, s, counts[n] if counts else None)
            for n, (o, s) in enumerate(zip(outcomes, scores, strict=True))
        ]
    meta = {"data": str(data.path), "mcp": mcp, "split": split, "seed": options.seed,
            "concurrency": options.concurrency, "tool_shortlist": options.tool_shortlist,
            "example": example.id, "examples": [case.id for case in shown],
            "worked_examples": len(shown) if mcp else len(config_examples),
            "model": run.model, "model_url": url, "stub": stub is not None,
            "case_ids": [case.id for case in sample]}  # fmt: skip
    if options.verbose:
        print_cases({**meta, **results}, {case.id: case for case in sample})
    return {**meta, **results}


async def run_all(options: argparse.Namespace, stub: StubLLM | None) -> dict[str, Any]:
    """One data set: its results; several: `{"data_sets": [its results, ...]}`."""
    runs = [await run_set(options, stub, await load_set(path)) for path in options.data]
    return runs[0] if len(runs) == 1 else {"data_sets": runs}


def print_cases(results: dict[str, Any], cases: dict[str, Case]) -> None:
    """A line per case and system: the request, what was planned and what gold holds."""

    def shape(tools: list[str], links: list[tuple[str, str]]) -> str:
        return ", ".join(tools) + (
            " | " + ", ".join(f"{a}->{b}" for a, b in links) if links else ""
        )

    for system, records in results["cases"].items():
        for record in records:
            case = cases[record["id"]]
            gold = shape(list(case.order), sorted(case.gold.links))
            steps = record.get("steps")
            if steps is not None:
                tool_of = {step["step"]: step["required_arm"] for step in steps}
                got = shape([step["required_arm"] for step in steps],
                            [(tool_of.get(d, "?"), step["required_arm"])
                             for step in steps for d in step["depends_on"] or []])  # fmt: skip
                unplanned = unplanned_details(record["warnings"])
                extra = (f" writes_added {record['writes_added']}"
                         f" args {record['arguments_matched']}/{len(case.arguments)}"
                         + (" DROPPED" if record["dropped"] else "")
                         + (f" unplanned {unplanned}" if unplanned else ""))  # fmt: skip
            else:
                got, extra = ", ".join(record["nodes"] or []), ""
            link = "n/a" if record["link_f1"] is None else f"{record['link_f1']:.2f}"
            print(
                f"[{system}] {case.id} node {record['node_f1']:.2f} link {link}{extra}\n"
                f"    request: {case.request}\n    planned: {got}\n    gold:    {gold}"
            )


SUMMARY = ("data", "system", "examples", "cases", "node F1", "link F1", "exact",
           "writes_added", "dropped", "unplanned_hit", "arguments")  # fmt: skip


def summary(data_sets: list[dict[str, Any]]) -> str:
    """One row per data set and system."""
    rows = [SUMMARY]
    for results in data_sets:
        for figs in results["systems"].values():
            f = Figures(**figs)

            def share(value: float | None) -> str:
                return "n/a" if value is None else f"{value:.3f}"

            def count(value: int | None) -> str:
                return "n/a" if value is None else str(value)

            rows.append((Path(results["data"]).name, f.system, str(results["worked_examples"]),
                         str(f.plans), f"{f.node_f1:.3f}", share(f.link_f1), f"{f.accuracy:.1%}",
                         count(f.writes_added), count(f.dropped), share(f.unplanned_hit),
                         share(f.arguments)))  # fmt: skip
    widths = [max(len(row[n]) for row in rows) for n in range(len(SUMMARY))]
    return "\n".join(
        "  ".join(f"{v:>{w}}" for v, w in zip(row, widths, strict=True)) for row in rows
    )


def report(results: dict[str, Any]) -> None:
    data_sets = results.get("data_sets", [results])
    for one in data_sets:
        rows = [Figures(**figs) for figs in one["systems"].values()]
        print(f"\n{one['data']}\n" + table(rows))
        for row in rows:
            if row.sources:
                print(
                    f"{row.system}: sources "
                    + ", ".join(f"{k} {v}" for k, v in row.sources.items())
                )
            for note, count in row.notes.items():
                print(f"{row.system}: {count} x {note}")
    print("\n" + summary(data_sets))


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    stub = StubLLM().start() if options.stub else None
    try:
        results = asyncio.run(run_all(options, stub))
    finally:
        if stub is not None:
            stub.stop()
    report(results)
    if options.json:
        options.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"written to {options.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
