"""Batch components end to end: batch spouts, basic and rich batch bolts, mixed with
per-tuple components, every grouping; acking, failing a row, errors, crashes."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import (
    BasicBatchBolt,
    BasicBolt,
    BatchBolt,
    CustomStreamGrouping,
    FailedException,
    Fields,
    Spout,
    TopologyBuilder,
    TupleBatch,
    run_topology,
)
from engine.testing import CrashTask, advance_time, simulate

SENTENCES = [f"w{i % 7} w{i % 5} w{i % 3} w{i % 11}" for i in range(240)]
EXPECTED = collections.Counter(w for s in SENTENCES for w in s.split())


# --- components ---------------------------------------------------------------------------
class SentenceSpout(Spout):
    """Emits every sentence once with its index as message id, ``batch`` rows per call
    (``batch=0``: per-tuple emits); replays what fails; task i of n takes every n-th."""

    def __init__(self, sentences: list[str], batch: int = 16) -> None:
        self.sentences = sentences
        self.batch = batch

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        n = len(context.get_component_tasks(context.get_this_component_id()))
        self.ids = list(range(context.get_this_task_index(), len(self.sentences), n))
        self.next = 0
        self.retry: collections.deque[int] = collections.deque()
        self.acked: list[int] = []
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        if self.batch == 0:
            if self.retry:
                i = self.retry.popleft()
            elif self.next < len(self.ids):
                i = self.ids[self.next]
                self.next += 1
            else:
                return
            self.collector.emit([self.sentences[i]], msg_id=i)
            return
        ids = [self.retry.popleft() for _ in range(min(len(self.retry), self.batch))]
        take = self.ids[self.next : self.next + self.batch - len(ids)]
        self.next += len(take)
        ids += take
        if ids:
            self.collector.emit_batch([[self.sentences[i] for i in ids]], msg_ids=ids)

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)
        self.retry.append(msg_id)

    def is_exhausted(self) -> bool:
        return (
            self.next >= len(self.ids) and not self.retry and len(set(self.acked)) == len(self.ids)
        )

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


class BatchSplit(BasicBatchBolt):
    def execute_batch(self, batch: TupleBatch, collector: Any) -> None:
        collector.emit_flat([s.split() for s in batch.column("sentence")])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class TupleSplit(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        for w in tuple[0].split():
            collector.emit([w])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class BatchCount(BasicBatchBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.task = context.get_this_task_id()
        self.seen_by_task: set[str] = set()

    def execute_batch(self, batch: TupleBatch, collector: Any) -> None:
        words = batch.column("word")
        self.counts.update(words)
        self.seen_by_task.update(words)


class TupleCount(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.seen_by_task: set[str] = set()

    def execute(self, tuple: Any, collector: Any) -> None:
        self.counts[tuple[0]] += 1
        self.seen_by_task.add(tuple[0])


def _wordcount(spout: Spout, split: Any, count: Any, p: int) -> Any:
    b = TopologyBuilder()
    b.set_spout("sentences", spout, p)
    b.set_bolt("split", split, p).shuffle_grouping("sentences")
    b.set_bolt("count", count, p).fields_grouping("split", Fields("word"))
    return b.create_topology()


async def _run(topology: Any, conf: dict[str, Any] | None = None, faults: Any = ()) -> Any:
    conf = {"topology.seed": 5, **(conf or {})}
    async with run_topology(topology, conf, faults=faults) as running:
        await running.wait_until_complete(timeout=600)
        counts: collections.Counter[str] = collections.Counter()
        owners: dict[str, set[int]] = collections.defaultdict(set)
        for t, bolt in running.task_objects("count").items():
            counts.update(bolt.counts)
            for w in bolt.seen_by_task:
                owners[w].add(t)
        spouts = running.task_objects("sentences").values()
        acked = sorted(m for s in spouts for m in s.acked)
        failed = sorted(m for s in spouts for m in s.failed)
        return counts, owners, acked, failed, running.info()


MIXES = {
    "batch": (16, BatchSplit, BatchCount),
    "per-tuple": (0, TupleSplit, TupleCount),
    "batch spout, per-tuple bolts": (16, TupleSplit, TupleCount),
    "per-tuple spout, batch bolts": (0, BatchSplit, BatchCount),
    "batch split only": (0, BatchSplit, TupleCount),
    "batch count only": (16, TupleSplit, BatchCount),
}


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_word_count_exact_every_mix(mix: str, parallelism: int) -> None:
    batch, split, count = MIXES[mix]
    topo = _wordcount(SentenceSpout(SENTENCES, batch), split(), count(), parallelism)
    counts, owners, acked, failed, info = simulate(_run(topo))
    assert counts == EXPECTED
    assert all(len(tasks) == 1 for tasks in owners.values())  # fields grouping holds
    assert acked == list(range(len(SENTENCES))) and failed == []
    assert info.acker["pending_roots"] == 0


class FailBad(BasicBatchBolt):
    """Fails the rows whose sentence has ``bad`` in it, the first time only."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.failed_once: set[str] = set()

    def execute_batch(self, batch: TupleBatch, collector: Any) -> None:
        sentences = batch.column("sentence")
        bad = [i for i, s in enumerate(sentences) if "bad" in s and s not in self.failed_once]
        self.failed_once.update(sentences[i] for i in bad)
        keep = [s.split() if i not in bad else [] for i, s in enumerate(sentences)]
        collector.emit_flat(keep)
        collector.fail(bad)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


def test_failing_one_row_fails_only_its_tree(parallelism: int) -> None:
    sentences = [f"bad {i}" if i % 10 == 3 else f"good {i}" for i in range(100)]
    topo = _wordcount(SentenceSpout(sentences, 8), FailBad(), BatchCount(), parallelism)
    counts, _, acked, failed, _ = simulate(_run(topo))
    # Each split task fails a bad sentence once: a replay may reach another task.
    bad = [i for i in range(100) if i % 10 == 3]
    assert sorted(set(failed)) == bad
    assert all(1 <= failed.count(i) <= parallelism for i in bad)
    assert acked == list(range(100))
    assert counts == collections.Counter(w for s in sentences for w in s.split())


class Explode(BasicBatchBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.calls = 0

    def execute_batch(self, batch: TupleBatch, collector: Any) -> None:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("boom in batch 2")
        if self.calls == 3:
            raise FailedException("quietly failed")
        collector.emit_flat([s.split() for s in batch.column("sentence")])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


def test_an_exception_fails_the_batch_and_the_topology_goes_on() -> None:
    topo = _wordcount(SentenceSpout(SENTENCES[:64], 8), Explode(), BatchCount(), 1)
    counts, _, acked, failed, info = simulate(_run(topo))
    assert len(failed) == 16  # two batches of 8: one reported, one quietly failed
    assert acked == list(range(64))
    assert counts == collections.Counter(w for s in SENTENCES[:64] for w in s.split())
    errors = info.components["split"].tasks
    (task,) = errors.values()
    assert [e.error for e in task.errors] == ["RuntimeError('boom in batch 2')"]
    assert "execute_batch" in task.errors[0].traceback


class HoldAndAck(BatchBolt):
    """A rich batch bolt: emits every row anchored to it, acks the even rows at once and
    the odd ones on the next call (a later batch or a tick)."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: list[TupleBatch] = []

    def execute_batch(self, batch: TupleBatch) -> None:
        for old in self.held:
            self.collector.ack(old, self.collector.pending_rows(old))
        self.held = []
        if batch.source_stream == "__tick":
            return
        self.collector.emit_batch([batch.column("sentence")], anchor_batch=batch)
        self.collector.ack(batch, np.arange(0, len(batch), 2))
        self.held = [batch]

    def component_configuration(self) -> dict[str, Any]:
        return {"topology.tick.tuple.freq.secs": 1}

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


class Sink(BasicBatchBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.rows: list[str] = []

    def execute_batch(self, batch: TupleBatch, collector: Any) -> None:
        self.rows.extend(batch.column("sentence"))


def test_rich_batch_bolt_acks_subsets_later() -> None:
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(SENTENCES[:50], 5))
    b.set_bolt("hold", HoldAndAck()).shuffle_grouping("sentences")
    b.set_bolt("sink", Sink()).shuffle_grouping("hold")

    async def scenario() -> Any:
        async with run_topology(b.create_topology(), {"topology.seed": 3}) as running:
            await running.wait_until_complete(timeout=60)
            (spout,) = running.task_objects("sentences").values()
            (sink,) = running.task_objects("sink").values()
            return sorted(spout.acked), spout.failed, sorted(sink.rows), running.info()

    acked, failed, rows, info = simulate(scenario())
    assert acked == list(range(50)) and failed == []
    assert rows == sorted(SENTENCES[:50])
    (hold,) = info.components["hold"].tasks.values()
    assert hold.acked == 50 and hold.process_latency.count == 50


class Twice(BatchBolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.errors: list[str] = []

    def execute_batch(self, batch: TupleBatch) -> None:
        self.collector.ack(batch, [0])
        try:
            self.collector.ack(batch, [0])
        except Exception as exc:
            self.errors.append(str(exc))
        self.collector.ack(batch, np.arange(1, len(batch)))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["x"])


def test_acking_a_row_twice_raises() -> None:
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(SENTENCES[:10], 5))
    b.set_bolt("twice", Twice()).shuffle_grouping("sentences")

    async def scenario() -> Any:
        async with run_topology(b.create_topology(), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=60)
            return next(iter(running.task_objects("twice").values())).errors

    errors = simulate(scenario())
    assert errors and all(
        "already acked or failed; every row is acked or failed exactly once" in e for e in errors
    )


class AckRowZeroTwice(BatchBolt):
    """Acks rows [0, 0, 2, ..., n - 1]: as many as the batch has, first and last in place,
    row 0 named twice and row 1 not at all; on the refusal, acks the whole batch."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.errors: list[str] = []

    def execute_batch(self, batch: TupleBatch) -> None:
        try:
            self.collector.ack(batch, [0, 0, *range(2, len(batch))])
        except Exception as exc:
            self.errors.append(str(exc))
            self.collector.ack(batch)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["x"])


def test_acking_a_row_twice_in_one_call_raises_even_when_the_rows_span_the_batch() -> None:
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(SENTENCES[:10], 5))
    b.set_bolt("twice", AckRowZeroTwice()).shuffle_grouping("sentences")

    async def scenario() -> Any:
        async with run_topology(b.create_topology(), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=60)
            (spout,) = running.task_objects("sentences").values()
            (bolt,) = running.task_objects("twice").values()
            return bolt.errors, sorted(spout.acked), spout.failed

    errors, acked, failed = simulate(scenario())
    assert (
        errors
        == [
            "component 'twice' called ack on rows of a batch from 'sentences' that were already "
            "acked or failed; every row is acked or failed exactly once"
        ]
        * 2
    )
    assert acked == list(range(10)) and failed == []


# --- every grouping -----------------------------------------------------------------------
class Numbers(Spout):
    def __init__(self, n: int, batch: int) -> None:
        self.n, self.batch = n, batch

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.i, self.acked = collector, 0, []
        self.targets = context.get_component_tasks("direct")

    def next_tuple(self) -> None:
        if self.i >= self.n:
            return
        j = min(self.n, self.i + self.batch)
        ids = list(range(self.i, j))
        cols = [np.arange(self.i, j, dtype=np.int64), [f"k{x % 5}" for x in ids]]
        if self.batch == 1:
            self.collector.emit([ids[0], cols[1][0]], msg_id=ids[0])
            self.collector.emit_direct(
                self.targets[ids[0] % len(self.targets)], [ids[0], cols[1][0]], "d"
            )
        else:
            self.collector.emit_batch(cols, msg_ids=ids)
            self.collector.emit_batch(
                cols, stream="d", tasks=[self.targets[x % len(self.targets)] for x in ids]
            )
        self.i = j

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def is_exhausted(self) -> bool:
        return len(self.acked) == self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n", "key"])
        declarer.declare_stream("d", ["n", "key"], direct=True)


class Record(BasicBatchBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.get_this_task_id()
        self.rows: list[tuple[int, str]] = []

    def execute_batch(self, batch: TupleBatch, collector: Any) -> None:
        self.rows.extend(zip((int(x) for x in batch.column("n")), batch.column("key"), strict=True))


class Odd(CustomStreamGrouping):
    def prepare(self, context: Any, stream: Any, target_tasks: list[int]) -> None:
        self.tasks = target_tasks

    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        return [self.tasks[int(values[0]) % 2 % len(self.tasks)]]


GROUPINGS = [
    "shuffle",
    "local_or_shuffle",
    "none",
    "fields",
    "all",
    "global",
    "partial_key",
    "custom",
    "direct",
]


@pytest.mark.parametrize("batch", [1, 7])
def test_every_grouping_on_batches(batch: int) -> None:
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(60, batch))
    for g in GROUPINGS:
        d = b.set_bolt(g, Record(), 3)
        if g == "fields":
            d.fields_grouping("numbers", Fields("key"))
        elif g == "partial_key":
            d.partial_key_grouping("numbers", Fields("key"))
        elif g == "custom":
            d.custom_grouping("numbers", Odd())
        elif g == "direct":
            d.direct_grouping("numbers", "d")
        else:
            getattr(d, f"{g}_grouping")("numbers")
    topo = b.create_topology()

    async def scenario() -> Any:
        async with run_topology(topo, {"topology.seed": 9}) as running:
            await running.wait_until_complete(timeout=60)
            return {g: running.task_objects(g) for g in GROUPINGS}

    got = simulate(scenario())
    everything = sorted((i, f"k{i % 5}") for i in range(60))
    for g in GROUPINGS:
        rows = sorted(r for bolt in got[g].values() for r in bolt.rows)
        if g == "all":
            assert rows == sorted(everything * 3), g
        else:
            assert rows == everything, g
    tasks = sorted(got["global"])
    assert [len(got["global"][t].rows) for t in tasks] == [60, 0, 0]
    owners = collections.defaultdict(set)
    for t, bolt in got["fields"].items():
        for _, k in bolt.rows:
            owners[k].add(t)
    assert all(len(v) == 1 for v in owners.values())
    custom_tasks = sorted(got["custom"])
    for t, bolt in got["custom"].items():
        assert all(custom_tasks[n % 2] == t for n, _ in bolt.rows)
    direct_tasks = sorted(got["direct"])
    for t, bolt in got["direct"].items():
        assert all(direct_tasks[n % 3] == t for n, _ in bolt.rows)
    if batch > 1:
        loads = [len(bolt.rows) for bolt in got["shuffle"].values()]
        assert max(loads) - min(loads) <= 1


class Bad(Spout):
    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.errors: list[str] = []

    def next_tuple(self) -> None:
        if getattr(self, "done", False):
            return
        for call in (
            lambda: self.collector.emit_batch([[1, 2], [3]]),
            lambda: self.collector.emit_batch([[1], [2]], msg_ids=[1, 2]),
            lambda: self.collector.emit_batch([[1], [2]], stream="nope"),
            lambda: self.collector.emit_batch([[1], [2], [3]]),
        ):
            try:
                call()
            except Exception as exc:
                self.errors.append(str(exc))
        self.done = True

    def is_exhausted(self) -> bool:
        return getattr(self, "done", False)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["a", "b"])


def test_emit_batch_errors_name_the_component() -> None:
    b = TopologyBuilder()
    b.set_spout("bad", Bad())

    async def scenario() -> Any:
        async with run_topology(b.create_topology(), {}) as running:
            await running.wait_until_complete(timeout=10)
            return next(iter(running.task_objects("bad").values())).errors

    errors = simulate(scenario())
    assert errors == [
        "component 'bad' emit_batch on stream 'default': column 'b' has 1 rows, column 'a' "
        "has 2; every column needs the same length",
        "component 'bad': emit_batch got 2 message ids for 1 rows; pass one message id per "
        "row (or msg_ids=None)",
        "component 'bad' emitted on undeclared stream 'nope'; declared streams: ['default']",
        "component 'bad' emit_batch on stream 'default': 3 columns for 2 declared fields "
        "['a', 'b']; pass one column per field (or a mapping field -> column)",
    ]


class FlatWrongArity(BasicBatchBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.errors: list[str] = []

    def execute_batch(self, batch: TupleBatch, collector: Any) -> None:
        words = batch.column("sentence")
        for per_row in (
            [[(w, 1, 2)] for w in words],  # every row one value too many
            [[(w, 1)] if i else [(w,)] for i, w in enumerate(words)],  # the first too few
        ):
            try:
                collector.emit_flat(per_row)
            except Exception as exc:
                self.errors.append(str(exc))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "n"])


class RowSink(BasicBatchBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.rows: list[list[Any]] = []

    def execute_batch(self, batch: TupleBatch, collector: Any) -> None:
        self.rows.extend(batch.rows())


def test_emit_flat_refuses_rows_that_do_not_fit_the_stream() -> None:
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(["a"], 5))
    b.set_bolt("flat", FlatWrongArity()).shuffle_grouping("sentences")
    b.set_bolt("sink", RowSink()).shuffle_grouping("flat")

    async def scenario() -> Any:
        async with run_topology(b.create_topology(), {}) as running:
            await running.wait_until_complete(timeout=10)
            (flat,) = running.task_objects("flat").values()
            (sink,) = running.task_objects("sink").values()
            return flat.errors, sink.rows

    errors, rows = simulate(scenario())
    assert errors == [
        "component 'flat': emit_flat emitted ['a', 1, 2] on stream 'default', which declares "
        "2 fields ['word', 'n']; give each output row one value per field",
        "component 'flat': emit_flat emitted ['a'] on stream 'default', which declares 2 "
        "fields ['word', 'n']; give each output row one value per field",
    ]
    assert rows == []  # nothing left the bolt


# --- a batch topology and its per-tuple twin ------------------------------------------------
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sentences=st.lists(st.text(alphabet="abc ", min_size=1, max_size=12), min_size=1, max_size=40),
    seed=st.integers(0, 2**32),
    crash_at=st.one_of(st.none(), st.floats(0.001, 0.05)),
    p=st.sampled_from([1, 3]),
)
def test_batch_topology_matches_its_per_tuple_twin(
    sentences: list[str], seed: int, crash_at: float | None, p: int
) -> None:
    def run(batch: bool) -> Any:
        topo = _wordcount(
            SentenceSpout(sentences, 4 if batch else 0),
            BatchSplit() if batch else TupleSplit(),
            BatchCount() if batch else TupleCount(),
            p,
        )
        faults = [] if crash_at is None else [CrashTask(component="split", at=crash_at)]
        counts, _, acked, _, _ = simulate(
            _run(topo, {"topology.seed": seed, "topology.message.timeout.secs": 1}, faults)
        )
        return counts, acked

    batch_counts, batch_acked = run(True)
    tuple_counts, tuple_acked = run(False)
    truth = collections.Counter(w for s in sentences for w in s.split())
    assert batch_acked == tuple_acked == list(range(len(sentences)))
    if crash_at is None:
        assert batch_counts == tuple_counts == truth
    else:  # at least once: a crash may replay words already counted
        assert all(batch_counts[w] >= c and tuple_counts[w] >= c for w, c in truth.items())


# --- latency: batching never holds a lone tuple back ----------------------------------------
class OneAtATime(Spout):
    """Emits one row every second (virtual time), by batch or per tuple, and records when."""

    def __init__(self, batch: bool) -> None:
        self.batch = batch

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.clock, self.i, self.sent = collector, context.clock, 0, {}
        self.next_at = 0

    def next_tuple(self) -> None:
        now = self.clock.now_ns()
        if self.i >= 5 or now < self.next_at:
            return
        self.next_at = now + 10**9
        self.sent[self.i] = now
        if self.batch:
            self.collector.emit_batch([[self.i]], msg_ids=[self.i])
        else:
            self.collector.emit([self.i], msg_id=self.i)
        self.i += 1

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Arrivals(BasicBatchBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.clock, self.seen = context.clock, {}

    def execute_batch(self, batch: TupleBatch, collector: Any) -> None:
        for n in batch.column("n"):
            self.seen[n] = self.clock.now_ns()


@pytest.mark.parametrize("batch", [True, False], ids=["emit_batch", "emit"])
def test_a_lone_row_is_not_held_back_by_batching(batch: bool) -> None:
    b = TopologyBuilder()
    b.set_spout("one", OneAtATime(batch))
    b.set_bolt("arrivals", Arrivals()).shuffle_grouping("one")

    async def scenario() -> Any:
        async with run_topology(b.create_topology(), {"topology.seed": 2}) as running:
            await advance_time(6)
            (spout,) = running.task_objects("one").values()
            (bolt,) = running.task_objects("arrivals").values()
            return spout.sent, bolt.seen

    sent, seen = simulate(scenario())
    assert sorted(seen) == [0, 1, 2, 3, 4]
    # The spout's wait strategy wakes it within a few ms of the due time; the row then
    # reaches the bolt in the same instant: no flush timer holds it.
    assert all(seen[i] - sent[i] == 0 for i in seen), {i: seen[i] - sent[i] for i in seen}
