"""``StatefulWindowedBolt``: a windowed bolt whose state survives crashes, on virtual time.

Each window adds its new tuples' words to the state; the guarantee is at-least-once (a tuple
is acked once it left the window and the state holding it committed), so after a crash the
committed counts are at least the truth and no spout tuple is lost."""

from __future__ import annotations

import collections
import re
from typing import Any

import pytest

from engine import Fields, InvalidConfigError, TopologyBuilder, run_topology
from engine.state import (
    CHECKPOINT_COMPONENT_ID,
    ROLLBACK,
    InMemoryStateStore,
    StatefulWindowedBolt,
    StatefulWindowedBoltExecutor,
)
from engine.testing import CrashTask, advance_time, simulate
from engine.windowing import Duration

from .wordcount import SentenceSpout, Split, sentences, truth


class WindowedCount(StatefulWindowedBolt):
    """Counts words per window into its state; emits the window's size."""

    def init_state(self, state: Any) -> None:
        self.counts = state
        self.inits = getattr(self, "inits", 0) + 1

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, window: Any) -> None:
        for t in window.get_new():
            word = t["word"]
            self.counts.put(word, self.counts.get(word, 0) + 1)
        self.collector.emit([len(window)])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["size"])


class SplitTimed(Split):
    """Words with an event time: the sentence id in milliseconds."""

    def execute(self, tuple: Any, collector: Any) -> None:
        for word in tuple[0].split():
            collector.emit([word, tuple[1] / 1000])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "ts"])


def build(n: int, counters: int, bolt: StatefulWindowedBolt | None = None) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(n))
    timed = bolt is not None and bolt.is_event_time
    builder.set_bolt("split", SplitTimed() if timed else Split(), 2).shuffle_grouping("sentences")
    window = bolt or WindowedCount().with_window(Duration(0.5), Duration(0.25))
    builder.set_bolt("count", window, counters).fields_grouping("split", Fields("word"))
    return builder.create_topology()


def run(topology: Any, faults: Any = ()) -> Any:
    async def scenario() -> Any:
        async with run_topology(
            topology, {"topology.seed": 5}, name="windowed-state", trace=True, faults=faults
        ) as running:
            await running.wait_until_complete(timeout=600)
            counts: collections.Counter[str] = collections.Counter()
            tasks = running.task_objects("count")
            for wrapper in tasks.values():
                assert isinstance(wrapper.delegate, StatefulWindowedBoltExecutor)
                assert wrapper.state is not None
                counts.update(dict(wrapper.state.items()))
            (spout,) = running.task_objects(CHECKPOINT_COMPONENT_ID).values()
            return counts, running.report(), list(spout.completed), len(tasks)

    return simulate(scenario())


@pytest.fixture(autouse=True)
def _fresh_memory_state() -> Any:
    InMemoryStateStore.clear()
    yield
    InMemoryStateStore.clear()


@pytest.mark.parametrize("counters", [1, 3])
def test_without_faults_the_state_is_the_exact_truth(counters: int) -> None:
    counts, report, _, tasks = run(build(1500, counters))
    assert tasks == counters
    assert counts == truth(1500)
    assert report["sentences"].lost == 0
    assert report["sentences"].failed == 0


@pytest.mark.parametrize("counters", [1, 3])
@pytest.mark.parametrize("component", ["count", "split"])
def test_a_crash_keeps_the_state_at_least_the_truth_and_loses_nothing(
    counters: int, component: str
) -> None:
    counts, report, completed, _ = run(
        build(3000, counters), faults=[CrashTask(component=component, at=1.5)]
    )
    want = truth(3000)
    assert set(counts) == set(want)
    assert all(counts[w] >= want[w] for w in want), (counts, want)
    assert report["sentences"].lost == 0
    assert report["sentences"].acked == 3000
    if component == "count":  # the restarted task failed a PREPARE: every task rolled back
        assert any(action == ROLLBACK for _, action in completed)
        assert report["sentences"].failed > 0


def test_event_time_windows_fire_although_barriers_share_the_inputs() -> None:
    # The checkpoint stream carries no timestamps: it must not hold the watermark back. The
    # last windows wait for a watermark past them (Storm's rule), so read the state while
    # the topology runs: sentence i has time i ms; after 4 s every one was emitted, and the
    # watermark (latest time - lag) fired every window up to 2.3 s at least.
    bolt = WindowedCount().with_tumbling_window(Duration(0.2)).with_timestamp_field("ts")
    topology = build(3000, 2, bolt.with_lag(0.5))

    async def scenario() -> collections.Counter[str]:
        async with run_topology(topology, {"topology.seed": 5}, name="event-time") as running:
            await advance_time(4)
            counts: collections.Counter[str] = collections.Counter()
            for wrapper in running.task_objects("count").values():
                counts.update(dict(wrapper.state.items()))
            return counts

    counts = simulate(scenario())
    low, high = truth(2300), truth(3000)
    assert all(low[w] <= counts[w] <= high[w] for w in high), (counts, low, high)


def test_a_timeout_shorter_than_window_plus_checkpoint_interval_is_refused() -> None:
    topology = build(10, 1, WindowedCount().with_tumbling_window(Duration(10)))
    conf = {"topology.message.timeout.secs": 20, "topology.state.checkpoint.interval.ms": 15_000}

    async def scenario() -> None:
        async with run_topology(topology, conf):
            pass

    message = (
        "stateful windowed bolt 'count': topology.message.timeout.secs = 20 does not cover "
        "the window's length + slide (20 s) plus the checkpoint interval (15 s): its tuples "
        "are acked only at the first commit after they leave the window, so they would time "
        "out; set the timeout above 35 s, shorten the window or checkpoint more often"
    )
    with pytest.raises(InvalidConfigError, match=f"^{re.escape(message)}$"):
        simulate(scenario())


def test_sentences_helper_is_deterministic() -> None:
    assert sentences(3) == sentences(3)
