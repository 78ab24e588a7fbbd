"""The rule-based input of a step: always valid against its arm's schema, no model needed.

Derived from the step alone: its action, acceptance criteria, arm and dependencies; a tool
step's arguments also from the request's goal and context (`rule_tool_input`). The
executor's command is a command-looking span of the action (in backticks or quotes, or after
"run"), else a harmless `echo` that says what to do, so a rule never invents a command that
changes anything. Outputs are named only of steps the step depends on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from planner_arm.errors import PlanValidationError
from planner_arm.plan.inputs import (
    MAX_INPUTS_FROM,
    MAX_ITEM_CHARS,
    MAX_ITEMS,
    MAX_TEXT_CHARS,
    check_input,
    reference,
)
from planner_arm.plan.lexicon import word_set
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.tool_inputs import ToolSchema, check_tool_input, needs_input
from planner_arm.plan.tool_traits import ID_WORDS, tokens

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
_BRACE_PAIR = re.compile(r"\{(?=\{)")
_MIN_TIMEOUT, _MAX_TIMEOUT = 60, 3_600
_NO_TEXT = "Carry out the step as planned"


def _cut(text: str, limit: int) -> str:
    # A template in the step's own text is not a reference this rule made: keep its words.
    text = " ".join(_BRACE_PAIR.sub("{ ", text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text(action: str) -> str:
    return _cut(action, MAX_TEXT_CHARS) or _NO_TEXT


def _items(texts: list[str]) -> list[str]:
    items = [_cut(text, MAX_ITEM_CHARS) for text in texts]
    return [item for item in items if item][:MAX_ITEMS]


def _outputs(step: PlanStep, limit: int = MAX_TEXT_CHARS) -> str:
    """The references to the step's dependencies' outputs, as many whole ones as fit."""
    text = ""
    for number in _deps(step):
        more = f"{text}, {reference(number)}" if text else reference(number)
        if len(more) > limit:
            break
        text = more
    return text


def _deps(step: PlanStep) -> list[int]:
    # A plan sent whole may name any number: only a real step's output is read.
    return [number for number in dict.fromkeys(step.depends_on) if number >= 1]


def _inputs_from(step: PlanStep) -> list[int]:
    return _deps(step)[:MAX_INPUTS_FROM]


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
    criteria = _items(step.acceptance_criteria) or [_cut(action, MAX_ITEM_CHARS) or _NO_TEXT]
    if arm == "retriever":
        return {"query": _text(action), "sources": [], "top_k": 5}
    if arm == "coder":
        files = _files(action)
        instruction = _text(action)
        uses = _outputs(step, MAX_TEXT_CHARS // 2)
        if uses:
            instruction = f"{_cut(instruction, MAX_TEXT_CHARS - len(uses) - 8)}\nUse: {uses}"
        return {"instruction": instruction, "language": _language(action, files),
                "files": files}  # fmt: skip
    if arm == "executor":
        return _executor_input(step)
    if arm == "judge":
        return {"criteria": criteria, "inputs_from": _inputs_from(step)}
    if arm == "guardian":
        return {"checks": criteria, "target": _outputs(step) or _text(action)}
    if arm == "planner":
        return {"goal": _text(action)}
    return {"instruction": _text(action), "inputs_from": _inputs_from(step)}


def _executor_input(step: PlanStep) -> dict[str, Any]:
    timeout = min(_MAX_TIMEOUT, max(_MIN_TIMEOUT, 2 * step.estimated_duration_seconds))
    command = command_in(_cut(step.action, MAX_TEXT_CHARS))
    if command is None:
        # No command to run: say so, so an orchestrator asks for one instead of recording
        # success for work nobody did.
        return {"command": None, "needs": "human_or_model", "instruction": _text(step.action),
                "working_dir": ".", "timeout_seconds": timeout, "expect_exit_code": 0}  # fmt: skip
    return {"command": _cut(command, MAX_TEXT_CHARS), "working_dir": ".",
            "timeout_seconds": timeout, "expect_exit_code": 0}  # fmt: skip


def rule_input(step: PlanStep) -> dict[str, Any]:
    """A valid input for `step`, whatever its arm (a configured arm gets GenericInput's)."""
    # Checked like a model's answer: a rule that broke the schema is a bug worth a loud error.
    return check_input(step.required_arm, _raw_input(step), frozenset(step.depends_on))


# Arguments that say what to look for or do: the step's own words fill one.
_TEXT_ARGUMENTS = word_set(
    "query q search search_query keywords text prompt question instruction instructions task"
)
_ABSENT = object()


def rule_tool_input(
    step: PlanStep, schema: ToolSchema, goal: str | None, context: Mapping[str, Any]
) -> dict[str, Any]:
    """The arguments of a tool step by rule, valid against the tool's `schema`: each required
    argument (and each optional one the context names) from the request's context (by name:
    `movie_id`, `movieId`), a `const`, a single `enum` value or a `default`, an id the goal or
    the action gives ("movie 603"), the step's words for a query, or the output of the step
    it depends on for an id; else the `needs` input naming the required arguments missing."""
    required = schema.required
    texts = [step.action, goal or ""]
    deps = _deps(step)
    given = _by_key(context)
    arguments: dict[str, Any] = {}
    for name, spec in schema.properties.items():
        fits = _Fits(schema, spec)
        found = fits.first(_candidates(given[_key(name)])) if _key(name) in given else _ABSENT
        if found is _ABSENT and name in required:
            found = _by_rule(name, fits, step.required_arm, texts, deps)
        if found is not _ABSENT:
            arguments[name] = found
    missing = [name for name in required if name not in arguments]
    if not missing:
        try:
            return check_tool_input(schema, arguments, frozenset(deps))
        except PlanValidationError:
            missing = required
    return needs_input(missing, arguments, _text(step.action))


def _key(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.lower())


def _by_key(context: Mapping[str, Any]) -> dict[str, Any]:
    """The context's values by their key as an argument name reads (`movieId` is `movie_id`),
    the first of each."""
    found: dict[str, Any] = {}
    for key, value in context.items():
        if isinstance(key, str):
            found.setdefault(_key(key), value)
    return found


class _Fits:
    """Which values one argument's schema takes, read within the whole tool schema."""

    def __init__(self, schema: ToolSchema, spec: Any) -> None:
        self.schema = schema
        self.spec = spec
        self.resolved = schema.resolved(spec)

    def first(self, values: list[Any]) -> Any:
        return next((value for value in values if self.schema.fits(self.spec, value)), _ABSENT)


def _candidates(value: Any) -> list[Any]:
    """A value as given, and as the other type a caller often means (42 and "42")."""
    if isinstance(value, bool):
        return [value]
    if isinstance(value, int | float):
        return [value, str(value)]
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,18}", value.strip()):
        return [value, int(value.strip())]
    return [value]


def _by_rule(name: str, fits: _Fits, tool: str, texts: list[str], deps: list[int]) -> Any:
    fixed = _fixed(fits.resolved)
    if fixed is not _ABSENT:
        return fixed
    words = tokens(name)
    if words and words[-1] in ID_WORDS:
        return _id_argument(words, fits, tool, texts, deps)
    if _key(name) in {_key(word) for word in _TEXT_ARGUMENTS}:
        return fits.first([_cut(texts[0], MAX_TEXT_CHARS)])
    return _ABSENT


def _id_argument(
    words: list[str], fits: _Fits, tool: str, texts: list[str], deps: list[int]
) -> Any:
    """An id the texts give for its noun (a bare `id`: the last noun of the tool's name),
    else the output of the nearest step the step depends on."""
    nouns = words[:-1] or [word for word in tokens(tool) if word not in ID_WORDS][-1:]
    given = [value for noun in nouns for text in texts for value in _given_ids(noun, text)]
    found = fits.first([item for value in given for item in _candidates(value)])
    if found is _ABSENT and deps:
        found = fits.first([reference(deps[-1])])
    return found


def _fixed(spec: Mapping[str, Any]) -> Any:
    """The one value the schema allows or offers: `const`, a single `enum`, a `default`."""
    if "const" in spec:
        return spec["const"]
    enum = spec.get("enum")
    if isinstance(enum, list) and len(enum) == 1:
        return enum[0]
    return spec.get("default", _ABSENT)


def _given_ids(noun: str, text: str) -> list[str]:
    """The ids of `noun` a text gives: "movie 603", "order #A-1", "ticket id T-4471"."""
    pattern = (
        rf"\b{re.escape(noun)}s?(?:\s+(?:id|number|no\.?))?\s*[:#]?\s*[\"']?"
        r"([A-Za-z]*[-_]?\d[\w-]*)"
    )
    return [match.group(1) for match in re.finditer(pattern, text, re.IGNORECASE)]
