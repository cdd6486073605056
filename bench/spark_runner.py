"""The word count on the Spark runner, against Spark's own DataFrame word count and against the
local engine: same run, same input, same cores.

    python bench/spark_runner.py [--sentences 400000] [--batch-rows 100000] [--repeat 2]

- spark runner: ``SparkOffsetSpout`` over a parquet file (2 tasks) → a columnar split
  (``BasicBatchBolt`` on Arrow: ``split_pattern`` + ``list_flatten``) → a columnar count
  per micro-batch (Arrow ``group_by``), fields-grouped on the word → ``SparkSinkBolt``
  (parquet), as one Structured Streaming query (``availableNow``, ``--batch-rows``
  sentences per spout task per micro-batch). Timed from ``run`` to the query's end, so it
  includes starting the query; ``steady`` leaves out the first micro-batch (Python workers
  starting) using Spark's own progress reports.
- spark runner, combiner: the split bolt also counts its batch (Arrow ``group_by``), as
  Spark's partial aggregation does before its shuffle, and the count bolt sums: the same
  runner, a topology that shuffles one row per word and batch instead of every word.
- spark dataframe: ``explode(split(sentence, ' '))``, ``groupBy("word").count()``, written
  to parquet, on the same session.
- local engine: the same topology on ``run_topology`` in this process.

Each figure is the best of ``--repeat`` runs; every result is checked against Spark's
count. The machine is printed first; the last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# This file's folder holds spark_io.py (a bench): keep it off sys.path so ``import spark_io``
# imports the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import uvloop  # noqa: E402

from engine import BasicBatchBolt, Fields, TopologyBuilder, run_topology  # noqa: E402
from spark_io import (  # noqa: E402
    RUNNER_SPARK_CONF,
    SessionConfig,
    SinkTarget,
    SparkOffsetSpout,
    SparkRunner,
    SparkSinkBolt,
    SparkSource,
    spark_session,
)

WORDS = [
    "storm",
    "spark",
    "tuple",
    "bolt",
    "spout",
    "acker",
    "stream",
    "batch",
    "arrow",
    "task",
    "topology",
    "grouping",
    "anchor",
    "ack",
    "fail",
    "timeout",
    "replay",
    "executor",
    "worker",
    "nimbus",
    "supervisor",
    "zookeeper",
    "kafka",
    "offset",
]
SCHEMAS = {"split": "word STRING", "count": "word STRING, count BIGINT"}
COMBINE_SCHEMAS = {"split": "word STRING, count BIGINT", "count": "word STRING, count BIGINT"}


def _arrow(col: Any, kind: Any) -> Any:
    return col if isinstance(col, (pa.Array, pa.ChunkedArray)) else pa.array(col, kind)


class ArrowSplit(BasicBatchBolt):
    """Sentences to words on Arrow: each word anchored to its sentence's row."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        lists = pc.split_pattern(_arrow(batch.column("sentence"), pa.string()), " ")
        words = pc.list_flatten(lists)
        parents = np.asarray(pc.list_parent_indices(lists), np.int64)
        collector.emit_batch([words], anchors=parents)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class ArrowCount(BasicBatchBolt):
    """The words of each batch counted with Arrow's group_by: (word, count) per word."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        words = _arrow(batch.column("word"), pa.string())
        table = pa.table({"word": words, "i": np.arange(len(words))})
        counts = table.group_by("word").aggregate([("i", "count"), ("i", "min")])
        collector.emit_batch(
            {"word": counts["word"], "count": counts["i_count"]},
            anchors=np.asarray(counts["i_min"], np.int64),
        )

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])


class ArrowSplitCount(BasicBatchBolt):
    """Split and count in one bolt (a combiner, as Spark's partial aggregation): (word,
    count) per word of the batch, anchored to a sentence holding it."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        lists = pc.split_pattern(_arrow(batch.column("sentence"), pa.string()), " ")
        table = pa.table({"word": pc.list_flatten(lists), "row": pc.list_parent_indices(lists)})
        counts = table.group_by("word").aggregate([("row", "count"), ("row", "min")])
        collector.emit_batch(
            {"word": counts["word"], "count": counts["row_count"]},
            anchors=np.asarray(counts["row_min"], np.int64),
        )

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])


class ArrowSum(BasicBatchBolt):
    """Partial counts summed per word."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        table = pa.table(
            {
                "word": _arrow(batch.column("word"), pa.string()),
                "count": _arrow(batch.column("count"), pa.int64()),
                "row": np.arange(len(batch)),
            }
        )
        sums = table.group_by("word").aggregate([("count", "sum"), ("row", "min")])
        collector.emit_batch(
            {"word": sums["word"], "count": sums["count_sum"]},
            anchors=np.asarray(sums["row_min"], np.int64),
        )

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])


def make_input(path: Path, sentences: int) -> int:
    """``sentences`` rows (id, sentence) of 1-12 words; returns the word count."""
    rng = random.Random(12)
    text = [" ".join(rng.choices(WORDS, k=rng.randint(1, 12))) for _ in range(sentences)]
    pq.write_table(
        pa.table({"id": np.arange(sentences, dtype=np.int64), "sentence": text}),
        path,
        row_group_size=50_000,
    )
    return sum(s.count(" ") + 1 for s in text)


def topology(data: Path, out: Path, work: Path, chunk_rows: int, combine: bool = False) -> Any:
    builder = TopologyBuilder()
    builder.set_spout(
        "sentences",
        SparkOffsetSpout(
            SparkSource.files(data, "parquet"),
            "id",
            ["sentence"],
            checkpoint_dir=work / "offsets",
            chunk_rows=chunk_rows,
        ),
        2,
    )
    if combine:
        builder.set_bolt("split", ArrowSplitCount(), 2).local_or_shuffle_grouping("sentences")
        builder.set_bolt("count", ArrowSum(), 2).fields_grouping("split", Fields("word"))
    else:
        builder.set_bolt("split", ArrowSplit(), 2).shuffle_grouping("sentences")
        builder.set_bolt("count", ArrowCount(), 2).fields_grouping("split", Fields("word"))
    builder.set_bolt(
        "sink",
        SparkSinkBolt(SinkTarget.files(out, "parquet"), ["word", "count"], batch_rows=50_000),
    ).shuffle_grouping("count")
    return builder.create_topology()


def totals(spark: Any, out: Path) -> dict[str, int]:
    rows = spark.read.parquet(str(out)).groupBy("word").sum("count").collect()
    return {r[0]: int(r[1]) for r in rows}


def best(repeat: int, once: Callable[[int], tuple[float, Any]]) -> tuple[float, Any]:
    results = [once(i) for i in range(repeat)]
    return min(results, key=lambda r: r[0])


def machine(spark: Any) -> str:
    load = os.getloadavg()[0]
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{load:.1f}; Python {platform.python_version()}, Spark {spark.version}, "
        f"master {spark.sparkContext.master}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=400_000)
    parser.add_argument("--batch-rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--skip-local", action="store_true", help="leave the local engine out")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="squall-bench-runner-"))
    try:
        spark = spark_session(SessionConfig(master="local[2]", conf=RUNNER_SPARK_CONF))
        print(machine(spark), flush=True)
        data = work / "sentences.parquet"
        words = make_input(data, args.sentences)
        print(f"input: {args.sentences:,} sentences, {words:,} words", flush=True)

        def dataframe(i: int) -> tuple[float, Any]:
            out = work / f"df{i}"
            start = time.perf_counter()
            (
                spark.read.parquet(str(data))
                .selectExpr("explode(split(sentence, ' ')) AS word")
                .groupBy("word")
                .count()
                .write.parquet(str(out))
            )
            return time.perf_counter() - start, totals(spark, out)

        df_secs, expected = best(args.repeat, dataframe)

        def runner(i: int, combine: bool = False) -> tuple[float, Any]:
            out = work / f"runner{i}{combine}"
            start = time.perf_counter()
            run = SparkRunner(spark).run(
                topology(data, out, work / f"r{i}{combine}", args.batch_rows, combine),
                {},
                checkpoint_location=work / f"ck{i}{combine}",
                schemas=COMBINE_SCHEMAS if combine else SCHEMAS,
                batch_rows={"sentences": args.batch_rows},
            )
            run.await_termination()
            secs = time.perf_counter() - start
            progress = run.query.recentProgress
            steady_ms = sum(p["durationMs"]["triggerExecution"] for p in progress[1:])
            steady_rows = sum(p["numInputRows"] for p in progress[1:])
            steady = steady_rows / (steady_ms / 1000) if steady_ms else float("nan")
            return secs, (totals(spark, out), steady, len(progress))

        runner_secs, (runner_counts, steady, batches) = best(args.repeat, runner)
        assert runner_counts == expected, "the Spark runner's counts differ from Spark's"
        combine_secs, (combine_counts, combine_steady, _) = best(
            args.repeat, lambda i: runner(i, combine=True)
        )
        assert combine_counts == expected, "the combiner topology's counts differ from Spark's"

        local_secs = float("nan")
        if not args.skip_local:

            def local(i: int) -> tuple[float, Any]:
                out = work / f"local{i}"
                topo = topology(data, out, work / f"l{i}", 50_000)

                async def go() -> None:
                    async with run_topology(
                        topo, {"topology.max.spout.pending": 200_000}
                    ) as running:
                        await running.wait_until_complete(3600)

                start = time.perf_counter()
                uvloop.run(go())
                return time.perf_counter() - start, totals(spark, out)

            local_secs, local_counts = best(1, local)
            assert local_counts == expected, "the local engine's counts differ from Spark's"

        n = args.sentences
        rates = {
            "spark_dataframe": n / df_secs,
            "spark_runner": n / runner_secs,
            "spark_runner_steady": steady,
            "spark_runner_combiner": n / combine_secs,
            "spark_runner_combiner_steady": combine_steady,
            "local_engine": n / local_secs,
        }
        for name, rate in rates.items():
            print(f"{name:>20}: {rate:>12,.0f} sentences/s", flush=True)
        ratio = rates["spark_runner"] / rates["spark_dataframe"]
        steady_ratio = steady / rates["spark_dataframe"]
        combine_ratio = rates["spark_runner_combiner"] / rates["spark_dataframe"]
        print(
            f"spark runner / Spark's own count: {ratio:.2f}x end to end, {steady_ratio:.2f}x "
            f"steady ({batches} micro-batches; target 0.8x); with a combiner bolt "
            f"{combine_ratio:.2f}x end to end",
            flush=True,
        )
        print(
            json.dumps(
                {
                    "bench": "spark_runner",
                    "sentences": n,
                    "words": words,
                    "batch_rows_per_task": args.batch_rows,
                    "micro_batches": batches,
                    "sentences_per_sec": {
                        k: None if v != v else round(v, 1) for k, v in rates.items()
                    },
                    "runner_vs_dataframe": round(ratio, 3),
                    "runner_steady_vs_dataframe": round(steady_ratio, 3),
                    "runner_combiner_vs_dataframe": round(combine_ratio, 3),
                    "machine": machine(spark),
                }
            )
        )
        spark.stop()
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
