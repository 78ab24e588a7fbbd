"""The run without I/O: a step's input resolved into arguments against earlier results (by
path, whole, inside text, a field picked by the argument's name where its schema wants a
scalar), MCP results read as values, and `Run.loop()` driven by hand."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from planner_arm.client.runner import Ask, CallTools, Notify, Replan, Run, ToolCall
from planner_arm.client.step_values import (
    Blocked,
    Output,
    call_arguments,
    read_output,
    read_tools,
)
from support.lending_server import plan_of, plan_step

# A pydantic-written schema: a nested model and an enum behind `#/$defs/...` references.
HOLD = {
    "name": "place_hold",
    "inputSchema": {
        "$defs": {
            "Branch": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
            "Format": {"enum": ["paper", "ebook"], "type": "string"},
        },
        "type": "object",
        "properties": {
            "book_id": {"type": "string"},
            "format": {"$ref": "#/$defs/Format"},
            "pickup": {"anyOf": [{"$ref": "#/$defs/Branch"}, {"type": "null"}]},
            "copies": {"type": ["integer", "null"]},
            "anything": {},
        },
        "required": ["book_id"],
    },
}
TOOLS = read_tools([HOLD])
RESULTS = {
    1: Output({"books": [{"book_id": "B-1", "format": "paper", "copies": 2}]}),
    2: Output({"Book-ID": "B-9", "branch": {"name": "Central"}}),
    3: Output(7, wrapped=True),
    4: Output({"books": [{"book_id": "B-1"}, {"book_id": "B-1"}, {"book_id": "B-2"}]}),
    5: Output({"book_id": "B-5", "nested": {"book_id": "B-6"}}),
}


def _arguments(arguments: dict[str, Any]) -> dict[str, Any] | Blocked:
    return call_arguments(plan_step(9, "place_hold", arguments), TOOLS["place_hold"], RESULTS)


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        pytest.param(
            {"book_id": "{{steps.1.output.books[0].book_id}}"}, {"book_id": "B-1"}, id="path"
        ),
        # A whole output where a scalar is wanted: the one value of the field of that name.
        pytest.param({"book_id": "{{steps.1.output}}"}, {"book_id": "B-1"}, id="whole-nested"),
        pytest.param({"book_id": "{{ steps.2.output }}"}, {"book_id": "B-9"}, id="loose-name"),
        pytest.param(
            {"book_id": "x", "format": "{{steps.1.output}}"},
            {"book_id": "x", "format": "paper"},
            id="enum-by-ref",
        ),
        pytest.param(
            {"book_id": "x", "copies": "{{steps.1.output}}"},
            {"book_id": "x", "copies": 2},
            id="typed-int",
        ),
        # An argument that may be an object takes the whole output as it is.
        pytest.param(
            {"book_id": "x", "pickup": "{{steps.2.output.branch}}"},
            {"book_id": "x", "pickup": {"name": "Central"}},
            id="object",
        ),
        pytest.param(
            {"book_id": "{{steps.4.output.books[2].book_id}}"}, {"book_id": "B-2"}, id="index"
        ),
        # Top-level field first, then inside.
        pytest.param({"book_id": "{{steps.5.output}}"}, {"book_id": "B-5"}, id="top-first"),
        # Inside text: a string as it is, anything else as compact JSON.
        pytest.param(
            {"book_id": "{{steps.3.output}} of {{steps.2.output.branch}}"},
            {"book_id": '7 of {"name":"Central"}'},
            id="in-text",
        ),
        # FastMCP's wrapper field, named by a path written from the output schema.
        pytest.param({"book_id": "{{steps.3.output.result}}"}, {"book_id": 7}, id="wrapped"),
        pytest.param(
            {"book_id": "x", "pickup": {"name": "{{steps.2.output.branch.name}}"}},
            {"book_id": "x", "pickup": {"name": "Central"}},
            id="nested-input",
        ),
    ],
)
def test_references_resolve_to_the_values_they_name(
    arguments: dict[str, Any], sent: dict[str, Any]
) -> None:
    assert _arguments(arguments) == sent


@pytest.mark.parametrize(
    ("arguments", "missing", "error"),
    [
        (
            {"book_id": "{{steps.4.output}}"},
            ["book_id"],
            "steps.4.output has 2 values named book_id",
        ),
        (
            {"book_id": "{{steps.1.output.books[3].book_id}}"},
            ["book_id"],
            "steps.1.output.books[3] is not in step 1's result",
        ),
        (
            {"book_id": "{{steps.1.output.isbn}}"},
            ["book_id"],
            "steps.1.output.isbn is not in step 1's result",
        ),
        (
            {"book_id": "B", "format": "{{steps.3.output.x}}"},
            ["format"],
            "steps.3.output.x is not in step 3's result",
        ),
        # An argument of any type declares no object or list: it wants a scalar too.
        (
            {"book_id": "x", "anything": "{{steps.5.output}}"},
            ["anything"],
            "steps.5.output has no field named anything",
        ),
        ({"format": "paper"}, ["book_id"], "required argument not given"),
        ({"book_id": "{{steps.1.output"}, ["book_id"], "argument book_id still holds '{{'"),
        (
            {"book_id": "B", "pickup": {"name": "{{steps.1.outputs}}"}},
            ["pickup"],
            "'{{steps.1.outputs}}' is not a reference",
        ),
    ],
)
def test_what_cannot_be_resolved_blocks_with_the_arguments_it_lacks(
    arguments: dict[str, Any], missing: list[str], error: str
) -> None:
    assert _arguments(arguments) == Blocked(missing, error)


def test_a_value_taken_from_a_result_that_holds_braces_is_never_sent() -> None:
    results = {1: Output({"note": "see {{steps.2.output}}"})}
    step = plan_step(2, "place_hold", {"book_id": "{{steps.1.output.note}}"})
    assert call_arguments(step, TOOLS["place_hold"], results) == Blocked(
        ["book_id"], "argument book_id still holds '{{'"
    )


@pytest.mark.parametrize(
    ("result", "value"),
    [
        (SimpleNamespace(structuredContent={"a": 1}, content=[]), {"a": 1}),
        (SimpleNamespace(structured_content={"result": [1, 2]}, content=[]), [1, 2]),
        (SimpleNamespace(content=[SimpleNamespace(type="text", text="[1, 2]")]), [1, 2]),
        (
            SimpleNamespace(content=[SimpleNamespace(type="text", text="plain words")]),
            "plain words",
        ),
        (
            {
                "content": [
                    {"type": "text", "text": "1"},
                    {"type": "image"},
                    {"type": "text", "text": "x"},
                ]
            },
            [1, "x"],
        ),
        ({"content": []}, None),
        ({"plain": "data"}, {"plain": "data"}),
    ],
)
def test_an_mcp_result_is_read_as_a_value(result: Any, value: Any) -> None:
    assert read_output(result, None).value == value


def test_fastmcps_wrapper_is_unwrapped_by_its_mark() -> None:
    [marked, unmarked] = read_tools(
        [
            {"name": "a", "inputSchema": {}, "outputSchema": {"x-fastmcp-wrap-result": True}},
            {"name": "b", "inputSchema": {}, "outputSchema": {"type": "object"}},
        ]
    ).values()
    both = {"result": 1, "extra": 2}
    assert read_output({"structuredContent": both}, marked) == Output(1, wrapped=True)
    assert read_output({"structuredContent": both}, unmarked) == Output(both)


def test_a_tool_the_service_would_refuse_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"tool 0 \('bad'\) cannot be read"):
        read_tools([{"name": "bad", "inputSchema": {"$ref": "https://example.com/x"}}])


def test_the_run_is_driven_by_hand_without_any_io() -> None:
    plan = plan_of(
        plan_step(1, "search", {"q": "Dune"}),
        plan_step(2, "place_hold", {"book_id": "{{steps.1.output}}"}, [1], writes=True),
    )
    run = Run(plan, [HOLD], asks=True)
    loop = run.loop()
    effect = next(loop)
    assert isinstance(effect, CallTools)
    [search] = effect.calls
    assert isinstance(search, ToolCall)
    assert search.arguments == {"q": "Dune"}
    assert not search.writes
    assert run.start(search) is not None
    run.finish(search, {"structuredContent": {"book_id": "B-1"}})
    effect = loop.send(None)
    assert isinstance(effect, Ask)
    assert effect.call.step.input == {"book_id": "B-1"}
    effect = loop.send(True)
    assert isinstance(effect, CallTools)
    [hold] = effect.calls
    run.start(hold)
    run.finish(hold, error=RuntimeError("locked"))
    effect = loop.send(None)
    assert isinstance(effect, Replan)
    assert effect.request["step_states"] == {
        1: {"status": "completed", "output": '{"book_id":"B-1"}'},
        2: {"status": "failed", "error": "RuntimeError: locked"},
    }
    effect = loop.send(plan.model_copy(update={"plan_id": "p2", "plan": plan.plan[:1]}))
    assert isinstance(effect, Notify)
    assert effect.event.kind == "replanned"
    with pytest.raises(StopIteration) as done:
        loop.send(None)
    finished = done.value.value
    assert finished.completed
    assert [step.status for step in finished.history] == ["failed"]
