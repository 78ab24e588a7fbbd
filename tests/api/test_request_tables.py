"""docs/api.md's request tables against the request models: every field a caller may send is
listed, and nothing is said of a step's `required_arm` that the OpenAPI document does not do."""

from __future__ import annotations

import re
from pathlib import Path

from planner_arm.plan.schemas import PlanRequest
from support.app import make_settings, running_app

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def _section(title: str) -> str:
    text = API_DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def test_the_plan_request_table_lists_every_field() -> None:
    rows = re.findall(r"^\| `([a-z_]+)(?:\.[a-z_]+)?` \|", _section("`POST /plan`"), re.M)
    assert set(rows) == set(PlanRequest.model_fields)


async def test_required_arm_is_described_as_the_openapi_document_has_it() -> None:
    async with running_app(make_settings(llm=False)) as client:
        schema = (await client.get("/openapi.json")).json()
    arm = schema["components"]["schemas"]["PlanStep"]["properties"]["required_arm"]
    assert "enum" not in arm  # a request's own tools are planned over too
    assert "examples" in arm
    said = " ".join(_section("Requests: keys, limits, ids").split())
    assert "`required_arm` is an enum" not in said
    assert "`required_arm` lists the configured arms as its examples" in said
