"""GET /plan/{plan_id} as an HTML page: chosen by Accept, self-contained, every text escaped;
JSON stays the answer for every other caller, and errors stay JSON."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
import respx

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
