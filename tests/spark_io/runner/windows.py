"""A windowed topology the Spark runner tests run on the local engine and on Spark alike:
events in waves, event-time sliding windows per key, late events on the late stream."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import BasicBolt, Component, Fields, StormTopology, TopologyBuilder
from engine.state import StatefulWindowedBolt
from engine.windowing import Duration, WindowedBolt
from spark_io import ReplayableSpout, SinkTarget, SparkSinkBolt

from .topologies import CLUSTER_SENTENCES, SCHEMAS, word_count

#: positions per spout task per wave (one micro-batch on Spark)
WAVE = 20
WAVES = 4
TASKS = 2
EVENTS = WAVE * WAVES * TASKS
KEYS = 3
#: local mode: seconds (virtual) between two waves, far more than the watermark interval
WAVE_GAP_SECS = 10.0


def event(i: int) -> tuple[int, int, float, int]:
    """Event ``i``: (id, key, ts, value). Wave ``k`` holds timestamps in [10k, 10k + 9.5];
    from wave 2 on, the last event of each task's wave is 20 s behind (late)."""
    p = i // TASKS
    k, j = divmod(p, WAVE)
    ts = k * 10 + j * 0.5
    if k >= 2 and j == WAVE - 1:
        ts = (k - 2) * 10 + 1.0
    return i, i % KEYS, ts, i


class Events(ReplayableSpout):
    """The events; event ``i`` is task ``i % 2``'s position ``i // 2``. In local mode a wave
    goes out every ``WAVE_GAP_SECS`` of the topology's clock, so that the watermark has
    moved past a wave before the next one comes, as between two micro-batches."""

    batch_rows = WAVE

    def __init__(self, count: int = EVENTS) -> None:
        self.count = count

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        self._clock = context.clock
        self._start_ns = self._clock.now_ns()

    def next_tuple(self) -> None:
        wave = int((self._clock.now_ns() - self._start_ns) / 1e9 // WAVE_GAP_SECS)
        if self._next < (wave + 1) * WAVE:
            super().next_tuple()

    def end_position(self, task_index: int, num_tasks: int) -> int:
        return len(range(task_index, self.count, num_tasks))

    def read(self, task_index: int, num_tasks: int, start: int, end: int) -> Any:
        rows = [event(task_index + p * num_tasks) for p in range(start, end)]
        return [list(c) for c in zip(*rows, strict=True)] if rows else [[], [], [], []]

    def spark_schema(self) -> str:
        return "id BIGINT, key BIGINT, ts DOUBLE, value BIGINT"

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "key", "ts", "value"])


class KeyWindows(WindowedBolt):
    """Per key of each window: (id, key, start, end, count, total), ``id`` unique per row."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, window: Any) -> None:
        if self.delay:
            import time

            time.sleep(self.delay)
        per_key: dict[int, list[int]] = {}
        for t in window.get():
            per_key.setdefault(t["key"], []).append(t["value"])
        for key, values in sorted(per_key.items()):
            end = round(window.end_timestamp)
            self.collector.emit(
                [
                    key * 1_000_000 + end,
                    key,
                    window.start_timestamp,
                    window.end_timestamp,
                    len(values),
                    sum(values),
                ]
            )

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "key", "start", "end", "count", "total"])


class LateIds(BasicBolt):
    """The id of each late event (the late stream carries its values as a list)."""

    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([tuple["late_tuple"][0], tuple["timestamp"]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "ts"])


WINDOW_SCHEMAS = {
    "windows": "id BIGINT, key BIGINT, start DOUBLE, end DOUBLE, count BIGINT, total BIGINT",
    "late": "id BIGINT, ts DOUBLE",
}


def windowed(
    sinks: Callable[[str], Component] | Path,
    delay: float = 0.0,
    events: int = EVENTS,
    late: bool = True,
    builder: TopologyBuilder | None = None,
) -> StormTopology:
    """Events → sliding event-time windows (10 s every 5 s, lag 2 s) per key → a sink;
    late events → their ids → another sink (with ``late``; without, late events are only
    counted). ``sinks``: a directory (transactional ``SparkSinkBolt``s in ``windows/`` and
    ``late/``) or a factory of sink bolts by name. Added to ``builder`` when given."""
    if isinstance(sinks, Path):
        out = sinks

        def sinks(name: str) -> Component:
            return SparkSinkBolt(
                SinkTarget.files(out / name, "parquet"), transactional=True, key_field="id"
            )

    bolt = (
        KeyWindows(delay)
        .with_window(Duration(10), Duration(5))
        .with_timestamp_field("ts")
        .with_lag(2)
    )
    if late:
        bolt = bolt.with_late_tuple_stream("late")
    builder = builder or TopologyBuilder()
    builder.set_spout("events", Events(events), TASKS)
    builder.set_bolt("windows", bolt, 2).fields_grouping("events", Fields("key"))
    builder.set_bolt("windows_out", sinks("windows")).shuffle_grouping("windows")
    if late:
        builder.set_bolt("late", LateIds()).shuffle_grouping("windows", "late")
        builder.set_bolt("late_out", sinks("late")).shuffle_grouping("late")
    return builder.create_topology()


class RunningTotals(StatefulWindowedBolt):
    """Per key of each window: (id, key, end, count, total of the key's counts so far), the
    totals in its ``KeyValueState``."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, window: Any) -> None:
        counts: dict[int, int] = {}
        for t in window.get():
            counts[t["key"]] = counts.get(t["key"], 0) + 1
        for key, count in sorted(counts.items()):
            total = self.state.get(key, 0) + count
            self.state.put(key, total)
            end = round(window.end_timestamp)
            self.collector.emit([key * 1_000_000 + end, key, window.end_timestamp, count, total])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "key", "end", "count", "total"])


TOTALS_SCHEMAS = {"totals": "id BIGINT, key BIGINT, end DOUBLE, count BIGINT, total BIGINT"}


def stateful_windowed(sink: Component) -> StormTopology:
    """Events → a stateful windowed bolt (tumbling event-time windows of 10 s, lag 2 s, per
    key; running totals per key in its state) → ``sink``."""
    bolt = RunningTotals().with_tumbling_window(Duration(10)).with_timestamp_field("ts")
    builder = TopologyBuilder()
    builder.set_spout("events", Events(), TASKS)
    builder.set_bolt("totals", bolt.with_lag(2), 2).fields_grouping("events", Fields("key"))
    builder.set_bolt("out", sink).shuffle_grouping("totals")
    return builder.create_topology()


#: Where ``cluster_topology`` writes (set by the test that submits it).
OUT_ENV = "SQUALL_RUNNER_CLUSTER_OUT"
#: ``squall submit`` reads the bolts' Spark types here (the word count's and the windows').
SPARK_SCHEMAS = {**WINDOW_SCHEMAS, **SCHEMAS}


def cluster_topology() -> StormTopology:
    """What ``squall submit`` runs on ``local-cluster``: the windowed topology (in
    ``$SQUALL_RUNNER_CLUSTER_OUT/windows`` and ``/late``) and, beside it in the same
    topology, the columnar word count of ``CLUSTER_SENTENCES`` sentences (in ``/counts``).
    One cluster start covers both (each start costs tens of seconds)."""
    out = Path(os.environ[OUT_ENV])
    builder = TopologyBuilder()
    word_count(out / "counts", CLUSTER_SENTENCES, batch_rows=500, builder=builder)
    return windowed(out, builder=builder)
