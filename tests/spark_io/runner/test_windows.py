"""Windowed bolts on Spark (``transformWithState`` by task, the window in Spark state): the
same rows as the local engine, through a driver SIGKILL, and on a local cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from engine import BasicBolt, run_topology
from engine.testing import advance_time, simulate
from spark_io import SparkRunner

from .windows import EVENTS, WAVE, WAVE_GAP_SECS, WAVES, WINDOW_SCHEMAS, windowed

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
Rows = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]


class Collect(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        self.rows.append(tuple.values)


def local_rows() -> Rows:
    """The local engine's rows, in virtual time: every wave, then the last ticks (before
    the message timeout replays the tuples the last windows still hold)."""
    topology = windowed(lambda name: Collect())

    async def scenario() -> Rows:
        async with run_topology(topology, {"topology.seed": 1}) as running:
            await advance_time(WAVES * WAVE_GAP_SECS + 5)
            out = []
            for cid in ("windows_out", "late_out"):
                objects = running.task_objects(cid).values()
                out.append(sorted(tuple(r) for o in objects for r in o.rows))
            return out[0], out[1]

    return simulate(scenario())


def spark_rows(spark: Any, out: Path) -> Rows:
    windows = spark.read.parquet(str(out / "windows")).drop("squall_txid").collect()
    late = spark.read.parquet(str(out / "late")).drop("squall_txid").collect()
    return sorted(tuple(r) for r in windows), sorted(tuple(r) for r in late)


@pytest.mark.timeout(300)  # transformWithState's first micro-batch starts its Python workers
def test_event_time_windows_give_the_same_rows_on_spark_as_on_the_engine(
    spark: Any, tmp_path: Path
) -> None:
    windows, late = local_rows()
    assert len(late) == (WAVES - 2) * 2  # one late event per task and wave from wave 2 on
    assert sum(r[4] for r in windows) > EVENTS  # sliding: most events in two windows

    running = SparkRunner(spark).run(
        windowed(tmp_path / "out"),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas=WINDOW_SCHEMAS,
        batch_rows={"events": WAVE},
    )
    assert running.await_termination(240)
    assert len(running.query.recentProgress) == WAVES
    assert spark_rows(spark, tmp_path / "out") == (windows, late)


@pytest.mark.timeout(400)  # two Spark drivers start, one after the other
def test_a_driver_killed_mid_stream_restarts_with_exact_windows(spark: Any, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    with subprocess.Popen(
        [sys.executable, "-m", "tests.spark_io.runner._crash_child", str(tmp_path), "windows"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    ) as child:
        try:
            assert child.stdout is not None
            line = child.stdout.readline().strip()
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    assert line.startswith("MIDWAY batch=")
    in_flight = int(line.partition("=")[2])
    assert not (tmp_path / "ck" / "commits" / str(in_flight)).exists()

    running = SparkRunner(spark).run(
        windowed(tmp_path / "out"),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas=WINDOW_SCHEMAS,
        batch_rows={"events": WAVE},
    )
    assert running.await_termination(240)
    assert spark_rows(spark, tmp_path / "out") == local_rows()
    ids = Counter(r.id for r in spark.read.parquet(str(tmp_path / "out" / "windows")).collect())
    assert max(ids.values()) == 1


@pytest.mark.slow
@pytest.mark.timeout(600)  # a cluster starts: ~25 s idle, minutes on a loaded machine
def test_squall_submit_runs_the_windowed_topology_on_a_local_cluster(
    spark: Any, tmp_path: Path
) -> None:
    from .windows import OUT_ENV

    python_path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from engine._command.cli import main; sys.exit(main(sys.argv[1:]))",
            "submit",
            "--runner",
            "spark",
            "--master",
            "local-cluster[2,1,1024]",
            "--checkpoint",
            str(tmp_path / "ck"),
            "--batch-rows",
            f"events={WAVE}",
            "--spark-conf",
            "spark.python.daemon.module=spark_io.runner._daemon",
            "--spark-conf",
            f"spark.executorEnv.PYTHONPATH={python_path}",
            "tests.spark_io.runner.windows:cluster_windowed",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": python_path, OUT_ENV: str(tmp_path / "out")},
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "bolt windows" in done.stdout and "transformWithState by task" in done.stdout
    assert spark_rows(spark, tmp_path / "out") == local_rows()
