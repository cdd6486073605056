"""The Spark runner in local[2] (the test process's one session): the same topology gives
the same result on the local engine and on Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_io import SparkRunner

from ..conftest import run
from .topologies import SCHEMAS, expected_counts, read_counts, word_count

pytestmark = pytest.mark.spark

SENTENCES = 3000


def test_columnar_word_count_is_the_same_on_the_engine_and_on_spark(
    spark: Any, tmp_path: Path
) -> None:
    expected = expected_counts(SENTENCES)
    info = run(
        word_count(tmp_path / "local", SENTENCES), {"topology.max.spout.pending": 5000}, timeout=90
    )
    assert list(info.errors) == []
    assert read_counts(spark, tmp_path / "local") == expected

    running = SparkRunner(spark).run(
        word_count(tmp_path / "spark", SENTENCES),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas=SCHEMAS,
        batch_rows={"sentences": 500},
    )
    assert running.await_termination(120)
    assert read_counts(spark, tmp_path / "spark") == expected
    # One transaction per micro-batch: 3000 sentences, 2 spout tasks, 500 per task per batch.
    published = sorted(p.name for p in (tmp_path / "spark").glob("squall_txid=*"))
    assert [name.rsplit("-", 1)[1] for name in published] == [f"{b:010d}" for b in range(3)]
    assert all(name.startswith(f"squall_txid=spark-{running.id}-") for name in published)


def test_per_tuple_bolts_with_ticks_and_local_or_shuffle_run_on_spark(
    spark: Any, tmp_path: Path
) -> None:
    topology = word_count(tmp_path / "out", SENTENCES, columnar=False)
    running = SparkRunner(spark).run(
        topology, {}, checkpoint_location=tmp_path / "ck", schemas=SCHEMAS
    )
    assert running.await_termination(120)
    assert read_counts(spark, tmp_path / "out") == expected_counts(SENTENCES)
    # One tick per micro-batch and task, and each word on one task: once per batch.
    rows = spark.read.parquet(str(tmp_path / "out")).groupBy("squall_txid", "word").count()
    assert rows.filter("count > 1").count() == 0
