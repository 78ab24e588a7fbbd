"""The reference in README.md and docs/ held against the code, so it cannot drift.

- docs/api.md's error-code tables: every code an error of `planner_arm.errors` can carry is
  listed, with the HTTP status the service answers it with (or in the table of codes that
  never reach a client), and every listed code exists.
- docs/api.md's repair and warning table: every code the service writes into
  `metadata.repairs` or `metadata.warnings` is listed, and every listed code exists.
- docs/api.md's /plan/validate error codes are the ones the checker reports.
- Every relative link in README.md and docs/*.md points at a file (and heading) that exists,
  and every repository path they name (`tests/e2e/test_faults.py`) exists.
- README.md's tool example: the cast asked for alone plans the search first.

Every documented example's output is run and compared by tests/test_doc_examples.py.

The codes are read from the source with `ast`, wherever the modules live, so a new code, a
moved module or a renamed file is caught here with its name.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from planner_arm import errors as error_module
from support.app import make_settings, running_app

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "planner_arm"
README = ROOT / "README.md"
API_DOC = ROOT / "docs" / "api.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
# Written separately: a link to it passes while the file is missing, and is checked once it
# is there. Remove an entry when its file lands.
HTTP_TABLE = "Error codes"
INTERNAL_TABLE = "Codes that never reach a client"
REPAIR_TABLE = "Repair and warning codes"
VALIDATE_TABLE = "Validation error codes"


def http_status(error_class: type[error_module.PlannerError], code: str) -> int:
    """The HTTP status the service answers an `error_class` error carrying `code` with: the
    class's own, except for PlanningFailed, whose status its code picks."""
    if error_class is error_module.PlanningFailed:
        return error_module.PlanningFailed.STATUS_BY_CODE.get(code, 503)
    return error_class.http_status


# --- Markdown ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    cells: list[str]
    line: int


def _headings(text: str) -> Iterator[tuple[int, int, str]]:
    """(line index, level, title) of each heading outside fenced code."""
    fenced = False
    for index, line in enumerate(text.splitlines()):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = re.match(r"(#{1,6}) +(.+?) *#*$", line)
        if match and not fenced:
            yield index, len(match.group(1)), match.group(2)


def table_under(path: Path, title: str) -> list[Row]:
    """The rows of the first table in the section headed `title` (header row left out)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    headings = list(_headings("\n".join(lines)))
    found = [(index, level) for index, level, text in headings if text.strip("` ") == title]
    assert found, f"{path.relative_to(ROOT)} has no heading {title!r}"
    start, level = found[0]
    end = next((i for i, lvl, _ in headings if i > start and lvl <= level), len(lines))
    rows = []
    for number in range(start + 1, end):
        line = lines[number].strip()
        if line.startswith("|"):
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip("|"))]
            if not all(re.fullmatch(r":?-+:?", cell) for cell in cells):
                rows.append(Row(cells, number + 1))
        elif rows:
            break
    assert len(rows) > 1, f"{path.relative_to(ROOT)}: no table under {title!r}"
    return rows[1:]


def codes_in(cell: str) -> list[str]:
    return re.findall(r"`([a-z][a-z0-9_]*)`", cell)


def documented_statuses() -> dict[str, int]:
    """code -> status from the HTTP table: `| status | `code`, `code` | when |`."""
    statuses: dict[str, int] = {}
    for row in table_under(API_DOC, HTTP_TABLE):
        assert re.fullmatch(r"\d{3}", row.cells[0]), (
            f"docs/api.md:{row.line}: one status a row, got {row.cells[0]!r}"
        )
        for code in codes_in(row.cells[1]):
            assert statuses.get(code, int(row.cells[0])) == int(row.cells[0]), (
                f"docs/api.md:{row.line}: `{code}` is listed with two statuses"
            )
            statuses[code] = int(row.cells[0])
    return statuses


def first_column_codes(title: str) -> set[str]:
    return {code for row in table_under(API_DOC, title) for code in codes_in(row.cells[0])}


# --- Reading the source -----------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    path: Path
    tree: ast.Module
    parents: dict[ast.AST, ast.AST]

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT))

    def enclosing_function(self, node: ast.AST) -> ast.AST:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                return node
        return self.tree


@cache
def modules() -> tuple[Module, ...]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        found.append(Module(path, tree, parents))
    return tuple(found)


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _code_of(text: str) -> set[str]:
    """The code of an entry "<code>" or "<code>: <detail>"."""
    code = text.split(":", 1)[0].strip()
    return {code} if re.fullmatch(r"[a-z][a-z0-9_]*", code) else set()


def _assigned(module: Module, name: str, near: ast.AST) -> list[ast.expr]:
    """What `name` is assigned in the function around `near`, else at module level."""
    function = module.enclosing_function(near)
    scopes = [list(ast.walk(function)), module.tree.body] if function is not module.tree else []
    for nodes in scopes or [module.tree.body]:
        values: list[ast.expr] = [
            node.value
            for node in nodes
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        ]
        if values:
            return values
    return []


def _parameter_values(module: Module, name: str, near: ast.AST) -> list[ast.expr]:
    """When `name` is a parameter of the function around `near`: what the module's calls of
    that function pass for it (one level, enough for `_reject("code", ...)` helpers)."""
    function = module.enclosing_function(near)
    if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
        return []
    names = [arg.arg for arg in function.args.args]
    if name not in names:
        return []
    position = names.index(name) - (1 if names[:1] in (["self"], ["cls"]) else 0)
    values: list[ast.expr] = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Call) and _call_name(node.func) == function.name:
            values += [k.value for k in node.keywords if k.arg == name]
            if 0 <= position < len(node.args):
                values.append(node.args[position])
    return values


def resolve(module: Module, expr: ast.AST | None, depth: int = 0) -> set[str]:
    """The codes an expression can hold: a literal, an f-string's "<code>: " head, either
    branch of `a if c else b`, a dict's values (`{...}.get(k, default)`), a list of entries,
    a variable assigned one of those, or a parameter its callers pass one of those."""
    if expr is None or depth > 6:
        return set()
    deeper = depth + 1
    if isinstance(expr, ast.Constant):
        return _code_of(expr.value) if isinstance(expr.value, str) else set()
    if isinstance(expr, ast.JoinedStr):
        head = expr.values[0] if expr.values else None
        if isinstance(head, ast.Constant) and ":" in str(head.value):
            return _code_of(str(head.value))
        return set()
    if isinstance(expr, ast.IfExp):
        return resolve(module, expr.body, deeper) | resolve(module, expr.orelse, deeper)
    if isinstance(expr, ast.List | ast.Tuple | ast.Set):
        return set().union(*(resolve(module, e, deeper) for e in expr.elts))
    if isinstance(expr, ast.Dict):
        return set().union(*(resolve(module, v, deeper) for v in expr.values))
    if isinstance(expr, ast.ListComp | ast.SetComp | ast.GeneratorExp):
        return resolve(module, expr.elt, deeper)
    if isinstance(expr, ast.Starred):
        return resolve(module, expr.value, deeper)
    if isinstance(expr, ast.Call) and _call_name(expr.func) == "get" and expr.args:
        assert isinstance(expr.func, ast.Attribute)
        default = expr.args[1] if len(expr.args) > 1 else None
        return resolve(module, expr.func.value, deeper) | resolve(module, default, deeper)
    if isinstance(expr, ast.Name):
        values = _assigned(module, expr.id, expr) or _parameter_values(module, expr.id, expr)
        return set().union(*(resolve(module, value, deeper) for value in values))
    return set()


# --- Error codes ------------------------------------------------------------------------


def error_classes() -> dict[str, type[error_module.PlannerError]]:
    return {
        name: value
        for name, value in vars(error_module).items()
        if inspect.isclass(value)
        and issubclass(value, error_module.PlannerError)
        and value.__module__ == error_module.__name__
    }


def _names_from_errors(module: Module) -> dict[str, str]:
    """Local name -> class name, for the classes a module imports from planner_arm.errors."""
    if module.path == PACKAGE / "errors.py":
        return {name: name for name in error_classes()}
    names = {}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom) and node.module == error_module.__name__:
            names.update({alias.asname or alias.name: alias.name for alias in node.names})
    return names


def error_codes() -> dict[tuple[str, str], str]:
    """(class name, code) -> where it comes from, for every code an error can carry: the
    class's own `code` (unless every constructor call must pass one) and each `code=` its
    callers pass, followed through variables and helper parameters."""
    found: dict[tuple[str, str], str] = {}
    for name, error_class in error_classes().items():
        parameter = inspect.signature(error_class.__init__).parameters.get("code")
        if parameter is None or parameter.default is not inspect.Parameter.empty:
            found[(name, error_class.code)] = f"{error_module.__name__}.{name}.code"
    for module in modules():
        imported = _names_from_errors(module)
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.Call):
                continue
            class_name = imported.get(_call_name(node.func) or "")
            if class_name is None:
                continue
            for keyword in node.keywords:
                if keyword.arg == "code":
                    for code in resolve(module, keyword.value):
                        found.setdefault((class_name, code), f"{module.name}:{node.lineno}")
    return found


def test_the_collector_sees_codes_passed_at_call_sites() -> None:
    codes = {code for _, code in error_codes()}
    # One each: a literal, a helper's parameter, a dict lookup with a default.
    assert {"shutting_down", "inconsistent_step_states", "deadline_exceeded"} <= codes


def test_every_error_code_is_in_the_api_docs_with_its_status() -> None:
    documented = documented_statuses()
    internal = first_column_codes(INTERNAL_TABLE)
    classes = error_classes()
    problems = []
    for (class_name, code), origin in sorted(error_codes().items()):
        status = http_status(classes[class_name], code)
        listed = documented.get(code)
        if status == 500 and (code in internal or listed == 500):
            continue  # handled inside the service (or a bug's 500)
        if status == 500:
            problems.append(f"`{code}` ({class_name}, {origin}) is missing from {INTERNAL_TABLE!r}")
        elif listed is None:
            problems.append(
                f"`{code}` ({class_name}, {origin}) is missing from {HTTP_TABLE!r} "
                f"(status {status})"
            )
        elif listed != status:
            problems.append(
                f"`{code}` ({class_name}, {origin}) is listed with {listed}; "
                f"the service answers it with {status}"
            )
    assert not problems, "docs/api.md:\n  " + "\n  ".join(problems)


@cache
def string_literals() -> frozenset[str]:
    """Every string in the package's source, and every f-string's leading text."""
    found = set()
    for module in modules():
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
            elif isinstance(node, ast.JoinedStr) and node.values:
                head = node.values[0]
                if isinstance(head, ast.Constant):
                    found.add(str(head.value))
    return frozenset(found)


def _in_source(code: str) -> bool:
    return any(text == code or text.startswith(f"{code}:") for text in string_literals())


@pytest.mark.parametrize("title", [HTTP_TABLE, INTERNAL_TABLE, REPAIR_TABLE])
def test_every_code_the_docs_list_exists_in_the_code(title: str) -> None:
    listed = set(documented_statuses()) if title == HTTP_TABLE else first_column_codes(title)
    stale = sorted(code for code in listed if not _in_source(code))
    assert not stale, f"docs/api.md, {title!r} lists codes the code never uses: {stale}"


# --- Repair and warning codes -----------------------------------------------------------

# The ways the service writes an entry into metadata.repairs or metadata.warnings, as
# (call name, which positional argument, which keyword) holding the code or "<code>: detail".
PRODUCERS: tuple[tuple[str, int | None, str | None], ...] = (
    ("repair", 0, None),  # repair("renumbered", detail)
    ("add", 0, None),  # the normaliser's self.add("field_synonym", detail)
    ("warn_once", 0, None),  # spend.warn_once(f"fallback_used: {reason}: {detail}")
    ("with_warning", 1, None),  # with_warning(response, "plan_not_stored", detail)
    ("PlanNote", None, "code"),  # PlanNote(code="input_by_rule", detail=...)
    ("QualityProblem", 0, None),  # QualityProblem("example_copied", message)
)
# Lists of entries built in place: repairs = [f"constraint_check_added: ..."], warnings=[...].
ENTRY_LISTS = ("repairs", "warnings")


def _produced(module: Module, node: ast.AST) -> Iterator[tuple[str, ast.expr]]:
    """(producer, expression holding codes) for one node."""
    if isinstance(node, ast.Assign):
        if any(isinstance(t, ast.Name) and t.id.endswith(ENTRY_LISTS) for t in node.targets):
            yield "repairs = [...]", node.value
        return
    if not isinstance(node, ast.Call):
        return
    name = _call_name(node.func)
    for producer, position, keyword in PRODUCERS:
        if name != producer:
            continue
        if producer == "add" and not (
            isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"
        ):
            continue
        if position is not None and position < len(node.args):
            yield producer, node.args[position]
        yield from ((producer, k.value) for k in node.keywords if k.arg == keyword)
    receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
    into = _call_name(receiver) if receiver is not None else None
    if name == "append" and (into or "").endswith(ENTRY_LISTS) and node.args:
        yield "repairs.append", node.args[0]
    yield from (("warnings=", k.value) for k in node.keywords if k.arg in ENTRY_LISTS)


def repair_codes() -> tuple[dict[str, str], dict[str, int]]:
    """code -> where it is made, and how many codes each producer made."""
    found: dict[str, str] = {}
    by_producer: dict[str, int] = {}
    for module in modules():
        for node in ast.walk(module.tree):
            for producer, expr in _produced(module, node):
                codes = resolve(module, expr)
                by_producer[producer] = by_producer.get(producer, 0) + len(codes)
                for code in codes:
                    found.setdefault(code, f"{module.name}:{getattr(node, 'lineno', '?')}")
    return found, by_producer


def test_the_collector_sees_every_kind_of_repair_entry() -> None:
    _, by_producer = repair_codes()
    blind = [producer for producer, _, _ in PRODUCERS if not by_producer.get(producer)]
    assert not blind, (
        f"no repair or warning code is made through {blind} any more: update PRODUCERS in "
        "tests/test_docs.py to the way the code makes them now"
    )


def test_every_repair_and_warning_code_is_in_the_api_docs() -> None:
    listed = first_column_codes(REPAIR_TABLE)
    found, _ = repair_codes()
    missing = sorted(f"`{code}` ({origin})" for code, origin in found.items() if code not in listed)
    assert not missing, f"docs/api.md, {REPAIR_TABLE!r} is missing: " + ", ".join(missing)


def _frozenset_named(name: str) -> set[str]:
    """The strings of a module-level `NAME = frozenset({...})`, wherever it is defined."""
    for module in modules():
        for node in module.tree.body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
                and isinstance(node.value, ast.Call)
                and node.value.args
            ):
                return resolve(module, node.value.args[0])
    pytest.fail(f"no module of the package defines {name}: update tests/test_docs.py")


def test_the_validation_error_codes_are_the_checkers() -> None:
    listed = first_column_codes(VALIDATE_TABLE)
    real = _frozenset_named("EDIT_ERROR_CODES")
    assert listed == real, (
        f"docs/api.md, {VALIDATE_TABLE!r}: missing {sorted(real - listed)}, "
        f"not a code {sorted(listed - real)}"
    )


# --- Links and paths --------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
PATH = re.compile(r"(?<![\w/.~-])((?:[\w.-]+/)+[\w.-]+\.(?:py|md|ya?ml|toml|txt|jsonl?|sh|cfg))\b")


def slug(title: str) -> str:
    """The anchor a heading gets on a rendered page: lower case, punctuation dropped (letters,
    digits, `_` and `-` kept), spaces made hyphens."""
    text = title.replace("`", "").replace("*", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, _, title in _headings(path.read_text(encoding="utf-8")):
        base = slug(title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def _outside_code_spans(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.DOTALL)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file_and_heading(doc: Path) -> None:
    broken: list[str] = []
    text = _outside_code_spans(doc.read_text(encoding="utf-8"))
    for target in sorted(set(LINK.findall(text))):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        relative = linked.relative_to(ROOT).as_posix() if linked.is_relative_to(ROOT) else None
        if not linked.exists():
            broken.append(f"{target} (no file {relative or linked})")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target} (no heading #{anchor} in {relative})")
    assert not broken, f"{doc.relative_to(ROOT)} links to: " + ", ".join(broken)


def _roots_of(path: str) -> list[Path]:
    """Where a relative path can live: the repository, or the package (`plan/arms.py`)."""
    first = path.split("/", 1)[0]
    return [root for root in (ROOT, PACKAGE) if (root / first).is_dir()]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_the_docs_name_exists(doc: Path) -> None:
    """A path whose first folder is one of the repository's (or the package's) must exist;
    others are examples (`auth/login.py` in a goal, `my-overlay/kustomization.yaml`)."""
    missing = []
    for path in sorted(set(PATH.findall(doc.read_text(encoding="utf-8")))):
        roots = _roots_of(path)
        if not roots:
            continue
        if not any((root / path).is_file() for root in roots):
            missing.append(path)
    assert not missing, f"{doc.relative_to(ROOT)} names files that do not exist: {missing}"


def test_the_readme_opens_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"```[a-z]*\n(.*?)```", text, re.DOTALL)
    assert block is not None, "README.md has no code block"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["bash scripts/serve.sh", "bash scripts/test.sh"], (
        f"README.md's first code block must hold the two commands, got {commands}"
    )


# --- documented examples, run --------------------------------------------------------------

TOOLS_DOC = ROOT / "docs" / "tools.md"


def section(path: Path, title: str) -> str:
    """The text of the section headed `title` (to the next heading of its level or above)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    headings = list(_headings("\n".join(lines)))
    found = [(index, level) for index, level, text in headings if text.strip() == title]
    assert found, f"{path.relative_to(ROOT)} has no heading {title!r}"
    start, level = found[0]
    end = next((i for i, lvl, _ in headings if i > start and lvl <= level), len(lines))
    return "\n".join(lines[start:end])


def curl_examples(text: str) -> list[tuple[dict[str, Any], str, list[str]]]:
    """Each `curl ... -d '<json>' | jq -c '<filter>'` block of `text`, with the lines of the
    code block after it (what the docs say it prints)."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL)
    examples = []
    for block, printed in pairwise(blocks):
        body = re.search(r"-d '(.*?)'", block, re.DOTALL)
        jq = re.search(r"jq -c '(.*?)'", block, re.DOTALL)
        if "curl" in block and body and jq:
            examples.append((json.loads(body.group(1)), jq.group(1), printed.splitlines()))
    return examples


async def test_the_readme_cast_without_the_search_gets_the_search_first() -> None:
    ((body, _, _),) = curl_examples(section(README, "Your own tools"))
    async with running_app(make_settings(llm=False)) as client:
        named = (await client.post("/plan", json=body)).json()
        alone = await client.post("/plan", json={**body, "goal": "List the cast of Titanic"})

    def graph(answer: dict[str, Any]) -> list[tuple[str, list[int]]]:
        return [(step["required_arm"], step["depends_on"]) for step in answer["plan"]]

    assert graph(alone.json()) == graph(named) == [("search_movie", []), ("GetMovieCredit", [1])]
