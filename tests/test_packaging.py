"""Building the distribution: every package and its data files are in the wheel, and
setuptools has nothing to warn about."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = "import setuptools.build_meta as b, sys; print(b.build_wheel(sys.argv[1]))"


@pytest.mark.timeout(180)
def test_the_wheel_holds_the_ui_assets_and_the_build_warns_of_nothing(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, str(tmp_path / "dist")],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stderr
    output = proc.stdout + proc.stderr
    assert "absent from the `packages` configuration" not in output
    assert "Warning:" not in output
    wheel = tmp_path / "dist" / proc.stdout.split()[-1]
    names = set(zipfile.ZipFile(wheel).namelist())
    for asset in ("index.html", "ui.js", "ui.css", "favicon.svg"):
        assert f"engine/ui/assets/{asset}" in names
    for typed in ("engine", "acker_kernel", "spark_io"):
        assert f"{typed}/py.typed" in names
    assert not [n for n in names if "__pycache__" in n]
