"""What the Spark runner refuses at compile time, each with its exact message (no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine import BasicBolt, CustomStreamGrouping, Fields, Spout, TopologyBuilder
from engine._command.cli import main as squall
from spark_io import (
    SinkTarget,
    SparkConfigError,
    SparkOffsetSpout,
    SparkSinkBolt,
    SparkSource,
)
from spark_io.runner._compile import check_topology

from .topologies import Sentences, SplitWordsPerTuple


class Counter(Spout):
    def next_tuple(self) -> None: ...

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Echo(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit(list(tuple.values))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Even(CustomStreamGrouping):
    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        return [0]


def refusal(builder: TopologyBuilder) -> str:
    with pytest.raises(SparkConfigError) as info:
        check_topology(builder.create_topology())
    return str(info.value)


def test_a_spout_that_cannot_replay_by_position_is_refused() -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", Counter())
    builder.set_bolt("echo", Echo()).shuffle_grouping("numbers")
    assert refusal(builder) == (
        "spout 'numbers' (Counter) cannot run on Spark: a Spark source must read a "
        "micro-batch again, by position, after a failure or a driver restart, and this spout "
        "replays only what it keeps in memory; subclass spark_io.ReplayableSpout "
        "(end_position and read) or read through SparkOffsetSpout"
    )


def test_an_offset_spout_over_a_table_is_refused(tmp_path: Path) -> None:
    builder = TopologyBuilder()
    builder.set_spout(
        "rows",
        SparkOffsetSpout(
            SparkSource.table("events"), "offset", ["offset"], checkpoint_dir=tmp_path
        ),
    )
    builder.set_bolt("echo", Echo()).shuffle_grouping("rows")
    assert refusal(builder) == (
        "spout 'rows' reads table 'events': on Spark a spout's partitions are read on the "
        "executors, which have no SparkSession, so only file sources can be read there; point "
        "it at the files with SparkSource.files(path, format)"
    )


def test_an_offset_spout_over_text_files_is_refused(tmp_path: Path) -> None:
    builder = TopologyBuilder()
    source = SparkSource.files(tmp_path / "in", "text")
    builder.set_spout(
        "rows", SparkOffsetSpout(source, "offset", ["value"], checkpoint_dir=tmp_path / "ck")
    )
    builder.set_bolt("echo", Echo()).shuffle_grouping("rows")
    assert refusal(builder) == (
        f"spout 'rows' reads text files at {str(tmp_path / 'in')!r}: the Spark runner reads "
        f"parquet, orc, csv, json files on the executors (pyarrow), not text"
    )


def test_a_custom_grouping_is_refused() -> None:
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences(10))
    builder.set_bolt("split", SplitWordsPerTuple(), 2).custom_grouping("sentences", Even())
    assert refusal(builder) == (
        "bolt 'split': custom_grouping on 'sentences' cannot run on Spark: a "
        "CustomStreamGrouping chooses tasks in the sending task's Python while Spark routes "
        "rows by columns; use fields_grouping, shuffle_grouping or direct_grouping with "
        "emit_direct"
    )


def test_a_cycle_is_refused() -> None:
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences(10))
    builder.set_bolt("a", Echo()).shuffle_grouping("sentences").shuffle_grouping("b")
    builder.set_bolt("b", Echo()).fields_grouping("a", Fields("n"))
    assert refusal(builder) == (
        "bolt 'a' is on a cycle (a -> b -> a): a Spark query is a directed acyclic graph; "
        "break the loop (feed it back through a spout)"
    )


def test_a_bolt_without_inputs_is_refused() -> None:
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences(10))
    builder.set_bolt("lonely", Echo())
    assert refusal(builder) == (
        "bolt 'lonely' has no inputs: on Spark a bolt runs only over its inputs' "
        "micro-batches; subscribe it to a stream or remove it"
    )


def refused_topology() -> Any:
    builder = TopologyBuilder()
    builder.set_spout("numbers", Counter())
    builder.set_bolt(
        "sink", SparkSinkBolt(SinkTarget.files("/nonexistent/never-written"), ["n"])
    ).shuffle_grouping("numbers")
    return builder.create_topology()


def test_squall_submit_runner_spark_refuses_before_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = squall(
        [
            "submit",
            "--runner",
            "spark",
            "--checkpoint",
            str(tmp_path / "ck"),
            "tests.spark_io.runner.test_refusals:refused_topology",
        ]
    )
    assert code == 1
    assert capsys.readouterr().err == (
        "squall submit: spout 'numbers' (Counter) cannot run on Spark: a Spark source must "
        "read a micro-batch again, by position, after a failure or a driver restart, and this "
        "spout replays only what it keeps in memory; subclass spark_io.ReplayableSpout "
        "(end_position and read) or read through SparkOffsetSpout\n"
    )
    assert not (tmp_path / "ck").exists()


def test_a_fields_grouping_on_a_key_typed_otherwise_by_each_input_is_refused() -> None:
    # Spark's hash of a string and of a pickled value differ: equal keys would not meet.
    from spark_io._layout import StreamLayout
    from spark_io.runner._compile import _key_casts

    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences(0))
    builder.set_bolt("typed", Echo()).shuffle_grouping("sentences")
    builder.set_bolt("pickled", Echo()).shuffle_grouping("sentences")
    builder.set_bolt("meet", Echo(), 2).fields_grouping("typed", Fields("n")).fields_grouping(
        "pickled", Fields("n")
    )
    spec = builder.create_topology().bolts["meet"]
    typed = StreamLayout("typed", "default", 0, ("n",), ('"string"',))
    pickled = StreamLayout("pickled", "default", 0, ("n",), (None,))
    with pytest.raises(SparkConfigError) as info:
        _key_casts("meet", spec, (typed, pickled))
    assert str(info.value) == (
        "bolt 'meet': its fields groupings hash stream 'default' of 'typed' field 'n' as "
        "string, stream 'default' of 'pickled' field 'n' as pickled; Spark hashes those "
        "types differently, so equal keys would reach different tasks: give the fields one "
        "Spark type in the runner's schemas= (untyped fields travel pickled)"
    )
    # numbers are hashed as one type: a long, or a double when one is floating
    wide = StreamLayout("typed", "default", 0, ("n",), ('"long"',))
    narrow = StreamLayout("pickled", "default", 0, ("n",), ('"integer"',))
    floating = StreamLayout("pickled", "default", 0, ("n",), ('"double"',))
    assert _key_casts("meet", spec, (wide, wide)) == {}
    assert _key_casts("meet", spec, (wide, narrow)) == {0: "bigint"}
    assert _key_casts("meet", spec, (narrow, floating)) == {0: "double"}
