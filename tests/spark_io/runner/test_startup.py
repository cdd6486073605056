"""What a topology's query does before and around its micro-batches: compiling reads a plain
parquet source's types from its footers (no Spark job), and a query whose one leaf is a sink
hands each micro-batch to the write as it is."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import pytest

from spark_io import SinkTarget, SparkOffsetSpout, SparkRunner, SparkSinkBolt, SparkSource

from ..conftest import write_parquet
from .topologies import Double

pytestmark = pytest.mark.spark

#: Columns of every parquet type the compiler reads itself, and of some it leaves to Spark.
READ_HERE = ["i64", "text", "i8", "i16", "i32", "f32", "f64", "flag", "day", "coded", "large"]
LEFT_TO_SPARK = ["u8", "raw", "items", "amount", "stamp", "u32"]


def _all_types(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "i64": pa.array([1], pa.int64()),
            "text": pa.array(["x"]),
            "i8": pa.array([1], pa.int8()),
            "i16": pa.array([1], pa.int16()),
            "i32": pa.array([1], pa.int32()),
            "f32": pa.array([1.0], pa.float32()),
            "f64": pa.array([1.0]),
            "flag": pa.array([True]),
            "day": pa.array([datetime.date(2020, 1, 1)]),
            "coded": pa.array(["x"]).dictionary_encode(),
            "large": pa.array(["x"], pa.large_string()),
            "u8": pa.array([1], pa.uint8()),
            "raw": pa.array([b"x"]),
            "items": pa.array([[1]]),
            "amount": pa.array([decimal.Decimal("1.5")]),
            "stamp": pa.array([datetime.datetime(2020, 1, 1)]),
            "u32": pa.array([1], pa.uint32()),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def test_a_plain_parquet_sources_types_are_the_ones_spark_reads(spark: Any, tmp_path: Path) -> None:
    from spark_io.runner._compile import _parquet_types

    path = _all_types(tmp_path / "in" / "part-0.parquet")
    sparks = {f.name: f.dataType.json() for f in spark.read.parquet(str(path)).schema.fields}
    for where in (path, path.parent):
        source = SparkSource.files(where, "parquet")
        assert _parquet_types(source, READ_HERE) == {c: sparks[c] for c in READ_HERE}
        for column in LEFT_TO_SPARK:
            assert _parquet_types(source, ["i64", column]) is None, column
        assert _parquet_types(source, ["missing"]) is None
    # reader options, partition folders, files that differ, summary files: Spark's to read
    assert (
        _parquet_types(SparkSource.files(path, "parquet", options={"mergeSchema": "true"}), ["i64"])
        is None
    )
    write_parquet(tmp_path / "parts" / "k=1" / "a.parquet", {"i64": [1]})
    assert _parquet_types(SparkSource.files(tmp_path / "parts", "parquet"), ["i64"]) is None
    write_parquet(tmp_path / "mixed" / "a.parquet", {"v": [1]})
    write_parquet(tmp_path / "mixed" / "b.parquet", {"v": [1.5]})
    assert _parquet_types(SparkSource.files(tmp_path / "mixed", "parquet"), ["v"]) is None
    write_parquet(tmp_path / "summary" / "a.parquet", {"v": [1]})
    write_parquet(tmp_path / "summary" / "_common_metadata", {"v": [1]})
    assert _parquet_types(SparkSource.files(tmp_path / "summary", "parquet"), ["v"]) is None


def test_a_spark_written_files_types_are_the_ones_spark_reads(spark: Any, tmp_path: Path) -> None:
    # Spark keeps its own schema in the footer and reads it back: an interval or a collated
    # string is a plain INT64 or UTF-8 column to parquet, but not to Spark
    from spark_io.runner._compile import _parquet_types

    path = str(tmp_path / "spark")
    spark.sql(
        "SELECT id AS offset, make_dt_interval(0, 0, 0, id) AS span, "
        "make_ym_interval(0, CAST(id AS INT)) AS months, "
        "CAST(CAST(id AS STRING) AS STRING COLLATE UTF8_LCASE) AS word, "
        "CAST(id AS STRING) AS plain FROM range(3)"
    ).coalesce(1).write.parquet(path)
    sparks = {f.name: f.dataType.json() for f in spark.read.parquet(path).schema.fields}
    source = SparkSource.files(path, "parquet")
    for column in ("span", "months", "word"):
        assert _parquet_types(source, ["offset", column]) in (
            None,
            {"offset": sparks["offset"], column: sparks[column]},
        ), column
    # the plain columns of a Spark-written file are still read here
    assert _parquet_types(source, ["offset", "plain"]) == {
        "offset": sparks["offset"],
        "plain": sparks["plain"],
    }


def test_names_spark_reads_though_they_start_with_an_underscore_are_not_left_out(
    spark: Any, tmp_path: Path
) -> None:
    # Spark leaves out names starting with "_" unless they hold "=": such a file is data to
    # it (its schema may be the one it reads), such a folder a partition column
    import pyarrow as pa

    from spark_io.runner._compile import _parquet_types

    files = tmp_path / "files"
    write_parquet(files / "b.parquet", {"offset": pa.array([1], pa.int32())})
    write_parquet(files / "_a=b.parquet", {"offset": pa.array([2], pa.int64())})
    sparks = {f.name: f.dataType.json() for f in spark.read.parquet(str(files)).schema.fields}
    assert _parquet_types(SparkSource.files(files, "parquet"), ["offset"]) in (None, sparks)
    folders = tmp_path / "folders"
    write_parquet(folders / "a.parquet", {"offset": [1]})
    write_parquet(folders / "_k=1" / "b.parquet", {"offset": [2]})
    assert "_k" in spark.read.parquet(str(folders)).columns
    assert _parquet_types(SparkSource.files(folders, "parquet"), ["offset"]) is None


def test_a_folder_that_cannot_be_listed_is_left_to_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a folder without read permission, for a user other than root): Spark's error, mapped,
    # says what is wrong, not an OSError out of compile
    from spark_io.runner import _compile

    write_parquet(tmp_path / "in" / "part-0.parquet", {"offset": [1]})

    def denied(path: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(_compile.os, "scandir", denied)
    assert _compile._parquet_types(SparkSource.files(tmp_path / "in"), ["offset"]) is None


def _doubled(data: Path, out: Path, work: Path, sink_schema: str | None = None) -> Any:
    from engine import TopologyBuilder

    builder = TopologyBuilder()
    builder.set_spout(
        "rows",
        SparkOffsetSpout(
            SparkSource.files(data, "parquet"), "offset", ["offset", "payload"], checkpoint_dir=work
        ),
        2,
    )
    builder.set_bolt("double", Double(), 2).local_or_shuffle_grouping("rows")
    builder.set_bolt(
        "sink",
        SparkSinkBolt(SinkTarget.files(out, "parquet"), ["doubled", "offset"], schema=sink_schema),
    ).shuffle_grouping("double")
    return builder.create_topology()


def test_compiling_over_plain_parquet_files_runs_no_spark_job(spark: Any, tmp_path: Path) -> None:
    write_parquet(tmp_path / "in" / "part-0.parquet", {"offset": [0, 1], "payload": [5, 6]})
    topology = _doubled(tmp_path / "in", tmp_path / "out", tmp_path / "offsets")
    sc = spark.sparkContext
    sc.setJobGroup("squall-compile-probe", "compile")
    try:
        compiled = SparkRunner(spark).compile(
            topology, {}, schemas={"double": "offset BIGINT, doubled BIGINT"}
        )
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert list(sc.statusTracker().getJobIdsForGroup("squall-compile-probe")) == []
    assert compiled.layouts["rows"].streams[0].types == ('"long"', '"long"')


def test_the_one_sinks_rows_are_the_querys_output_named_and_cast(
    spark: Any, tmp_path: Path
) -> None:
    offsets = list(range(300))
    write_parquet(tmp_path / "in" / "part-0.parquet", {"offset": offsets, "payload": offsets})
    runner = SparkRunner(spark)
    compiled = runner.compile(
        _doubled(tmp_path / "in", tmp_path / "out", tmp_path / "offsets", "doubled STRING"),
        {},
        schemas={"double": "offset BIGINT, doubled BIGINT"},
        batch_rows={"rows": 100},
    )
    # foreachBatch writes the micro-batch as it comes: no leaf column to filter on, no
    # renaming or cast per micro-batch
    assert [(f.name, f.dataType.simpleString()) for f in compiled.output.schema.fields] == [
        ("doubled", "string"),
        ("offset", "bigint"),
    ]
    running = runner.start(compiled, checkpoint_location=tmp_path / "ck")
    assert running.await_termination(120)
    assert len(running.query.recentProgress) == 2
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r.offset, r.doubled) for r in rows) == [(o, str(o * 2)) for o in offsets]


def test_a_one_sink_querys_schema_that_does_not_cast_is_refused_as_ours(
    spark: Any, tmp_path: Path
) -> None:
    # the one sink's cast is part of the query, made at compile: Spark's analysis error
    # comes out as spark_io's, naming the sink
    from spark_io import SinkSchemaError

    write_parquet(tmp_path / "in" / "part-0.parquet", {"offset": [0, 1], "payload": [5, 6]})
    topology = _doubled(
        tmp_path / "in", tmp_path / "out", tmp_path / "offsets", "doubled ARRAY<INT>"
    )
    with pytest.raises(SinkSchemaError) as raised:
        SparkRunner(spark).compile(
            topology, {}, schemas={"double": "offset BIGINT, doubled BIGINT"}
        )
    assert str(raised.value).startswith(
        "sink 'sink': casting its columns ['doubled', 'offset'] to its schema "
        "'doubled ARRAY<INT>' failed: "
    )
