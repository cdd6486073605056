"""Layers point one way, read from the source: every import of every module of ``engine``,
``spark_io`` and ``acker_kernel`` (top level, under ``TYPE_CHECKING`` and inside functions)
is an edge of one graph, and the graph has the shape below.

- ``acker_kernel`` imports nothing of ``engine`` or ``spark_io``; ``engine`` nothing of
  ``spark_io``; ``pyspark`` is imported only inside ``spark_io``.
- The model (topology, component, tuple, fields, grouping declarations, context, errors,
  config, metrics) imports only the model and the standard library.
- The core never imports its subpackages (``coordination``, ``drpc``, ``transactional``,
  ``testing``): they are users of the core. ``ui`` is a service the runtime starts
  (``run_topology(ui=PORT)``): it reads the model and the stats records, never the machinery.
- No import cycles, not even through a type-only or function-level import.
- Executors, collectors and the acker never import the runtime: they get a ``Services``
  record.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGES = ("acker_kernel", "engine", "spark_io")
SUBPACKAGES = (
    "engine.coordination",
    "engine.drpc",
    "engine.kafka",
    "engine.patterns",
    "engine.redis",
    "engine.state",
    "engine.testing",
    "engine.transactional",
    "engine.windowing",
)

#: What the web UI may import of ours: the model, the stats records, the HTTP servers' access
#: rules (shared with the DRPC endpoint) and itself.
UI_MAY_IMPORT = ("engine._monitor.http_guard", "engine._monitor.stats", "engine.ui")

#: The model: plain data and the base classes users subclass; no machinery.
MODEL = frozenset(
    {
        "engine._model.batch_component",
        "engine._model.combiner",
        "engine._model.component",
        "engine._model.config",
        "engine._model.context",
        "engine._model.copying",
        "engine._model.errors",
        "engine._model.fields",
        "engine._model.grouping",
        "engine._model.metrics",
        "engine._model.public",
        "engine._model.rebalance",
        "engine._model.topology",
        "engine._model.tuple",
    }
)

#: The runtime: it builds executors and owns them; they see it only as a ``Services`` record.
RUNTIME = frozenset(
    {
        "engine._runtime.fault_injection",
        "engine._runtime.lifecycle",
        "engine._runtime.reconfigure",
        "engine._runtime.report",
        "engine._runtime.running",
        "engine._runtime",
        "engine._runtime.table",
        "engine._runtime.wiring",
    }
)

#: What runs inside executors: none of it may import the runtime, not even for hints.
EXECUTION = frozenset(
    {
        "engine._execution.acker",
        "engine._columnar.batch_collector",
        "engine._execution.channel",
        "engine._execution.collector",
        "engine._execution.control",
        "engine._execution.executor",
        "engine._execution.gate",
        "engine._execution.services",
        "engine._columnar.xor",
    }
)


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module, resolved to an absolute name
    line: int
    type_only: bool  # under ``if TYPE_CHECKING:``
    in_function: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((SRC / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(
    node: ast.AST, type_only: bool = False, in_function: bool = False
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, type_only, in_function
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), True, in_function)
            for stmt in child.orelse:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), type_only, in_function)
        else:
            func = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from _walk(child, type_only, in_function or func)


def imports_of(name: str) -> list[Import]:
    path = modules()[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node, type_only, in_function in _walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # "from . import _kernel" imports the submodule; "from ._x import y" the module.
            targets = [
                f"{mod}.{alias.name}" if f"{mod}.{alias.name}" in modules() else mod
                for alias in node.names
            ]
        for target in targets:
            found.append(Import(name, target, node.lineno, type_only, in_function))
    return found


@cache
def all_imports() -> list[Import]:
    return [imp for name in modules() for imp in imports_of(name)]


def internal(target: str) -> str | None:
    """The module of ours an import names (``engine._x.y`` -> ``engine._x``), else None."""
    parts = target.split(".")
    while parts:
        if ".".join(parts) in modules():
            return ".".join(parts)
        parts.pop()
    return None


def graph(skip: frozenset[tuple[str, str]] = frozenset()) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in modules()}
    for imp in all_imports():
        target = internal(imp.target)
        if target is not None and target != imp.source and (imp.source, target) not in skip:
            edges[imp.source].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def top(target: str) -> str:
    return target.split(".")[0]


def where(imp: Import) -> str:
    return f"{imp.source}:{imp.line} imports {imp.target}"


# --- the parser sees every kind of import --------------------------------------------------


def test_every_module_is_parsed() -> None:
    names = set(modules())
    assert {
        "engine",
        "engine._model.grouping",
        "engine._execution.groupers",
        "acker_kernel._kernel",
    } <= names
    assert {"spark_io._spout", "engine.testing.strategies", "engine.drpc._server"} <= names


def test_type_checking_and_function_level_imports_are_edges() -> None:
    edges = {(imp.source, internal(imp.target)): imp for imp in all_imports()}
    # _running imports the ui only inside a function; hints-only imports exist (spark_io's
    # modules import engine's classes for hints, say) and are edges too.
    assert edges["engine._runtime.running", "engine.ui"].in_function
    assert any(imp.type_only and internal(imp.target) for imp in all_imports())
    assert not edges["engine._runtime.running", "engine._runtime.lifecycle"].type_only
    # "from . import _kernel" is an edge to the submodule, not to the package face.
    assert ("acker_kernel._ledger", "acker_kernel._kernel") in edges


# --- layers ----------------------------------------------------------------------------------


def test_acker_kernel_imports_nothing_of_engine_or_spark_io() -> None:
    bad = [
        where(imp)
        for imp in all_imports()
        if top(imp.source) == "acker_kernel" and top(imp.target) in ("engine", "spark_io")
    ]
    assert bad == []


def test_engine_imports_nothing_of_spark_io() -> None:
    bad = [
        where(imp)
        for imp in all_imports()
        if top(imp.source) == "engine" and top(imp.target) == "spark_io"
    ]
    assert bad == []


def test_pyspark_is_imported_only_inside_spark_io() -> None:
    users = {imp.source for imp in all_imports() if top(imp.target) == "pyspark"}
    assert users  # the check sees spark_io's (lazy and type-only) pyspark imports
    assert {top(source) for source in users} == {"spark_io"}


def test_the_core_never_imports_its_subpackages() -> None:
    def in_subpackage(module: str) -> bool:
        return any(module == sub or module.startswith(sub + ".") for sub in SUBPACKAGES)

    bad = [
        where(imp)
        for imp in all_imports()
        if top(imp.source) == "engine"
        and not in_subpackage(imp.source)
        and in_subpackage(internal(imp.target) or "")
    ]
    assert bad == []


def test_the_ui_reads_only_the_model_and_the_stats() -> None:
    bad = [
        where(imp)
        for imp in all_imports()
        if imp.source.startswith("engine.ui")
        and (ours := internal(imp.target)) is not None
        and ours not in MODEL
        and not ours.startswith(UI_MAY_IMPORT)
    ]
    assert bad == []


@pytest.mark.parametrize("model", sorted(MODEL))
def test_model_modules_import_only_the_model_and_the_standard_library(model: str) -> None:
    assert model in modules()
    bad = []
    for imp in imports_of(model):
        ours = internal(imp.target)
        if ours is not None:
            if ours not in MODEL:
                bad.append(where(imp))
        elif top(imp.target) not in sys.stdlib_module_names | {"__future__"}:
            bad.append(where(imp))
    assert bad == []


# --- cycles ----------------------------------------------------------------------------------


def test_no_import_cycles_of_any_kind() -> None:
    # Every edge counts: top level, inside functions and under TYPE_CHECKING.
    assert cycles(graph()) == []


def test_executors_and_collectors_never_import_the_runtime() -> None:
    assert set(modules()) >= EXECUTION | RUNTIME
    bad = [
        where(imp)
        for imp in all_imports()
        if imp.source in EXECUTION and internal(imp.target) in RUNTIME
    ]
    assert bad == []


def test_cycle_finder_finds_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
