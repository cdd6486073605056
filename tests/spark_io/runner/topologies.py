"""Topologies the Spark runner tests run on the local engine and on Spark alike."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from engine import (
    BasicBatchBolt,
    BasicBolt,
    Bolt,
    CombinerBolt,
    CountCombiner,
    Fields,
    StormTopology,
    TopologyBuilder,
    is_tick_tuple,
)
from engine.state import BasicStatefulBolt
from spark_io import ReplayableSpout, SinkTarget, SparkSinkBolt

WORDS = ["storm", "spark", "tuple", "bolt", "spout", "acker", "stream", "batch", "arrow", "task"]


def sentences(count: int, seed: int = 7) -> list[str]:
    """``count`` sentences of 1-8 words, the same for a seed in every process."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))) for _ in range(count)]


def expected_counts(count: int, seed: int = 7) -> dict[str, int]:
    return dict(Counter(w for s in sentences(count, seed) for w in s.split()))


class Sentences(ReplayableSpout):
    """Sentence ``sid`` belongs to task ``sid % num_tasks`` at position ``sid // num_tasks``."""

    def __init__(self, count: int, seed: int = 7, batch_rows: int = 1000) -> None:
        self.count = count
        self.seed = seed
        self.batch_rows = batch_rows

    def _all(self) -> list[str]:
        cached = getattr(self, "_cache", None)
        if cached is None:
            cached = self._cache = sentences(self.count, self.seed)
        return cached

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_cache"}

    def end_position(self, task_index: int, num_tasks: int) -> int:
        return len(range(task_index, self.count, num_tasks))

    def read(self, task_index: int, num_tasks: int, start: int, end: int) -> Any:
        sids = list(range(task_index + start * num_tasks, task_index + end * num_tasks, num_tasks))
        everything = self._all()
        return {"sid": sids, "sentence": [everything[s] for s in sids]}

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sid", "sentence"])


class SplitWords(BasicBatchBolt):
    """Columnar split: each word with a key unique over the whole input (sid, position)."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        words: list[str] = []
        keys: list[int] = []
        sids = batch.column("sid")
        sids = sids.to_pylist() if hasattr(sids, "to_pylist") else list(sids)
        texts = batch.column("sentence")
        texts = texts.to_pylist() if hasattr(texts, "to_pylist") else list(texts)
        anchors: list[int] = []
        for row, (sid, text) in enumerate(zip(sids, texts, strict=True)):
            for pos, word in enumerate(text.split()):
                words.append(word)
                keys.append(sid * 100 + pos)
                anchors.append(row)
        collector.emit_batch({"word": words, "key": keys}, anchors=anchors)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "key"])


class SplitWordsPerTuple(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        for pos, word in enumerate(tuple["sentence"].split()):
            collector.emit([word, tuple["sid"] * 100 + pos])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "key"])


class CountBatch(BasicBatchBolt):
    """Counts the words of each batch it gets: one (word, count, smallest key) per word."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        words = batch.column("word")
        words = words.to_pylist() if hasattr(words, "to_pylist") else list(words)
        keys = batch.column("key")
        keys = np.asarray(keys.to_pylist() if hasattr(keys, "to_pylist") else keys)
        first: dict[str, int] = {}
        counts: Counter[str] = Counter()
        least: dict[str, int] = {}
        for row, (word, key) in enumerate(zip(words, keys.tolist(), strict=True)):
            counts[word] += 1
            if word not in least or key < least[word]:
                least[word] = key
            first.setdefault(word, row)
        out = sorted(counts)
        collector.emit_batch(
            {"word": out, "count": [counts[w] for w in out], "key": [least[w] for w in out]},
            anchors=[first[w] for w in out],
        )

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count", "key"])


class CountOnTick(Bolt):
    """Storm's classic counter: holds words, emits and acks on each tick."""

    def component_configuration(self) -> dict[str, Any]:
        return {"topology.tick.tuple.freq.secs": 0.05}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: dict[str, list[Any]] = {}

    def execute(self, tuple: Any) -> None:
        if is_tick_tuple(tuple):
            for word, tuples in sorted(self.held.items()):
                key = min(t["key"] for t in tuples)
                self.collector.emit([word, len(tuples), key], anchors=tuples)
                for t in tuples:
                    self.collector.ack(t)
            self.held = {}
            return
        self.held.setdefault(tuple["word"], []).append(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count", "key"])


SCHEMAS = {
    "split": "word STRING, key BIGINT",
    "count": "word STRING, count BIGINT, key BIGINT",
}


def word_count(
    out: Path,
    count: int = 2000,
    *,
    columnar: bool = True,
    spout_tasks: int = 2,
    batch_rows: int = 500,
    transactional: bool = True,
    builder: TopologyBuilder | None = None,
) -> StormTopology:
    """Sentences → split → count → a sink writing to ``out`` (added to ``builder``, when
    given, beside what it holds)."""
    builder = builder or TopologyBuilder()
    builder.set_spout("sentences", Sentences(count, batch_rows=batch_rows), spout_tasks)
    if columnar:
        builder.set_bolt("split", SplitWords(), 2).shuffle_grouping("sentences")
        builder.set_bolt("count", CountBatch(), 3).fields_grouping("split", Fields("word"))
    else:
        builder.set_bolt("split", SplitWordsPerTuple(), 2).local_or_shuffle_grouping("sentences")
        builder.set_bolt("count", CountOnTick(), 3).fields_grouping("split", Fields("word"))
    builder.set_bolt(
        "sink",
        SparkSinkBolt(
            SinkTarget.files(out, "parquet"),
            ["word", "count", "key"],
            batch_rows=2000,
            batch_secs=0.1,
            transactional=transactional,
            key_field="key" if transactional else None,
        ),
    ).shuffle_grouping("count")
    return builder.create_topology()


def read_counts(spark: Any, out: Path) -> dict[str, int]:
    """Sum of the partial counts per word in the sink's output."""
    totals: Counter[str] = Counter()
    for row in spark.read.parquet(str(out)).select("word", "count").collect():
        totals[row["word"]] += row["count"]
    return dict(totals)


class SlowCount(CountBatch):
    """``CountBatch`` that takes ``delay`` seconds per batch (so a crash lands mid-batch)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def execute_batch(self, batch: Any, collector: Any) -> None:
        import time

        time.sleep(self.delay)
        super().execute_batch(batch, collector)


def slow_word_count(out: Path, count: int, delay: float = 0.5) -> StormTopology:
    """The word count with a slow count; its split runs inside the spout's read (local or
    shuffle on the spout's two tasks), so a driver crash test covers that read too."""
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences(count), 2)
    builder.set_bolt("split", SplitWords(), 2).local_or_shuffle_grouping("sentences")
    builder.set_bolt("count", SlowCount(delay), 2).fields_grouping("split", Fields("word"))
    builder.set_bolt(
        "sink",
        SparkSinkBolt(
            SinkTarget.files(out, "parquet"),
            ["word", "count", "key"],
            transactional=True,
            key_field="key",
        ),
    ).shuffle_grouping("count")
    return builder.create_topology()


#: ``squall submit --runner spark`` reads the bolts' Spark types here: those of the word
#: count and of ``submit_squares`` and ``submit_failing``, in one mapping.
SPARK_SCHEMAS = {**SCHEMAS, "square": "n BIGINT, square BIGINT", "boom": "n BIGINT"}
#: The sentences of the word count in ``windows.cluster_topology``.
CLUSTER_SENTENCES = 1000


class Numbers(ReplayableSpout):
    """0 .. count-1 on one field ``n`` (task ``i`` holds ``i, i + tasks, ...``)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.batch_rows = count

    def end_position(self, task_index: int, num_tasks: int) -> int:
        return len(range(task_index, self.count, num_tasks))

    def read(self, task_index: int, num_tasks: int, start: int, end: int) -> Any:
        return [
            list(range(task_index + start * num_tasks, task_index + end * num_tasks, num_tasks))
        ]

    def spark_schema(self) -> str:
        return "n BIGINT"

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Router(BasicBolt):
    """Even numbers on ``even``, odd ones on ``odd``, every one direct to a ``picked`` task."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.targets = context.get_component_tasks("picked")

    def execute(self, tuple: Any, collector: Any) -> None:
        n = tuple["n"]
        collector.emit([n], "even" if n % 2 == 0 else "odd")
        collector.emit_direct(self.targets[n % len(self.targets)], [n], "direct")

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream("even", ["n"])
        declarer.declare_stream("odd", ["n"])
        declarer.declare_stream("direct", ["n"], direct=True)


class WhoGotIt(BasicBolt):
    """(this task's id, n) for each input."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.get_this_task_id()

    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([self.task, tuple["n"]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["task", "n"])


class Merge(BasicBolt):
    """Three inputs into one stream: (which bolt, its task, n)."""

    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([tuple.source_component, tuple["task"], tuple["n"]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["src", "task", "n"])


GROUPINGS_SCHEMAS = {
    "everyone": "task INT, n BIGINT",
    "single": "task INT, n BIGINT",
    "picked": "task INT, n BIGINT",
    "merge": "src STRING, task INT, n BIGINT",
}


def groupings(out: Path, count: int = 40) -> StormTopology:
    """All, global and direct groupings, named and direct streams, one bolt with three
    inputs (the router's streams travel pickled: no schema given)."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers(count), 2)
    builder.set_bolt("router", Router(), 2).shuffle_grouping("numbers")
    builder.set_bolt("everyone", WhoGotIt(), 2).all_grouping("router", "even")
    builder.set_bolt("single", WhoGotIt(), 2).global_grouping("router", "odd")
    builder.set_bolt("picked", WhoGotIt(), 2).direct_grouping("router", "direct")
    merge = builder.set_bolt("merge", Merge())
    for cid in ("everyone", "single", "picked"):
        merge.shuffle_grouping(cid)
    builder.set_bolt(
        "sink", SparkSinkBolt(SinkTarget.files(out, "parquet"), batch_secs=0.1)
    ).shuffle_grouping("merge")
    return builder.create_topology()


def read_rows(spark: Any, out: Path) -> list[tuple[str, int, int]]:
    return sorted((r["src"], r["task"], r["n"]) for r in spark.read.parquet(str(out)).collect())


class StatefulWordCount(BasicStatefulBolt):
    """Counts in the task's ``KeyValueState``; on each tick, the running total of every word
    counted since the last tick (so the largest total per word is its count)."""

    def component_configuration(self) -> dict[str, Any]:
        return {"topology.tick.tuple.freq.secs": 0.05}

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tuple: Any, collector: Any) -> None:
        changed = self.__dict__.setdefault("changed", set())
        if is_tick_tuple(tuple):
            for word in sorted(changed):
                collector.emit([word, self.counts.get(word)])
            changed.clear()
            return
        word = tuple["word"]
        self.counts.put(word, self.counts.get(word, 0) + 1)
        changed.add(word)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])


STATEFUL_SCHEMAS = {"split": "word STRING, key BIGINT", "count": "word STRING, count BIGINT"}


def stateful_word_count(out: Path, count: int, batch_rows: int = 500) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences(count, batch_rows=batch_rows), 2)
    builder.set_bolt("split", SplitWordsPerTuple(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", StatefulWordCount(), 2).fields_grouping("split", Fields("word"))
    builder.set_bolt(
        "sink", SparkSinkBolt(SinkTarget.files(out, "parquet"), batch_secs=0.1)
    ).shuffle_grouping("count")
    return builder.create_topology()


def read_totals(spark: Any, out: Path) -> dict[str, int]:
    """The largest running total per word."""
    rows = spark.read.parquet(str(out)).groupBy("word").max("count").collect()
    return {r[0]: int(r[1]) for r in rows}


class Double(BasicBatchBolt):
    """(offset, payload * 2) on Arrow."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        payload = batch.column("payload")
        if not isinstance(payload, (pa.Array, pa.ChunkedArray)):
            payload = pa.array(payload, pa.int64())
        collector.emit_batch([batch.column("offset"), pc.multiply(payload, 2)])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["offset", "doubled"])


def offset_files(data: Path, out: Path, work: Path) -> StormTopology:
    from spark_io import SparkOffsetSpout, SparkSource

    builder = TopologyBuilder()
    builder.set_spout(
        "rows",
        SparkOffsetSpout(
            SparkSource.files(data, "parquet"),
            "offset",
            ["offset", "payload"],
            checkpoint_dir=work,
            chunk_rows=100,
        ),
        3,
    )
    builder.set_bolt("double", Double(), 2).local_or_shuffle_grouping("rows")
    builder.set_bolt(
        "sink",
        SparkSinkBolt(SinkTarget.files(out, "parquet"), transactional=True, key_field="offset"),
    ).shuffle_grouping("double")
    return builder.create_topology()


class CommitLog(Numbers):
    """``Numbers`` that appends each ``commit`` to a file as ``task end`` (any process)."""

    def __init__(self, count: int, batch_rows: int, log: Path) -> None:
        super().__init__(count)
        self.batch_rows = batch_rows
        self.log = str(log)

    def commit(self, task_index: int, num_tasks: int, end: int) -> None:
        with open(self.log, "a") as f:
            f.write(f"{task_index} {end}\n")


def read_commits(log: Path) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        task, end = map(int, line.split())
        out.setdefault(task, []).append(end)
    return out


class Below(BasicBolt):
    """The numbers below ``limit``, as (n, n): a filter that leaves micro-batches empty."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple["n"] < self.limit:
            collector.emit([tuple["n"]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Boom(BasicBolt):
    """Raises ``ValueError`` on the number ``at``."""

    def __init__(self, at: int) -> None:
        self.at = at

    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple["n"] == self.at:
            raise ValueError(f"cannot take {self.at}")
        collector.emit([tuple["n"]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


def committed_numbers(log: Path, out: Path, limit: int = 100) -> StormTopology:
    """100 numbers over 2 spout tasks, 10 per task per micro-batch, into a transactional
    sink through ``Below(limit)``."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", CommitLog(100, 10, log), 2)
    builder.set_bolt("below", Below(limit), 2).shuffle_grouping("numbers")
    builder.set_bolt(
        "sink",
        SparkSinkBolt(SinkTarget.files(out, "parquet"), transactional=True, key_field="n"),
    ).shuffle_grouping("below")
    return builder.create_topology()


#: Where the ``submit_*`` topologies write (set by the tests that submit them).
SUBMIT_OUT_ENV = "SQUALL_RUNNER_SUBMIT_OUT"


def _submit_out() -> Path:
    import os

    return Path(os.environ[SUBMIT_OUT_ENV])


def submit_failing() -> StormTopology:
    """``Boom(7)`` between 20 numbers and a sink: its query fails."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers(20), 2)
    builder.set_bolt("boom", Boom(7), 2).shuffle_grouping("numbers")
    builder.set_bolt(
        "sink", SparkSinkBolt(SinkTarget.files(_submit_out() / "out", "parquet"))
    ).shuffle_grouping("boom")
    return builder.create_topology()


def submit_squares() -> StormTopology:
    """One of two topologies typed by the module's one ``SPARK_SCHEMAS``."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers(20), 2)
    builder.set_bolt("square", Square(), 2).shuffle_grouping("numbers")
    builder.set_bolt(
        "sink", SparkSinkBolt(SinkTarget.files(_submit_out() / "out", "parquet"))
    ).shuffle_grouping("square")
    return builder.create_topology()


class Square(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([tuple["n"], tuple["n"] ** 2])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n", "square"])


class UserWordCount(CombinerBolt):
    """A combiner as a user writes it: Python's value and ``+`` (no Arrow shortcut)."""

    def zero(self) -> int:
        return 0

    def value(self, tuple: Any) -> int:
        return 1

    def combine(self, a: int, b: int) -> int:
        return a + b

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])


COMBINER_SCHEMAS = {"split": "word STRING, key BIGINT", "count": "word STRING, count BIGINT"}


def combined_word_count(out: Path, count: int, user: bool = False) -> StormTopology:
    """The word count with a combiner bolt (``CountCombiner``, or ``UserWordCount``)."""
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences(count, batch_rows=500), 2)
    builder.set_bolt("split", SplitWords(), 2).shuffle_grouping("sentences")
    counter = UserWordCount() if user else CountCombiner(["word", "count"])
    builder.set_bolt("count", counter, 3).fields_grouping("split", Fields("word"))
    builder.set_bolt(
        "sink", SparkSinkBolt(SinkTarget.files(out, "parquet"), batch_secs=0.1)
    ).shuffle_grouping("count")
    return builder.create_topology()
