"""A SIGKILL of the driver mid-batch, then a restart on the checkpoint: exact output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from spark_io import SparkRunner

from ._crash_child import BATCH_ROWS, SENTENCES
from .topologies import SCHEMAS, expected_counts, read_counts, slow_word_count

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.timeout(300)  # two Spark drivers start, one after the other
def test_a_driver_killed_mid_batch_restarts_on_its_checkpoint_with_exact_counts(
    spark: Any, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    with subprocess.Popen(
        [sys.executable, "-m", "tests.spark_io.runner._crash_child", str(tmp_path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # the driver, its JVM and Spark's Python workers: one group
    ) as child:
        try:
            assert child.stdout is not None
            line = child.stdout.readline().strip()
        finally:
            os.killpg(child.pid, signal.SIGKILL)  # no stop(), no cleanup: a dead driver
            child.wait(30)
    assert line.startswith("MIDWAY batch=")
    in_flight = int(line.partition("=")[2])
    assert not (tmp_path / "ck" / "commits" / str(in_flight)).exists()  # it died mid-batch
    before = sorted(p.name for p in (tmp_path / "out").glob("squall_txid=*"))
    assert 1 <= len(before) <= in_flight + 1

    running = SparkRunner(spark).run(
        slow_word_count(tmp_path / "out", SENTENCES, delay=0.0),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas=SCHEMAS,
        batch_rows={"sentences": BATCH_ROWS},
    )
    assert running.await_termination(120)
    assert read_counts(spark, tmp_path / "out") == expected_counts(SENTENCES)
    published = sorted(p.name for p in (tmp_path / "out").glob("squall_txid=*"))
    batches = SENTENCES // (2 * BATCH_ROWS)
    assert [name.rsplit("-", 1)[1] for name in published] == [f"{b:010d}" for b in range(batches)]
    assert set(before) <= set(published)  # the published transactions were kept, not redone
    keys = Counter(r.key for r in spark.read.parquet(str(tmp_path / "out")).select("key").collect())
    assert keys and max(keys.values()) == 1
