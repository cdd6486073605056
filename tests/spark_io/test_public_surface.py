"""spark_io's public surface: sorted ``__all__``s, the error tree as drawn, one-way layers."""

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

import engine
import spark_io
from spark_io import _errors

SRC = Path(__file__).resolve().parents[2] / "src"


def ruff_order(name: str) -> tuple[int, str]:
    if name.isupper():
        return (0, name)
    if name[0].isupper():
        return (1, name)
    return (2, name)


MODULES = [spark_io] + [
    importlib.import_module(f"spark_io.{info.name}")
    for info in pkgutil.iter_modules(spark_io.__path__)
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_all_is_sorted_unique_and_real(module: types.ModuleType) -> None:
    names = list(module.__all__)
    assert names == sorted(names, key=ruff_order)
    assert len(set(names)) == len(names)
    assert [n for n in names if not hasattr(module, n)] == []


def test_the_package_face_exports_every_public_name() -> None:
    public = {
        name
        for name, value in vars(spark_io).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(spark_io.__all__)


def test_every_error_class_is_exported() -> None:
    errors = {n for n in _errors.__all__ if isinstance(getattr(_errors, n), type)}
    assert errors <= set(spark_io.__all__)


_LINE = re.compile(r"^[│├└─ ]*(?P<name>[A-Z]\w+)(?: \((?P<builtin>\w+)\))?")


def test_the_drawn_tree_is_the_real_tree() -> None:
    assert _errors.__doc__ is not None
    stack: list[str] = []
    tree: dict[str, str | None] = {}
    for line in _errors.__doc__.split("::", 1)[1].split("\n\n", 2)[1].splitlines():
        match = _LINE.match(line[4:])
        assert match, line
        depth = match.start("name") // 4
        del stack[depth:]
        tree[match["name"]] = stack[-1] if stack else None
        stack.append(match["name"])
    ours = {n for n in _errors.__all__ if isinstance(getattr(_errors, n), type)}
    assert ours <= set(tree)
    for name in ours:
        parent = getattr(engine, tree[name] or "", None) or getattr(_errors, tree[name] or "")
        assert getattr(_errors, name).__bases__ == (parent,), name
    assert issubclass(spark_io.SparkIOError, engine.SquallRuntimeError)
    assert issubclass(spark_io.SparkConfigError, engine.TopologyError)
    assert issubclass(spark_io.SparkConfigError, ValueError)
    assert not hasattr(builtins, "SparkIOError")


def test_importing_spark_io_does_not_start_spark_and_engine_does_not_import_it() -> None:
    script = (
        "import sys\n"
        "import engine, engine.testing\n"
        "assert not [m for m in sys.modules if m.startswith(('spark_io', 'pyspark'))]\n"
        "import spark_io\n"
        "assert not [m for m in sys.modules if m.startswith(('pyspark', 'py4j'))], 'eager import'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_only_spark_io_imports_pyspark() -> None:
    root = SRC.parent
    paths = [
        *(root / "src" / "engine").rglob("*.py"),
        *(root / "src" / "acker_kernel").rglob("*.py"),
        *(root / "examples").rglob("*.py"),
        *(root / "bench").rglob("*.py"),
    ]
    offenders = [
        str(path.relative_to(root))
        for path in paths
        if re.search(r"^\s*(from|import)\s+(pyspark|py4j)\b", path.read_text(), re.M)
    ]
    assert offenders == []
