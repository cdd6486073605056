"""SparkStreamingSpout's retries on virtual time: a fake query hands one batch through the
real foreachBatch bridge (no Spark)."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from engine import BasicBolt, FailedException, TopologyBuilder, run_topology
from engine.testing import simulate
from spark_io import RetryPolicy, SparkStreamingSpout, StreamSource


class FakeQuery:
    """A streaming query that delivers one batch through the spout's batch function from a
    thread of its own, as Spark's foreachBatch does, then terminates."""

    def __init__(self, spout: SparkStreamingSpout, table: Any) -> None:
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(spout, table), daemon=True)
        self.thread.start()

    def _run(self, spout: SparkStreamingSpout, table: Any) -> None:
        class Frame:
            def toArrow(self) -> Any:  # Spark's name
                return table

        try:
            spout._on_batch(Frame(), 0)  # type: ignore[arg-type]
        finally:
            self.stopped.set()

    def awaitTermination(self) -> None:  # Spark's name
        self.stopped.wait()

    def stop(self) -> None:
        self.stopped.set()


class FakeStreaming(SparkStreamingSpout):
    def _start_query(self) -> Any:
        import pyarrow as pa

        return FakeQuery(self, pa.table({"id": list(range(5))}))


class Timed(BasicBolt):
    """Fails id 2 the first ``fails`` times; records the clock time of each delivery of 2."""

    def __init__(self, fails: int) -> None:
        self.fails = fails

    def prepare(self, conf: Any, context: Any) -> None:
        self.clock = context.clock
        self.times: list[float] = []
        self.seen: list[int] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        self.seen.append(tuple[0])
        if tuple[0] == 2:
            self.times.append(self.clock.now_ns() / 1e9)
            if len(self.times) <= self.fails:
                raise FailedException("failing 2")


def test_a_failed_row_is_retried_with_backoff_on_the_topologys_clock() -> None:
    policy = RetryPolicy(initial_delay_secs=0.5, delay_period_secs=1.0, max_delay_secs=3.0)
    spout = FakeStreaming(StreamSource.rate(), ["id"], checkpoint_location="/unused", retry=policy)
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("collect", Timed(fails=3)).shuffle_grouping("src")

    async def scenario() -> tuple[list[int], list[float]]:
        conf = {"topology.message.timeout.secs": 300}
        async with run_topology(builder.create_topology(), conf) as running:
            await running.wait_until_complete(600)
            (bolt,) = running.task_objects("collect").values()
            return sorted(bolt.seen), bolt.times

    seen, times = simulate(scenario())
    assert seen == [0, 1, 2, 2, 2, 2, 3, 4]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([0.5, 2.0, 3.0], abs=0.05)
