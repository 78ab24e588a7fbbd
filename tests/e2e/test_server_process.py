"""The real service process under uvicorn, on a free loopback port, spoken to over HTTP.

The model is the stub OpenAI-compatible server of tests/support/stub_model.py, on loopback
too, so the real openai client, the real sockets and the real uvicorn all run.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from support.app import make_settings, with_lifespan
from support.invariants import assert_valid_plan
from support.service import free_port, start_service, wait_for_line
from support.stub_model import Held, StubLLM


@pytest.fixture
def service(stub: StubLLM) -> Iterator[str]:
    port = free_port()
    process, lines, reader = start_service(
        port, {"OPENAI_BASE_URL": stub.base_url, "LOG_FORMAT": "json"}
    )
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    # uvicorn shuts down cleanly on SIGTERM, then re-raises the signal: -15 is the clean exit.
    assert process.wait(timeout=15) in (0, -15)
    reader.join(timeout=5)
    said = []
    while not lines.empty():
        said.append(lines.get_nowait())
    assert any("service_stopped" in line for line in said), said


@pytest.mark.slow
def test_real_server_plans_over_http(service: str, stub: StubLLM) -> None:
    with httpx.Client(base_url=service, timeout=10) as client:
        ready = client.get("/ready")
        response = client.post(
            "/plan",
            json={"goal": "Fix authentication bug and add tests"},
            headers={"X-Request-ID": "e2e-1"},
        )
        bad = client.post("/plan", json={"goal": " "})
        metrics = client.get("/metrics").text
    assert ready.status_code == 200
    assert response.status_code == 200
    body = response.json()
    assert_valid_plan(body)
    assert body["metadata"]["source"] == "llm"
    assert response.headers["x-request-id"] == "e2e-1"
    assert stub.calls == 1
    assert bad.status_code == 422
    assert bad.json()["error"] == "invalid_request"
    assert 'planner_plans_total{source="llm"} 1.0' in metrics


@pytest.mark.slow
def test_sigterm_drains_requests_in_flight(stub: StubLLM) -> None:
    port = free_port()
    env = {"OPENAI_BASE_URL": stub.base_url, "LOG_FORMAT": "json", "DRAIN_SECONDS": "5"}
    process, lines, reader = start_service(port, env)
    release = threading.Event()
    stub.script(Held(release))
    try:
        results: list[httpx.Response] = []
        client = threading.Thread(
            target=lambda: results.append(
                httpx.post(f"http://127.0.0.1:{port}/plan", json={"goal": "Ship it"}, timeout=20)
            )
        )
        client.start()
        assert stub.arrived.wait(timeout=10)  # the request is now waiting on the model
        said: list[str] = []
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        # uvicorn logs this once its listening socket is closed and it waits on our request.
        wait_for_line(lines, "Waiting for connections to close", said)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        release.set()
        client.join(timeout=15)
        assert process.wait(timeout=10) in (0, -15)
        exited_after = time.monotonic() - signalled
    finally:
        release.set()
        process.kill()
    assert results, "the request in flight got no answer"
    assert results[0].status_code == 200
    assert results[0].json()["metadata"]["source"] == "llm"
    assert exited_after < 5
    reader.join(timeout=5)
    while not lines.empty():
        said.append(lines.get_nowait())
    assert any("service_stopped" in line for line in said)


async def test_exit_signal_turns_ready_off_at_once() -> None:
    import uvicorn

    from planner_arm.api.app import create_app
    from planner_arm.api.server import build_server

    settings = make_settings(llm=False)
    app = create_app(settings)
    server = build_server(app, settings)
    assert isinstance(server.config, uvicorn.Config)
    assert server.config.timeout_graceful_shutdown == 14  # drain 15 s, half a second kept
    async with with_lifespan(app) as served:
        transport = httpx.ASGITransport(app=served)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            assert (await client.get("/ready")).status_code == 200
            server.handle_exit(signal.SIGTERM, None)
            assert (await client.get("/ready")).status_code == 503
            # A new plan might outlast the drain: it is turned away at once, to retry
            # elsewhere (requests already admitted finish: tests/api/test_errors.py).
            late = await client.post("/plan", json={"goal": "g"})
            assert late.status_code == 503
            assert late.json()["error"] == "shutting_down"
            assert late.headers["retry-after"] == "1"
    assert server.should_exit
