"""Kill a Spark-to-Spark topology mid-run, restart it on the same checkpoint: every input row
is processed at least once, and the transactional sink holds every row exactly once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import BasicBolt, RunningTopology, TopologyBuilder
from spark_io import SinkTarget, SparkOffsetSpout, SparkSinkBolt, SparkSource

from .conftest import run, write_parquet

pytestmark = pytest.mark.spark

ROWS = 600


class Relay(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([tuple[0], tuple[1].upper()])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "word"])


def build(tmp_path: Path) -> Any:
    builder = TopologyBuilder()
    source = SparkSource.files(tmp_path / "in.parquet")
    builder.set_spout(
        "src",
        SparkOffsetSpout(
            source,
            "id",
            ["id", "word"],
            checkpoint_dir=tmp_path / "ck",
            chunk_rows=100,
            commit_interval_secs=0.2,
        ),
        2,
    )
    builder.set_bolt("relay", Relay(), 2).shuffle_grouping("src")
    builder.set_bolt(
        "exactly_once",
        SparkSinkBolt(
            SinkTarget.files(tmp_path / "exactly_once"),
            batch_rows=40,
            batch_secs=0.2,
            transactional=True,
            key_field="id",
        ),
        2,
    ).shuffle_grouping("relay")
    builder.set_bolt(
        "at_least_once",
        SparkSinkBolt(
            SinkTarget.files(tmp_path / "at_least_once", "json"), batch_rows=40, batch_secs=0.2
        ),
    ).shuffle_grouping("relay")
    return builder.create_topology()


def crash(running: RunningTopology) -> None:
    """Make the coming kill look like a dead process: no final commit, no final flush."""
    for spout in running.task_objects("src").values():
        spout._reader.stopping.set()
        spout.close = lambda: None
    for cid in ("exactly_once", "at_least_once"):
        for sink in running.task_objects(cid).values():
            sink.cleanup = lambda sink=sink: sink._writer.shutdown(wait=False)


def committed(tmp_path: Path) -> list[int | None] | None:
    path = tmp_path / "ck" / "offsets.json"
    return json.loads(path.read_text())["committed"] if path.exists() else None


@pytest.mark.parametrize("how", ["kill", "crash"])
def test_a_killed_topology_resumes_and_the_transactional_output_is_exact(
    spark: Any, tmp_path: Path, how: str
) -> None:
    write_parquet(
        tmp_path / "in.parquet",
        {"id": list(range(ROWS)), "word": [f"w{i}" for i in range(ROWS)]},
        row_group_size=50,
    )

    async def midway(running: RunningTopology) -> None:
        sinks = running.task_objects("exactly_once").values()
        while sum(s.rows_written for s in sinks) < 150:
            await asyncio.sleep(0.02)
        if how == "crash":
            crash(running)

    run(build(tmp_path), {"topology.max.spout.pending": 120}, until=midway)
    first = committed(tmp_path)
    assert first != [500, ROWS], first  # stopped midway
    info = run(build(tmp_path), {"topology.max.spout.pending": 120}, timeout=90)
    assert list(info.errors) == []
    # Task 0 owns the chunks [0, 100), [200, 300), [400, 500); task 1 the others.
    assert committed(tmp_path) == [500, ROWS]

    exact = spark.read.parquet(str(tmp_path / "exactly_once")).collect()
    assert sorted(r.id for r in exact) == list(range(ROWS))  # every row, none twice
    assert all(r.word == f"W{r.id}" for r in exact)
    loose = spark.read.json(str(tmp_path / "at_least_once")).collect()
    assert {r.id for r in loose} == set(range(ROWS))  # every row at least once


@pytest.mark.slow
def test_a_process_killed_with_sigkill_loses_nothing_and_duplicates_nothing(
    spark: Any, tmp_path: Path
) -> None:
    write_parquet(
        tmp_path / "in.parquet",
        {"id": list(range(ROWS)), "word": [f"w{i}" for i in range(ROWS)]},
        row_group_size=50,
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    with subprocess.Popen(
        [sys.executable, "-m", "tests.spark_io._crash_child", str(tmp_path)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "MIDWAY"
        finally:
            child.send_signal(signal.SIGKILL)  # no close(), no cleanup(): a dead process
            child.wait(30)
    published = spark.read.parquet(str(tmp_path / "exactly_once")).count()
    assert 100 <= published < ROWS  # it died midway
    info = run(build(tmp_path), {"topology.max.spout.pending": 120}, timeout=90)
    assert list(info.errors) == []
    assert committed(tmp_path) == [500, ROWS]
    exact = spark.read.parquet(str(tmp_path / "exactly_once")).collect()
    assert sorted(r.id for r in exact) == list(range(ROWS))
    loose = spark.read.json(str(tmp_path / "at_least_once")).collect()
    assert {r.id for r in loose} == set(range(ROWS))
