"""``ReplayableSpout`` in local mode: a reliable spout over positions (no Spark)."""

from __future__ import annotations

from typing import Any

from engine import BasicBolt, TopologyBuilder, run_topology
from engine.testing import FailTuples, simulate

from .topologies import Numbers


class RecordingNumbers(Numbers):
    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.batch_rows = 16
        self.commits: list[int] = []

    def commit(self, task_index: int, num_tasks: int, end: int) -> None:
        self.commits.append(end)


class Collect(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.seen: list[int] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        self.seen.append(tuple["n"])


def test_failed_rows_are_read_again_and_the_acked_prefix_is_committed() -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", RecordingNumbers(200), 2)
    builder.set_bolt("collect", Collect(), 2).shuffle_grouping("numbers")
    topology = builder.create_topology()

    async def scenario() -> Any:
        faults = [FailTuples(component="collect", probability=0.3)]
        conf = {"topology.seed": 3, "topology.max.spout.pending": 40}
        async with run_topology(topology, conf, trace=True, faults=faults) as running:
            await running.wait_until_complete(600)
            spouts = running.task_objects("numbers").values()
            bolts = running.task_objects("collect").values()
            return (
                running.report()["numbers"],
                sorted(n for b in bolts for n in b.seen),
                [(s.commits, s.end_position(s._task_index, 2)) for s in spouts],
            )

    report, seen, commits = simulate(scenario())
    assert report.lost == 0
    assert report.replayed > 0  # the failures were replayed by re-reading their positions
    assert report.messages == 200
    assert seen == list(range(200))  # every row executed once, after its failed attempts
    for made, end in commits:
        assert end == 100
        assert made == sorted(made) and made[-1] == end  # the done prefix, up to the end
