"""A bolt that is its spout's one subscriber, local-or-shuffle grouped on as many tasks,
runs inside the spout's read: one Python stage, the spout's rows never enter the JVM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine import TopologyBuilder
from spark_io import SinkTarget, SparkIOError, SparkRunner, SparkSinkBolt

from .test_found import BOLT_FAILED
from .topologies import (
    SCHEMAS,
    Below,
    Boom,
    CommitLog,
    Numbers,
    read_commits,
    word_count,
)

pytestmark = pytest.mark.spark


def _where(compiled: Any) -> dict[str, str]:
    return {cid: p.where for cid, p in compiled.placements.items()}


def test_only_a_bolt_alone_on_its_spouts_tasks_is_fused(spark: Any, tmp_path: Path) -> None:
    runner = SparkRunner(spark)
    fused = runner.compile(word_count(tmp_path / "a", columnar=False), {}, schemas=SCHEMAS)
    assert _where(fused)["split"] == "read of sentences"
    assert "sentences" not in fused.frames  # no DataFrame of the spout's own rows
    assert "runs in" in fused.describe() and "read of sentences" in fused.describe()
    # a shuffle grouping, or other task counts, need Spark's exchange
    shuffled = runner.compile(word_count(tmp_path / "b"), {}, schemas=SCHEMAS)
    assert _where(shuffled)["split"] == "mapInArrow"
    three = runner.compile(
        word_count(tmp_path / "c", columnar=False, spout_tasks=3), {}, schemas=SCHEMAS
    )
    assert _where(three)["split"] == "mapInArrow"
    # a second subscriber reads the spout's rows too
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers(20), 2)
    builder.set_bolt("a", Below(5), 2).local_or_shuffle_grouping("numbers")
    builder.set_bolt("b", Below(5), 2).local_or_shuffle_grouping("numbers")
    for cid in "ab":
        builder.set_bolt(
            f"sink_{cid}", SparkSinkBolt(SinkTarget.files(tmp_path / cid, "parquet"))
        ).shuffle_grouping(cid)
    both = runner.compile(builder.create_topology(), {}, schemas={"a": "n BIGINT", "b": "n BIGINT"})
    assert _where(both)["a"] == _where(both)["b"] == "mapInArrow"


def _numbers(log: Path, out: Path, bolt: Any) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("numbers", CommitLog(100, 10, log), 2)
    builder.set_bolt("bolt", bolt, 2).local_or_shuffle_grouping("numbers")
    builder.set_bolt(
        "sink",
        SparkSinkBolt(SinkTarget.files(out, "parquet"), transactional=True, key_field="n"),
    ).shuffle_grouping("bolt")
    return builder.create_topology()


def test_a_fused_spout_commits_every_micro_batch_and_its_rows_arrive_once(
    spark: Any, tmp_path: Path
) -> None:
    log = tmp_path / "commits.log"
    compiled = SparkRunner(spark).compile(
        _numbers(log, tmp_path / "out", Below(1000)), {}, schemas={"bolt": "n BIGINT"}
    )
    assert _where(compiled)["bolt"] == "read of numbers"
    running = SparkRunner(spark).start(compiled, checkpoint_location=tmp_path / "ck")
    assert running.await_termination(120)
    assert read_commits(log) == {0: [10, 20, 30, 40, 50], 1: [10, 20, 30, 40, 50]}
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.n for r in rows) == list(range(100))


def test_a_fused_bolt_that_raises_fails_the_query_in_one_line(spark: Any, tmp_path: Path) -> None:
    running = SparkRunner(spark).run(
        _numbers(tmp_path / "commits.log", tmp_path / "out", Boom(7)),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas={"bolt": "n BIGINT"},
    )
    with pytest.raises(SparkIOError) as info:
        running.await_termination(120)
    assert str(info.value) in {
        "the topology's Spark query failed: "
        + BOLT_FAILED.replace("'boom'", "'bolt'").format(task=t)
        for t in (1, 2)
    }
    assert not (tmp_path / "commits.log").exists()  # nothing committed
