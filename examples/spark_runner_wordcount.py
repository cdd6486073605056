"""One word count topology, run on the local engine and then on Spark, with the same result.

    python examples/spark_runner_wordcount.py [--sentences 20000] [--master local[2]]

The spout is a ``ReplayableSpout`` (its rows can be read again by position, which Spark
needs to run a micro-batch again); the bolts are columnar (``BasicBatchBolt`` on Arrow);
the sink writes exactly once per micro-batch (Spark) or per key (local engine). Both
outputs hold partial counts, summed when read back; the script checks both sums against
a count in plain Python and exits 1 if anything differs.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import BasicBatchBolt, Fields, TopologyBuilder, run_topology
from spark_io import (
    RUNNER_SPARK_CONF,
    ReplayableSpout,
    SessionConfig,
    SinkTarget,
    SparkRunner,
    SparkSinkBolt,
    spark_session,
)

WORDS = ["storm", "spark", "tuple", "bolt", "spout", "acker", "stream", "batch", "arrow"]


class Sentences(ReplayableSpout):
    """``count`` sentences; sentence ``sid`` is row ``sid // num_tasks`` of task
    ``sid % num_tasks``. Deterministic, so any range reads the same rows again."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.batch_rows = 2_500

    def text(self, sid: int) -> str:
        rng = random.Random(sid)
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))

    def end_position(self, task_index: int, num_tasks: int) -> int:
        return len(range(task_index, self.count, num_tasks))

    def read(self, task_index: int, num_tasks: int, start: int, end: int) -> Any:
        sids = range(task_index + start * num_tasks, task_index + end * num_tasks, num_tasks)
        return {"sid": list(sids), "sentence": [self.text(s) for s in sids]}

    def spark_schema(self) -> str:
        return "sid BIGINT, sentence STRING"

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sid", "sentence"])


def arrow(col: Any, kind: Any) -> Any:
    return col if isinstance(col, (pa.Array, pa.ChunkedArray)) else pa.array(col, kind)


class Split(BasicBatchBolt):
    """Each word, keyed by (sentence, position): a key unique over the whole input."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        lists = pc.split_pattern(arrow(batch.column("sentence"), pa.string()), " ")
        parents = np.asarray(pc.list_parent_indices(lists), np.int64)
        sids = np.asarray(arrow(batch.column("sid"), pa.int64()))[parents]
        offsets = np.asarray(
            lists.offsets if isinstance(lists, pa.Array) else lists.combine_chunks().offsets
        )
        position = np.arange(len(parents)) - offsets[parents]
        collector.emit_batch([pc.list_flatten(lists), sids * 100 + position], anchors=parents)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "key"])


class Count(BasicBatchBolt):
    """The words of each batch counted: (word, count, smallest key) per word."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        table = pa.table(
            {
                "word": arrow(batch.column("word"), pa.string()),
                "key": arrow(batch.column("key"), pa.int64()),
                "row": np.arange(len(batch)),
            }
        )
        counts = table.group_by("word").aggregate(
            [("key", "count"), ("key", "min"), ("row", "min")]
        )
        collector.emit_batch(
            {"word": counts["word"], "count": counts["key_count"], "key": counts["key_min"]},
            anchors=np.asarray(counts["row_min"], np.int64),
        )

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count", "key"])


#: The Spark types of the bolts' streams (a spout's come from the spout).
SCHEMAS = {"split": "word STRING, key BIGINT", "count": "word STRING, count BIGINT, key BIGINT"}


def build(out: Path, sentences: int) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences(sentences), 2)
    # local or shuffle, on as many tasks as the spout: on Spark the split then runs inside
    # the spout's read (the plan says "read of sentences"), and no sentence enters the JVM
    builder.set_bolt("split", Split(), 2).local_or_shuffle_grouping("sentences")
    builder.set_bolt("count", Count(), 2).fields_grouping("split", Fields("word"))
    builder.set_bolt(
        "sink",
        SparkSinkBolt(
            SinkTarget.files(out, "parquet"),
            ["word", "count", "key"],
            batch_rows=5_000,
            batch_secs=0.2,
            transactional=True,
            key_field="key",
        ),
    ).shuffle_grouping("count")
    return builder.create_topology()


def totals(spark: Any, out: Path) -> dict[str, int]:
    rows = spark.read.parquet(str(out)).groupBy("word").sum("count").collect()
    return {r[0]: int(r[1]) for r in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    spark = spark_session(SessionConfig(master=args.master, conf=RUNNER_SPARK_CONF))
    work = Path(tempfile.mkdtemp(prefix="squall-spark-runner-"))

    async def local() -> None:
        topology = build(work / "local", args.sentences)
        async with run_topology(topology, {"topology.max.spout.pending": 20_000}) as running:
            await running.wait_until_complete(600)

    asyncio.run(local())
    on_engine = totals(spark, work / "local")

    run = SparkRunner(spark).run(
        build(work / "spark", args.sentences), {}, checkpoint_location=work / "ck", schemas=SCHEMAS
    )
    run.await_termination()
    on_spark = totals(spark, work / "spark")

    spout = Sentences(args.sentences)
    expected = dict(Counter(w for s in range(args.sentences) for w in spout.text(s).split()))
    print(f"output under {work}")
    print(f"{'word':>8} {'engine':>8} {'spark':>8}")
    for word in sorted(expected):
        print(f"{word:>8} {on_engine.get(word, 0):>8} {on_spark.get(word, 0):>8}")
    if on_engine == on_spark == expected:
        print("the same counts on the local engine and on Spark")
        return 0
    print("counts differ", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
