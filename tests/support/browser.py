"""The system's Chromium, headless and driven by Playwright (which downloads no browser here),
kept off the network: no background requests of its own (updates, safe browsing, metrics),
and `offline(page, url)` aborts every request of a page to any host but the service's.

Without chromium the test is skipped (under CI it fails: scripts/test.sh installs the Debian
package `chromium`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Route, sync_playwright

# Chromium's own traffic (component updates, field trials, safe browsing, metrics) stays off.
QUIET = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--metrics-recording-only",
    "--no-first-run",
]


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@contextmanager
def chromium() -> Iterator[Browser]:
    executable = chromium_path()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=QUIET)
        try:
            yield launched
        finally:
            launched.close()


def offline(page: Page, url: str) -> list[str]:
    """Aborts each request of `page` to a host other than `url`'s; returns the list the
    aborted URLs are added to."""
    allowed = urlsplit(url).netloc
    refused: list[str] = []

    def route(request_route: Route) -> None:
        target = request_route.request.url
        if urlsplit(target).scheme in ("data", "blob") or urlsplit(target).netloc == allowed:
            request_route.continue_()
        else:
            refused.append(target)
            request_route.abort("internetdisconnected")

    page.route("**/*", route)
    return refused
