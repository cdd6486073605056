"""SparkSinkBolt's batch timer on virtual time (the writes are recorded, not made: no Spark)."""

from __future__ import annotations

import asyncio
from typing import Any

from engine import RunningTopology, Spout, TopologyBuilder, run_topology
from engine.testing import advance_time, simulate
from spark_io import SinkTarget, SparkSinkBolt


class Recorded(SparkSinkBolt):
    """The real bolt with Spark swapped for a list of the batches it would write."""

    def _prepare_blocking(self) -> tuple[Any, Any, Any]:
        self.batches: list[list[Any]] = []
        return None, None, None

    def _write_batch(self, pieces: list[Any], seq: int) -> int:
        self.batches.append(self._arrow_table(pieces).to_pylist())
        return len(self.batches[-1])


class Five(Spout):
    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.i = collector, 0
        self.acked: list[int] = []
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        if self.i < 5:
            self.collector.emit([self.i], msg_id=self.i)
            self.i += 1

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id"])


async def written(running: RunningTopology) -> None:
    """Until the sink's writer thread is idle (it runs on real time) and its acks reached
    the spout."""
    ((_, bolt),) = running.task_objects("sink").items()
    await asyncio.to_thread(bolt._idle.wait, 30)
    await advance_time(0.01)


def test_a_partial_batch_is_flushed_after_batch_secs_of_the_topologys_clock() -> None:
    sink = Recorded(SinkTarget.files("/nonexistent/out"), batch_rows=1_000, batch_secs=10.0)
    builder = TopologyBuilder()
    builder.set_spout("rows", Five())
    builder.set_bolt("sink", sink).shuffle_grouping("rows")

    def state(running: RunningTopology) -> tuple[int, list[int], list[int]]:
        ((_, bolt),) = running.task_objects("sink").items()
        ((_, spout),) = running.task_objects("rows").items()
        return len(bolt.batches), sorted(spout.acked), sorted(spout.failed)

    async def scenario() -> list[tuple[int, list[int], list[int]]]:
        conf = {"topology.message.timeout.secs": 60}
        async with run_topology(builder.create_topology(), conf) as running:
            await advance_time(9)
            seen = [state(running)]  # held: the oldest tuple waited less than batch_secs
            await advance_time(8)  # ticks every batch_secs / 2: flushed by 15 s
            await written(running)
            seen.append(state(running))
            return seen

    assert simulate(scenario()) == [(0, [], []), (1, [0, 1, 2, 3, 4], [])]
