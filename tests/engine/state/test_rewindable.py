"""Spouts that rewind with the state (``RewindableSpout``), on virtual time: the state
stays exactly the truth through crashes of the tasks between the spouts and the stateful
bolt, and of the spouts themselves, whose open waits (as a broker client's does)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from engine import FailedException, Fields, TopologyBuilder, run_topology
from engine.state import CHECKPOINT_COMPONENT_ID, InMemoryStateStore, RewindableSpout
from engine.testing import CrashTask, FailTuples, simulate
from engine.windowing import Duration

from .test_windowed_state import WindowedCount
from .wordcount import BasicCount, SentenceSpout, Split, committed_counts, sentences, truth


class ListSpout(RewindableSpout):
    """Task ``i`` of ``n`` reads ``sentences[i::n]``; its position is the index of the next
    one. Its ``open`` takes ``open_secs``, and opening a task's new object closes the
    crashed one's source, as a Kafka client's take-over does: the crashed object's
    ``rewind`` then raises."""

    #: (task index) -> the object open for that task
    open_objects: ClassVar[dict[int, ListSpout]] = {}
    #: called (once) by task 0 before it emits sentence ``crash_before``: a test crashes a
    #: task there, before the tuples emitted next reach the crashed task's queue
    crash_hook: ClassVar[Callable[[], None] | None] = None
    crash_before = 300

    def __init__(self, n: int, open_secs: float = 0.2) -> None:
        self.n = n
        self.open_secs = open_secs

    async def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.closed = False
        index = self.index = context.get_this_task_index()
        prior = self.open_objects.get(index)
        if prior is not None:
            prior.closed = True
        self.open_objects[index] = self
        self.collector = collector
        tasks = len(context.get_component_tasks(context.get_this_component_id()))
        self.rows = sentences(self.n)[index::tasks]
        self.next = 0
        await asyncio.sleep(self.open_secs)

    def next_tuple(self) -> None:
        hook = ListSpout.crash_hook
        if hook is not None and self.index == 0 and self.next >= self.crash_before:
            ListSpout.crash_hook = None
            hook()
        for _ in range(10):
            if self.next == len(self.rows):
                return
            self.collector.emit([self.rows[self.next]], msg_id=self.next)
            self.next += 1

    def position(self) -> int:
        return self.next

    def rewind(self, position: int) -> None:
        if self.closed:
            raise RuntimeError("the source of a crashed spout object is closed")
        self.next = position

    def is_exhausted(self) -> bool:
        return self.next == len(self.rows)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    InMemoryStateStore.clear()
    ListSpout.open_objects.clear()
    ListSpout.crash_hook = None
    yield
    InMemoryStateStore.clear()


def run(
    n: int,
    faults: list[Any],
    crash_in_burst: str | None = None,
    conf: dict[str, Any] | None = None,
) -> tuple[Any, list[tuple[int, str]]]:
    builder = TopologyBuilder()
    builder.set_spout("sentences", ListSpout(n), 2)
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", BasicCount(), 2).fields_grouping("split", Fields("word"))
    full = {
        "topology.seed": 5,
        "topology.state.checkpoint.interval.ms": 50,
        "topology.max.spout.pending": 100,
        "topology.message.timeout.secs": 5,
        **(conf or {}),
    }

    async def scenario() -> Any:
        async with run_topology(
            builder.create_topology(), full, name="rewind", faults=faults
        ) as running:
            if crash_in_burst is not None:
                crash = CrashTask(component=crash_in_burst, task_index=0, at=0.0)
                ListSpout.crash_hook = lambda: running.inject(crash)
            await running.wait_until_complete(timeout=600)
            assert ListSpout.crash_hook is None  # it crashed
            (spout,) = running.task_objects(CHECKPOINT_COMPONENT_ID).values()
            return committed_counts(running), list(spout.completed)

    return simulate(scenario())


def test_the_state_is_the_truth_without_faults() -> None:
    counts, _ = run(2000, [])
    assert counts == truth(2000)


@pytest.mark.parametrize("task_index", [0, 1])
def test_a_crashed_forwarder_loses_nothing_from_the_state(task_index: int) -> None:
    # The split task's queue, with sentences emitted before the next barrier, is lost: a
    # checkpoint must not record spout positions past them.
    counts, completed = run(2000, [CrashTask(component="split", task_index=task_index, at=0.3)])
    assert counts == truth(2000)
    assert any(action == "ROLLBACK" for _, action in completed)


def test_a_forwarder_crashed_with_a_full_queue_loses_nothing_from_the_state() -> None:
    # The crash comes before the split task ran the burst emitted to it: its queue is lost.
    counts, completed = run(2000, [], crash_in_burst="split")
    assert counts == truth(2000)
    assert any(action == "ROLLBACK" for _, action in completed)


def test_a_crashed_spout_whose_source_closes_stops_taking_part_at_once() -> None:
    # The crashed object's rewind raises: the action fails and the other task still hears
    # of every action (before, it never did while the new object opened).
    counts, _ = run(2000, [CrashTask(component="sentences", task_index=0, at=0.3)])
    assert counts == truth(2000)


def test_crashes_of_every_kind_in_one_run() -> None:
    faults = [
        CrashTask(component="count", task_index=1, at=0.2),
        CrashTask(component="sentences", task_index=0, at=0.35),
        CrashTask(component="split", task_index=0, at=0.5),
        CrashTask(component="split", task_index=1, at=0.8),
    ]
    counts, _ = run(3000, faults)
    assert counts == truth(3000)


def test_an_action_reaches_every_participant_when_one_raises() -> None:
    from engine.state._coordinator import CheckpointCoordinator

    got: list[tuple[int, int, str]] = []

    def broken(request: tuple[int, int, str]) -> None:
        raise RuntimeError("closed")

    coordinator = CheckpointCoordinator([1, 2])
    coordinator.join(1, broken)
    coordinator.join(2, got.append)
    seq, errors = coordinator.post(7, "INITSTATE")
    assert got == [(seq, 7, "INITSTATE")]
    assert [str(e) for e in errors] == ["closed"]
    assert coordinator.settled() is False  # the action failed: it is tried again


@pytest.mark.parametrize("component", ["split", "count"])
def test_failed_tuples_never_leave_the_state_short_with_several_ackers(component: str) -> None:
    # A fail reaches the spout through its acker; with several, the barrier's tree may
    # complete first, and the checkpoint then records positions past the failed tuple.
    counts, completed = run(
        3000,
        [FailTuples(component=component, probability=0.01, start=0.0, end=1.0)],
        conf={"topology.acker.executors": 3},
    )
    assert counts == truth(3000)
    assert any(action == "ROLLBACK" for _, action in completed)


class SplitFailingOnce(Split):
    """Fails the ``at``-th sentence it is given, once."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.seen = 0

    def execute(self, tuple: Any, collector: Any) -> None:
        self.seen += 1
        if self.seen == self.at:
            raise FailedException("once")
        super().execute(tuple, collector)


def test_a_stateful_window_reset_by_a_rollback_does_not_fail_the_next_checkpoint() -> None:
    # INITSTATE empties the window and fails the tuples it held: here a plain spout's,
    # which arrive between the ROLLBACK and the INITSTATE. They came before the state was
    # reloaded, so they must not fail the next PREPARE (as failed data tuples do): that
    # PREPARE rolled back again, and with the plain spout still sending, so did every
    # later one, and the topology never completed.
    builder = TopologyBuilder()
    builder.set_spout("sentences", ListSpout(1000, open_secs=0))
    builder.set_spout("plain", SentenceSpout(300, interval_secs=0.002))
    builder.set_bolt("split", SplitFailingOnce(at=200)).shuffle_grouping(
        "sentences"
    ).shuffle_grouping("plain")
    window = WindowedCount().with_tumbling_window(Duration(0.1))
    builder.set_bolt("count", window).fields_grouping("split", Fields("word"))
    conf = {
        "topology.seed": 5,
        "topology.state.checkpoint.interval.ms": 50,
        "topology.message.timeout.secs": 5,
    }

    async def scenario() -> list[tuple[int, str]]:
        async with run_topology(builder.create_topology(), conf, name="window") as running:
            await running.wait_until_complete(timeout=20)
            (spout,) = running.task_objects(CHECKPOINT_COMPONENT_ID).values()
            return list(spout.completed)

    completed = simulate(scenario())
    assert [action for _, action in completed].count("ROLLBACK") == 1
