"""The README's runnable examples that need no Spark run as written and check themselves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("example", ["batch_wordcount.py"])
def test_example_runs_and_checks_its_result(example: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "sentences acked: 100000" in done.stdout
