"""Run code in a fresh interpreter over this checkout's ``src``: what a process Spark starts
(or any new process) sees, with nothing imported by the test session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def run_fresh(script: str) -> subprocess.CompletedProcess[str]:
    """``python -c script`` with only ``src`` on the path; fails the test if it fails."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done


def loaded_after(code: str, packages: Iterable[str]) -> list[str]:
    """Which of ``packages`` (top-level names) are in ``sys.modules`` after ``code`` ran."""
    script = (
        f"import json, sys\n{code}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(packages)!r})))"
    )
    return list(json.loads(run_fresh(script).stdout))
