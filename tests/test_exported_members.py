"""The public surface is what it claims: sorted ``__all__``s that name real objects, every
public name of a package face exported, one exception tree matching its drawing, and
layers that import one way only."""

from __future__ import annotations

import builtins
import importlib
import os
import pkgutil
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import acker_kernel
import engine
from engine._model import errors as _errors

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = [engine, acker_kernel]


def isort_order(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then functions, each alphabetical."""
    if name.isupper():
        return (0, name)
    if name[0].isupper():
        return (1, name)
    return (2, name)


def submodules() -> list[types.ModuleType]:
    found = []
    for package in PACKAGES:
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            if hasattr(module, "__all__"):
                found.append(module)
    return found


@pytest.mark.parametrize("module", PACKAGES + submodules(), ids=lambda m: m.__name__)
def test_all_is_sorted_unique_and_real(module: types.ModuleType) -> None:
    names = list(module.__all__)
    assert names == sorted(names, key=isort_order)
    assert len(set(names)) == len(names)
    missing = [name for name in names if not hasattr(module, name)]
    assert missing == []


@pytest.mark.parametrize("package", PACKAGES, ids=lambda m: m.__name__)
def test_every_public_name_of_the_package_face_is_exported(package: types.ModuleType) -> None:
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(package.__all__)


def test_engine_face_exports_every_error() -> None:
    assert set(_errors.__all__) <= set(engine.__all__)
    exported_errors = {
        name
        for name in engine.__all__
        if isinstance(getattr(engine, name), type)
        and issubclass(getattr(engine, name), BaseException)
    }
    assert exported_errors == set(_errors.__all__)


# --- the exception tree ----------------------------------------------------------------------

_TREE_LINE = re.compile(r"^[│├└─ ]*(?P<name>[A-Z]\w+)(?: \((?P<builtin>\w+)\))?")


def drawn_tree() -> dict[str, tuple[str | None, str | None]]:
    """name -> (drawn parent, drawn builtin base), read from the ``_model.errors`` docstring."""
    assert _errors.__doc__ is not None
    tree: dict[str, tuple[str | None, str | None]] = {}
    stack: list[str] = []
    for line in _errors.__doc__.splitlines():
        if not line.startswith("    ") or not line.strip():
            continue
        match = _TREE_LINE.match(line[4:])
        assert match, line
        depth = match.start("name") // 4
        del stack[depth:]
        tree[match["name"]] = (stack[-1] if stack else None, match["builtin"])
        stack.append(match["name"])
    return tree


def test_the_drawn_tree_is_the_real_tree() -> None:
    tree = drawn_tree()
    assert tree["SquallError"] == (None, None)
    assert tree["InvalidConfigError"] == ("TopologyError", None)
    assert tree["SquallRuntimeError"] == ("SquallError", "RuntimeError")
    assert set(tree) == set(_errors.__all__)
    for name, (parent, builtin) in tree.items():
        bases = {getattr(_errors, parent) if parent else Exception}
        if builtin:
            bases.add(getattr(builtins, builtin))
        assert set(getattr(_errors, name).__bases__) == bases, name


@pytest.mark.parametrize("name", _errors.__all__)
def test_every_engine_error_is_a_squall_error(name: str) -> None:
    assert issubclass(getattr(engine, name), engine.SquallError)


def test_branches() -> None:
    build = [
        engine.InvalidComponentError,
        engine.InvalidDeclarationError,
        engine.InvalidGroupingError,
        engine.InvalidConfigError,
    ]
    run = [
        engine.EmitError,
        engine.TupleStateError,
        engine.TopologyStateError,
        engine.TaskStartError,
    ]
    assert issubclass(engine.TopologyError, ValueError)
    assert issubclass(engine.SquallRuntimeError, RuntimeError)
    for cls in build:
        assert issubclass(cls, engine.TopologyError)
        assert not issubclass(cls, RuntimeError)
    for cls in run:
        assert issubclass(cls, engine.SquallRuntimeError)
        assert not issubclass(cls, ValueError)
    # Control flow, on its own branch: neither a build nor a runtime error.
    assert issubclass(engine.ReportedFailedException, engine.FailedException)
    for cls in (engine.FailedException, engine.ReportedFailedException):
        assert not issubclass(cls, (ValueError, RuntimeError))
    assert not issubclass(engine.SquallError, (ValueError, RuntimeError))


# --- layers ------------------------------------------------------------------------------------


def test_layers_point_one_way() -> None:
    script = (
        "import sys\n"
        "import acker_kernel\n"
        "assert 'engine' not in sys.modules, 'acker_kernel imports engine'\n"
        "import engine, engine.testing\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'spark_io'))\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=SRC,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_engine_testing_face_exports_every_public_name_and_its_components() -> None:
    import engine.testing
    from engine.testing import strategies

    public = {
        name
        for name, value in vars(engine.testing).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(engine.testing.__all__)
    components = ["AsyncPassBolt", "BasicPassBolt", "FanOutBolt", "FilterBolt", "FiniteSpout"]
    for name in [*components, "HoldBolt", "PassBolt"]:
        cls = getattr(engine.testing, name)
        assert cls.__module__ == "engine.testing", name  # reports its public package
        assert getattr(strategies, name) is cls, name  # strategies re-exports the same class
    assert engine.testing.FIELDS == strategies.FIELDS == ("id", "key")
