"""``BatchingBolt``: batches by size or tick, acks after processing, fails on error."""

from __future__ import annotations

from typing import Any

import pytest

from engine import InvalidComponentError, TopologyBuilder, run_topology
from engine.patterns import BatchingBolt
from engine.testing import advance_time, simulate

from .components import ListSpout, Sink


class Collect(BatchingBolt):
    batch_size, max_delay_secs = 4, 1.0

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.clock = context.clock
        self.batches: list[tuple[float, list[int]]] = []
        self.fail_next = False

    def process_batch(self, tuples: list[Any]) -> None:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("bulk write failed")
        ids = [t["n"] for t in tuples]
        self.batches.append((self.clock.now_ns() / 1e9, ids))
        self.collector.emit([len(ids)])  # anchored to the whole batch

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["size"])


def build(rows: int, interval: float, parallelism: int = 1, bolt: Any = None) -> Any:
    b = TopologyBuilder()
    b.set_spout("numbers", ListSpout(["n"], [[i] for i in range(rows)], interval))
    b.set_bolt("batch", bolt or Collect(), parallelism).shuffle_grouping("numbers")
    b.set_bolt("sink", Sink()).shuffle_grouping("batch")
    return b.create_topology()


def run(topology: Any, fail_first: bool = False) -> Any:
    async def main() -> Any:
        async with run_topology(topology, {"topology.seed": 2}, trace=True) as running:
            tasks = running.task_objects("batch")
            for ex in tasks.values():
                ex.bolt.fail_next = fail_first
            await advance_time(10)
            spout = next(iter(running.task_objects("numbers").values()))
            return running.report(), [ex.bolt.batches for ex in tasks.values()], spout

    return simulate(main())


def test_batches_by_size_then_by_tick_and_acks_after(parallelism: int) -> None:
    report, batches, spout = run(build(10, 0.01, parallelism))
    assert sorted(i for task in batches for _, ids in task for i in ids) == list(range(10))
    if parallelism == 1:
        (task,) = batches
        assert [ids for _, ids in task] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
        assert task[2][0] == 1.0  # the last two waited for the tick
        assert spout.ack_times[8] >= 1.0 and spout.ack_times[0] < 1.0  # acked after it
    assert all(len(ids) <= 4 for task in batches for _, ids in task)
    r = report["numbers"]
    assert (r.acked, r.failed, r.lost) == (10, 0, 0)
    assert sorted(spout.acked) == list(range(10))


def test_a_failing_batch_fails_every_tuple_and_they_replay() -> None:
    report, batches, spout = run(build(6, 0.01), fail_first=True)
    assert sorted(spout.failed) == [0, 1, 2, 3]
    assert sorted(i for _, ids in batches[0] for i in ids) == list(range(6))
    assert (report["numbers"].acked, report["numbers"].lost) == (6, 0)


def test_a_batching_bolt_without_process_batch_is_refused() -> None:
    class Nothing(BatchingBolt):
        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(["size"])

    with pytest.raises(InvalidComponentError) as err:
        build(1, 0, bolt=Nothing())
    assert (
        str(err.value) == "batching bolt 'batch' (Nothing) does not implement process_batch(tuples)"
    )
