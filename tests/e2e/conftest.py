"""Fixtures of the tests that start the service as a process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from support.browser import chromium
from support.service import Serve, fault_services
from support.stub_model import StubLLM


@pytest.fixture
def serve(stub: StubLLM) -> Iterator[Serve]:
    """`serve(**env)`: the service against `stub` with the fault scenarios' settings
    (support.service.fault_services), warmed up; stopped after the test."""
    with fault_services(stub) as start:
        yield start


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """The system's headless Chromium, with none of its own network traffic
    (support.browser)."""
    with chromium() as launched:
        yield launched
