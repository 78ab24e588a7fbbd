"""GET /plan/{plan_id} as an HTML page: chosen by Accept, self-contained, every text escaped;
JSON stays the answer for every other caller, and errors stay JSON."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
import respx

from planner_arm.api.plan_page import plan_page
from planner_arm.plan.schemas import PlanResponse
from support.app import answer, good_plan, make_settings, running_app
from support.invariants import assert_error_body

GOAL = {"goal": "Fix authentication bug and add tests"}
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)> & "quotes"'


def hostile_plan() -> dict[str, Any]:
    plan = good_plan()
    plan["plan"][1]["action"] = f"Write a patch {HOSTILE}"
    plan["plan"][1]["acceptance_criteria"] = [f"Patch applies {HOSTILE}"]
    plan["rationale"] = f"Because {HOSTILE}"
    return plan


async def stored_page(
    chat_route: respx.Route, plan: dict[str, Any], accept: str
) -> tuple[dict[str, Any], Any]:
    chat_route.return_value = answer(plan)
    async with running_app(make_settings()) as client:
        body = (await client.post("/plan", json=GOAL)).json()
        page = await client.get(f"/plan/{body['plan_id']}", headers={"Accept": accept})
    return body, page


@pytest.mark.parametrize(
    "accept", [BROWSER_ACCEPT, "text/html", "text/*", "application/json;q=0.5, text/html"]
)
async def test_a_browser_gets_the_plan_drawn(chat_route: respx.Route, accept: str) -> None:
    body, page = await stored_page(chat_route, good_plan(), accept)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "script-src" not in page.headers["content-security-policy"]  # none at all
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["vary"] == "Accept, Authorization, X-API-Key"
    assert page.headers["cache-control"] == "private, no-store"
    text = page.text
    for step in body["plan"]:
        assert html.escape(step["action"], quote=False) in text
    # One arrow per dependency: 1->2, 1->3, 2->4, 3->4; the path 1, 2, 4 marked.
    assert len(re.findall(r'<path class="edge', text)) == 4
    assert len(re.findall(r'<path class="edge critical"', text)) == 2
    assert re.findall(r'<g class="step critical" id="step-(\d+)"', text) == ["1", "2", "4"]
    assert "1 → 2 → 4" in text
    assert f"{body['critical_path_duration']} s along the critical path" in text
    assert "model (gpt-3.5-turbo)" in text


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "*/*",
        "application/json",
        "text/html;q=0.5, application/json",
        "text/html;q=bad",
        "image/png",
    ],
)
async def test_anyone_else_still_gets_json(chat_route: respx.Route, accept: str | None) -> None:
    chat_route.return_value = answer(good_plan())
    async with running_app(make_settings()) as client:
        body = (await client.post("/plan", json=GOAL)).json()
        headers = {"Accept": accept} if accept else {}
        fetched = await client.get(f"/plan/{body['plan_id']}", headers=headers)
    assert fetched.status_code == 200
    assert fetched.headers["content-type"] == "application/json"
    assert fetched.json() == body
    assert fetched.headers["vary"] == "Accept, Authorization, X-API-Key"
    assert fetched.headers["cache-control"] == "private, no-store"


async def test_model_text_is_shown_as_text_never_as_markup(chat_route: respx.Route) -> None:
    _, page = await stored_page(chat_route, hostile_plan(), "text/html")
    text = page.text
    assert "<script>" not in text.lower()
    assert "<img" not in text.lower()
    assert "&lt;script&gt;alert(" in text
    assert "onerror=alert(1)&gt;" in text


async def test_a_rule_based_plan_names_its_source_and_warnings() -> None:
    async with running_app(make_settings(llm=False)) as client:
        body = (await client.post("/plan", json=GOAL)).json()
        page = await client.get(f"/plan/{body['plan_id']}", headers={"Accept": "text/html"})
    assert page.status_code == 200
    assert '<dd id="source">rule-based</dd>' in page.text
    assert body["metadata"]["warnings"], "the rule-based planner says why it was used"
    for note in body["metadata"]["warnings"]:
        assert f"<code>{html.escape(note['code'])}</code>" in page.text


async def test_an_unknown_plan_is_the_json_404_for_a_browser_too() -> None:
    async with running_app(make_settings(llm=False)) as client:
        page = await client.get("/plan/nope", headers={"Accept": BROWSER_ACCEPT})
    assert_error_body(page, 404, "plan_not_found")


async def test_the_page_needs_the_key_like_the_json() -> None:
    settings = make_settings(llm=False, auth={"api_keys": ["k-0123456789abcdef"]})
    async with running_app(settings) as client:
        key = {"X-API-Key": "k-0123456789abcdef"}
        body = (await client.post("/plan", json=GOAL, headers=key)).json()
        refused = await client.get(f"/plan/{body['plan_id']}", headers={"Accept": "text/html"})
        shown = await client.get(f"/plan/{body['plan_id']}", headers={"Accept": "text/html", **key})
    assert_error_body(refused, 401, "unauthorized")
    assert shown.status_code == 200


async def test_openapi_names_the_html_answer() -> None:
    async with running_app(make_settings(llm=False)) as client:
        spec = (await client.get("/openapi.json")).json()
    content = spec["paths"]["/plan/{plan_id}"]["get"]["responses"]["200"]["content"]
    assert set(content) == {"application/json", "text/html"}
    assert "/PlanResponse" in content["application/json"]["schema"]["$ref"]


@pytest.mark.parametrize("accept", [None, "application/json", BROWSER_ACCEPT])
async def test_head_answers_the_headers_of_get_and_no_body(accept: str | None) -> None:
    headers = {"Accept": accept} if accept else {}
    async with running_app(make_settings(llm=False)) as client:
        body = (await client.post("/plan", json=GOAL)).json()
        got = await client.get(f"/plan/{body['plan_id']}", headers=headers)
        head = await client.head(f"/plan/{body['plan_id']}", headers=headers)
    assert head.status_code == 200
    assert head.content == b""
    assert int(head.headers["content-length"]) == len(got.content)

    def without_request_id(response: Any) -> dict[str, str]:
        return {k: v for k, v in response.headers.items() if k != "x-request-id"}

    assert without_request_id(head) == without_request_id(got)


async def test_head_of_an_unknown_plan_or_without_the_key_is_refused_like_get() -> None:
    settings = make_settings(llm=False, auth={"api_keys": ["k-0123456789abcdef"]})
    async with running_app(settings) as client:
        key = {"X-API-Key": "k-0123456789abcdef"}
        body = (await client.post("/plan", json=GOAL, headers=key)).json()
        unknown = await client.head("/plan/nope", headers=key)
        keyless = await client.head(f"/plan/{body['plan_id']}")
    assert (unknown.status_code, unknown.headers["content-type"]) == (404, "application/json")
    assert keyless.status_code == 401
    assert keyless.headers["www-authenticate"].startswith("Bearer")


async def test_the_answer_says_what_it_is_for() -> None:
    request = {"goal": "Fix the login bug", "constraints": [" No schema change ", "Keep the API"]}
    async with running_app(make_settings(llm=False)) as client:
        made = (await client.post("/plan", json=request)).json()
        fetched = (await client.get(f"/plan/{made['plan_id']}")).json()
        replan = {
            "goal": "Fix the login bug, then the logout bug",
            "plan_id": made["plan_id"],
            "step_states": {"1": "completed", "2": "failed"},
        }
        replanned = (await client.post("/replan", json=replan)).json()
    # The constraints as the request model read them (trimmed); the same when fetched.
    assert (made["goal"], made["constraints"]) == (
        request["goal"],
        ["No schema change", "Keep the API"],
    )
    assert fetched == made
    # A replan answers its own request: no constraints it did not give; its goal is the
    # stored plan's, which a body naming another does not change (and is told so).
    assert (replanned["goal"], replanned["constraints"]) == (request["goal"], [])
    assert "stored_request_used" in [note["code"] for note in replanned["metadata"]["warnings"]]


def page_parts(text: str) -> dict[str, Any]:
    return {
        "title": re.search(r"<title>(.*?)</title>", text, re.S)[1],  # type: ignore[index]
        "heading": re.search(r'<h1 id="goal">(.*?)</h1>', text, re.S),
        "constraints": re.findall(
            r"<li>(.*?)</li>", text.split('id="constraints"')[1].split("</ul>")[0]
        )
        if 'id="constraints"' in text
        else [],
    }


async def test_the_page_is_titled_and_headed_by_the_goal_and_lists_the_constraints() -> None:
    request = {"goal": f"Fix {HOSTILE}", "constraints": [f"Keep {HOSTILE}", "No <b>downtime</b>"]}
    async with running_app(make_settings(llm=False)) as client:
        body = (await client.post("/plan", json=request)).json()
        page = await client.get(f"/plan/{body['plan_id']}", headers={"Accept": "text/html"})
    parts = page_parts(page.text)
    shown = [parts["title"], parts["heading"][1], *parts["constraints"]]
    # Each is the request's text, escaped: read as text, not as markup.
    assert [html.unescape(text) for text in shown] == [
        request["goal"],  # under 80 characters: the title holds it whole
        request["goal"],
        *request["constraints"],
    ]
    assert not any(ch in text for text in shown for ch in '<>"')
    # Markup from the request is text on the page: no tag of it survives.
    assert "<script>" not in page.text.lower()
    assert "<b>downtime" not in page.text
    assert 'id="goal-whole"' not in page.text
    assert f'<dd id="plan-id"><code>{body["plan_id"]}</code></dd>' in page.text


async def test_a_long_goal_is_cut_in_the_title_and_heading_and_shown_whole_below() -> None:
    goal = "Migrate every service of the billing platform & its data " * 10  # 580 characters
    async with running_app(make_settings(llm=False)) as client:
        body = (await client.post("/plan", json={"goal": goal})).json()
        page = await client.get(f"/plan/{body['plan_id']}", headers={"Accept": "text/html"})
    parts = page_parts(page.text)
    title = html.unescape(parts["title"])
    assert len(title) <= 80
    assert title.endswith("…")
    assert goal.startswith(title.removesuffix("…"))
    heading = html.unescape(parts["heading"][1])
    assert len(heading) <= 240
    assert heading.endswith("…")
    assert len(heading) > len(title)
    whole = re.search(r'<details class="goal" id="goal-whole">.*?<p>(.*?)</p>', page.text, re.S)
    assert whole is not None
    assert html.unescape(whole[1]) == goal


def test_a_plan_stored_before_answers_carried_the_goal_is_titled_by_its_id() -> None:
    plan = PlanResponse.model_validate({**_stored_answer(), "goal": None, "constraints": []})
    text = plan_page(plan)
    assert page_parts(text)["title"] == f"Plan {plan.plan_id}"
    assert page_parts(text)["heading"] is None
    assert f"<h1>Plan <code>{plan.plan_id}</code></h1>" in text


def _stored_answer() -> dict[str, Any]:
    plan = good_plan()
    return {
        **plan,
        "total_estimated_duration": 150,
        "complexity_score": 0.5,
        "plan_id": "p-old",
        "request_id": "r-1",
        "parallel_stages": [[1], [2, 3], [4]],
        "critical_path_duration": 110,
        "estimated_cost": {"llm_usd": 0.0, "prompt_tokens": 0, "completion_tokens": 0},
        "metadata": {
            "source": "llm",
            "model": "m",
            "attempts": 1,
            "repairs": [],
            "warnings": [],
            "latency_ms": 1.0,
            "prompt_version": "v",
        },
    }


async def test_a_hierarchical_plan_is_drawn_phase_by_phase() -> None:
    request = {"goal": "Migrate the billing service to PostgreSQL", "strategy": "hierarchical"}
    async with running_app(make_settings(llm=False)) as client:
        body = (await client.post("/plan", json=request)).json()
        page = await client.get(f"/plan/{body['plan_id']}", headers={"Accept": "text/html"})
    text = page.text
    phases = re.findall(
        r'<g class="phase" id="phase-([\d.]+)" data-phase="\1" data-steps="([\d ]+)">', text
    )
    assert [phase for phase, _ in phases] == [node["id"] for node in body["tree"]]
    held = {int(n): phase for phase, numbers in phases for n in numbers.split()}
    assert sorted(held) == [step["step"] for step in body["plan"]]
    for step in body["plan"]:
        # A step's phase is the top of its parent's path, or the phase it is (a leaf).
        phase = (step["parent"] or held[step["step"]]).split(".")[0]
        assert held[step["step"]] == phase
        assert f'data-step="{step["step"]}" data-stage=' in text
        assert re.search(rf'id="step-{step["step"]}" [^>]*data-phase="{phase}"', text)
    assert "<th>Phase</th>" in text
    assert f"<dd>{len(body['plan'])} in " in text
    assert f", {len(phases)} phases</dd>" in text
