"""The rule-based input of a step: always valid against its arm's schema, no model needed.

Derived from the step alone: its action, acceptance criteria, arm and dependencies (a tool
step's arguments are `tools/arguments.py`'s). The executor's command is a command-looking span
of the action (in backticks or quotes, or after "run"), else a harmless `echo` that says what to
do, so a rule never invents a command that changes anything. Outputs are named only of steps the
step depends on.
"""

from __future__ import annotations

import re
from typing import Any

from planner_arm.plan.inputs import (
    MAX_INPUTS_FROM,
    MAX_ITEM_CHARS,
    MAX_ITEMS,
    MAX_TEXT_CHARS,
    NO_TEXT,
    check_input,
    clipped,
    instruction_text,
    real_dependencies,
    reference,
)
from planner_arm.plan.schemas import PlanStep

_QUOTED = re.compile(r"`([^`\n]{2,200})`|\"([^\"\n]{2,200})\"|'([^'\n]{2,200})'")
_RUN = re.compile(
    r"\b(?:run|execute|invoke)\s+((?:pytest|python3?|npm|yarn|pnpm|make|cargo|go|mvn|gradle|"
    r"docker|kubectl|pip|uv|tox|ruff|mypy|bash|sh|node|git|dotnet|bundle|rake)\b[^,;.\n]*)",
    re.I,
)
_COMMAND_WORDS = re.compile(r"^[\w./-]+(\s|$)")
_FILE = re.compile(
    r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.(?:py|js|ts|tsx|jsx|go|rs|java|kt|rb|"
    r"php|c|h|cpp|hpp|cs|swift|scala|sql|sh|yaml|yml|json|toml|md|html|css))\b"
)
_LANGUAGES = {
    "py": "python", "js": "javascript", "jsx": "javascript", "ts": "typescript",
    "tsx": "typescript", "go": "go", "rs": "rust", "java": "java", "kt": "kotlin",
    "rb": "ruby", "php": "php", "c": "c", "h": "c", "cpp": "cpp", "hpp": "cpp", "cs": "csharp",
    "swift": "swift", "scala": "scala", "sql": "sql", "sh": "bash",
}  # fmt: skip
_LANGUAGE_WORDS = re.compile(
    r"\b(python|javascript|typescript|golang|rust|java|kotlin|ruby|php|swift|scala|sql|bash)\b",
    re.I,
)
_MIN_TIMEOUT, _MAX_TIMEOUT = 60, 3_600


def _items(texts: list[str]) -> list[str]:
    items = [clipped(text, MAX_ITEM_CHARS) for text in texts]
    return [item for item in items if item][:MAX_ITEMS]


def _outputs(step: PlanStep, limit: int = MAX_TEXT_CHARS) -> str:
    """The references to the step's dependencies' outputs, as many whole ones as fit."""
    text = ""
    for number in real_dependencies(step.depends_on):
        more = f"{text}, {reference(number)}" if text else reference(number)
        if len(more) > limit:
            break
        text = more
    return text


def _inputs_from(step: PlanStep) -> list[int]:
    return real_dependencies(step.depends_on)[:MAX_INPUTS_FROM]


def command_in(action: str) -> str | None:
    """A command the action spells out, if it spells one out."""
    for match in _QUOTED.finditer(action):
        text = next(group for group in match.groups() if group)
        if _COMMAND_WORDS.match(text.strip()) and " " in text.strip():
            return text.strip()
    found = _RUN.search(action)
    return found.group(1).strip() if found else None


def _files(action: str) -> list[str]:
    return list(dict.fromkeys(match.group(1) for match in _FILE.finditer(action)))[:50]


def _language(action: str, files: list[str]) -> str | None:
    for name in files:
        language = _LANGUAGES.get(name.rsplit(".", 1)[-1].lower())
        if language:
            return language
    word = _LANGUAGE_WORDS.search(action)
    if word is None:
        return None
    language = word.group(1).lower()
    return "go" if language == "golang" else language


def _raw_input(step: PlanStep) -> dict[str, Any]:
    action, arm = step.action, step.required_arm
    criteria = _items(step.acceptance_criteria) or [clipped(action, MAX_ITEM_CHARS) or NO_TEXT]
    if arm == "retriever":
        return {"query": instruction_text(action), "sources": [], "top_k": 5}
    if arm == "coder":
        files = _files(action)
        instruction = instruction_text(action)
        uses = _outputs(step, MAX_TEXT_CHARS // 2)
        if uses:
            instruction = f"{clipped(instruction, MAX_TEXT_CHARS - len(uses) - 8)}\nUse: {uses}"
        return {"instruction": instruction, "language": _language(action, files),
                "files": files}  # fmt: skip
    if arm == "executor":
        return _executor_input(step)
    if arm == "judge":
        return {"criteria": criteria, "inputs_from": _inputs_from(step)}
    if arm == "guardian":
        return {"checks": criteria, "target": _outputs(step) or instruction_text(action)}
    if arm == "planner":
        return {"goal": instruction_text(action)}
    return {"instruction": instruction_text(action), "inputs_from": _inputs_from(step)}


def _executor_input(step: PlanStep) -> dict[str, Any]:
    timeout = min(_MAX_TIMEOUT, max(_MIN_TIMEOUT, 2 * step.estimated_duration_seconds))
    command = command_in(clipped(step.action, MAX_TEXT_CHARS))
    if command is None:
        # No command to run: say so, so an orchestrator asks for one instead of recording
        # success for work nobody did.
        return {"command": None, "needs": "human_or_model",
                "instruction": instruction_text(step.action), "working_dir": ".",
                "timeout_seconds": timeout, "expect_exit_code": 0}  # fmt: skip
    return {"command": clipped(command, MAX_TEXT_CHARS), "working_dir": ".",
            "timeout_seconds": timeout, "expect_exit_code": 0}  # fmt: skip


def rule_input(step: PlanStep) -> dict[str, Any]:
    """A valid input for `step`, whatever its arm (a configured arm gets GenericInput's)."""
    # Checked like a model's answer: a rule that broke the schema is a bug worth a loud error.
    return check_input(step.required_arm, _raw_input(step), frozenset(step.depends_on))
