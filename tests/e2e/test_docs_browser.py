"""/docs and /redoc in a real browser (the system's headless Chromium) against the real service
process, with every request to another host aborted: the API explorer renders its list of
operations from the service alone, as it must where the service has no way out."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser

from support.browser import offline
from support.service import Serve

pytestmark = pytest.mark.slow


def operations(url: str) -> list[tuple[str, str]]:
    spec: dict[str, Any] = httpx.get(f"{url}/openapi.json", timeout=10).json()
    return [(method.upper(), path) for path, item in spec["paths"].items() for method in item]


def test_swagger_ui_lists_every_operation_with_no_network(serve: Serve, browser: Browser) -> None:
    url = serve(warm=False)
    page = browser.new_page()
    refused = offline(page, url)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    try:
        answer = page.goto(f"{url}/docs")
        assert answer is not None
        assert answer.status == 200
        blocks = page.locator(".opblock")
        blocks.first.wait_for(state="visible", timeout=15_000)
        shown = [
            (
                block.locator(".opblock-summary-method").inner_text().strip(),
                block.locator(".opblock-summary-path").get_attribute("data-path"),
            )
            for block in blocks.all()
        ]
    finally:
        page.close()
    assert sorted(shown) == sorted(operations(url))
    assert refused == []  # it asked no other host: nothing had to be stopped
    assert problems == []


def test_redoc_shows_the_operations_with_no_network(serve: Serve, browser: Browser) -> None:
    url = serve(warm=False)
    page = browser.new_page()
    refused = offline(page, url)
    try:
        answer = page.goto(f"{url}/redoc")
        assert answer is not None
        assert answer.status == 200
        page.get_by_text("Turn a goal into a validated, executable plan.").first.wait_for(
            state="attached", timeout=15_000
        )
        title = page.locator("h1").first.inner_text()
    finally:
        page.close()
    assert title.startswith("planner-arm")
    assert refused == []  # the page's policy keeps even ReDoc's logo from the CDN
