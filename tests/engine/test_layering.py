"""Layers point one way, read from the source: every import of every module of ``engine``,
``spark_io`` and ``acker_kernel`` (top level, under ``TYPE_CHECKING`` and inside functions)
is an edge of one graph, and the graph has the shape below.

- ``acker_kernel`` imports nothing of ``engine`` or ``spark_io``; ``engine`` nothing of
  ``spark_io``; ``pyspark`` is imported only inside ``spark_io``.
- Inside ``engine`` the layers are folders: every private module lives in one of the
  ``LAYERS`` folders, and a module's layer is the folder it lives in. ``MAY_IMPORT`` is the
  table of which folder may import which; it points one way (no loop through it), and every
  import between folders is one of its edges.
- The model (``_model``: topology, components, tuple, fields, grouping declarations, context,
  errors, config, metrics) imports only the model and the standard library.
- The core never imports its subpackages (``coordination``, ``drpc``, ``transactional``,
  ``testing``, ...): they are users of the core. ``ui`` is a service the runtime starts
  (``run_topology(ui=PORT)``): it reads the model and what ``_monitor`` records, and uses
  ``_time``'s event-loop helpers, never the machinery.
- No import cycles, not even through a type-only or function-level import.
- Executors, collectors and the acker (``_execution``, ``_columnar``) never import the
  runtime: they get a ``Services`` record.

(That spark_io imports no private name of the engine is checked by
``tests/spark_io/runner/test_seam.py``.)
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

#: engine's layer folders, from the ground up; README.md's "Inside the engine" says what
#: lives in each.
LAYERS = ("_model", "_time", "_monitor", "_columnar", "_execution", "_runtime", "_command")

#: Which place of ``engine`` may import which, besides itself: the layer folders, and the two
#: services the upper layers start (``ui``, the web UI; ``prometheus``, the exporter). A
#: place not in a row's set is out of bounds for it, and the table has no loop.
MAY_IMPORT: dict[str, frozenset[str]] = {
    # What a topology is made of: plain data and the base classes users subclass.
    "_model": frozenset(),
    # The clock, event loops and virtual time.
    "_time": frozenset(),
    # Statistics records, the error log, the HTTP servers' access rules.
    "_monitor": frozenset({"_time"}),
    # TupleBatch, the batch collector, the XOR acking rules.
    "_columnar": frozenset({"_model", "_monitor"}),
    # Executors, collectors, queues, gates, the acker, groupers, Services.
    "_execution": frozenset({"_model", "_time", "_monitor", "_columnar"}),
    # The web UI: the model, the records of _monitor and the event-loop helpers of _time,
    # never the machinery.
    "ui": frozenset({"_model", "_time", "_monitor"}),
    # The runtime: it builds executors and owns them (and starts the UI on request).
    "_runtime": frozenset({"_model", "_time", "_monitor", "_columnar", "_execution", "ui"}),
    # The Prometheus exporter reads a running topology's report.
    "prometheus": frozenset({"_monitor", "_runtime"}),
    # The engine's side of the ``squall`` command.
    "_command": frozenset(
        {"_model", "_time", "_monitor", "_columnar", "_execution", "_runtime", "ui", "prometheus"}
    ),
}


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


def place(module: str) -> str | None:
    """The place of ``engine`` a module belongs to: its layer folder (``engine._model.tuple``
    -> ``_model``), else its subpackage or public module (``engine.ui._api`` -> ``ui``); None
    for the package face ``engine`` and for modules outside ``engine``."""
    parts = module.split(".")
    return parts[1] if parts[0] == "engine" and len(parts) > 1 else None


def members(layer: str) -> list[str]:
    """The modules living in a layer folder, found by where they are, not listed by hand."""
    return sorted(name for name in modules() if place(name) == layer)


def layer_order(table: dict[str, frozenset[str]]) -> list[str]:
    """The places of ``table`` with each after everything it may import; fails on a loop."""
    done: list[str] = []
    pending = dict(table)
    while pending:
        ready = sorted(p for p, below in pending.items() if below <= set(done))
        assert ready, f"the table has a loop among {sorted(pending)}"
        done += ready
        for p in ready:
            del pending[p]
    return done


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


def test_the_ui_reads_only_the_model_and_the_monitor() -> None:
    bad = [
        where(imp)
        for imp in all_imports()
        if place(imp.source) == "ui"
        and (ours := internal(imp.target)) is not None
        and top(ours) == "engine"
        and place(ours) not in MAY_IMPORT["ui"] | {"ui"}
    ]
    assert bad == []


def test_every_private_module_of_engine_lives_in_a_layer_folder() -> None:
    engine = SRC / "engine"
    loose = sorted(path.name for path in engine.glob("_*.py") if path.name != "__init__.py")
    assert loose == []  # engine/_x.py belongs in one of LAYERS
    private_folders = {
        path.name for path in engine.iterdir() if path.is_dir() and path.name.startswith("_")
    } - {"__pycache__"}
    assert private_folders == set(LAYERS)
    for layer in LAYERS:
        assert (engine / layer / "__init__.py").is_file(), layer
        assert f"engine.{layer}" in members(layer) and len(members(layer)) > 1, layer
        # A layer is flat: its modules, no folders of its own.
        assert [p.name for p in (engine / layer).iterdir() if p.is_dir()] in ([], ["__pycache__"])
    # Every module of engine is in a layer, a subpackage or a public module of the face.
    places = {place(name) for name in modules() if top(name) == "engine" and name != "engine"}
    assert {p for p in places if p is not None and p.startswith("_")} == set(LAYERS)


def test_the_allowed_imports_between_places_point_one_way() -> None:
    # Every place the table names has a row, and the rows have no loop.
    assert all(name in MAY_IMPORT for below in MAY_IMPORT.values() for name in below)
    assert set(layer_order(MAY_IMPORT)) == set(MAY_IMPORT) >= set(LAYERS)
    # LAYERS lists the folders from the ground up: each imports only folders listed before it.
    for i, layer in enumerate(LAYERS):
        assert MAY_IMPORT[layer] & set(LAYERS) <= set(LAYERS[:i]), layer
    assert MAY_IMPORT["_model"] == MAY_IMPORT["_time"] == frozenset()


def test_the_table_check_finds_loops() -> None:
    table = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}
    with pytest.raises(AssertionError, match=r"the table has a loop among \['a', 'b', 'c'\]"):
        layer_order(table)
    assert layer_order({"a": frozenset({"b"}), "b": frozenset()}) == ["b", "a"]


def test_every_import_between_places_is_an_allowed_edge() -> None:
    bad = []
    used: set[tuple[str, str]] = set()
    for imp in all_imports():
        ours = internal(imp.target)
        source, target = place(imp.source), place(ours) if ours else None
        if source in MAY_IMPORT and target is not None and target != source:
            if target not in MAY_IMPORT[source]:
                bad.append(where(imp))
            used.add((source, target))
    assert bad == []
    # The check sees the edges it judges.
    assert {("_execution", "_columnar"), ("_runtime", "ui"), ("_command", "_runtime")} <= used


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


@pytest.mark.parametrize("model", members("_model"))
def test_model_modules_import_only_the_model_and_the_standard_library(model: str) -> None:
    assert model in modules()
    bad = []
    for imp in imports_of(model):
        ours = internal(imp.target)
        if ours is not None:
            if place(ours) != "_model":
                bad.append(where(imp))
        elif top(imp.target) not in sys.stdlib_module_names | {"__future__"}:
            bad.append(where(imp))
    assert bad == []


# --- cycles ----------------------------------------------------------------------------------


def test_no_import_cycles_of_any_kind() -> None:
    # Every edge counts: top level, inside functions and under TYPE_CHECKING.
    assert cycles(graph()) == []


def test_executors_and_collectors_never_import_the_runtime() -> None:
    execution = {"_execution", "_columnar"}
    assert {place(name) for name in modules()} >= execution | {"_runtime"}
    bad = [
        where(imp)
        for imp in all_imports()
        if place(imp.source) in execution
        and place(internal(imp.target) or "") in ("_runtime", "_command")
    ]
    assert bad == []


def test_cycle_finder_finds_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
