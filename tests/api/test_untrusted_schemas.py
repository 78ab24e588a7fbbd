"""A tool's JSON Schema is the caller's data: the service follows only references within it,
retrieves nothing a schema names (a loopback JSON service, a file on its own disk, a port that
never answers), refuses a reference that leaves the schema, points nowhere or loops, with a
422 that names the tool and the reference, and checks what pydantic writes (enums and nested
models under `$defs`) against the whole schema, with a model or without."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import respx
from pydantic import BaseModel

from support.app import answer, make_settings, running_app

SECRET = "the-value-only-the-service-could-read"


class _Counted(BaseHTTPRequestHandler):
    hits: list[str] = []  # noqa: RUF012

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = json.dumps({"type": "string", "enum": [SECRET]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def json_service() -> Iterator[tuple[str, list[str]]]:
    """A JSON service on loopback that counts the requests it gets."""
    hits: list[str] = []
    handler = type("Handler", (_Counted,), {"hits": hits})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/unit.json", hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def silent_port() -> Iterator[tuple[str, socket.socket]]:
    """A loopback port that takes connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/never.json", listener
    finally:
        listener.close()


def _weather(unit: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "get_weather",
        "description": "Get the weather of a city in a unit",
        "inputSchema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": unit},
            "required": ["city", "unit"],
        },
    }


def _request(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "goal": "Get the weather in Paris",
        "context": {"city": "Paris", "unit": "celsius"},
        "tools": [tool],
        "specialize": True,
    }


def _refused(response: Any, *names: str) -> None:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "invalid_request"
    for name in names:
        assert name in body["detail"], body
    assert SECRET not in response.text


async def test_a_reference_to_a_loopback_service_is_refused_and_never_fetched(
    json_service: tuple[str, list[str]],
) -> None:
    url, hits = json_service
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json=_request(_weather({"$ref": url})))
    _refused(response, "get_weather", url, "points outside the schema")
    assert hits == []


async def test_a_reference_to_a_file_of_the_service_is_refused_and_never_read(
    tmp_path: Path,
) -> None:
    secret_file = tmp_path / "unit.json"
    secret_file.write_text(json.dumps({"enum": [SECRET]}))
    ref = secret_file.as_uri()
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json=_request(_weather({"$ref": ref})))
    _refused(response, "get_weather", ref)


async def test_a_reference_to_a_port_that_never_answers_is_refused_without_connecting(
    silent_port: tuple[str, socket.socket],
) -> None:
    url, listener = silent_port
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json=_request(_weather({"$ref": url})))
        health = await client.get("/health")
    _refused(response, "get_weather", url)
    assert health.status_code == 200
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody connected


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/plan/specialize", {"step": 1}),
        ("/replan", {"step_states": {"1": "failed"}}),
        ("/plan/expand", {"step": 1, "goal": "Get the weather in Paris"}),
    ],
)
async def test_every_endpoint_that_reads_tools_refuses_a_remote_reference(
    json_service: tuple[str, list[str]], path: str, extra: dict[str, Any]
) -> None:
    url, hits = json_service
    good = _weather({"type": "string"})
    async with running_app(make_settings(llm=False)) as client:
        made = (await client.post("/plan", json=_request(good))).json()
        body = {"plan_id": made["plan_id"], "tools": [_weather({"$ref": url})], **extra}
        response = await client.post(path, json=body)
    _refused(response, "get_weather", url)
    assert hits == []


@pytest.mark.parametrize(
    ("unit", "says"),
    [
        ({"$ref": "#/$defs/Missing"}, "'#/$defs/Missing' points at nothing"),
        ({"$ref": "#nowhere"}, "names no anchor"),
        ({"$ref": "#/properties/city/type"}, "points at a str, not a schema"),
        ({"$ref": "other.json#/Unit"}, "points outside the schema"),
    ],
)
async def test_a_broken_reference_is_a_422_naming_it(unit: dict[str, Any], says: str) -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json=_request(_weather(unit)))
    _refused(response, "get_weather", says)


async def test_a_reference_that_loops_on_one_value_is_a_422() -> None:
    tool = {"name": "looping", "description": "Loop", "inputSchema": {"$ref": "#"}}
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json=_request(tool))
    _refused(response, "looping", "a reference cycle never reaches into the value: # -> #")


async def test_a_schema_that_doubles_at_each_reference_is_a_422() -> None:
    # 30 levels of allOf over two references to the next: 2**30 subschemas for one value.
    defs: dict[str, Any] = {
        f"d{n}": {"allOf": [{"$ref": f"#/$defs/d{n + 1}"}, {"$ref": f"#/$defs/d{n + 1}"}]}
        for n in range(30)
    }
    defs["d30"] = {"type": "string"}
    unit = {"$ref": "#/$defs/d0"}
    tool = _weather(unit)
    tool["inputSchema"]["$defs"] = defs
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json=_request(tool))
    _refused(response, "get_weather", "unfolds to more than")


async def test_a_property_referring_to_the_whole_schema_is_a_recursive_schema_not_a_crash() -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "parent": {"$ref": "#"}},
        "required": ["name"],
    }
    tool = {"name": "add_node", "description": "Add a node of a tree", "inputSchema": schema}
    context = {"name": "leaf", "parent": {"name": "root"}}
    request = {"goal": "Add the node leaf", "context": context, "tools": [tool]}
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={**request, "specialize": True})
    assert response.status_code == 200, response.text
    (step,) = response.json()["plan"]
    assert step["input"] == context


class Unit(StrEnum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Place(BaseModel):
    city: str
    country: str = "FR"


class Forecast(BaseModel):
    place: Place
    unit: Unit
    days: int = 3


PYDANTIC_TOOL = {
    "name": "get_forecast",
    "description": "Get the weather forecast of a place in a unit",
    "inputSchema": Forecast.model_json_schema(),
}


async def test_a_pydantic_schema_gets_arguments_valid_against_the_whole_schema() -> None:
    # What FastMCP lists: the enum and the nested model under $defs, referred to by $ref.
    assert "$defs" in PYDANTIC_TOOL["inputSchema"]
    request = {
        "goal": "Get the forecast for Paris",
        "context": {"place": {"city": "Paris"}, "unit": "celsius"},
        "tools": [PYDANTIC_TOOL],
        "specialize": True,
    }
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json=request)
    assert response.status_code == 200, response.text
    (step,) = response.json()["plan"]
    assert step["input"] == {"place": {"city": "Paris"}, "unit": "celsius"}
    jsonschema.validate(step["input"], PYDANTIC_TOOL["inputSchema"])


async def test_a_pydantic_enum_with_one_value_is_filled_through_its_reference() -> None:
    schema = {
        "$defs": {"Only": {"enum": ["metric"], "type": "string"}},
        "properties": {"system": {"$ref": "#/$defs/Only"}},
        "required": ["system"],
        "type": "object",
    }
    tool = {"name": "set_units", "description": "Set the unit system", "inputSchema": schema}
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            "/plan", json={"goal": "Set the units", "tools": [tool], "specialize": True}
        )
    assert response.status_code == 200, response.text
    assert response.json()["plan"][0]["input"] == {"system": "metric"}


@respx.mock(assert_all_called=False)
async def test_a_models_arguments_are_checked_against_the_whole_pydantic_schema(
    respx_mock: respx.MockRouter,
) -> None:
    plan = {
        "plan": [
            {
                "step": 1,
                "tool": "get_forecast",
                "action": "Get the forecast of Paris",
                "depends_on": [],
            }
        ]
    }
    wrong = {"place": {"city": "Paris"}, "unit": "kelvin"}
    right = {"place": {"city": "Paris"}, "unit": "fahrenheit", "days": 2}
    respx_mock.post(url__regex=r".*/chat/completions").mock(
        side_effect=[answer(plan), answer(wrong), answer(right)]
    )
    request = {"goal": "Get the forecast for Paris", "tools": [PYDANTIC_TOOL], "specialize": True}
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json=request)
    assert response.status_code == 200, response.text
    (step,) = response.json()["plan"]
    assert step["input"] == right
    jsonschema.validate(step["input"], PYDANTIC_TOOL["inputSchema"])
    repair = json.loads(respx_mock.calls[2].request.content)["messages"][-1]["content"]
    assert "unit: 'kelvin' is not one of ['celsius', 'fahrenheit']" in repair
