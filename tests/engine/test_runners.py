"""``engine.runners``: one bolt task outside the runtime, with the engine's collectors and
context, as another runner (Spark's) runs it; loading a target; the task plan."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from engine import (
    BasicBatchBolt,
    BasicBolt,
    Bolt,
    FailedException,
    Fields,
    Spout,
    TopologyBuilder,
    TupleBatch,
    is_tick_tuple,
)
from engine.runners import BoltTaskRun, RunnerUsageError, Source, load_topology, task_plan
from engine.windowing import Duration, TupleWindow, WindowedBolt


class Words(Spout):
    def next_tuple(self) -> None: ...

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


class Split(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple["sentence"] == "bad":
            raise FailedException("bad sentence")
        for word in tuple["sentence"].split():
            collector.emit([word])
        collector.emit_direct(self.to, [tuple["sentence"]], "whole")

    def prepare(self, conf: Any, context: Any) -> None:
        self.to = context.get_component_tasks("picked")[-1]
        self.task = context.get_this_task_id()

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])
        declarer.declare_stream("whole", ["sentence"], direct=True)


class Lengths(BasicBatchBolt):
    def execute_batch(self, batch: Any, collector: Any) -> None:
        words = batch.column("sentence")
        collector.emit_batch([np.array([len(w) for w in words])])
        collector.fail([i for i, w in enumerate(words) if w == "bad"])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Holds(Bolt):
    """Acks nothing until a tick."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: list[Any] = []

    def execute(self, tuple: Any) -> None:
        if is_tick_tuple(tuple):
            for t in self.held:
                self.collector.ack(t)
            self.held = []
            return
        self.held.append(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def topology() -> Any:
    b = TopologyBuilder()
    b.set_spout("sentences", Words())
    b.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    b.set_bolt("picked", Holds(), 2).direct_grouping("split", "whole")
    b.set_bolt("lengths", Lengths()).shuffle_grouping("sentences")
    b.set_bolt("holds", Holds()).fields_grouping("split", Fields("word"))
    return b.create_topology()


def batch(*sentences: str) -> TupleBatch:
    return TupleBatch(Source("sentences", "default", 9, Fields("sentence")), [list(sentences)])


def test_a_basic_bolt_task_emits_per_stream_and_fails_what_raises_failed() -> None:
    topo = topology()
    plan = task_plan(topo)
    task_id = plan.component_tasks["split"][1]
    run = BoltTaskRun(topo, plan, {}, "split", task_id)
    run.prepare()
    assert run.bolt.task == task_id  # the engine's context, the same task ids
    run.execute(batch("a b", "bad", "c"))
    emitted = run.take_emitted()
    picked = plan.component_tasks["picked"][-1]
    # One entry per run of emits on one stream, in emit order per target.
    assert sum(e.n for e in emitted) == 5
    by_stream: dict[str, list[Any]] = {}
    for e in emitted:
        by_stream.setdefault(e.stream, []).extend(e.columns[0])
        if e.stream == "whole":
            assert e.tasks is not None and set(e.tasks.tolist()) == {picked}
        else:
            assert e.tasks is None
    assert by_stream == {"default": ["a", "b", "c"], "whole": ["a b", "c"]}
    assert (run.failed, run.pending, run.take_emitted()) == (1, 0, [])
    run.cleanup()


def test_a_batch_bolt_task_emits_columns_and_fails_rows() -> None:
    topo = topology()
    plan = task_plan(topo)
    run = BoltTaskRun(topo, plan, {}, "lengths", plan.component_tasks["lengths"][0])
    run.prepare()
    run.execute(batch("ab", "bad", "c"))
    (emitted,) = run.take_emitted()
    assert emitted.stream == "default" and emitted.n == 3
    assert np.asarray(emitted.columns[0]).tolist() == [2, 3, 1]
    assert (run.failed, run.pending) == (1, 0)


def test_a_rich_bolt_task_holds_its_inputs_until_a_tick() -> None:
    topo = topology()
    plan = task_plan(topo)
    run = BoltTaskRun(topo, plan, {}, "holds", plan.component_tasks["holds"][0])
    run.prepare()
    run.execute(TupleBatch(Source("split", "default", 3, Fields("word")), [["x", "y"]]))
    assert run.pending == 2
    run.tick(1.0)
    assert (run.pending, run.failed) == (0, 0)


def test_load_topology_says_what_is_wrong_with_a_target() -> None:
    with pytest.raises(RunnerUsageError) as info:
        load_topology("no_colon")
    assert str(info.value) == (
        "squall: expected MODULE:FUNCTION, got 'no_colon' (or FILE.py:FUNCTION)"
    )
    assert info.value.code == 2
    topo, conf = load_topology("tests.engine.test_runners:topology")
    assert sorted(topo.bolts) == ["holds", "lengths", "picked", "split"] and conf == {}


class Sums(WindowedBolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, window: Any) -> None:
        values = [t["n"] for t in window.get()]
        self.collector.emit([window.end_timestamp, len(values), sum(values)])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["end", "count", "total"])


def windowed() -> Any:
    b = TopologyBuilder()
    b.set_spout("numbers", Words())
    bolt = Sums().with_window(Duration(10), Duration(5)).with_timestamp_field("ts").with_lag(1)
    b.set_bolt("sums", bolt).shuffle_grouping("numbers")
    return b.create_topology()


def numbers(lo: int, hi: int) -> TupleBatch:
    ns = list(range(lo, hi))
    src = Source("numbers", "default", 1, Fields("ts", "n"))
    return TupleBatch(src, [[n * 0.5 for n in ns], ns])


def restore(saved: bytes | None) -> Any:
    if saved is None:
        return None
    return lambda bolt: bolt.restore_window_state(pickle.loads(saved))


def test_a_window_saved_and_restored_between_batches_fires_as_one_that_stayed() -> None:
    topo = windowed()
    plan = task_plan(topo)
    task = plan.component_tasks["sums"][0]

    def emitted(run: BoltTaskRun) -> list[tuple[Any, ...]]:
        return [r for e in run.take_emitted() for r in zip(*e.columns, strict=True)]

    kept = BoltTaskRun(topo, plan, {}, "sums", task)
    kept.prepare()
    once: list[tuple[Any, ...]] = []
    for k in range(6):
        kept.execute(numbers(k * 20, (k + 1) * 20))
        kept.tick(1.0)
        once += emitted(kept)

    saved: bytes | None = None
    again: list[tuple[Any, ...]] = []
    for k in range(6):  # a fresh task per batch, the window carried over pickled
        run = BoltTaskRun(topo, plan, {}, "sums", task)
        run.prepare(restore(saved))
        run.execute(numbers(k * 20, (k + 1) * 20))
        run.tick(1.0)
        again += emitted(run)
        saved = pickle.dumps(run.bolt.window_state())
    assert once and again == once


class ColumnSums(WindowedBolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.conf = conf
        self.collector = collector

    def execute(self, window: Any) -> None:
        self.collector.emit([window.end_timestamp, len(window), sum(window.column("n"))])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["end", "count", "total"])


def test_a_window_on_a_runner_emits_unanchored_as_no_acker_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    b = TopologyBuilder()
    b.set_spout("numbers", Words())
    bolt = ColumnSums().with_window(Duration(10), Duration(5)).with_timestamp_field("ts")
    b.set_bolt("sums", bolt).shuffle_grouping("numbers")
    b.set_bolt("after", Holds()).shuffle_grouping("sums")  # the sums go somewhere
    topo = b.create_topology()
    plan = task_plan(topo)
    # anchoring an emit to its window makes a Tuple per row of the window (``get``)
    gets: list[int] = []
    real_get = TupleWindow.get
    monkeypatch.setattr(TupleWindow, "get", lambda self: gets.append(1) or real_get(self))

    run = BoltTaskRun(topo, plan, {}, "sums", plan.component_tasks["sums"][0])
    run.prepare()
    rows = []
    for k in range(4):
        run.execute(numbers(k * 20, (k + 1) * 20))
        run.tick(1.0)
        rows += [r for e in run.take_emitted() for r in zip(*e.columns, strict=True)]
    assert len(rows) >= 6 and max(r[1] for r in rows) == 20  # sliding windows fired
    assert gets == []
    assert run.bolt.bolt.conf["topology.acker.executors"] == 0


class Faulty(ColumnSums):
    def execute(self, window: Any) -> None:
        raise ValueError(f"no sum for the window ending {window.end_timestamp}")


class Complains(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        collector.report_error(f"odd sentence {tuple['sentence']!r}")

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def test_errors_a_runner_task_reports_are_logged_with_tracebacks_and_then_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A window's execute that raises is reported, and its tuples stay held (the engine's
    # rule): outside the runtime there is no error log, so the task logs it itself.
    b = TopologyBuilder()
    b.set_spout("numbers", Words())
    bolt = Faulty().with_window(Duration(10)).with_timestamp_field("ts")
    b.set_bolt("sums", bolt).shuffle_grouping("numbers")
    topo = b.create_topology()
    plan = task_plan(topo)
    run = BoltTaskRun(topo, plan, {}, "sums", plan.component_tasks["sums"][0])
    run.prepare()
    with caplog.at_level("ERROR", logger="engine.component.sums"):
        run.execute(numbers(0, 60))  # timestamps 0 to 29.5 s: windows end at 0, 10, 20
        run.tick(1.0)
        run.cleanup()
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 3 and len(run.errors) == 3
    assert all("ValueError('no sum for the window ending" in m for m in logged)
    assert all("Traceback (most recent call last)" in m for m in logged)

    # Past topology.max.error.report.per.interval per run, errors are counted, and one
    # line at the end says how many were not logged.
    caplog.clear()
    b3 = TopologyBuilder()
    b3.set_spout("sentences", Words())
    b3.set_bolt("complains", Complains()).shuffle_grouping("sentences")
    topo = b3.create_topology()
    plan = task_plan(topo)
    conf = {"topology.max.error.report.per.interval": 3}
    run = BoltTaskRun(topo, plan, conf, "complains", plan.component_tasks["complains"][0])
    run.prepare()
    with caplog.at_level("ERROR", logger="engine.component.complains"):
        run.execute(batch(*[f"s{i}" for i in range(40)]))
        run.cleanup()
    logged = [r.getMessage() for r in caplog.records]
    assert len(run.errors) == 40 and (run.failed, run.pending) == (0, 0)
    assert len(logged) == 4
    assert logged[0].endswith("odd sentence 's0'")
    assert "37 more error(s) not logged in this run, the last: odd sentence 's39'" in logged[3]
