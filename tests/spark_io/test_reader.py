"""The offset spout's reader against real Spark: one query per pass, streamed a group of
partitions per job with the next job in flight, and no query for where offsets start or
end."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine import BasicBolt, TopologyBuilder
from spark_io import SparkOffsetSpout, SparkSource
from spark_io._bad_files import FileGuard
from spark_io._reader import StreamReader, spark_batches

from .conftest import run, write_parquet

pytestmark = pytest.mark.spark


def test_batches_come_in_partition_order_with_the_next_group_already_running(
    spark: Any,
) -> None:
    df = spark.range(0, 60_000, numPartitions=6).selectExpr("id", "concat('w', id) AS word")
    group = "squall-test-reader"
    tracker = spark.sparkContext.statusTracker()
    jobs_seen = []
    ids: list[int] = []
    per = spark.sparkContext.defaultParallelism
    for batch in spark_batches(spark, df, job_group=group, stopping=threading.Event()):
        if not ids:
            # The first group is being consumed, and stays so until the second group's job
            # has started (a job started by the reader, not by this loop).
            deadline = time.monotonic() + 60
            while len(tracker.getJobIdsForGroup(group)) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            jobs_seen.append(len(tracker.getJobIdsForGroup(group)))
        ids.extend(batch.column("id").to_pylist())
        assert batch.schema.names == ["id", "word"]
    assert ids == list(range(60_000))  # one pass, in partition order
    groups = -(-6 // per)
    assert jobs_seen == [min(2, groups)]
    assert len(tracker.getJobIdsForGroup(group)) == groups  # one job per group, no other


class Collect(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.ids: list[int] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        self.ids.append(tuple[0])


def collected(data: Path, checkpoint: Path, tasks: int = 1) -> tuple[Any, list[int]]:
    """Run ``SparkOffsetSpout`` (``tasks`` tasks) over the files at ``data`` into one
    collecting bolt: the run's info and the ids it collected."""
    builder = TopologyBuilder()
    spout = SparkOffsetSpout(SparkSource.files(data), "id", ["id"], checkpoint_dir=checkpoint)
    builder.set_spout("src", spout, tasks)
    builder.set_bolt("collect", Collect()).shuffle_grouping("src")
    info, ids = run(
        builder.create_topology(),
        read=lambda r: (r.info(), next(iter(r.task_objects("collect").values())).ids),
    )
    return info, ids


def test_a_read_asks_spark_for_no_offset_bounds(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The spout used to run a full-scan min/max query at start: only the LATEST strategies
    # ask for the highest offset now.
    def refuse(self: StreamReader) -> int:
        raise AssertionError("the reader asked for the latest offset")

    monkeypatch.setattr(StreamReader, "_latest", refuse)
    data = tmp_path / "in"
    for k in range(3):
        ids = list(range(k * 1000, (k + 1) * 1000))[::-1]
        write_parquet(data / f"part-{k}.parquet", {"id": ids, "w": [str(i) for i in ids]})
    info, ids = collected(data, tmp_path / "ck", tasks=2)
    assert list(info.errors) == []
    assert sorted(ids) == list(range(3000))


def test_a_bounded_read_loads_the_source_once(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # open() loads the source to check its columns; the first pass reads that DataFrame
    # rather than listing the files and reading the schema again.
    loads = []
    load = FileGuard.load

    def counted(self: FileGuard, spark: Any) -> Any:
        loads.append(self.describe)
        return load(self, spark)

    monkeypatch.setattr(FileGuard, "load", counted)
    data = write_parquet(tmp_path / "in.parquet", {"id": list(range(500)), "w": ["x"] * 500})
    info, ids = collected(data, tmp_path / "ck")
    assert list(info.errors) == []
    assert sorted(ids) == list(range(500))
    assert len(loads) == 1
