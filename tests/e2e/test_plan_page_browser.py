"""The plan's HTML page in a real browser (the system's headless Chromium, driven by
Playwright) against the real service process: what a person sees of a 3-step, a 40-step and a
hierarchical plan. The goal as the heading and the title, the constraints under it, every
step's action readable inside its box, one arrow per dependency, no two boxes overlapping,
each phase's frame around its steps, no console error, no request to another host, no wider
than a laptop screen.

A screenshot of each page is kept in tests/artifacts/ (not committed); its path is printed.
The `show` command draws the same stored plan from the service in the terminal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, Page
from typer.testing import CliRunner

from planner_arm.cli import cli
from support.browser import offline
from support.service import Serve
from support.stub_model import Reply, StubLLM

pytestmark = pytest.mark.slow

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
LAPTOP = {"width": 1366, "height": 768}
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
ARMS = ["retriever", "coder", "executor", "coder"]
HOSTILE = '<img src=x onerror="document.title=\'pwned\'"><script>document.title="pwned"</script>'


def a_step(number: int, action: str, deps: list[int], arm: str) -> dict[str, Any]:
    return {
        "step": number,
        "action": action,
        "required_arm": arm,
        "acceptance_criteria": [f"Part {number} is done and checked"],
        "depends_on": deps,
        "estimated_cost_tier": 1 + number % 4,
        "estimated_duration_seconds": 10 + (number * 7) % 50,
    }


def three_steps() -> dict[str, Any]:
    return {
        "plan": [
            a_step(1, f"Read the failing login handler {HOSTILE}", [], "retriever"),
            a_step(2, "Patch the token expiry check & add a regression test", [1], "coder"),
            a_step(3, "Validate the fix against the goal", [2], "judge"),
        ],
        "rationale": "Read, patch, check.",
        "confidence": 0.8,
    }


def forty_steps() -> dict[str, Any]:
    """A root, a wide stage of 12, chains and joins of varied length, then the final check:
    stages of every width, arrows that skip stages, actions of one to four lines."""
    steps = [a_step(1, "Collect the service's requirements and current state", [], "retriever")]
    for number in range(2, 14):  # twelve side by side
        steps.append(
            a_step(number, f"Survey module {number - 1} for the migration", [1], "retriever")
        )
    for number in range(14, 39):
        base = 2 + (number - 14) % 12
        deps = [base] if number < 26 else [number - 12, number - 11 if number > 26 else 1]
        words = " and record every finding in the shared migration notes" * ((number % 3) + 1)
        steps.append(a_step(number, f"Migrate part {number}{words}", deps, ARMS[number % 4]))
    steps.append(a_step(39, "Run the whole test suite against the migrated code", [38], "executor"))
    steps.append(a_step(40, "Validate the migration against the goal", list(range(2, 40)), "judge"))
    return {"plan": steps, "rationale": "Survey, migrate in parallel, check.", "confidence": 0.7}


def stored(url: str, stub: StubLLM, plan: dict[str, Any] | None, **request: Any) -> dict[str, Any]:
    """The answer of POST /plan with `request`, the model answering `plan` (every call the
    stub's default 4-step plan when None)."""
    if plan is not None:
        stub.script(Reply(content=json.dumps(plan)))
    with httpx.Client(base_url=url, timeout=10) as client:
        response = client.post("/plan", json=request)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["metadata"]["source"] == "llm", body["metadata"]
    if plan is not None:
        assert len(body["plan"]) == len(plan["plan"])
    return body


def look_at(browser: Browser, url: str, body: dict[str, Any], name: str) -> None:
    page = browser.new_page(viewport=LAPTOP, extra_http_headers={"Accept": BROWSER_ACCEPT})
    problems: list[str] = []
    hosts: set[str] = set()
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("request", lambda request: hosts.add(urlsplit(request.url).netloc))
    try:
        answer = page.goto(f"{url}/plan/{body['plan_id']}")
        assert answer is not None
        assert answer.status == 200
        assert answer.headers["content-type"].startswith("text/html")
        page.wait_for_load_state("load")
        see_the_plan(page, body)
        shot = ARTIFACTS / f"plan-page-{name}.png"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot of the {name} plan: {shot}")
    finally:
        page.close()
    assert problems == []
    assert hosts == {urlsplit(url).netloc}


def see_the_plan(page: Page, body: dict[str, Any]) -> None:
    steps = body["plan"]
    # What the plan is for, as the request said it: no markup of it ran or was drawn.
    goal = " ".join(body["goal"].split())
    assert page.title() == (goal if len(goal) <= 80 else goal[:79].rstrip() + "…")
    heading = page.locator("h1#goal")
    assert heading.is_visible()
    assert heading.inner_text() == goal
    shown = [item.inner_text() for item in page.locator("#constraints li").all()]
    assert shown == body["constraints"]
    boxes = {}
    for step in steps:
        group = page.locator(f"#step-{step['step']}")
        action = group.locator("text.action")
        assert action.is_visible()
        shown = action.text_content() or ""
        wanted = step["action"]
        if not shown.endswith("…"):
            assert re.sub(r"\s", "", shown) == re.sub(r"\s", "", wanted)
        box = group.locator("rect").bounding_box()
        assert box is not None
        # Each text stays inside its box (in the browser's own font): readable, not cut
        # by a neighbour.
        for line in group.locator("text").all():
            text = line.bounding_box()
            assert text is not None
            assert box["x"] <= text["x"] <= text["x"] + text["width"] <= box["x"] + box["width"]
            assert box["y"] <= text["y"] <= text["y"] + text["height"] <= box["y"] + box["height"]
        boxes[step["step"]] = box
    links = sum(len(step["depends_on"]) for step in steps)
    assert page.locator("svg .edge").count() == links
    placed = list(boxes.items())
    for i, (a_number, a) in enumerate(placed):
        for b_number, b in placed[i + 1 :]:
            apart = (
                a["x"] + a["width"] <= b["x"]
                or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"]
                or b["y"] + b["height"] <= a["y"]
            )
            assert apart, f"steps {a_number} and {b_number} overlap"
    assert page.evaluate("document.documentElement.scrollWidth") <= LAPTOP["width"]
    assert page.locator("#source").inner_text() == "model (gpt-3.5-turbo)"


def test_a_person_sees_each_plan_whole(serve: Serve, stub: StubLLM, browser: Browser) -> None:
    url = serve(MAX_PLAN_STEPS="50")
    goal = f"Fix the login expiry bug {HOSTILE}"
    small = stored(url, stub, three_steps(), goal=goal, constraints=["No <b>schema</b> change"])
    large = stored(url, stub, forty_steps(), goal="Migrate the service to the new framework")
    look_at(browser, url, small, "3-steps")
    look_at(browser, url, large, "40-steps")
    # The markup reached the page as the model wrote it, and was shown as text there.
    assert HOSTILE in small["plan"][0]["action"]

    result = CliRunner().invoke(
        cli, ["show", large["plan_id"], "--url", url], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0, result.output
    for step in large["plan"]:
        assert step["action"] in result.output
    assert result.output.count("★") == len(re.findall(r"→", result.output)) + 2


def phase_frames(page: Page) -> dict[str, tuple[dict[str, float], list[int]]]:
    """Each phase's frame as the browser lays it out, with the steps it says it holds."""
    frames = {}
    for group in page.locator("svg g.phase").all():
        box = group.locator("rect").bounding_box()
        assert box is not None
        numbers = [int(n) for n in (group.get_attribute("data-steps") or "").split()]
        frames[group.get_attribute("data-phase") or ""] = (box, numbers)
    return frames


def test_a_person_sees_each_phase_around_its_steps(
    serve: Serve, stub: StubLLM, browser: Browser
) -> None:
    url = serve(MAX_PLAN_STEPS="50")
    # The stub answers every call with its 4-step plan: 4 phases, the middle two at once,
    # the first three each detailed into 4 steps, the last (the final check) left one step.
    body = stored(
        url,
        stub,
        None,
        goal="Fix authentication bug & add tests <em>today</em>",
        constraints=["Don't modify the database schema", "Keep <i>every</i> test green"],
        strategy="hierarchical",
    )
    assert [node["id"] for node in body["tree"]] == ["1", "2", "3", "4"]
    page = browser.new_page(viewport=LAPTOP, extra_http_headers={"Accept": BROWSER_ACCEPT})
    refused = offline(page, url)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    try:
        answer = page.goto(f"{url}/plan/{body['plan_id']}")
        assert answer is not None
        assert answer.status == 200
        see_the_plan(page, body)
        frames = phase_frames(page)
        assert list(frames) == ["1", "2", "3", "4"]
        held = sorted(n for _, numbers in frames.values() for n in numbers)
        assert held == [step["step"] for step in body["plan"]]
        for phase, (frame, numbers) in frames.items():
            for number in numbers:
                step = page.locator(f"#step-{number}")
                assert step.get_attribute("data-phase") == phase
                box = step.locator("rect").bounding_box()
                assert box is not None
                assert (
                    frame["x"] <= box["x"] <= box["x"] + box["width"] <= frame["x"] + frame["width"]
                )
                assert (
                    frame["y"]
                    <= box["y"]
                    <= box["y"] + box["height"]
                    <= frame["y"] + frame["height"]
                )
            label = page.locator(f"#phase-{phase} text.phase-label")
            assert label.is_visible()
            assert (label.text_content() or "").startswith(f"phase {phase} · ")
        placed = [frame for frame, _ in frames.values()]
        for i, a in enumerate(placed):
            for b in placed[i + 1 :]:
                assert a["y"] + a["height"] <= b["y"], "each phase below the one before"
        shot = ARTIFACTS / "plan-page-hierarchical.png"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot of the hierarchical plan: {shot}")
    finally:
        page.close()
    assert problems == []
    assert refused == []
