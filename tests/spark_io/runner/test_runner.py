"""The Spark runner in local[2] (the test process's one session): the same topology gives
the same result on the local engine and on Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine import BasicBolt
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
    topology = word_count(tmp_path / "out", 1500, columnar=False)
    running = SparkRunner(spark).run(
        topology, {}, checkpoint_location=tmp_path / "ck", schemas=SCHEMAS
    )
    assert running.await_termination(120)
    assert read_counts(spark, tmp_path / "out") == expected_counts(1500)
    # One tick per micro-batch and task, and each word on one task: once per batch.
    rows = spark.read.parquet(str(tmp_path / "out")).groupBy("squall_txid", "word").count()
    assert rows.filter("count > 1").count() == 0


def test_all_global_direct_groupings_and_a_three_input_bolt_match_the_engine(
    spark: Any, tmp_path: Path
) -> None:
    from engine._model.context import build_plan

    from .topologies import GROUPINGS_SCHEMAS, groupings, read_rows

    topology = groupings(tmp_path / "local")
    tasks = build_plan(topology).component_tasks
    expected = sorted(
        [("everyone", t, n) for n in range(0, 40, 2) for t in tasks["everyone"]]
        + [("single", tasks["single"][0], n) for n in range(1, 40, 2)]
        + [("picked", tasks["picked"][n % 2], n) for n in range(40)]
    )
    info = run(topology, {}, timeout=60)
    assert list(info.errors) == []
    assert read_rows(spark, tmp_path / "local") == expected

    running = SparkRunner(spark).run(
        groupings(tmp_path / "spark"),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas=GROUPINGS_SCHEMAS,
    )
    assert running.await_termination(120)
    assert read_rows(spark, tmp_path / "spark") == expected


def test_a_stateful_bolt_keeps_its_state_across_micro_batches_as_on_the_engine(
    spark: Any, tmp_path: Path
) -> None:
    pytest.importorskip("google.protobuf")  # Spark's transformWithState needs it
    from .topologies import STATEFUL_SCHEMAS, read_totals, stateful_word_count

    expected = expected_counts(2000)
    info = run(stateful_word_count(tmp_path / "local", 2000), {}, timeout=90)
    assert list(info.errors) == []
    assert read_totals(spark, tmp_path / "local") == expected

    running = SparkRunner(spark).run(
        stateful_word_count(tmp_path / "spark", 2000),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas=STATEFUL_SCHEMAS,
    )
    assert running.await_termination(120)
    assert len(running.query.recentProgress) == 2  # two micro-batches: the state carried over
    assert read_totals(spark, tmp_path / "spark") == expected


def test_an_offset_spout_over_parquet_reads_each_row_once_on_the_executors(
    spark: Any, tmp_path: Path
) -> None:
    from ..conftest import write_parquet
    from .topologies import offset_files

    offsets = [o for o in range(1000) if o % 7 != 3]  # gaps in the offset column
    write_parquet(
        tmp_path / "in" / "part-0.parquet",
        {"offset": offsets, "payload": [o * 10 for o in offsets]},
        row_group_size=128,
    )
    running = SparkRunner(spark).run(
        offset_files(tmp_path / "in", tmp_path / "out", tmp_path / "offsets"),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas={"double": "offset BIGINT, doubled BIGINT"},
        batch_rows={"rows": 150},  # offsets per task per micro-batch: 450 a batch
    )
    assert running.await_termination(120)
    assert len(running.query.recentProgress) == 3
    rows = spark.read.parquet(str(tmp_path / "out")).select("offset", "doubled").collect()
    assert sorted((r.offset, r.doubled) for r in rows) == [(o, o * 20) for o in offsets]


class Passes(BasicBolt):
    """Emits its ``n``."""

    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([tuple["n"]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


def test_a_fields_grouping_over_inputs_of_different_integer_types_keeps_each_key_on_one_task(
    spark: Any, tmp_path: Path
) -> None:
    # On the engine a key meets on one task whatever type it arrives as (stable_hash);
    # Spark's hash of an INT differs from a BIGINT's, and n went to two tasks.
    from engine import Fields, TopologyBuilder
    from spark_io import SinkTarget, SparkSinkBolt

    from .topologies import Merge, Numbers, WhoGotIt, read_rows

    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers(40), 2)
    builder.set_bolt("wide", Passes(), 2).shuffle_grouping("numbers")
    builder.set_bolt("narrow", Passes(), 2).shuffle_grouping("numbers")
    builder.set_bolt("meet", WhoGotIt(), 3).fields_grouping("wide", Fields("n")).fields_grouping(
        "narrow", Fields("n")
    )
    builder.set_bolt("tag", Merge()).shuffle_grouping("meet")
    builder.set_bolt(
        "sink", SparkSinkBolt(SinkTarget.files(tmp_path / "out", "parquet"))
    ).shuffle_grouping("tag")
    running = SparkRunner(spark).run(
        builder.create_topology(),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas={
            "wide": "n BIGINT",
            "narrow": "n INT",
            "meet": "task INT, n BIGINT",
            "tag": "src STRING, task INT, n BIGINT",
        },
    )
    assert running.await_termination(120)
    rows = read_rows(spark, tmp_path / "out")
    assert sorted(n for _, _, n in rows) == sorted([*range(40), *range(40)])
    tasks: dict[int, set[int]] = {}
    for _, task, n in rows:
        tasks.setdefault(n, set()).add(task)
    assert [n for n, seen in sorted(tasks.items()) if len(seen) > 1] == []


def test_a_sink_schema_refuses_a_fraction_cast_to_an_integer_as_the_engine_does(
    spark: Any,
) -> None:
    # Spark's cast made 1.5 a 1 without a word; the engine's sink refuses the value.
    from spark_io.runner._compile import _cast

    rows = spark.createDataFrame([(3.0, 1), (None, 2)], "h DOUBLE, n BIGINT")
    cast = _cast("sink", rows, "h BIGINT")
    assert [tuple(r) for r in cast.collect()] == [(3, 1), (None, 2)]
    assert cast.schema.simpleString() == "struct<h:bigint,n:bigint>"
    fraction = spark.createDataFrame([(3.0,), (1.5,)], "h DOUBLE")
    with pytest.raises(Exception) as info:  # Spark's error, raise_error's message in it
        _cast("sink", fraction, "h BIGINT").collect()
    assert "sink 'sink': field 'h' is 1.5, which its schema's bigint cannot hold" in str(info.value)
