"""Example answers for the OpenAPI document: what a caller sees, field for field."""

from __future__ import annotations

from typing import Any

REQUEST_ID = "0b6f6b1e-3f7a-4c55-9d9e-0f1a2b3c4d5e"
MODEL = "gpt-4o-mini"


def _step(
    step: int, action: str, arm: str, criteria: list[str], after: list[int], tier: int, secs: int
) -> dict[str, Any]:
    return {
        "step": step,
        "action": action,
        "required_arm": arm,
        "acceptance_criteria": criteria,
        "depends_on": after,
        "estimated_cost_tier": tier,
        "estimated_duration_seconds": secs,
    }


PLAN: dict[str, Any] = {
    "plan": [
        _step(
            1,
            "Search the codebase for the authentication logic",
            "retriever",
            ["auth/login.py located", "Related tests listed"],
            [],
            1,
            20,
        ),
        _step(
            2,
            "Write a patch that fixes the token expiry check",
            "coder",
            ["Patch addresses the root cause"],
            [1],
            3,
            60,
        ),
        _step(
            3,
            "Write a regression test for the expiry bug",
            "coder",
            ["Test fails before the patch"],
            [1],
            3,
            40,
        ),
        _step(
            4,
            "Validate the fix against the goal and the constraints",
            "judge",
            ["All criteria met", "No schema change"],
            [2, 3],
            2,
            30,
        ),
    ],
    "rationale": "Locate, fix and test in parallel, then validate.",
    "confidence": 0.9,
    "total_estimated_duration": 150,
    "complexity_score": 0.5,
    "plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f",
    "request_id": REQUEST_ID,
    "parallel_stages": [[1], [2, 3], [4]],
    "critical_path_duration": 110,
    "estimated_cost": {"llm_usd": 0.0009, "prompt_tokens": 900, "completion_tokens": 300},
    "metadata": {
        "source": "llm",
        "model": MODEL,
        "attempts": 1,
        "repairs": [],
        "warnings": [],
        "latency_ms": 812.4,
        "prompt_version": "2026-11-22.1",
    },
}

HEALTH: dict[str, Any] = {
    "status": "healthy",
    "version": "0.1.0",
    "model": MODEL,
    "timestamp": "2026-11-22T09:30:00.000000+00:00",
    "uptime_seconds": 3600.5,
    "llm": "configured",
    "store": "redis",
    "circuits": {MODEL: "closed"},
}

READY: dict[str, Any] = {"status": "ready"}

CAPABILITIES: dict[str, Any] = {
    "arm_id": "planner",
    "capabilities": ["planning", "task_decomposition", "dependency_resolution", "arm_selection"],
    "cost_tier": 2,
    "average_latency_ms": 1350.0,
    "model_latency_ms": 1520.0,
    "timeout_seconds": 10.0,
    "success_rate": 0.98,
    "measured": True,
    "plans_by_source": {"llm": 96, "fallback": 2, "cache": 14},
    "arms": [
        {
            "id": "coder",
            "capabilities": ["code_generation", "refactoring"],
            "description": "Writes and changes code",
            "input_schema": {
                "type": "object",
                "title": "CoderInput",
                "properties": {
                    "instruction": {"type": "string", "minLength": 1, "maxLength": 4000},
                    "language": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "files": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["instruction"],
                "additionalProperties": False,
            },
        }
    ],
    "min_steps": 3,
    "max_steps": 7,
    "models": [MODEL],
    "llm": "configured",
}

METRICS = 'planner_plans_total{source="llm"} 42.0\n'

REPLAN: dict[str, Any] = {
    **PLAN,
    "plan": [
        PLAN["plan"][0],
        PLAN["plan"][2],
        _step(
            5,
            "Write a patch that fixes the token expiry check without touching the schema",
            "coder",
            ["Patch addresses the root cause", "No migration added"],
            [1],
            3,
            60,
        ),
        _step(
            6,
            "Validate the fix against the goal and the constraints",
            "judge",
            ["All criteria met", "No schema change"],
            [3, 5],
            2,
            30,
        ),
    ],
    "plan_id": "9a1e0c7d2b3f4e5a8c6d7b0e1f2a3c4d",
    "parallel_stages": [[1], [3, 5], [6]],
    "version": 2,
    "parent_plan_id": PLAN["plan_id"],
    "replan_count": 1,
    "diff": {"kept": [1, 3], "removed": [2, 4], "added": [5, 6]},
}

VALIDATION: dict[str, Any] = {
    "valid": False,
    "errors": [
        {
            "code": "cycle",
            "step": 2,
            "message": "steps 2 -> 3 -> 2 depend on each other",
            "loc": ["plan", 1],
        }
    ],
    "warnings": [
        {
            "code": "dangling_dependency",
            "detail": "step 4 depends on step 9, which is not in the plan",
        },
    ],
    "plan": None,
}
