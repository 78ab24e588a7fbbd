"""/docs (Swagger UI) and /redoc: every file they load comes from the service itself, so the API
explorer works where the service does, with no network beyond it (no CDN, no web font)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest

from support.app import make_settings, running_app

PAGES = ["/docs", "/redoc"]


class _Links(HTMLParser):
    """Every URL an element of the page loads or links to (src, href)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def links(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    return parser.urls


@pytest.mark.parametrize("path", PAGES)
async def test_the_page_and_every_file_it_loads_come_from_the_service(path: str) -> None:
    async with running_app(make_settings(llm=False)) as client:
        page = await client.get(path)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        # The browser is told to load nothing from elsewhere, whatever the page's script asks.
        policy = page.headers["content-security-policy"]
        assert "default-src 'self'" in policy
        assert "http" not in policy
        # No address of another host anywhere in the page: not in a tag, not in its script.
        assert re.findall(r"https?://[^\s'\"<>)]+", page.text) == []
        urls = links(page.text)
        assert urls, "the page loads its script and style"
        for url in urls:
            absolute = urljoin(str(page.url), url)
            assert urlsplit(absolute).netloc == page.url.host, url
            asset = await client.get(absolute)
            assert asset.status_code == 200, url
            assert asset.content, url
        # The OpenAPI document the page reads is the service's own too.
        (spec,) = re.findall(r"(?:url|spec-url)[:=]\s*['\"]([^'\"]+)['\"]", page.text)
        assert (await client.get(spec)).json()["info"]["title"] == "planner-arm"


async def test_swagger_ui_gets_its_script_style_and_icon() -> None:
    async with running_app(make_settings(llm=False)) as client:
        page = await client.get("/docs")
        kinds = {}
        for url in links(page.text):
            asset = await client.get(url)
            kinds[url.rsplit("/", 1)[-1]] = asset.headers["content-type"].split(";")[0]
    assert kinds == {
        "swagger-ui-bundle.js": "text/javascript",
        "swagger-ui.css": "text/css",
        "favicon.png": "image/png",
    }
