"""One public seam between the engine and the runner: spark_io imports no private name of
the engine, and ``squall submit`` finds the Spark runner by its entry point name."""

from __future__ import annotations

import ast
import importlib.metadata
from pathlib import Path

import pytest

from engine._command.cli import main as squall

SPARK_IO = Path(__file__).resolve().parents[3] / "src" / "spark_io"


def _private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def test_spark_io_imports_no_private_engine_name() -> None:
    found = []
    for path in sorted(SPARK_IO.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(SPARK_IO.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "engine":
                module = node.module or ""
                names = [a.name for a in node.names]
                if _private(module) or any(n.startswith("_") for n in names):
                    found.append(f"{where}: from {module} import {', '.join(names)}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "engine" and _private(alias.name):
                        found.append(f"{where}: import {alias.name}")
    assert found == []


def test_the_spark_runner_is_registered_by_name() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group="squall.runners")]
    assert (entry.name, entry.value) == ("spark", "spark_io.runner:main")
    from spark_io.runner import main

    assert entry.load() is main


def test_an_unknown_runner_is_refused_naming_the_installed_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert squall(["submit", "--runner", "flink", "mod:build"]) == 2
    assert capsys.readouterr().err == (
        "squall submit: --runner must be one of local, spark, got 'flink'\n"
    )
