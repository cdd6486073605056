"""A ``StatefulWindowedBolt`` behind spouts that rewind (``RewindableSpout``), on virtual
time: its window is saved with every checkpoint and put back at ``INITSTATE``, so the
committed counts stay exactly the truth through a failed tuple (a rollback) and through a
crash of the windowed task, with tumbling and sliding windows, in memory and in SQLite.

Without the saved window, the tuples it held at a rollback were lost: the spouts rewind to
the positions of the last checkpoint, which are past them."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from engine import FailedException, Fields, TopologyBuilder, run_topology
from engine.state import (
    CHECKPOINT_COMPONENT_ID,
    INITSTATE,
    ROLLBACK,
    InMemoryStateStore,
    KeyValueState,
    SqliteStateStore,
    StatefulWindowedBolt,
    open_state_store,
    state_namespace,
)
from engine.testing import CrashTask, advance_time, simulate
from engine.windowing import Duration

from .test_rewindable import ListSpout
from .test_windowed_state import WindowedCount
from .wordcount import Split, truth

N = 1000


class PacedSpout(ListSpout):
    """A ``ListSpout`` that emits one sentence per millisecond: the window holds some when
    each checkpoint is taken."""

    async def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.clock = context.clock
        self.at = 0
        await super().open(conf, context, collector)

    def next_tuple(self) -> None:
        now = self.clock.now_ns()
        if now < self.at or self.next == len(self.rows):
            return
        self.collector.emit([self.rows[self.next]], msg_id=self.next)
        self.next += 1
        self.at = now + 1_000_000

    def rewind(self, position: Any) -> None:
        super().rewind(position)
        self.at = 0


class SplitFailingAt(Split):
    """Fails the first sentence it gets at or after ``at`` seconds (once per run)."""

    failed = False

    def __init__(self, at: float) -> None:
        self.at_ns = round(at * 1e9)

    def prepare(self, conf: Any, context: Any) -> None:
        self.clock = context.clock

    def execute(self, tuple: Any, collector: Any) -> None:
        if not SplitFailingAt.failed and self.clock.now_ns() >= self.at_ns:
            SplitFailingAt.failed = True
            raise FailedException("once")
        super().execute(tuple, collector)


@pytest.fixture(autouse=True)
def _fresh_state() -> Any:
    InMemoryStateStore.clear()
    SplitFailingAt.failed = False
    yield
    InMemoryStateStore.clear()


WINDOWS = {
    "tumbling": lambda: WindowedCount().with_tumbling_window(Duration(0.2)),
    "sliding": lambda: WindowedCount().with_window(Duration(0.3), Duration(0.1)),
}


def conf_for(provider: str, tmp_path: Path) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "topology.seed": 5,
        "topology.state.checkpoint.interval.ms": 50,
        "topology.message.timeout.secs": 5,
    }
    if provider == "sqlite":
        conf["topology.state.provider"] = "sqlite"
        conf["topology.state.provider.config"] = str(tmp_path / "state.sqlite")
    return conf


def run(
    window: StatefulWindowedBolt, conf: dict[str, Any], split: Any, faults: Any = ()
) -> tuple[collections.Counter[str], list[str]]:
    """The committed counts once every sentence was acked and the windows holding the last
    ones fired and committed (the tuples are acked at a checkpoint, before they leave the
    window), and the checkpoint actions completed."""
    builder = TopologyBuilder()
    builder.set_spout("sentences", PacedSpout(N, open_secs=0))
    builder.set_bolt("split", split).shuffle_grouping("sentences")
    builder.set_bolt("count", window).fields_grouping("split", Fields("word"))

    async def scenario() -> tuple[collections.Counter[str], list[str]]:
        async with run_topology(
            builder.create_topology(), conf, name="persistent", faults=faults
        ) as running:
            await running.wait_until_complete(timeout=60)
            await advance_time(1)
            (spout,) = running.task_objects(CHECKPOINT_COMPONENT_ID).values()
            named = {**conf, "topology.name": "persistent"}
            store = open_state_store(named, state_namespace(named, "count", 0))
            try:
                counts = collections.Counter(dict(KeyValueState(store).items()))
            finally:
                store.close()
            return counts, [action for _, action in spout.completed]

    return simulate(scenario())


@pytest.mark.parametrize("provider", ["memory", "sqlite"])
@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_a_rollback_keeps_the_committed_counts_exact(
    kind: str, provider: str, tmp_path: Path
) -> None:
    counts, actions = run(WINDOWS[kind](), conf_for(provider, tmp_path), SplitFailingAt(0.35))
    assert actions.count(ROLLBACK) == 1
    assert counts == truth(N)


@pytest.mark.parametrize("provider", ["memory", "sqlite"])
@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_a_crash_of_the_windowed_task_restores_its_window(
    kind: str, provider: str, tmp_path: Path
) -> None:
    # A longer window: the crash loses a few hundred tuples the window held, which only
    # the saved window gives back (the spout rewinds past them).
    window = WindowedCount().with_window(Duration(0.6), Duration(0.3 if kind == "sliding" else 0.6))
    counts, actions = run(
        window,
        conf_for(provider, tmp_path),
        Split(),
        faults=[CrashTask(component="count", task_index=0, at=0.45)],
    )
    assert ROLLBACK in actions and actions.count(INITSTATE) >= 2
    assert counts == truth(N)


def test_the_saved_window_is_out_of_the_users_sight_and_commits_with_the_state(
    tmp_path: Path,
) -> None:
    for store in (
        InMemoryStateStore("doc/window/0"),
        SqliteStateStore(tmp_path / "s.sqlite", "doc/window/0"),
    ):
        state = KeyValueState(store)
        state.put("cat", 1)
        state.put_system("window", b"one")
        state.prepare_commit(1)
        assert state.system("window") is None  # not committed yet
        state.commit(1)
        state.put_system("window", b"two")
        state.prepare_commit(2)
        state.rollback()
        again = KeyValueState(store)
        assert again.system("window") == b"one"
        assert dict(again.items()) == {"cat": 1} and len(again) == 1 and list(again) == ["cat"]
        store.close()


def test_a_window_longer_than_the_timeout_runs_when_it_is_saved() -> None:
    # Saved with every checkpoint, its tuples are acked at the next commit, not when they
    # leave: a window of 10 s under a timeout of 5 s is fine.
    window = WindowedCount().with_tumbling_window(Duration(10))
    conf = conf_for("memory", Path())
    builder = TopologyBuilder()
    builder.set_spout("sentences", PacedSpout(200, open_secs=0))
    builder.set_bolt("split", Split()).shuffle_grouping("sentences")
    builder.set_bolt("count", window).fields_grouping("split", Fields("word"))

    async def scenario() -> collections.Counter[str]:
        async with run_topology(builder.create_topology(), conf, name="long") as running:
            await running.wait_until_complete(timeout=8)  # before the window fires
            await advance_time(21)  # (ticks every 10 s: it fires at the second)
            counts: collections.Counter[str] = collections.Counter()
            for wrapper in running.task_objects("count").values():
                counts.update(dict(wrapper.state.items()))
            return counts

    assert simulate(scenario()) == truth(200)
