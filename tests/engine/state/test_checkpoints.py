"""Stateful bolts end to end: the checkpoint protocol on virtual time, task crashes, a
topology restarted on the same state, and a real SIGKILL of the process."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import Fields, InvalidComponentError, InvalidConfigError, TopologyBuilder, run_topology
from engine.state import (
    CHECKPOINT_COMPONENT_ID,
    COMMIT,
    INITSTATE,
    PREPARE,
    ROLLBACK,
    InMemoryStateStore,
    KeyValueState,
    SqliteStateStore,
    state_namespace,
)
from engine.testing import CrashTask, simulate

from .wordcount import (
    BasicCount,
    SentenceSpout,
    Split,
    build,
    committed_counts,
    state_counts,
    truth,
)


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


ROOT = Path(__file__).resolve().parents[3]


def run(topology: Any, name: str, conf: dict[str, Any] | None = None, faults: Any = ()) -> Any:
    async def scenario() -> Any:
        async with run_topology(
            topology, {"topology.seed": 3, **(conf or {})}, name=name, trace=True, faults=faults
        ) as running:
            await running.wait_until_complete(timeout=600)
            (spout,) = running.task_objects(CHECKPOINT_COMPONENT_ID).values()
            idempotent = type(next(iter(running.task_objects("count").values())).delegate)
            return (
                committed_counts(running, idempotent=idempotent.__name__ == "IdempotentWords"),
                running.report(),
                list(spout.completed),
            )

    return simulate(scenario())


@pytest.fixture(autouse=True)
def _fresh_memory_state() -> Any:
    InMemoryStateStore.clear()
    yield
    InMemoryStateStore.clear()


@pytest.mark.parametrize(
    ("split", "count"),
    [
        ("basic", "basic"),
        ("basic", "rich"),
        ("batch", "basic"),
        ("batch", "batch"),
        ("basic", "rich-batch"),
    ],
)
def test_word_count_state_is_exact_without_faults(split: str, count: str) -> None:
    counts, report, completed = run(build(300, split=split, count=count), "exact")
    assert counts == truth(300)
    assert report["sentences"].lost == 0
    assert report["sentences"].failed == 0
    assert completed[0] == (0, INITSTATE)
    assert completed[1:3] == [(1, PREPARE), (1, COMMIT)]


@pytest.mark.parametrize("kind", ["basic", "batch"])
@pytest.mark.parametrize("component", ["count", "split"])
def test_task_crash_counts_at_least_the_truth_and_nothing_is_lost(
    component: str, kind: str
) -> None:
    counts, report, completed = run(
        build(3000, split=kind, count=kind),
        "crash",
        faults=[CrashTask(component=component, at=1.5)],
    )
    want = truth(3000)
    assert set(counts) == set(want)
    assert all(counts[w] >= want[w] for w in want), (counts, want)
    assert report["sentences"].lost == 0
    assert report["sentences"].acked == 3000
    if component == "count":  # the restarted task failed the next PREPARE: rolled back
        assert any(action == ROLLBACK for _, action in completed)
        assert completed.count((completed[-1][0], COMMIT)) <= 1


def test_task_crash_with_an_idempotent_bolt_gives_the_exact_truth() -> None:
    counts, report, _ = run(
        build(3000, idempotent=True),
        "idempotent",
        faults=[CrashTask(component="count", at=1.5), CrashTask(component="split", at=2.2)],
    )
    assert counts == truth(3000)
    assert report["sentences"].lost == 0


def test_state_survives_a_restart_of_the_topology(tmp_path: Path) -> None:
    conf = {
        "topology.state.provider": "sqlite",
        "topology.state.provider.config": str(tmp_path / "state.sqlite"),
    }
    first, _, completed = run(build(200), "restart", conf)
    assert first == truth(200)
    last_commit = max(t for t, a in completed if a == COMMIT)
    again, _, completed = run(build(0), "restart", conf)  # nothing new: only INITSTATE
    assert again == truth(200)
    assert completed == [(last_commit, INITSTATE)]


def test_recovery_commits_a_prepared_transaction_and_rolls_back_a_preparing_one(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "state.sqlite")
    conf = {"topology.state.provider": "sqlite", "topology.state.provider.config": db}
    conf_all = {**conf, "topology.name": "recover"}
    # A crash left the checkpoint spout COMMITTING txid 5 and a count task prepared 5 (its
    # committed state is from txid 4): recovery commits it before INITSTATE.
    spout = KeyValueState(
        SqliteStateStore(db, state_namespace(conf_all, CHECKPOINT_COMPONENT_ID, 0))
    )
    spout.put("txid", 5)
    spout.put("phase", "COMMITTING")
    spout.prepare_commit(1)
    spout.commit(1)
    task0 = KeyValueState(SqliteStateStore(db, state_namespace(conf_all, "count", 0)))
    task0.put("apple", 10)
    task0.prepare_commit(4)
    task0.commit(4)
    task0.put("apple", 11)
    task0.prepare_commit(5)
    counts, _, completed = run(build(0), "recover", conf)
    assert completed[:2] == [(5, COMMIT), (5, INITSTATE)]
    assert counts["apple"] == 11
    # Left PREPARING txid 6 with the task prepared: recovery rolls it back.
    spout.put("txid", 6)
    spout.put("phase", "PREPARING")
    spout.prepare_commit(2)
    spout.commit(2)
    task0.put("apple", 12)
    task0.prepare_commit(6)
    counts, _, completed = run(build(0), "recover", conf)
    assert completed[:2] == [(6, ROLLBACK), (5, INITSTATE)]
    assert counts["apple"] == 11


@pytest.mark.parametrize("idempotent", [False, True])
def test_sigkill_mid_run_then_restart_never_loses_committed_state(
    tmp_path: Path, idempotent: bool
) -> None:
    n = 4000
    db, acked = str(tmp_path / "state.sqlite"), str(tmp_path / "acked.txt")
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.engine.state._kill_child",
            db,
            acked,
            str(n),
            str(int(idempotent)),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "MIDWAY"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
    acked_before = {int(x) for x in Path(acked).read_text().split()}
    assert 0 < len(acked_before) < n  # killed mid-run
    conf = {
        "topology.state.provider": "sqlite",
        "topology.state.provider.config": db,
        "topology.state.checkpoint.interval.ms": 50,
    }
    counts, report, _ = run(build(n, idempotent=idempotent, acked_path=acked), "killed", conf)
    want = truth(n)
    if idempotent:
        assert counts == want
    else:
        assert all(counts[w] >= want[w] for w in want), (counts, want)
    assert report["sentences"].lost == 0


def test_checkpoint_interval_must_be_shorter_than_the_message_timeout() -> None:
    async def scenario() -> None:
        conf = {"topology.state.checkpoint.interval.ms": 30_000}
        async with run_topology(build(1), conf, name="slow-checkpoints"):
            pass

    with pytest.raises(
        InvalidConfigError,
        match=exactly(
            "'topology.state.checkpoint.interval.ms' = 30000 is not shorter than "
            "'topology.message.timeout.secs' = 30: a stateful bolt acks its tuples only at the "
            "next checkpoint, so they would time out; checkpoint more often or raise the timeout"
        ),
    ):
        simulate(scenario())


def test_async_bolt_upstream_of_a_stateful_bolt_is_refused_naming_it() -> None:
    class AsyncSplit(Split):
        async def execute(self, tuple: Any, collector: Any) -> None:  # type: ignore[override]
            collector.emit([tuple[0]])

    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(1))
    builder.set_bolt("split", AsyncSplit()).shuffle_grouping("sentences")
    builder.set_bolt("count", BasicCount()).shuffle_grouping("split")
    with pytest.raises(
        InvalidComponentError,
        match=exactly(
            "bolt 'split' (upstream of a stateful bolt): an async execute cannot be "
            "aligned with checkpoint barriers (tuples in flight would cross them); make "
            "AsyncSplit.execute a plain def, or move the bolt downstream of the stateful bolts"
        ),
    ):
        builder.create_topology()


def test_wiring_adds_the_checkpoint_spout_and_barrier_streams_only_where_needed() -> None:
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(1))
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", BasicCount(), 2).shuffle_grouping("split")
    builder.set_bolt("after", Split()).shuffle_grouping("sentences")
    topology = builder.create_topology()
    assert CHECKPOINT_COMPONENT_ID in topology.spouts
    inputs = {
        b: [(s.component, s.stream) for s in spec.inputs] for b, spec in topology.bolts.items()
    }
    assert inputs["split"] == [("sentences", "default"), (CHECKPOINT_COMPONENT_ID, "__checkpoint")]
    assert inputs["count"] == [("split", "default"), ("split", "__checkpoint")]
    assert inputs["after"] == [("sentences", "default")]  # not upstream of state: untouched
    assert type(topology.bolts["after"].component) is Split
    assert CHECKPOINT_COMPONENT_ID not in builder._components  # the user's builder is unchanged


def test_state_counts_helper() -> None:
    assert state_counts([("a", 2), ("b", 1)]) == {"a": 2, "b": 1}


def run_timed(topology: Any, conf: dict[str, Any]) -> tuple[Any, float, list[Any]]:
    """Counts, virtual seconds to completion, and the checkpoint actions completed."""

    async def scenario() -> Any:
        loop = asyncio.get_running_loop()
        start = loop.time()
        async with run_topology(topology, {"topology.seed": 5, **conf}, name="early") as running:
            await running.wait_until_complete(timeout=600)
            took = loop.time() - start
            (spout,) = running.task_objects(CHECKPOINT_COMPONENT_ID).values()
            return committed_counts(running), took, list(spout.completed)

    return simulate(scenario())


def test_spouts_at_max_pending_get_a_checkpoint_before_the_interval_is_over() -> None:
    # 10 trees pending at most, a checkpoint every 2 s: waiting for the interval would
    # complete 10 sentences per 2 s, 80 s for 400.
    conf = {"topology.max.spout.pending": 10, "topology.state.checkpoint.interval.ms": 2000}
    counts, took, completed = run_timed(build(400, interval_secs=0.0005), conf)
    assert counts == truth(400)
    assert took < 10.0, took
    prepares = [t for t, a in completed if a == PREPARE]
    assert len(prepares) <= took / 0.2 + 2  # at most 10 per interval


def test_the_last_tuples_of_a_finite_input_are_acked_without_waiting_for_the_interval() -> None:
    conf = {"topology.state.checkpoint.interval.ms": 5000}
    counts, took, completed = run_timed(build(50), conf)
    assert counts == truth(50)
    assert took < 1.0, took  # not 5 s: the input paused with tuples uncommitted
    assert (1, PREPARE) in completed


def test_a_trickling_input_checkpoints_at_most_ten_times_per_interval() -> None:
    # one sentence every 30 ms for 3 s: the input pauses after each one
    conf = {"topology.state.checkpoint.interval.ms": 1000}
    counts, took, completed = run_timed(build(100, interval_secs=0.03), conf)
    assert counts == truth(100)
    prepares = sum(1 for _, a in completed if a == PREPARE)
    assert 10 < prepares <= took * 10 + 2, (prepares, took)


def test_a_checkpoint_holding_many_tuples_starts_as_soon_as_the_input_pauses() -> None:
    # ~750 words held when the input ends: no waiting for a tenth of the 5 s interval
    conf = {"topology.state.checkpoint.interval.ms": 5000}
    counts, took, _ = run_timed(build(300, interval_secs=0.0005), conf)
    assert counts == truth(300)
    assert took < 0.4, took


class PendingWatch(SentenceSpout):
    """Records the most trees it ever had pending."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        self.most_pending = 0

    def next_tuple(self) -> None:
        self.most_pending = max(self.most_pending, self.collector.pending_count())
        super().next_tuple()


def test_a_checkpoint_starts_before_the_spouts_reach_max_spout_pending() -> None:
    # 2,000 sentences/s, at most 100 pending: half of them held starts a checkpoint (50 in
    # 25 ms, a tenth of the 200 ms interval later than the last), so the spout never waits
    builder = TopologyBuilder()
    builder.set_spout("sentences", PendingWatch(1000, interval_secs=0.0005))
    builder.set_bolt("split", Split()).shuffle_grouping("sentences")
    builder.set_bolt("count", BasicCount()).fields_grouping("split", Fields("word"))
    conf = {"topology.max.spout.pending": 100, "topology.state.checkpoint.interval.ms": 200}

    async def scenario() -> int:
        async with run_topology(builder.create_topology(), conf, name="filling") as running:
            await running.wait_until_complete(timeout=600)
            assert committed_counts(running) == truth(1000)
            (spout,) = running.task_objects("sentences").values()
            return int(spout.most_pending)

    assert simulate(scenario()) < 90  # 99: waited at the limit for the pause to show
