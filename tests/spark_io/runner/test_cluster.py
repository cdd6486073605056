"""``squall submit --runner spark`` on ``local-cluster[2,1,1024]``: a master, two workers and
two executor JVMs with their own Python workers, on this machine, from the pip-installed
PySpark (its own driver process: the test process's session is local[2]). The word count
and the windowed topology run there as one topology, in one cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .test_windows import local_rows, spark_rows
from .topologies import CLUSTER_SENTENCES, expected_counts, read_counts
from .windows import OUT_ENV, WAVE, WAVES

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
SQUALL = "import sys; from engine._command.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.timeout(600)  # a cluster starts: ~25 s idle, minutes on a loaded machine
def test_squall_submit_runs_word_count_and_windows_on_a_local_cluster(
    spark: Any, tmp_path: Path
) -> None:
    """One topology with two parts, so that one cluster start covers both: the columnar
    word count (a fields grouping between ``mapInArrow`` stages, a transactional sink) and
    the windowed topology (``transformWithStateInPandas`` by task, the late stream)."""
    python_path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SQUALL,
            "submit",
            "--runner",
            "spark",
            "--master",
            "local-cluster[2,1,1024]",
            "--checkpoint",
            str(tmp_path / "ck"),
            "--batch-rows",
            f"events={WAVE}",
            "--spark-conf",
            "spark.python.daemon.module=spark_io.runner._daemon",
            "--spark-conf",
            f"spark.executorEnv.PYTHONPATH={python_path}",
            "tests.spark_io.runner.windows:cluster_topology",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": python_path, OUT_ENV: str(tmp_path / "out")},
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("squall submit: the topology on Spark\n")
    assert "bolt windows" in done.stdout and "transformWithStateInPandas by task" in done.stdout
    assert done.stdout.rstrip().endswith(f"ended after micro-batch {WAVES - 1}")
    counts = read_counts(spark, tmp_path / "out" / "counts")
    assert counts == expected_counts(CLUSTER_SENTENCES)
    assert spark_rows(spark, tmp_path / "out") == local_rows()
