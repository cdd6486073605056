"""The main job: a reliable word count that reads and writes through Spark.

    sentences  SparkOffsetSpout, 2 tasks: examples/data/sentences.parquet in chunks,
               emitted as Arrow batches, each sentence its own tree with its id as
               message id, commits to a checkpoint
      -> split  BasicBatchBolt: a batch of sentences per call, one word row per word,
                anchored to its sentence's row
      -> count  Bolt, fields grouping on "word": adds up words and, every quarter second,
                emits one (word, count) per word it saw, anchored to those words' tuples
                (and sooner once it holds 50,000 words)
      -> sink   SparkSinkBolt: writes the counts to parquet through Spark, acks after
                the write returns

A sentence is acked only once the counts of its words are on disk, so the checkpoint
never runs ahead of the output. The parquet holds partial counts (one row per word per
flush): a word's total is the sum of its rows. The job reads them back through Spark,
checks them against Spark's own word count of the same file, prints a summary and exits.

Run it: ``bash scripts/run.sh`` (or ``python examples/spark_wordcount.py --out DIR``).
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import uvloop

from engine import (
    BasicBatchBolt,
    Bolt,
    Config,
    Fields,
    TopologyBuilder,
    format_stats,
    is_tick_tuple,
    run_with_progress,
)
from spark_io import (
    SessionConfig,
    SinkTarget,
    SparkOffsetSpout,
    SparkSinkBolt,
    SparkSource,
    spark_session,
)

DATA = Path(__file__).resolve().parent / "data" / "sentences.parquet"
_WORD = re.compile(r"[a-z']+")


class SplitSentence(BasicBatchBolt):
    """A batch of sentences at a time (Arrow columns from the spout, lists for retried
    rows); each word is anchored to its sentence's row, every row acked on return."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        sentences = batch.column("sentence")
        if hasattr(sentences, "to_pylist"):
            sentences = sentences.to_pylist()
        collector.emit_flat([_WORD.findall(s.lower()) for s in sentences])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class CountWords(Bolt):
    """Counts words; on each tick (or once ``flush_words`` are held) emits the counts since
    the last flush, anchored to the word tuples they count, then acks those tuples (their
    trees finish when the sink acks the counts)."""

    def __init__(self, flush_secs: float = 0.25, flush_words: int = 50_000) -> None:
        self.flush_secs = flush_secs
        self.flush_words = flush_words

    def component_configuration(self) -> dict[str, Any]:
        return {"topology.tick.tuple.freq.secs": self.flush_secs}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: dict[str, list[Any]] = collections.defaultdict(list)
        self.n_held = 0

    def execute(self, tuple: Any) -> None:
        if is_tick_tuple(tuple):
            self.flush()
            return
        self.held[tuple[0]].append(tuple)
        self.n_held += 1
        if self.n_held >= self.flush_words:
            self.flush()

    def flush(self) -> None:
        held, self.held, self.n_held = self.held, collections.defaultdict(list), 0
        for word, tuples in held.items():
            self.collector.emit([word, len(tuples)], anchors=tuples)
            for t in tuples:
                self.collector.ack(t)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])


def build(out: Path, session: SessionConfig) -> tuple[Any, Config]:
    builder = TopologyBuilder()
    spout = SparkOffsetSpout(
        SparkSource.files(DATA),
        "id",
        ["id", "sentence"],
        checkpoint_dir=out / "checkpoint",
        chunk_rows=20_000,
        session=session,
    )
    builder.set_spout("sentences", spout, 2)
    builder.set_bolt("split", SplitSentence()).shuffle_grouping("sentences")
    builder.set_bolt("count", CountWords(), 2).fields_grouping("split", Fields("word"))
    sink = SparkSinkBolt(
        SinkTarget.files(out / "counts", "parquet"),
        ["word", "count"],
        schema="word STRING, count BIGINT",
        batch_rows=200,  # about one flush of the counters: write it at once
        batch_secs=0.25,
        session=session,
    )
    builder.set_bolt("sink", sink).shuffle_grouping("count")
    conf = Config()
    conf.set_max_spout_pending(50_000)
    conf.set_message_timeout_secs(60)
    return builder.create_topology(), conf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Word count from parquet to parquet through Spark."
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("out/spark_wordcount"),
        help="output directory (replaced on each run)",
    )
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    session = SessionConfig(app_name="squall-spark-wordcount", warehouse_dir=str(out / "warehouse"))

    start = time.perf_counter()
    print("starting Spark ...", file=sys.stderr, flush=True)
    spark = spark_session(session)
    print(f"Spark {spark.version} ready in {time.perf_counter() - start:.1f} s", file=sys.stderr)

    topology, conf = build(out, session)
    started = time.perf_counter()
    info = uvloop.run(run_with_progress(topology, conf, name="spark-wordcount", timeout=300))
    elapsed = time.perf_counter() - started

    # Read the output back through Spark, and count the words of the input with Spark alone.
    counts = spark.read.parquet(str(out / "counts")).groupBy("word").sum("count")
    totals = {word: total for word, total in counts.collect()}
    words = spark.read.parquet(str(DATA)).selectExpr(
        "explode(split(lower(sentence), '[^a-z'']+')) AS word"
    )
    expected = {word: n for word, n in words.where("word != ''").groupBy("word").count().collect()}
    sentences = info.components["sentences"].acked
    n_words = sum(totals.values())

    print()
    print(
        f"output:     {out / 'counts'}  (parquet: word, count; a word's total is the sum of its rows)"
    )
    print(f"checkpoint: {out / 'checkpoint' / 'offsets.json'}")
    print(
        f"counted {n_words:,} words in {sentences:,} sentences in {elapsed:.1f} s "
        f"({sentences / elapsed:,.0f} sentences/s, every sentence acked after its counts were written)"
    )
    print(f"matches Spark's own word count of the input: {'yes' if totals == expected else 'NO'}")
    print(f"top {args.top} words:")
    for word, n in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[: args.top]:
        print(f"  {word:<12}{n:>10,}")
    print()
    print(format_stats(info))
    spark.stop()
    ok = totals == expected and not info.errors
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
