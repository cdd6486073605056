"""``SparkOffsetSpout`` takes part in the checkpoints of the stateful bolts it feeds: a
stateful word count reading it keeps counts equal to the truth (not just at least the
truth) through failed tuples, crashed tasks and SIGKILLs of the whole process, with real
Spark reading real parquet files."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from engine import run_topology
from engine.state import RewindableSpoutExecutor
from engine.testing import CrashTask, FailTuples
from tests.engine.kafka.eo_campaign import committed_counts, kill_campaign
from tests.engine.state.wordcount import truth
from tests.spark_io import eo_offset_wordcount as wc


@pytest.mark.timeout(300)
def test_counts_equal_the_truth_through_failures_and_crashes(spark: Any, tmp_path: Path) -> None:
    n = 3000
    wc.fill(tmp_path / "in", n)
    db = tmp_path / "state.sqlite"
    expected = truth(n)
    faults = [
        FailTuples(component="split", probability=0.01, start=0.0, end=1.0),
        CrashTask(component="count", task_index=1, at=0.5),
        CrashTask(component="sentences", task_index=0, at=0.8),
        CrashTask(component="split", task_index=0, at=1.2),
    ]

    async def main() -> int:
        topology = wc.build(tmp_path / "in", tmp_path / "checkpoints")
        async with run_topology(topology, wc.conf(db), name="spark-eo", faults=faults) as running:
            deadline = asyncio.get_running_loop().time() + 180
            while sum(committed_counts(db, "spark-eo").values()) < sum(expected.values()):
                assert asyncio.get_running_loop().time() < deadline, "not every word counted"
                await asyncio.sleep(0.01)
            spouts = running.task_objects("sentences").values()
            assert all(isinstance(s, RewindableSpoutExecutor) for s in spouts)
            return sum(s.rewinds for s in spouts)

    rewinds = asyncio.run(main())
    assert committed_counts(db, "spark-eo") == expected
    assert rewinds > 2  # the start, then rollbacks after the failures and crashes


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_counts_equal_the_truth_after_sigkills_at_random_points(spark: Any, tmp_path: Path) -> None:
    n = 6000
    wc.fill(tmp_path / "in", n)
    db = tmp_path / "state.sqlite"
    args = [
        "tests.spark_io._eo_offset_child",
        str(tmp_path / "in"),
        str(tmp_path / "checkpoints"),
        str(db),
    ]
    # Three kills, not five: each restart starts Spark in a new process (~10 s), and the
    # Kafka campaigns run five kills through the same checkpoint machinery.
    kill_campaign(
        args, db, "spark-eo-killed", truth(n), kills=3, ready_timeout=180, finish_timeout=240
    )
