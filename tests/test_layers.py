"""The package's layering, read from the source: who may import whom, no cycles, small modules
and functions simple enough to follow (cyclomatic complexity as radon counts it).

Data flows one way: api (HTTP and MCP) -> service -> strategies -> (pipeline, llm, rules,
tools) -> plan -> the shared modules; the service alone reaches the store. rules/ (the
configured agents) and tools/ (a caller's tool set) never import each other.
A module that imports against that flow, or FastAPI below api/, fails here with its name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest
from radon.complexity import cc_visit
from radon.visitors import Class, Function

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "planner_arm"
SHARED = {
    "config",
    "errors",
    "metrics",
    "logging",
    "tracing",
    "defaults",
    "clock",
    "limits",
    "principal",
    "circuit",
    "tool_schema",
    "tool_shapes",
    "text",
}
# What each layer may import from the package, besides itself.
ALLOWED: dict[str, set[str]] = {
    # The edge, HTTP and MCP: it talks to the service (and knows the HTTP contract's models).
    "api": {"service", "plan", *SHARED},
    # The composition root and one request's way around a strategy.
    "service": {"strategies", "pipeline", "llm", "rules", "store", "plan", *SHARED},
    # Who makes the plan: never the service's plumbing, never the store.
    "strategies": {"pipeline", "llm", "rules", "tools", "plan", *SHARED},
    # The rule-based planner of the configured agents: no I/O, so nothing of the service's
    # machinery either.
    "rules": {"plan", "config", "errors", "defaults", "limits", "text"},
    # A caller's tool set: its rule-based plan and everything it is read by; no I/O.
    "tools": {"plan", *SHARED},
    "pipeline": {"plan", *SHARED},
    # The models: messages in, completions and their cost out; nothing of plans.
    "llm": {*SHARED},
    "store": {*SHARED},
    "plan": {"config", "errors", "defaults", "limits", "tool_schema", "tool_shapes", "text"},
    # Installed without the service's dependencies: the models of plan/ and the error codes.
    "client": {"plan", "errors", "limits", "tool_schema", "tool_shapes"},
}
MAX_MODULE_LINES = 600
# Radon's default count: one, plus one per branch, loop, except, boolean operator,
# comprehension clause and assert. Above this a function no longer fits in a reader's head.
MAX_COMPLEXITY = 15


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(p for p in parts if p != "__init__") or "__init__"
        found[name] = path
    return found


def _package_imports(path: Path) -> set[str]:
    """Every `planner_arm.x.y` a module imports, at any depth (lazy imports count too)."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("planner_arm."):
                imported.add(name.removeprefix("planner_arm."))
    return imported


def _third_party(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def _layer(module: str) -> str:
    return module.split(".")[0]


def test_each_layer_imports_only_the_layers_below_it() -> None:
    modules = _modules()
    wrong = []
    for module, path in modules.items():
        layer = _layer(module)
        allowed = ALLOWED.get(layer)
        if allowed is None:
            continue  # cli, __main__ and the shared modules are checked below
        for target in _package_imports(path):
            target_layer = _layer(target)
            if target_layer != layer and target_layer not in allowed:
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_shared_modules_import_no_layer() -> None:
    modules = _modules()
    wrong = [
        f"{module} imports {target}"
        for module, path in modules.items()
        if module in SHARED
        for target in _package_imports(path)
        if _layer(target) not in SHARED
    ]
    assert wrong == []


def test_nothing_below_api_imports_fastapi_or_starlette() -> None:
    wrong = [
        module
        for module, path in _modules().items()
        if _layer(module) not in {"api", "cli", "__main__"}
        and _third_party(path) & {"fastapi", "starlette", "uvicorn"}
    ]
    assert wrong == []


def test_no_import_cycles() -> None:
    modules = _modules()
    graph = {
        module: {t for t in _package_imports(path) if t in modules}
        for module, path in modules.items()
    }
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as cycle:
        pytest.fail(f"import cycle: {' -> '.join(cycle.args[1])}")


def test_no_module_is_longer_than_the_limit() -> None:
    long = {
        module: lines
        for module, path in _modules().items()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def _functions(blocks: Sequence[Function | Class], outer: str = "") -> Iterator[tuple[str, int]]:
    """Every function, method and nested function, named as `radon cc` names them."""
    for block in blocks:
        if isinstance(block, Function):
            name = f"{outer}{block.fullname}"
            yield name, block.complexity
            yield from _functions(block.closures, f"{name}.")
        else:  # radon lists a top-level class's methods beside it, a nested class's only in it
            for inner in block.inner_classes:
                yield from _functions([*inner.methods, inner], f"{outer}{block.name}.")


def test_no_function_is_more_complex_than_the_limit() -> None:
    over = {
        (module, name): complexity
        for module, path in _modules().items()
        for name, complexity in _functions(cc_visit(path.read_text()))
        if complexity > MAX_COMPLEXITY
    }
    too_complex = [
        f"{module}: {name} ({complexity})" for (module, name), complexity in sorted(over.items())
    ]
    assert too_complex == [], f"split these functions to complexity {MAX_COMPLEXITY} or less"
