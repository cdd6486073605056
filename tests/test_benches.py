"""Every benchmark starts as its README line runs it (``python bench/NAME.py``), with bench/
first on ``sys.path``: its imports work, and no file of bench/ shadows a package the engine
loads (the engine's face loads ``acker_kernel`` lazily, so ``bench/acker_kernel.py`` broke
``bench/windows.py``'s first ``from engine import ...``). ``--help`` imports the bench and stops before it measures anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
BENCHES = sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def test_no_bench_is_named_like_a_package_the_engine_imports_lazily() -> None:
    assert "acker_kernel.py" not in BENCHES
    assert "engine.py" not in BENCHES


@pytest.mark.parametrize("name", BENCHES)
def test_the_bench_imports_and_explains_itself(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / name), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=BENCH.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:"), done.stdout
