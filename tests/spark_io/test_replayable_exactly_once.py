"""``ReplayableSpout`` in local mode is a rewindable source: feeding a stateful word count
through failed tuples and crashed tasks, the committed counts equal the truth."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from engine import Fields, TopologyBuilder, run_topology
from engine.state import RewindableSpoutExecutor, SqliteStateStore, decode
from engine.testing import CrashTask, FailTuples
from spark_io import ReplayableSpout
from tests.engine.state.wordcount import BasicCount, Split, sentences, truth

N = 3000


class Sentences(ReplayableSpout):
    batch_rows = 50

    def end_position(self, task_index: int, num_tasks: int) -> int:
        return len(range(task_index, N, num_tasks))

    def read(self, task_index: int, num_tasks: int, start: int, end: int) -> Any:
        return [sentences(N)[task_index::num_tasks][start:end]]

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


def committed(db: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for task in range(2):
        store = SqliteStateStore(db, f"replayable/count/{task}")
        try:
            for key, value in store.load().items():
                counts[decode(key)] = counts.get(decode(key), 0) + decode(value)
        finally:
            store.close()
    return counts


def test_counts_equal_the_truth_through_failures_and_crashes(tmp_path: Path) -> None:
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences(), 2)
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", BasicCount(), 2).fields_grouping("split", Fields("word"))
    db = tmp_path / "state.sqlite"
    conf = {
        "topology.state.provider": "sqlite",
        "topology.state.provider.config": str(db),
        "topology.state.checkpoint.interval.ms": 50,
        "topology.max.spout.pending": 200,
        "topology.message.timeout.secs": 5,
    }
    faults = [
        FailTuples(component="split", probability=0.01, start=0.0, end=1.0),
        CrashTask(component="count", task_index=1, at=0.4),
        CrashTask(component="sentences", task_index=0, at=0.7),
    ]
    total = sum(truth(N).values())

    async def main() -> int:
        async with run_topology(
            builder.create_topology(), conf, name="replayable", faults=faults
        ) as running:
            deadline = asyncio.get_running_loop().time() + 90
            while sum(committed(db).values()) < total:
                assert asyncio.get_running_loop().time() < deadline, "not every word counted"
                await asyncio.sleep(0.05)
            spouts = running.task_objects("sentences").values()
            assert all(isinstance(s, RewindableSpoutExecutor) for s in spouts)
            return sum(s.rewinds for s in spouts)

    rewinds = asyncio.run(main())
    assert committed(db) == dict(truth(N))
    assert rewinds > 2  # the start, then rollbacks after the failures and crashes
