"""Windowed bolts on Spark (``applyInPandasWithState`` or ``transformWithStateInPandas`` by
task, the window in Spark state): the same rows as the local engine, and through a driver
SIGKILL (on a local cluster: ``test_cluster``)."""

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
from spark_io import SinkTarget, SparkRunner, SparkSinkBolt

from .windows import (
    EVENTS,
    TOTALS_SCHEMAS,
    WAVE,
    WAVE_GAP_SECS,
    WAVES,
    WINDOW_SCHEMAS,
    stateful_windowed,
    windowed,
)

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
Rows = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]


class Collect(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        self.rows.append(tuple.values)


def local_rows(late: bool = True) -> Rows:
    """The local engine's rows, in virtual time: every wave, then the last ticks (before
    the message timeout replays the tuples the last windows still hold)."""
    topology = windowed(lambda name: Collect(), late=late)

    async def scenario() -> Rows:
        async with run_topology(topology, {"topology.seed": 1}) as running:
            await advance_time(WAVES * WAVE_GAP_SECS + 5)
            out = []
            for cid in ("windows_out", "late_out") if late else ("windows_out",):
                objects = running.task_objects(cid).values()
                out.append(sorted(tuple(r) for o in objects for r in o.rows))
            return out[0], out[1] if late else []

    return simulate(scenario())


def spark_rows(spark: Any, out: Path, late: bool = True) -> Rows:
    windows = spark.read.parquet(str(out / "windows")).drop("squall_txid").collect()
    if not late:
        return sorted(tuple(r) for r in windows), []
    late_rows = spark.read.parquet(str(out / "late")).drop("squall_txid").collect()
    return sorted(tuple(r) for r in windows), sorted(tuple(r) for r in late_rows)


@pytest.mark.timeout(300)  # transformWithState's first micro-batch starts its Python workers
def test_event_time_windows_give_the_same_rows_on_spark_as_on_the_engine(
    spark: Any, tmp_path: Path
) -> None:
    windows, late = local_rows()
    assert len(late) == (WAVES - 2) * 2  # one late event per task and wave from wave 2 on
    assert sum(r[4] for r in windows) > EVENTS  # sliding: most events in two windows

    runner = SparkRunner(spark)
    topology = windowed(tmp_path / "out")
    # the window's output reaches the leaves twice (its stream, its late stream): a query
    # holds one applyInPandasWithState, counted per path
    compiled = runner.compile(topology, {}, schemas=WINDOW_SCHEMAS)
    assert compiled.placements["windows"].where == "transformWithStateInPandas by task"
    running = runner.run(
        topology,
        {},
        checkpoint_location=tmp_path / "ck",
        schemas=WINDOW_SCHEMAS,
        batch_rows={"events": WAVE},
    )
    assert running.await_termination(240)
    assert len(running.query.recentProgress) == WAVES
    assert spark_rows(spark, tmp_path / "out") == (windows, late)


@pytest.mark.timeout(300)
def test_a_window_with_one_path_to_the_leaves_runs_in_apply_in_pandas_with_state(
    spark: Any, tmp_path: Path
) -> None:
    windows, _ = local_rows(late=False)
    runner = SparkRunner(spark)
    topology = windowed(tmp_path / "out", late=False)
    schemas = {"windows": WINDOW_SCHEMAS["windows"]}
    compiled = runner.compile(topology, {}, schemas=schemas)
    assert compiled.placements["windows"].where == "applyInPandasWithState by task"
    running = runner.run(
        topology,
        {},
        checkpoint_location=tmp_path / "ck",
        schemas=schemas,
        batch_rows={"events": WAVE},
    )
    assert running.await_termination(240)
    assert len(running.query.recentProgress) == WAVES
    assert spark_rows(spark, tmp_path / "out", late=False) == (windows, [])


@pytest.mark.timeout(300)
def test_a_stateful_windowed_bolt_keeps_its_window_and_its_state_as_on_the_engine(
    spark: Any, tmp_path: Path
) -> None:
    async def scenario() -> list[tuple[Any, ...]]:
        topology = stateful_windowed(Collect())
        async with run_topology(topology, {"topology.seed": 1}) as running:
            await advance_time(WAVES * WAVE_GAP_SECS + 5)
            objects = running.task_objects("out").values()
            return sorted(tuple(r) for o in objects for r in o.rows)

    expected = simulate(scenario())
    # the totals carry across windows (and micro-batches): the last total of a key is all
    # of its events that reached a fired window
    assert max(r[4] for r in expected) > max(r[3] for r in expected)

    runner = SparkRunner(spark)
    topology = stateful_windowed(
        SparkSinkBolt(
            SinkTarget.files(tmp_path / "out", "parquet"), transactional=True, key_field="id"
        )
    )
    compiled = runner.compile(topology, {}, schemas=TOTALS_SCHEMAS)
    assert compiled.placements["totals"].where == "transformWithStateInPandas by task"
    running = runner.run(
        topology,
        {},
        checkpoint_location=tmp_path / "ck",
        schemas=TOTALS_SCHEMAS,
        batch_rows={"events": WAVE},
    )
    assert running.await_termination(240)
    got = spark.read.parquet(str(tmp_path / "out")).drop("squall_txid").collect()
    assert sorted(tuple(r) for r in got) == expected


@pytest.mark.slow
@pytest.mark.timeout(400)  # two Spark drivers start, one after the other
@pytest.mark.parametrize("late", [True, False], ids=["transformWithState", "applyInPandas"])
def test_a_driver_killed_mid_stream_restarts_with_exact_windows(
    spark: Any, tmp_path: Path, late: bool
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    which = "windows" if late else "windows-no-late"
    with subprocess.Popen(
        [sys.executable, "-m", "tests.spark_io.runner._crash_child", str(tmp_path), which],
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

    schemas = WINDOW_SCHEMAS if late else {"windows": WINDOW_SCHEMAS["windows"]}
    running = SparkRunner(spark).run(
        windowed(tmp_path / "out", late=late),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas=schemas,
        batch_rows={"events": WAVE},
    )
    assert running.await_termination(240)
    assert spark_rows(spark, tmp_path / "out", late) == local_rows(late)
    ids = Counter(r.id for r in spark.read.parquet(str(tmp_path / "out" / "windows")).collect())
    assert max(ids.values()) == 1


def test_a_checkpoint_keyed_by_task_index_is_refused_and_a_new_one_is_marked(
    tmp_path: Path,
) -> None:
    from spark_io import SparkConfigError
    from spark_io.runner._compile import STATE_LAYOUT, STATE_LAYOUT_FILE, check_state_layout

    new = tmp_path / "new"
    check_state_layout(new)
    assert (new / STATE_LAYOUT_FILE).read_text().strip() == STATE_LAYOUT
    check_state_layout(new)  # a restart on it
    old = tmp_path / "old"  # an older Squall's: micro-batches, no layout file
    (old / "offsets").mkdir(parents=True)
    (old / "offsets" / "0").write_text("v1\n")
    with pytest.raises(SparkConfigError, match=r"keyed by task index.*new checkpoint"):
        check_state_layout(old)
    assert not (old / STATE_LAYOUT_FILE).exists()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("late", [False, True], ids=["applyInPandasWithState", "transform"])
def test_a_windows_input_crosses_one_exchange_its_grouping_by_task_key(
    spark: Any, tmp_path: Path, late: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """The grouping by task key places each task in its state partition: no repartition
    by task before it (a second shuffle of every row)."""
    schemas = WINDOW_SCHEMAS if late else {"windows": WINDOW_SCHEMAS["windows"]}
    compiled = SparkRunner(spark).compile(
        windowed(tmp_path / "out", late=late), {}, schemas=schemas
    )
    capsys.readouterr()
    compiled.frames["windows"].explain()
    plan = capsys.readouterr().out
    exchanges = [line for line in plan.splitlines() if "Exchange " in line]
    assert len(exchanges) == 1, plan
    assert "hashpartitioning(__task_key" in exchanges[0]
