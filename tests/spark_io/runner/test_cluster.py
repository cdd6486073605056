"""``squall submit --runner spark`` on ``local-cluster[2,1,1024]``: a master, two workers and
two executor JVMs with their own Python workers, on this machine, from the pip-installed
PySpark (its own driver process: the test process's session is local[2])."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .topologies import CLUSTER_SENTENCES, OUT_ENV, expected_counts, read_counts

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
SQUALL = "import sys; from engine._command.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.timeout(600)  # a cluster starts: ~25 s idle, minutes on a loaded machine
def test_squall_submit_runs_the_word_count_on_a_local_cluster(spark: Any, tmp_path: Path) -> None:
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
            "--spark-conf",
            "spark.python.daemon.module=spark_io.runner._daemon",
            "--spark-conf",
            f"spark.executorEnv.PYTHONPATH={python_path}",
            "tests.spark_io.runner.topologies:cluster_word_count",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": python_path, OUT_ENV: str(tmp_path / "out")},
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("squall submit: the topology on Spark\n")
    assert done.stdout.rstrip().endswith("ended after micro-batch 0")
    assert read_counts(spark, tmp_path / "out") == expected_counts(CLUSTER_SENTENCES)
