"""A windowed bolt's task as ``transformWithStateInPandas`` runs it, without Spark: pyspark's
``TwsTester`` plays Spark's part (its state, its processing time and its timers)."""

from __future__ import annotations

from typing import Any

import pytest

from engine import TopologyBuilder
from engine.runners import task_plan
from engine.windowing import Duration, WindowedBolt

from .topologies import Numbers

pd = pytest.importorskip("pandas")
pytest.importorskip("pyspark")


class Sizes(WindowedBolt):
    """Emits the size of each window it gets."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, window: Any) -> None:
        self.collector.emit([len(window.get())])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


def processing_time_window() -> tuple[Any, int]:
    """The processor of a one-task processing-time window (a minute, sliding every 30 s:
    what enters holds for the whole test) and its task's grouping key."""
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    from spark_io._layout import SOURCE_TASK, TASK, OutputLayout, StreamLayout, in_col
    from spark_io._stream_source import cloudpickled
    from spark_io.runner._bolt_task import BoltPlan
    from spark_io.runner._stateful import stateful_processor
    from spark_io.runner._task_keys import KEY_COLUMN, task_keys

    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers(10))
    bolt = Sizes().with_window(Duration(60), Duration(30))
    builder.set_bolt("sizes", bolt).shuffle_grouping("numbers")
    topology = builder.create_topology()
    spec = topology.bolts["sizes"]
    long = '"long"'
    plan = BoltPlan(
        topology=topology,
        plan=task_plan(topology),
        conf={},
        component="sizes",
        inputs=(StreamLayout("numbers", "default", 0, ("n",), (long,)),),
        output=OutputLayout("sizes", (StreamLayout("sizes", "default", 0, ("n",), (long,)),)),
        tick_secs=float(spec.config["topology.tick.tuple.freq.secs"]),
    )
    schema = StructType(
        [
            StructField(SOURCE_TASK, IntegerType(), False),
            StructField(in_col(0, 0), LongType()),
            StructField(TASK, IntegerType()),
            StructField(KEY_COLUMN, IntegerType()),
        ]
    )
    processor = stateful_processor(
        cloudpickled(plan), schema.json(), kv=False, window=True, tick_ms=30_000
    )
    return processor, task_keys(1)[0]


def test_a_processing_time_window_keeps_a_timer_while_it_holds_tuples() -> None:
    """The timer that fires is still listed while it is handled (Spark deletes it after):
    the window must set its next one then, or it ticks once and never again without input."""
    from pyspark.sql.streaming.tws_tester import TwsTester

    processor, key = processing_time_window()
    tester = TwsTester(processor, timeMode="ProcessingTime")
    rows = pd.DataFrame({"a": [0, 0, 0], "b": [1, 2, 3], "c": [0, 0, 0], "d": [key] * 3})
    tester.testInPandas(key, rows)

    def timers() -> list[int]:
        tester.handle.setGroupingKey(key)
        return list(tester.handle.listTimers())

    assert timers() == [30_000]
    tester.setProcessingTime(30_000)
    assert timers() == [60_000]
    tester.setProcessingTime(60_000)
    assert timers() == [90_000]
