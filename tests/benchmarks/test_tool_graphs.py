"""benchmarks/tool_graphs.py: its scoring on hand-made predictions, its deterministic choice of
cases, and whole runs in stub mode over the tiny tool set in benchmarks/data/tiny-tools."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import openai
import pytest

from planner_arm.config import load_settings
from planner_arm.plan.schemas import PlanRequest
from support.stub_model import Reply, StubLLM

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "tool_graphs.py"
TINY = ROOT / "benchmarks" / "data" / "tiny-tools"
KNOWN = {"find_restaurant", "book_table", "lookup_weather", "send_message", "add_calendar_event"}
HAS_TOOLS_FIELD = "tools" in PlanRequest.model_fields


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tool_graphs", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tool_graphs"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


tg = load_script()
GOLD = tg.Graph(
    frozenset({"find_restaurant", "book_table", "add_calendar_event"}),
    frozenset({("find_restaurant", "book_table"), ("book_table", "add_calendar_event")}),
)


def answer(nodes: list[str], links: list[tuple[str, str]]) -> str:
    return json.dumps(
        {
            "task_steps": [f"Step {n}: Call {tool}" for n, tool in enumerate(nodes, 1)],
            "task_nodes": [{"task": tool} for tool in nodes],
            "task_links": [{"source": s, "target": t} for s, t in links],
        }
    )


def scored(text: str) -> tuple[float, float | None, bool]:
    result = tg.score(tg.graph_from_answer(text), GOLD, KNOWN)
    return result.node_f1, result.link_f1, result.valid


# --- scoring -------------------------------------------------------------------------------


def test_a_perfect_answer_scores_one_even_in_prose_or_a_code_fence() -> None:
    text = answer(
        ["find_restaurant", "book_table", "add_calendar_event"],
        [("find_restaurant", "book_table"), ("book_table", "add_calendar_event")],
    )
    assert scored(text) == (1.0, 1.0, True)
    assert scored(f"Here is the plan:\n```json\n{text}\n```") == (1.0, 1.0, True)


def test_a_partial_answer_scores_its_f1() -> None:
    # Two of three tools (precision 1, recall 2/3) and one of two links, plus a wrong one.
    text = answer(
        ["find_restaurant", "book_table"],
        [("find_restaurant", "book_table"), ("book_table", "find_restaurant")],
    )
    node_f1, link_f1, valid = scored(text)
    assert node_f1 == pytest.approx(0.8)
    assert link_f1 == pytest.approx(0.5)
    assert valid


def test_an_empty_answer_is_valid_and_scores_zero() -> None:
    assert scored(answer([], [])) == (0.0, 0.0, True)


def test_a_tool_outside_the_set_scores_zero_for_the_whole_request() -> None:
    nodes = ["find_restaurant", "book_table", "add_calendar_event", "order_taxi"]
    links = [("find_restaurant", "book_table"), ("book_table", "add_calendar_event")]
    assert scored(answer(nodes, links)) == (0.0, 0.0, False)
    # In a link only, too.
    nodes = nodes[:3]
    assert scored(answer(nodes, [*links, ("book_table", "order_taxi")])) == (0.0, 0.0, False)


@pytest.mark.parametrize(
    "text",
    [
        "I would first find a restaurant, then book it.",
        '{"task_nodes": [{"task": "find_restaurant"}, ',
        '{"task_steps": ["Step 1"]}',
        '{"task_nodes": [{"name": "find_restaurant"}]}',
        '{"task_nodes": [{"task": 3}]}',
        "",
    ],
)
def test_an_unparseable_answer_scores_zero(text: str) -> None:
    assert scored(text) == (0.0, 0.0, False)


def test_a_service_plan_gives_its_tools_and_dependency_links() -> None:
    plan = [
        {"step": 1, "required_arm": "find_restaurant", "depends_on": []},
        {"step": 2, "required_arm": "book_table", "depends_on": [1]},
        {"step": 3, "required_arm": "add_calendar_event", "depends_on": [2]},
        {"step": 4, "required_arm": "send_message", "depends_on": [2, 3]},
    ]
    graph = tg.graph_from_plan(plan)
    assert graph.nodes == GOLD.nodes | {"send_message"}
    assert graph.links == GOLD.links | {
        ("book_table", "send_message"),
        ("add_calendar_event", "send_message"),
    }
    result = tg.score(graph, GOLD, KNOWN)
    assert result.node_f1 == pytest.approx(6 / 7)
    assert result.link_f1 == pytest.approx(2 / 3)
    # A step the caller's tools do not have (a built-in arm, say) scores the request 0.
    judge = {"step": 5, "required_arm": "judge", "depends_on": [4]}
    assert not tg.score(tg.graph_from_plan([*plan, judge]), GOLD, KNOWN).valid


def test_the_figures_average_requests_and_count_exact_ones() -> None:
    outcomes = [tg.Outcome(str(n), None, seconds, calls=1) for n, seconds in enumerate([1, 2, 9])]
    scores = [tg.Score(1.0, 1.0, True), tg.Score(0.5, None, True), tg.Score(0.0, 0.0, False)]
    figures = tg.figures("direct", outcomes, scores)
    assert figures.node_f1 == pytest.approx(0.5)
    assert figures.link_f1 == pytest.approx(0.5)  # the request without gold links is left out
    assert figures.accuracy == pytest.approx(1 / 3)
    assert figures.valid == pytest.approx(2 / 3)
    assert figures.median_seconds == 2
    assert 2 < figures.p90_seconds <= 9


# --- choosing cases ------------------------------------------------------------------------


def test_cases_are_chosen_by_seed_and_the_example_is_never_among_them() -> None:
    _, cases = tg.load_data(TINY)
    sample, example = tg.choose_cases(cases, "all", 10, seed=1)
    assert len(sample) == len(cases) - 1
    assert example not in sample
    assert tg.split_of(example.id) == "dev"
    assert tg.choose_cases(cases, "all", 10, seed=1) == (sample, example)
    dev, _ = tg.choose_cases(cases, "dev", 10, seed=1)
    heldout, _ = tg.choose_cases(cases, "heldout", 10, seed=1)
    assert {c.id for c in heldout} == {"t3"}
    assert not {c.id for c in dev} & {c.id for c in heldout}


def test_the_direct_prompt_lists_every_tool_the_example_and_the_request() -> None:
    tools, cases = tg.load_data(TINY)
    prompt = tg.direct_prompt(tools, cases[0], cases[1].request)
    for tool in tools:
        assert json.dumps({"id": tool.id, "desc": tool.description}) in prompt
    assert cases[0].request in prompt
    assert json.dumps(tg.gold_answer(cases[0])) in prompt
    assert prompt.rstrip().endswith(
        f"{cases[1].request}\nWrite your answer now, as strict JSON only.\n# ANSWER #:"
    )
    assert '"task_steps"' in prompt
    assert '"task_links"' in prompt


# --- the systems, one request each -----------------------------------------------------------


def a_run(tools: list[Any], example: Any, url: str | None = None) -> Any:
    return tg.Run(tools, example, "m", url, "sk-test", timeout=10.0, max_tokens=500)


async def test_the_direct_system_asks_once_more_when_the_answer_does_not_parse() -> None:
    tools, cases = tg.load_data(TINY)
    with StubLLM() as stub:
        good = answer(["find_restaurant", "book_table"], [("find_restaurant", "book_table")])
        stub.script(
            Reply("Sure! First find a restaurant, then book it.", prompt_tokens=50),
            Reply(good, prompt_tokens=20, completion_tokens=7),
        )
        client = openai.AsyncOpenAI(base_url=stub.base_url, api_key="sk-test", max_retries=0)
        async with client:
            outcome = await tg.Direct(a_run(tools, cases[1]), client).plan(cases[0])
        first, second = (r["messages"][0]["content"] for r in stub.requests)
    assert outcome.graph == tg.Graph(
        frozenset({"find_restaurant", "book_table"}), frozenset({("find_restaurant", "book_table")})
    )
    assert (outcome.calls, outcome.prompt_tokens, outcome.completion_tokens) == (2, 70, 307)
    assert cases[0].request in first
    assert "Sure! First find a restaurant" in second
    assert '"task_links"' in second


async def test_the_service_system_sends_the_tools_and_reads_the_plan_it_gets() -> None:
    tools, cases = tg.load_data(TINY)
    sent: list[dict[str, Any]] = []
    plan = [
        {"step": 1, "required_arm": "find_restaurant", "depends_on": []},
        {"step": 2, "required_arm": "book_table", "depends_on": [1]},
    ]
    metadata = {
        "source": "fallback",
        "attempts": 3,
        "warnings": [{"code": "fallback_used", "detail": "invalid_plan: 3 answers broke rules"}],
    }
    cost = {"llm_usd": 0.0, "prompt_tokens": 3000, "completion_tokens": 450}

    def answer_plan(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        if len(sent) > 1:
            return httpx.Response(422, json={"error": "invalid_request", "detail": "bad tools"})
        return httpx.Response(
            200, json={"plan": plan, "metadata": metadata, "estimated_cost": cost}
        )

    transport = httpx.MockTransport(answer_plan)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        service = tg.Service(a_run(tools, cases[1]), http)
        planned = await service.plan(cases[0])
        refused = await service.plan(cases[2])
    assert sent[0]["goal"] == cases[0].request
    assert sent[0]["tools"] == [{"id": t.id, "description": t.description} for t in tools]
    assert sent[0]["options"] == {"use_cache": False}
    assert planned.graph == tg.graph_from_plan(plan)
    assert (planned.calls, planned.prompt_tokens, planned.completion_tokens) == (3, 3000, 450)
    assert (planned.source, planned.note) == ("fallback", "invalid_plan")
    assert refused.graph is None
    assert refused.note == "422 invalid_request: bad tools"


def test_the_service_lists_every_tool_when_asked_and_its_default_otherwise() -> None:
    tools, cases = tg.load_data(TINY)
    every = replace(a_run(tools, cases[1]), tool_shortlist=0)
    assert tg.service_settings(every, with_model=True).planning.tool_shortlist == 0
    default = tg.service_settings(a_run(tools, cases[1]), with_model=True).planning
    assert default.tool_shortlist == load_settings().planning.tool_shortlist


def test_the_service_answers_as_long_as_the_direct_prompt() -> None:
    tools, cases = tg.load_data(TINY)
    run = a_run(tools, cases[1])
    assert tg.service_settings(run, with_model=True).model.max_tokens == run.max_tokens == 500


# --- whole runs in stub mode ---------------------------------------------------------------


def run_stub(tmp_path: Path, systems: str) -> dict[str, Any]:
    out = tmp_path / "out.json"
    argv = ["--stub", "--data", str(TINY), "--split", "all", "--systems", systems]
    assert tg.main([*argv, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_stub_mode_runs_the_direct_prompt_end_to_end(tmp_path: Path) -> None:
    results = run_stub(tmp_path, "direct")
    direct = results["systems"]["direct"]
    assert direct["plans"] == 3
    assert direct["node_f1"] == direct["accuracy"] == direct["valid"] == 1.0
    assert direct["link_f1"] == 1.0
    # One call a plan, counted from the stub's usage (900 prompt, 300 completion tokens).
    assert direct["calls_per_plan"] == 1.0
    assert direct["prompt_tokens_per_plan"] == 900
    assert direct["completion_tokens_per_plan"] == 300
    assert results["example"] not in results["case_ids"]


def test_stub_mode_runs_the_rule_based_planner(tmp_path: Path) -> None:
    rules = run_stub(tmp_path, "rules")["systems"]["rules"]
    assert rules["plans"] == 3
    assert rules["calls_per_plan"] == 0


@pytest.mark.skipif(
    not HAS_TOOLS_FIELD, reason="POST /plan has no `tools` field yet: the service system waits"
)
def test_stub_mode_runs_the_service_end_to_end(tmp_path: Path) -> None:
    service = run_stub(tmp_path, "service")["systems"]["service"]
    assert service["plans"] == 3
    assert service["valid"] == 1.0
    assert service["node_f1"] == 1.0
    assert service["calls_per_plan"] >= 1
    assert service["prompt_tokens_per_plan"] >= 900


@pytest.mark.slow
def test_the_script_runs_from_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    argv = [sys.executable, str(SCRIPT), "--stub", "--data", str(TINY), "--systems", "direct"]
    done = subprocess.run(
        [*argv, "--cases", "1", "--json", str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "node F1" in done.stdout
    assert "direct" in done.stdout
    assert json.loads(out.read_text())["systems"]["direct"]["plans"] == 1


# --- MCP domains ---------------------------------------------------------------------------

DATA = ROOT / "benchmarks" / "data"
LIBRARY = DATA / "library"
LIBRARY_TOOLS = {
    "search_books", "get_book", "find_member", "list_loans", "renew_loan", "place_hold",
    "check_availability", "notify_member",
}  # fmt: skip


async def test_an_mcp_domain_is_listed_through_the_mcp_protocol() -> None:
    data = await tg.load_set(LIBRARY)
    assert {tool["name"] for tool in data.mcp_tools} == LIBRARY_TOOLS
    for tool in data.mcp_tools:
        assert set(tool) == {"name", "description", "inputSchema", "outputSchema"}
        assert tool["inputSchema"]["type"] == "object"
        assert tool["description"]
    by_name = {tool["name"]: tool for tool in data.mcp_tools}
    # pydantic's shape: a list of models is nested under $defs and reached by $ref.
    found = by_name["search_books"]["outputSchema"]
    assert found["properties"]["result"]["items"] == {"$ref": "#/$defs/BookSummary"}
    assert "book_id" in found["$defs"]["BookSummary"]["properties"]
    assert by_name["get_book"]["inputSchema"]["required"] == ["book_id"]
    assert data.write_tools == {"renew_loan", "place_hold", "notify_member"}
    assert [tool.id for tool in data.tools] == [tool["name"] for tool in data.mcp_tools]
    first = data.cases[0]
    assert first.arguments == (
        ("search_books", "query", "Dune"),
        ("find_member", "email", "alice@example.com"),
    )
    assert data.cases[3].unplanned == ("translate its summary into French",)


async def test_a_domain_server_answers_its_tools() -> None:
    server = tg.import_server(LIBRARY).server
    async with tg.create_connected_server_and_client_session(server._mcp_server) as session:
        found = await session.call_tool("search_books", {"query": "Dune"})
        missing = await session.call_tool("get_book", {"book_id": "B-999"})
    assert found.structuredContent == {
        "result": [{"book_id": "B-100", "title": "Dune", "author": "Frank Herbert", "year": 1965}]
    }
    assert missing.isError


def library_case() -> Any:
    return next(case for case in tg.load_cases(LIBRARY) if case.id == "library-01")


def test_a_plan_over_a_domain_counts_writes_added_and_silent_drops() -> None:
    case = library_case()  # search_books + find_member -> place_hold
    writes = frozenset({"renew_loan", "place_hold", "notify_member"})
    plan = [
        {"step": 1, "required_arm": "find_member", "depends_on": []},
        {"step": 2, "required_arm": "renew_loan", "depends_on": [1]},
        {"step": 3, "required_arm": "place_hold", "depends_on": [1, 2]},
    ]
    graph = tg.graph_from_plan(plan)
    result = tg.score(graph, case.gold, LIBRARY_TOOLS)
    assert result.node_f1 == pytest.approx(2 / 3)
    assert result.link_f1 == pytest.approx(0.4)  # find_member -> place_hold: 1 of 2 gold, 3 planned
    # renew_loan writes and the gold plan does not call it; place_hold writes and it does.
    assert tg.writes_added(plan, case.gold, writes) == 1
    # search_books is missing: silently, unless a warning says a part went unplanned.
    assert tg.silently_dropped(graph, case.gold, [{"code": "fallback_used", "detail": "x"}])
    unplanned = [{"code": "goal_part_unplanned", "detail": "Find the book Dune"}]
    assert not tg.silently_dropped(graph, case.gold, unplanned)
    assert tg.silently_dropped(None, case.gold, [])
    whole = tg.graph_from_plan(
        [*plan, {"step": 4, "required_arm": "search_books", "depends_on": []}]
    )
    assert not tg.silently_dropped(whole, case.gold, [])


def test_an_unplanned_part_is_hit_when_a_warning_names_most_of_its_words() -> None:
    parts = ("buy a copy from the bookshop next door",)
    cut = "Buy a copy from the bookshop next…"  # a detail is cut at 80 characters
    assert tg.unplanned_named(parts, [{"code": "goal_part_unplanned", "detail": cut}]) == 1
    # The doable part named instead of the impossible one is no hit, nor is another code.
    other = [{"code": "goal_part_unplanned", "detail": "Tell me who wrote Neuromancer"}]
    assert tg.unplanned_named(parts, other) == 0
    assert tg.unplanned_named(parts, [{"code": "action_unlike_tool", "detail": parts[0]}]) == 0


def test_expected_arguments_are_matched_in_the_steps_of_their_tool() -> None:
    expected = (
        ("search_books", "query", "Dune"),
        ("find_member", "email", "alice@example.com"),
        ("place_hold", "member_id", "M-7"),
        ("unlock_bike", "electric", True),
        ("list_seats", "max_price", 50),
    )
    plan = [
        {"step": 1, "required_arm": "search_books", "input": {"query": "the book DUNE"}},
        # A `needs` input counts what it found so far.
        {"step": 2, "required_arm": "find_member",
         "input": {"needs": "human_or_model", "arguments": {"email": "alice@example.com"}}},
        # The right value under another tool, or a reference to a step's output, is no match.
        {"step": 3, "required_arm": "notify_member", "input": {"member_id": "M-7"}},
        {"step": 4, "required_arm": "place_hold", "input": {"member_id": "{{steps.2.output}}"}},
        {"step": 5, "required_arm": "unlock_bike", "input": {"electric": 1}},
        {"step": 6, "required_arm": "list_seats", "input": {"max_price": 50.0}},
    ]  # fmt: skip
    assert tg.arguments_matched(expected, plan) == 3
    assert tg.arguments_matched(expected, []) == 0


async def test_the_service_sends_a_domains_tools_as_mcp_lists_them_with_its_examples() -> None:
    data = await tg.load_set(LIBRARY)
    shown, sample = tg.domain_cases(data.cases, 2, 50, seed=1)
    examples = [tg.example_of(case) for case in shown]
    run = replace(a_run(data.tools, sample[0]), mcp_tools=data.mcp_tools, request_examples=examples)
    sent: list[dict[str, Any]] = []
    plan = [
        {"step": 1, "required_arm": "list_loans", "depends_on": [], "input": {"member_id": "M-4"}}
    ]
    warnings = [{"code": "goal_part_unplanned", "detail": "print it"}]

    def answer_plan(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        metadata = {"source": "fallback", "warnings": warnings}
        cost = {"prompt_tokens": 0, "completion_tokens": 0}
        return httpx.Response(
            200, json={"plan": plan, "metadata": metadata, "estimated_cost": cost}
        )

    transport = httpx.MockTransport(answer_plan)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        outcome = await tg.Service(run, http).plan(sample[0])
    assert sent[0]["tools"] == data.mcp_tools
    assert sent[0]["specialize"] is True
    assert sent[0]["examples"] == examples
    assert examples[0]["steps"][0]["tool"] in LIBRARY_TOOLS
    assert (outcome.plan, outcome.warnings) == (plan, warnings)


def test_a_domains_examples_are_chosen_by_seed_and_never_scored() -> None:
    cases = tg.load_cases(LIBRARY)
    shown, scored_cases = tg.domain_cases(cases, 3, 50, seed=1)
    assert len(shown) == 3
    assert len(scored_cases) == len(cases) - 3
    assert not {c.id for c in shown} & {c.id for c in scored_cases}
    assert tg.domain_cases(cases, 3, 50, seed=1) == (shown, scored_cases)
    assert tg.domain_cases(cases, 0, 50, seed=1) == ([], cases)  # cold: every case, in order


def test_the_rule_based_planner_runs_over_domains_with_one_row_each(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    argv = ["--data", str(LIBRARY), "--data", str(DATA / "bike-share"), "--systems", "rules"]
    assert tg.main([*argv, "--examples", "3", "--json", str(out)]) == 0
    library, bikes = json.loads(out.read_text())["data_sets"]
    assert library["mcp"] is True
    assert len(library["examples"]) == 3
    assert library["worked_examples"] == 3
    assert not set(library["examples"]) & set(library["case_ids"])
    assert len(library["case_ids"]) == len(tg.load_cases(LIBRARY)) - 3
    rules = library["systems"]["rules"]
    assert isinstance(rules["writes_added"], int)
    assert isinstance(rules["dropped"], int)
    assert 0 <= rules["arguments"] <= 1
    assert 0 <= rules["unplanned_hit"] <= 1
    first = library["cases"]["rules"][0]
    assert {"writes_added", "dropped", "arguments_matched", "steps", "warnings"} <= set(first)
    assert bikes["data"].endswith("bike-share")


def test_domains_and_repeated_data_make_the_list_of_sets() -> None:
    rules = ["--systems", "rules"]
    assert tg.parse_args(rules).data == [tg.DEFAULT_DATA]
    assert tg.parse_args([*rules, "--domains"]).data == tg.DOMAINS
    both = tg.parse_args([*rules, "--data", str(TINY), "--domains"]).data
    assert both == [TINY, *tg.DOMAINS]
    assert [path.name for path in tg.DOMAINS] == ["library", "clinic", "bike-share", "box-office"]
    with pytest.raises(SystemExit):  # the direct prompt's worked example comes from --examples
        tg.parse_args(["--domains", "--systems", "direct", "--stub"])
    assert tg.parse_args(["--domains", "--systems", "direct", "--stub", "--examples", "1"])


@pytest.mark.parametrize("directory", tg.DOMAINS, ids=lambda path: path.name)
async def test_every_domains_cases_are_well_formed(directory: Path) -> None:
    data = await tg.load_set(directory)
    schemas = {tool["name"]: tool for tool in data.mcp_tools}
    assert 8 <= len(schemas) <= 12
    assert all("outputSchema" in tool for tool in data.mcp_tools)
    assert data.write_tools
    assert data.write_tools <= set(schemas)
    assert len(data.cases) >= 12
    assert len({case.id for case in data.cases}) == len(data.cases)
    for case in data.cases:
        assert case.gold.nodes <= set(schemas), case.id
        assert len(case.order) == len(case.gold.nodes), f"{case.id}: a tool listed twice"
        for source, target in case.gold.links:
            assert {source, target} <= case.gold.nodes, f"{case.id}: {source} -> {target}"
        for tool, name, _ in case.arguments:
            assert tool in case.gold.nodes, f"{case.id}: arguments of {tool}, not in gold"
            assert name in schemas[tool]["inputSchema"]["properties"], f"{case.id}: {tool}.{name}"
        for part in case.unplanned:
            assert part in case.request, f"{case.id}: {part!r} is not the goal's words"
    # The mix: single steps, chains, independent parts, impossible parts, writes asked for.
    assert any(len(case.gold.nodes) == 1 for case in data.cases)
    assert any(case.gold.links for case in data.cases)
    assert any(len(case.gold.nodes) > 1 and not case.gold.links for case in data.cases)
    assert any(case.unplanned for case in data.cases)
    assert any(case.gold.nodes & data.write_tools for case in data.cases)
    assert any(not case.gold.nodes & data.write_tools for case in data.cases)


async def test_concurrency_keeps_that_many_requests_in_flight_and_the_cases_order() -> None:
    _, cases = tg.load_data(TINY)
    many = [replace(cases[n % len(cases)], id=f"c{n}") for n in range(7)]
    now = most = 0
    full = asyncio.Event()

    async def plan(case: Any) -> Any:
        nonlocal now, most
        now += 1
        most = max(most, now)
        if now == 3:
            full.set()
        # Each waits until three are in flight at once: without a bound, all seven would be.
        await full.wait()
        now -= 1
        return tg.Outcome(case.id, None, 0.0)

    outcomes = await tg.in_flight(many, plan, 3)
    assert [o.case for o in outcomes] == [case.id for case in many]
    assert most == 3


def test_concurrency_below_one_is_refused() -> None:
    with pytest.raises(SystemExit):
        tg.parse_args(["--systems", "rules", "--concurrency", "0"])
