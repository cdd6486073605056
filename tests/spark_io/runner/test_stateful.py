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


def processing_time_window() -> tuple[bytes, str, int]:
    """A one-task processing-time window (a minute, sliding every 30 s: what enters holds
    for the whole test): its plan, its input's schema and its task's grouping key."""
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    from spark_io._layout import SOURCE_TASK, TASK, OutputLayout, StreamLayout, in_col
    from spark_io._stream_source import cloudpickled
    from spark_io.runner._bolt_task import BoltPlan
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
    return cloudpickled(plan), schema.json(), task_keys(1)[0]


def three_rows(key: int) -> Any:
    """Three rows for the window's task, as Spark groups them (its input's columns)."""
    from spark_io._layout import SOURCE_TASK, TASK, in_col
    from spark_io.runner._task_keys import KEY_COLUMN

    return pd.DataFrame(
        {SOURCE_TASK: [0, 0, 0], in_col(0, 0): [1, 2, 3], TASK: [0, 0, 0], KEY_COLUMN: [key] * 3}
    )


def test_a_processing_time_window_keeps_a_timer_while_it_holds_tuples() -> None:
    """The timer that fires is still listed while it is handled (Spark deletes it after):
    the window must set its next one then, or it ticks once and never again without input."""
    from pyspark.sql.streaming.tws_tester import TwsTester

    from spark_io.runner._stateful import stateful_processor

    plan, schema, key = processing_time_window()
    processor = stateful_processor(plan, schema, kv=False, window=True, tick_ms=30_000)
    tester = TwsTester(processor, timeMode="ProcessingTime")
    rows = three_rows(key)
    tester.testInPandas(key, rows)

    def timers() -> list[int]:
        tester.handle.setGroupingKey(key)
        return list(tester.handle.listTimers())

    assert timers() == [30_000]
    tester.setProcessingTime(30_000)
    assert timers() == [60_000]
    tester.setProcessingTime(60_000)
    assert timers() == [90_000]


class GroupState:
    """What ``applyInPandasWithState`` hands its function: the group's state and timeout."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None
        self.hasTimedOut = False
        self.timeout_ms: int | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple[Any, ...]:
        assert self.value is not None
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value

    def setTimeoutDuration(self, ms: int) -> None:
        self.timeout_ms = ms


def test_a_processing_time_window_fires_on_time_on_another_executor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The window's times outlive the Python worker, in Spark state: the next micro-batch
    may run its task on another machine (or after a reboot), whose monotonic clock started
    elsewhere (here a day later): 31 s on, the 30 s slide has passed and the window fires."""
    import time

    from spark_io.runner._stateful import window_function

    plan, schema, key = processing_time_window()
    run = window_function(plan, schema, tick_ms=30_000)
    rows = three_rows(key)
    state = GroupState()
    assert list(run((key,), iter([rows]), state)) == []
    assert state.timeout_ms == 30_000

    monotonic, wall = time.monotonic_ns, time.time_ns
    monkeypatch.setattr(time, "monotonic_ns", lambda: monotonic() - 86_400 * 10**9)
    monkeypatch.setattr(time, "time_ns", lambda: wall() + 31 * 10**9)
    state.hasTimedOut = True
    out = list(run((key,), iter(()), state))
    assert [list(frame.iloc[:, -1]) for frame in out] == [[3]]


def test_a_processing_time_window_fires_once_more_for_what_left_as_on_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After its last tuples leave, the window still has a firing due (an empty window
    whose expired tuples are those): the engine's ticks fire it, so must Spark's timeout."""
    import time

    from spark_io.runner._stateful import window_function

    plan, schema, key = processing_time_window()
    run = window_function(plan, schema, tick_ms=30_000)
    state = GroupState()
    assert list(run((key,), iter([three_rows(key)]), state)) == []
    wall = time.time_ns
    sizes = []
    for secs in (31, 61, 91):
        monkeypatch.setattr(time, "time_ns", lambda secs=secs: wall() + secs * 10**9)
        state.hasTimedOut, state.timeout_ms = True, None
        out = list(run((key,), iter(()), state))
        sizes.append([n for frame in out for n in frame.iloc[:, -1]])
        if secs < 91:
            assert state.timeout_ms == 30_000, secs
    assert sizes == [[3], [3], [0]]  # the engine's: the two windows, then what left them
    assert state.timeout_ms is None  # nothing more to fire


def test_a_window_task_quiets_the_padding_warning_of_sparks_own_worker() -> None:
    """pyspark pads a window group's output with all-NA rows and pandas warns about the
    concatenation (``pyspark.worker``) on every call that emits less than its state: the
    window's function ignores that one warning from there, and only that one."""
    import warnings

    from spark_io.runner._stateful import PADDING_WARNING, window_function

    plan, schema, key = processing_time_window()
    run = window_function(plan, schema, tick_ms=30_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as pytest's filter; restored on the way out
        list(run((key,), iter([three_rows(key)]), GroupState()))
        message = f"{PADDING_WARNING} is deprecated."
        warnings.warn_explicit(message, FutureWarning, "worker.py", 1, module="pyspark.worker")
        with pytest.raises(FutureWarning):  # the same from anywhere else still shows
            warnings.warn_explicit(message, FutureWarning, "user.py", 1, module="user")
        with pytest.raises(DeprecationWarning):  # and so does anything else from pyspark
            warnings.warn_explicit("other", DeprecationWarning, "worker.py", 1, "pyspark.worker")
