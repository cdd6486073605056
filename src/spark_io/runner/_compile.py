"""``SparkRunner``: the same ``StormTopology`` as one Spark Structured Streaming query.

>>> from spark_io import SparkRunner, spark_session
>>> runner = SparkRunner(spark_session())                          # doctest: +SKIP
>>> run = runner.run(topology, {}, checkpoint_location="ck/wc",   # doctest: +SKIP
...                  schemas={"split": "word STRING", "count": "word STRING, n BIGINT"})
>>> run.await_termination()                                        # doctest: +SKIP

How a topology maps (``compile`` checks all of it before Spark runs anything, and refuses
what cannot map, naming the component and why):

- a spout that can re-read rows by position (``ReplayableSpout``, ``SparkOffsetSpout`` over
  files) is a Python streaming source, one Spark partition per spout task (see
  ``_stream_source``);
- a bolt is ``mapInArrow`` over its input, one component instance per Spark task, task
  index = partition id (see ``_bolt_task``); its inputs are unioned and routed by a
  ``__task`` column with ``repartitionById(tasks, __task)``: shuffle → a seeded random
  task, fields and partial key → ``pmod(hash(fields), tasks)`` (Spark's murmur3, the same
  in every run), global → task 0, all → a broadcast cross join with every task index,
  direct → the task the emitter chose; local-or-shuffle with as many tasks as its one
  upstream component → no exchange at all. Custom groupings are refused;
- a spout's only subscriber, local-or-shuffle grouped with as many tasks (and neither
  stateful nor windowed), runs inside the spout's read instead (``_fused``): the spout's
  rows never enter the JVM;
- a stateful bolt (``engine.state``) is ``transformWithStateInPandas`` grouped by its
  task's key (``_task_keys``; the checkpoint says so, ``check_state_layout``):
  its task's ``KeyValueState`` is a Spark map state, committed with each micro-batch
  (``_stateful``); the engine's checkpoint spout and barrier forwarders are taken off
  (Spark's checkpoint does their work). A windowed bolt (``engine.windowing``) is
  ``applyInPandasWithState`` by task key (faster to plan and to feed; one per query)
  or else ``transformWithStateInPandas``: its window is the task's Spark state between
  micro-batches. A stateful windowed bolt has both, in ``transformWithStateInPandas``;
- a ``CombinerBolt``'s input from a bolt, fields-grouped on part of its key (or global,
  all), is combined in the upstream bolt's task first: only partial aggregates cross the
  shuffle (``_combine``);
- ``SparkSinkBolt`` is written by the query's ``foreachBatch``: one transaction per
  micro-batch that has rows, named by the query id and the batch id (Storm's txid),
  published with one rename and skipped if already published, so a batch that runs again
  after a driver crash never writes twice; then every spout's ``commit`` gets the batch's
  end positions (``_commits``);
- every other bolt without subscribers runs for its side effects; the query's one
  ``foreachBatch`` computes all leaves of a micro-batch once (``persist``), or, when the
  one leaf is a sink, in its write.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import BasicBatchBolt, BatchBolt, ComponentSpec, StormTopology
from engine.runners import (
    ChosenTask,
    EveryTask,
    FirstTask,
    HashTask,
    LocalTask,
    NoColumnRouting,
    TaskPlan,
    grouper_class,
    task_plan,
)

from .._errors import (
    SinkError,
    SinkSchemaError,
    SparkConfigError,
    SparkIOError,
    is_interruption,
    is_spark_error,
    map_spark_error,
)
from .._layout import (
    DIRECT_TASK,
    INPUT,
    LEAF,
    SOURCE_TASK,
    STREAM,
    TASK,
    OutputLayout,
    StreamLayout,
    in_col,
    leaf_col,
    out_col,
)
from .._replayable import ReplayableSpout
from .._sink import SparkSinkBolt, _local_path
from .._spout import SparkOffsetSpout
from ._bolt_task import BoltFailure, BoltPlan, run_bolt_partition
from ._combine import CombineSpec, PartialStep

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from .._stream_source import PositionReader

__all__ = [
    "RUNNER_SPARK_CONF",
    "CompiledTopology",
    "Placement",
    "SparkRunner",
    "SparkTopologyRun",
    "StoppedDuringBatch",
    "check_topology",
    "failure_line",
]

#: File formats a Spark-run ``SparkOffsetSpout`` reads on the executors (with pyarrow).
RUNNER_SOURCE_FORMATS = ("parquet", "orc", "csv", "json")
#: Rows read from a ``ReplayableSpout`` to infer its Spark schema.
_SAMPLE_ROWS = 100
#: Session settings the runner needs: fixed partitioning (AQE would merge the bolts'
#: partitions, which are their task indexes).
RUNNER_SESSION_CONF = {"spark.sql.adaptive.enabled": "false"}
#: Settings for a session made to run topologies (``SessionConfig(conf=RUNNER_SPARK_CONF)``):
#: Spark's Python workers fork from a daemon that imported the engine once (``_daemon``),
#: which saves seconds per worker.
RUNNER_SPARK_CONF = {
    "spark.python.daemon.module": "spark_io.runner._daemon",
    "spark.sql.adaptive.enabled": "false",
}


# --- refusals --------------------------------------------------------------------------------
def check_topology(topology: StormTopology) -> None:
    """Raise ``SparkConfigError`` for the first part of ``topology`` Spark cannot run, naming
    the component and the reason (no Spark needed)."""
    from ._stateful import unwire

    topology, stateful = unwire(topology)
    for cid, spec in sorted(topology.bolts.items()):
        if cid in stateful and isinstance(spec.component, (BasicBatchBolt, BatchBolt)):
            raise SparkConfigError(  # pragma: no cover - the engine refuses them first
                f"stateful bolt {cid!r}: batch bolts cannot be stateful on Spark"
            )
    for cid, spec in sorted(topology.spouts.items()):
        _check_spout(cid, spec)
    for cid, spec in sorted(topology.bolts.items()):
        if not spec.inputs:
            raise SparkConfigError(
                f"bolt {cid!r} has no inputs: on Spark a bolt runs only over its inputs' "
                f"micro-batches; subscribe it to a stream or remove it"
            )
        for sub in spec.inputs:
            routing = grouper_class(sub.grouping).spark_routing(sub.grouping)
            if isinstance(routing, NoColumnRouting):
                raise SparkConfigError(
                    f"bolt {cid!r}: {sub.grouping!r} on {sub.component!r} cannot run on Spark: "
                    f"{routing.reason}; use fields_grouping, shuffle_grouping or "
                    f"direct_grouping with emit_direct"
                )
        if isinstance(spec.component, SparkSinkBolt) and spec.streams:
            raise SparkConfigError(  # pragma: no cover - SparkSinkBolt declares no streams
                f"sink {cid!r} declares output streams; a SparkSinkBolt ends the topology"
            )
    cycle = _find_cycle(topology)
    if cycle:
        raise SparkConfigError(
            f"bolt {cycle[0]!r} is on a cycle ({' -> '.join(cycle)}): a Spark query is a "
            f"directed acyclic graph; break the loop (feed it back through a spout)"
        )


def _check_spout(cid: str, spec: ComponentSpec) -> None:
    spout = spec.component
    if isinstance(spout, SparkOffsetSpout):
        source = spout.source
        if source.kind != "files":
            raise SparkConfigError(
                f"spout {cid!r} reads {source.describe()}: on Spark a spout's partitions are "
                f"read on the executors, which have no SparkSession, so only file sources "
                f"can be read there; point it at the files with SparkSource.files(path, format)"
            )
        if source.format not in RUNNER_SOURCE_FORMATS:
            raise SparkConfigError(
                f"spout {cid!r} reads {source.describe()}: the Spark runner reads "
                f"{', '.join(RUNNER_SOURCE_FORMATS)} files on the executors (pyarrow), not "
                f"{source.format}"
            )
        return
    if isinstance(spout, ReplayableSpout):
        if len(spec.streams) != 1 or next(iter(spec.streams.values())).direct:
            raise SparkConfigError(
                f"spout {cid!r}: a ReplayableSpout on Spark declares exactly one stream, not "
                f"direct (it declares {sorted(spec.streams)})"
            )
        return
    raise SparkConfigError(
        f"spout {cid!r} ({type(spout).__name__}) cannot run on Spark: a Spark source must "
        f"read a micro-batch again, by position, after a failure or a driver restart, and "
        f"this spout replays only what it keeps in memory; subclass "
        f"spark_io.ReplayableSpout (end_position and read) or read through SparkOffsetSpout"
    )


def _find_cycle(topology: StormTopology) -> list[str]:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(cid: str) -> list[str]:
        state[cid] = 1
        path.append(cid)
        for sub in topology.components[cid].inputs:
            up = sub.component
            if state.get(up) == 1:
                loop = path[path.index(up) :]
                return [*loop, up]
            if up not in state:
                found = visit(up)
                if found:
                    return found
        path.pop()
        state[cid] = 2
        return []

    for cid in sorted(topology.bolts):
        if cid not in state:
            found = visit(cid)
            if found:
                return found
    return []


def _order(topology: StormTopology) -> list[str]:
    """Components, every one after its inputs (spouts first)."""
    done: list[str] = sorted(topology.spouts)
    seen = set(done)
    pending = sorted(topology.bolts)
    while pending:
        for cid in pending:
            if all(s.component in seen for s in topology.bolts[cid].inputs):
                done.append(cid)
                seen.add(cid)
                pending.remove(cid)
                break
    return done


# --- schemas ---------------------------------------------------------------------------------
def _parse_ddl(where: str, ddl: str) -> list[tuple[str, Any]]:
    from pyspark.sql.types import StructType, _parse_datatype_string

    try:
        struct = _parse_datatype_string(ddl)
    except Exception as exc:
        raise SparkConfigError(f"{where}: {ddl!r} is not a DDL schema ({exc})") from exc
    if not isinstance(struct, StructType):
        raise SparkConfigError(f"{where}: {ddl!r} is not a DDL schema of named fields")
    return [(f.name, f.dataType) for f in struct.fields]


def _declared_types(
    where: str, fields: Sequence[str], named: Sequence[tuple[str, Any]]
) -> tuple[str | None, ...]:
    by_name = dict(named)
    extra = [n for n in by_name if n not in fields]
    if extra:
        raise SparkConfigError(
            f"{where}: {extra[0]!r} is not a field of the stream (its fields: {list(fields)})"
        )
    return tuple(by_name[f].json() if f in by_name else None for f in fields)


@dataclass(frozen=True)
class Placement:
    """Where one component runs in the query and how long its memory lasts."""

    component: str
    kind: str  # "spout", "bolt" or "sink"
    tasks: int
    #: the Spark operator that runs it
    where: str
    #: what survives a micro-batch (and a driver restart)
    memory: str


@dataclass
class CompiledTopology:
    """A topology as Spark DataFrames (``SparkRunner.compile``): per component its output
    layout and streaming DataFrame, the leaves the query's ``foreachBatch`` handles, and
    ``output``, the one DataFrame the query writes."""

    topology: StormTopology
    plan: TaskPlan
    layouts: dict[str, OutputLayout]
    frames: dict[str, DataFrame]
    #: per leaf index: the component and, for sinks, the written column names
    leaves: list[tuple[str, list[str] | None]]
    output: DataFrame
    readers: dict[str, PositionReader] = field(default_factory=dict)
    #: per component, in topological order: where it runs and what its memory is
    placements: dict[str, Placement] = field(default_factory=dict)
    #: some bolt keeps Spark state (stateful or windowed): its checkpoint is keyed by task
    #: keys (``_task_keys``, ``check_state_layout``)
    keeps_state: bool = False

    def describe(self) -> str:
        """The plan as a table, one component a line: what ``squall submit --runner spark``
        prints at start, so that a bolt whose memory ends with each micro-batch is no
        surprise."""
        rows = [("component", "tasks", "runs in", "memory")] + [
            (f"{p.kind} {p.component}", str(p.tasks), p.where, p.memory)
            for p in self.placements.values()
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        return "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(r[:3], widths, strict=True)) + "  " + r[3]
            for r in rows
        )


class SparkRunner:
    """Runs a topology on a Spark session as one Structured Streaming query.

    The session may be local (``local[N]``; ``local[N,F]`` retries a failed task ``F - 1``
    times), ``local-cluster[...]`` or a real cluster's master URL; every executor needs the
    topology's modules and pyarrow.
    """

    def __init__(self, spark: SparkSession) -> None:
        from pyspark.sql import SparkSession

        if not isinstance(spark, SparkSession):
            raise SparkConfigError(
                f"SparkRunner needs a pyspark.sql.SparkSession, got {type(spark).__name__}; "
                f"spark_io.spark_session() makes one"
            )
        self.spark = spark

    # --- compile ---------------------------------------------------------------------------
    def compile(
        self,
        topology: StormTopology,
        conf: Mapping[str, Any] | None = None,
        *,
        schemas: Mapping[str, str] | None = None,
        batch_rows: Mapping[str, int] | None = None,
        combine: bool = True,
    ) -> CompiledTopology:
        """The topology's DataFrames, checked; nothing runs yet.

        ``schemas``: Spark types of bolt streams (and spouts, overriding theirs) as DDL,
        keyed ``"component"`` (its default stream) or ``"component:stream"``; fields left
        out travel pickled. ``batch_rows``: positions per spout task per micro-batch.
        ``combine=False`` leaves out the combine steps before combiner bolts (``_combine``;
        same rows, every raw row through the shuffle).
        """
        if not isinstance(topology, StormTopology):
            raise SparkConfigError(
                f"SparkRunner needs a StormTopology (TopologyBuilder.create_topology()), got "
                f"{type(topology).__name__}"
            )
        check_topology(topology)
        from ._stateful import STATE_STORE_CONF, unwire

        topology, stateful = unwire(topology)
        conf = dict(conf or {})
        schemas = dict(schemas or {})
        for key in schemas:
            cid, _, stream = key.partition(":")
            spec = topology.components.get(cid)
            if spec is None or (stream or "default") not in spec.streams:
                raise SparkConfigError(
                    f"schemas key {key!r} names no stream of the topology; use 'component' for "
                    f"a default stream or 'component:stream' (components: "
                    f"{sorted(topology.components)})"
                )
        batch_rows = dict(batch_rows or {})
        for cid, rows in batch_rows.items():
            if cid not in topology.spouts:
                raise SparkConfigError(f"batch_rows names {cid!r}, which is not a spout")
            if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
                raise SparkConfigError(f"batch_rows[{cid!r}] must be an int >= 1, got {rows!r}")
        from ._commits import NamedReader

        plan = task_plan(topology)
        combining = _Combining(topology, stateful, schemas, enabled=combine)
        windowed = any(_windowed(spec) is not None for spec in topology.bolts.values())
        fused = _fusable(topology, plan, stateful)
        self._group_state = _group_state_window(topology, stateful)
        self._prepare_session(STATE_STORE_CONF if stateful or windowed else {})
        #: components whose partition i holds task index i (a stateful bolt's output is
        #: partitioned by Spark's state partitions instead)
        self._aligned: set[str] = set(topology.spouts)
        layouts: dict[str, OutputLayout] = {}
        frames: dict[str, DataFrame] = {}
        readers: dict[str, PositionReader] = {}
        placements: dict[str, Placement] = {}
        for cid in _order(topology):
            spec = topology.components[cid]
            tasks = len(plan.component_tasks[cid])
            if spec.is_spout:
                reader = self._spout_reader(cid, spec, plan, schemas, conf, batch_rows.get(cid))
                readers[cid] = reader
                layouts[cid] = reader.layout
                if cid not in fused.values():
                    frames[cid] = self._source(NamedReader.of(reader))
                placements[cid] = Placement(
                    cid,
                    "spout",
                    tasks,
                    "streaming source",
                    f"positions in Spark's offset log; up to {reader.batch_rows} rows per task "
                    f"per micro-batch",
                )
                continue
            sink = spec.component
            if isinstance(sink, SparkSinkBolt):
                placements[cid] = Placement(
                    cid,
                    "sink",
                    1,
                    "foreachBatch",
                    "one transaction per non-empty micro-batch (exactly once)"
                    if sink.transactional
                    else "appends each micro-batch (a restarted batch appends again)",
                )
                continue
            # (a combiner's layout is _Combining's: its schema parsed once)
            own = combining.outputs.get(cid)
            if own is None:
                own = _bolt_layout(cid, spec, schemas)
            layouts[cid], steps = combining.layout(cid, own)
            bolt_plan = self._bolt_plan(topology, plan, conf, cid, layouts, steps, combining)
            if cid in fused:
                from .._stream_source import cloudpickled
                from ._fused import FusedReader

                reader = FusedReader.of(readers[fused[cid]], cloudpickled(bolt_plan), layouts[cid])
                frames[cid] = self._source(NamedReader.of(reader))
                self._aligned.add(cid)
                placements[cid] = Placement(
                    cid,
                    "bolt",
                    tasks,
                    f"read of {fused[cid]}",
                    "one micro-batch (fields reset at each)",
                )
                continue
            frames[cid] = self._bolt_frame(
                topology, plan, cid, layouts, frames, cid in stateful, bolt_plan
            )
            where, memory = "mapInArrow", "one micro-batch (fields reset at each)"
            if cid == self._group_state:
                where = "applyInPandasWithState by task"
                memory = "the window, in Spark state, checkpointed with each micro-batch"
            elif _windowed(spec) is not None:
                where = "transformWithStateInPandas by task"
                memory = "the window, in Spark state, checkpointed with each micro-batch"
            elif cid in stateful:
                where = "transformWithStateInPandas by task"
                memory = "KeyValueState, checkpointed with each micro-batch"
            elif cid in combining.outputs:
                ups = sorted({u for (c, _), (u, _) in combining.inputs.items() if c == cid})
                where = "mapInArrow, combining" + (
                    f" partials from {', '.join(ups)}" if ups else " its rows"
                )
            placements[cid] = Placement(cid, "bolt", tasks, where, memory)
        leaves, output = self._leaves(topology, plan, layouts, frames)
        return CompiledTopology(
            topology,
            plan,
            layouts,
            frames,
            leaves,
            output,
            readers,
            placements,
            keeps_state=bool(stateful) or windowed,
        )

    def _prepare_session(self, extra: Mapping[str, str]) -> None:
        from .._stream_source import SpoutSource

        try:
            for key, value in {**RUNNER_SESSION_CONF, **extra}.items():
                self.spark.conf.set(key, value)
            self.spark.dataSource.register(SpoutSource)
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(exc, "preparing the session for the Spark runner") from exc

    def _spout_reader(
        self,
        cid: str,
        spec: ComponentSpec,
        plan: TaskPlan,
        schemas: Mapping[str, str],
        conf: Mapping[str, Any],
        batch_rows: int | None,
    ) -> PositionReader:
        from .._stream_source import OffsetFilesReader, ReplayableReader

        spout = spec.component
        (stream, info), *_ = spec.streams.items()
        fields = tuple(info.fields)
        tasks = plan.component_tasks[cid]
        where = f"spout {cid!r}"
        given = schemas.get(f"{cid}:{stream}") or (
            schemas.get(cid) if stream == "default" else None
        )
        types: tuple[str | None, ...]
        if isinstance(spout, SparkOffsetSpout):
            source = spout.source
            found = _parquet_types(source, (*fields, spout.offset_column))
            if found is not None:
                types = tuple(found[f] for f in fields)
            else:
                struct = source.load(self.spark).schema
                names = [f.name for f in struct.fields]
                missing = [f for f in (*fields, spout.offset_column) if f not in names]
                if missing:
                    raise SparkConfigError(
                        f"{where}: {source.describe()} has no column {missing[0]!r} "
                        f"(columns: {names})"
                    )
                by_name = {f.name: f.dataType for f in struct.fields}
                types = tuple(by_name[f].json() for f in fields)
            if given:
                types = _merge(types, _declared_types(where, fields, _parse_ddl(where, given)))
            layout = OutputLayout(cid, (StreamLayout(cid, stream, 0, fields, types),))
            return OffsetFilesReader(
                cid,
                tasks,
                layout,
                batch_rows or spout.chunk_rows,
                location=source.location,
                format=source.format or "parquet",
                options=dict(source.options),
                offset_column=spout.offset_column,
                chunk_rows=spout.chunk_rows,
                first_poll=spout.first_poll,
                bounded=spout.bounded,
            )
        assert isinstance(spout, ReplayableSpout)
        ddl = given or spout.spark_schema()
        if ddl:
            types = _declared_types(where, fields, _parse_ddl(where, ddl))
        else:
            types = _infer_types(cid, spout, fields, len(tasks))
        layout = OutputLayout(cid, (StreamLayout(cid, stream, 0, fields, types),))
        return ReplayableReader(cid, tasks, layout, batch_rows or spout.batch_rows, spout=spout)

    def _source(self, reader: PositionReader) -> DataFrame:
        """The streaming DataFrame of ``reader``'s rows (``SpoutSource``)."""
        from .._stream_source import SOURCE_NAME, source_options

        return self.spark.readStream.format(SOURCE_NAME).options(**source_options(reader)).load()

    def _bolt_plan(
        self,
        topology: StormTopology,
        plan: TaskPlan,
        conf: Mapping[str, Any],
        cid: str,
        layouts: Mapping[str, OutputLayout],
        steps: tuple[PartialStep, ...],
        combining: _Combining,
    ) -> BoltPlan:
        """What a task of bolt ``cid`` needs on an executor."""
        spec = topology.bolts[cid]
        inputs = tuple(
            layouts[sub.component].stream(combining.inputs.get((cid, i), (None, sub.stream))[1])
            for i, sub in enumerate(spec.inputs)
        )
        tick = spec.config.get(
            "topology.tick.tuple.freq.secs", conf.get("topology.tick.tuple.freq.secs")
        )
        return BoltPlan(
            topology=topology,
            plan=plan,
            conf={**conf, **spec.config},
            component=cid,
            inputs=inputs,
            output=layouts[cid],
            tick_secs=None if tick is None else float(tick),
            partials=steps,
            drop=frozenset(layouts[cid].stream(name).index for name in combining.drop.get(cid, ())),
            combine=combining.spec(cid, inputs),
        )

    def _bolt_frame(
        self,
        topology: StormTopology,
        plan: TaskPlan,
        cid: str,
        layouts: Mapping[str, OutputLayout],
        frames: Mapping[str, DataFrame],
        stateful: bool,
        bolt_plan: BoltPlan,
    ) -> DataFrame:
        """Bolt ``cid``'s DataFrame: its routed input through ``mapInArrow``, or, for a
        stateful or windowed bolt, grouped by its tasks' keys into Spark state."""
        spec = topology.bolts[cid]
        routed = self._route(
            plan,
            cid,
            spec,
            bolt_plan.inputs,
            layouts,
            frames,
            keep_task=stateful or _windowed(spec) is not None,
        )
        from .._stream_source import cloudpickled

        payload = cloudpickled(bolt_plan)
        window = _windowed(spec)
        tick_ms = None
        if window is not None and not window.bolt.is_event_time and bolt_plan.tick_secs:
            tick_ms = max(1, round(bolt_plan.tick_secs * 1000))
        if stateful or window is not None:
            from ._task_keys import KEY_COLUMN, task_key_column

            # each task in a state partition of its own (see _task_keys)
            routed = routed.withColumn(
                KEY_COLUMN, task_key_column(TASK, len(plan.component_tasks[cid]))
            )
        if window is not None and cid == self._group_state:
            from ._stateful import WINDOW_STATE_SCHEMA, window_function

            return routed.groupBy(KEY_COLUMN).applyInPandasWithState(
                window_function(payload, routed.schema.json(), tick_ms=tick_ms),
                layouts[cid].spark_schema(),
                WINDOW_STATE_SCHEMA,
                "append",
                "NoTimeout" if tick_ms is None else "ProcessingTimeTimeout",
            )
        if stateful or window is not None:
            from ._stateful import stateful_processor

            return routed.groupBy(KEY_COLUMN).transformWithStateInPandas(
                stateful_processor(
                    payload,
                    routed.schema.json(),
                    kv=stateful,
                    window=window is not None,
                    tick_ms=tick_ms,
                ),
                layouts[cid].spark_schema(),
                "Append",
                "None" if tick_ms is None else "ProcessingTime",
            )
        self._aligned.add(cid)
        return routed.mapInArrow(
            functools.partial(run_bolt_partition, payload), layouts[cid].spark_schema()
        )

    def _route(
        self,
        plan: TaskPlan,
        cid: str,
        spec: ComponentSpec,
        inputs: Sequence[StreamLayout],
        layouts: Mapping[str, OutputLayout],
        frames: Mapping[str, DataFrame],
        keep_task: bool = False,
    ) -> DataFrame:
        """The bolt's input: every subscription's rows with ``__task``, in one DataFrame
        whose partition ``i`` holds task index ``i``'s rows; with ``keep_task`` (a bolt
        grouped by task into Spark state), not repartitioned: the grouping's own exchange
        places each task's key in its state partition (``_task_keys``), and a
        repartition by task before it would be a second shuffle of every row (its stage
        took 0.08-0.09 s of a 200,000-event micro-batch in ``bench/spark_runner.py``)."""
        from pyspark.sql import functions as F

        n = len(plan.component_tasks[cid])
        casts = _key_casts(cid, spec, inputs)
        parts = []
        for i, (sub, layout) in enumerate(zip(spec.inputs, inputs, strict=True)):
            up = frames[sub.component]
            if len(layouts[sub.component].streams) > 1:
                up = up.filter(F.col(STREAM) == layout.index)
            columns = [F.col(SOURCE_TASK)] + [
                F.col(out_col(layout.index, k)).alias(in_col(i, k))
                for k in range(len(layout.fields))
            ]
            if len(inputs) > 1:
                columns.append(F.lit(i).cast("int").alias(INPUT))
            routing = grouper_class(sub.grouping).spark_routing(sub.grouping)
            up_tasks = len(plan.component_tasks[sub.component])
            if (
                isinstance(routing, LocalTask)
                and len(inputs) == 1
                and up_tasks == n
                and sub.component in self._aligned
            ):
                # The same tasks on both sides: no exchange.
                if keep_task:
                    return up.select(*columns, F.spark_partition_id().alias(TASK))
                return up.select(*columns)
            if isinstance(routing, ChosenTask):
                tasks = plan.component_tasks[cid]
                lo, hi = tasks[0], tasks[-1]
                up = up.filter((F.col(DIRECT_TASK) >= lo) & (F.col(DIRECT_TASK) <= hi))
                task = (F.col(DIRECT_TASK) - lo).cast("int")
            elif isinstance(routing, HashTask):
                keys = [
                    F.col(out_col(layout.index, layout.fields.index(f))) for f in routing.fields
                ]
                keys = [k.cast(casts[j]) if j in casts else k for j, k in enumerate(keys)]
                task = F.pmod(F.hash(*keys), F.lit(n)).cast("int")
            elif isinstance(routing, FirstTask):
                task = F.lit(0).cast("int")
            elif isinstance(routing, EveryTask):
                every = self.spark.range(n).select(F.col("id").cast("int").alias(TASK))
                parts.append(up.select(*columns).crossJoin(F.broadcast(every)))
                continue
            else:  # RandomTask, or a LocalTask across different task counts
                task = F.floor(F.rand(seed=_seed(cid, i)) * n).cast("int")
            parts.append(up.select(*columns, task.alias(TASK)))
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part, allowMissingColumns=True)
        return union if keep_task else union.repartitionById(n, TASK)

    def _leaves(
        self,
        topology: StormTopology,
        plan: TaskPlan,
        layouts: Mapping[str, OutputLayout],
        frames: Mapping[str, DataFrame],
    ) -> tuple[list[tuple[str, list[str] | None]], DataFrame]:
        """The leaves and the query's output: each leaf's rows tagged ``LEAF`` with its
        columns as ``leaf_col``; or, when the one leaf is a sink, just that sink's rows as
        it writes them (its columns named, cast to its schema), so that the query's
        ``foreachBatch`` hands the micro-batch to the write as it is."""
        from pyspark.sql import functions as F

        subscribed = {sub.component for spec in topology.bolts.values() for sub in spec.inputs}
        leaves: list[tuple[str, list[str] | None]] = []
        for cid in _order(topology):
            spec = topology.components[cid]
            if isinstance(spec.component, SparkSinkBolt):
                leaves.append((cid, _sink_columns(cid, spec, topology, layouts)))
            elif cid not in subscribed:
                leaves.append((cid, None))
        direct = _direct_sink(leaves)
        parts = []
        for k, (cid, columns) in enumerate(leaves):
            spec = topology.components[cid]
            if columns is None:
                parts.append(frames[cid].select(F.lit(k).cast("int").alias(LEAF)))
                continue
            for sub in spec.inputs:
                layout = layouts[sub.component].stream(sub.stream)
                up = frames[sub.component]
                if len(layouts[sub.component].streams) > 1:
                    up = up.filter(F.col(STREAM) == layout.index)
                picked = [F.col(out_col(layout.index, layout.fields.index(c))) for c in columns]
                if direct:
                    parts.append(
                        up.select(*[col.alias(c) for col, c in zip(picked, columns, strict=True)])
                    )
                else:
                    parts.append(
                        up.select(
                            F.lit(k).cast("int").alias(LEAF),
                            *[col.alias(leaf_col(k, j)) for j, col in enumerate(picked)],
                        )
                    )
        output = parts[0]
        for part in parts[1:]:
            output = output.unionByName(part, allowMissingColumns=True)
        if direct:
            cid = leaves[0][0]
            sink = topology.bolts[cid].component
            assert isinstance(sink, SparkSinkBolt)
            if sink.schema:
                try:
                    output = _cast(cid, output, sink.schema)
                except Exception as exc:  # analysed here, at compile: Spark's error mapped
                    if not is_spark_error(exc):
                        raise
                    raise map_spark_error(
                        exc,
                        f"sink {cid!r}: casting its columns {leaves[0][1]} to its schema "
                        f"{sink.schema!r}",
                        SinkSchemaError,
                    ) from exc
        return leaves, output

    # --- run -------------------------------------------------------------------------------
    def run(
        self,
        topology: StormTopology,
        conf: Mapping[str, Any] | None = None,
        *,
        checkpoint_location: str | os.PathLike[str],
        schemas: Mapping[str, str] | None = None,
        batch_rows: Mapping[str, int] | None = None,
        trigger_secs: float | None = None,
        query_name: str | None = None,
        combine: bool = True,
    ) -> SparkTopologyRun:
        """Start the topology's query; returns at once (``await_termination`` waits).

        With ``trigger_secs=None`` (default) the query processes every row available now,
        in micro-batches of ``batch_rows`` per spout task, and stops (``availableNow``);
        otherwise it runs a micro-batch every ``trigger_secs`` until stopped. Restarted on
        the same ``checkpoint_location``, it resumes after the last committed micro-batch,
        running an uncommitted one again.
        """
        compiled = self.compile(
            topology, conf, schemas=schemas, batch_rows=batch_rows, combine=combine
        )
        return self.start(
            compiled,
            checkpoint_location=checkpoint_location,
            trigger_secs=trigger_secs,
            query_name=query_name,
        )

    def start(
        self,
        compiled: CompiledTopology,
        *,
        checkpoint_location: str | os.PathLike[str],
        trigger_secs: float | None = None,
        query_name: str | None = None,
    ) -> SparkTopologyRun:
        """Start the query of a topology ``compile`` returned (``run`` is both)."""
        checkpoint = os.fspath(checkpoint_location)
        if not checkpoint:
            raise SparkConfigError("run needs a checkpoint_location (a directory)")
        if compiled.keeps_state:
            check_state_layout(Path(checkpoint))
        sink = _BatchSink(compiled, checkpoint)
        writer = compiled.output.writeStream.foreachBatch(sink).option(
            "checkpointLocation", checkpoint
        )
        if query_name:
            writer = writer.queryName(query_name)
        if trigger_secs is None:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{float(trigger_secs)} seconds")
        try:
            query = writer.start()
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(exc, "starting the topology's Spark query") from exc
        return SparkTopologyRun(query, compiled)


#: The file in a checkpoint that says how its stateful and windowed bolts key their Spark
#: state, and the layout this runner writes: each task under its key of ``_task_keys``.
STATE_LAYOUT_FILE = "squall-state-layout"
STATE_LAYOUT = "task-keys-1"


def check_state_layout(checkpoint: Path) -> None:
    """Refuse a checkpoint whose Spark state is keyed otherwise than this runner keys it
    (the state would not be found, and the bolts would start empty); mark a new one.

    Squall before ``_task_keys`` grouped a bolt's state by the task index: its checkpoints
    hold micro-batches but no layout file."""
    marker = checkpoint / STATE_LAYOUT_FILE
    try:
        found = marker.read_text().strip()
    except FileNotFoundError:
        found = None
    if found == STATE_LAYOUT:
        return
    offsets = checkpoint / "offsets"
    if found is not None or (offsets.is_dir() and any(offsets.iterdir())):
        raise SparkConfigError(
            f"checkpoint {str(checkpoint)!r} holds a query whose Spark state is keyed "
            f"{'as ' + repr(found) if found else 'by task index (an older Squall, or a topology that had no stateful or windowed bolt)'}, "
            f"but this runner keys a stateful or windowed bolt's state as {STATE_LAYOUT!r}: "
            f"its state would not be found. Start on a new checkpoint location, or finish "
            f"this one with the Squall that wrote it"
        )
    checkpoint.mkdir(parents=True, exist_ok=True)
    marker.write_text(STATE_LAYOUT + "\n")


def _fusable(topology: StormTopology, plan: TaskPlan, stateful: frozenset[str]) -> dict[str, str]:
    """Bolt -> spout, for each bolt that runs inside its spout's read (``_fused``): its one
    input is the spout's stream, local-or-shuffle grouped with as many tasks as the spout,
    nothing else subscribes to the spout, and the bolt keeps no state across micro-batches
    (neither stateful nor windowed) and is no sink."""
    subscribers: dict[str, list[str]] = {}
    for cid, spec in topology.bolts.items():
        for sub in spec.inputs:
            subscribers.setdefault(sub.component, []).append(cid)
    fused = {}
    for sid in topology.spouts:
        subs = subscribers.get(sid, [])
        if len(subs) != 1 or len(topology.bolts[subs[0]].inputs) != 1:
            continue
        cid = subs[0]
        spec = topology.bolts[cid]
        sub = spec.inputs[0]
        if (
            cid not in stateful
            and _windowed(spec) is None
            and not isinstance(spec.component, SparkSinkBolt)
            and isinstance(grouper_class(sub.grouping).spark_routing(sub.grouping), LocalTask)
            and len(plan.component_tasks[cid]) == len(plan.component_tasks[sid])
        ):
            fused[cid] = sid
    return fused


def _windowed(spec: ComponentSpec) -> Any:
    """The bolt's ``WindowedBoltExecutor`` if it is a windowed bolt, else None."""
    from engine.windowing import WindowedBoltExecutor

    return spec.component if isinstance(spec.component, WindowedBoltExecutor) else None


def _group_state_window(topology: StormTopology, stateful: frozenset[str]) -> str | None:
    """The windowed bolt that runs in ``applyInPandasWithState``, if one may.

    Spark allows one such operator per query, counted in the query's plan, where a bolt's
    output appears once per path from it to a leaf (a bolt subscribed to two of its
    streams reads it twice). So the one windowed bolt of a topology without stateful bolts,
    whose output reaches the leaves by one path; other windows run in
    ``transformWithStateInPandas`` (``_stateful``).
    """
    windows = [cid for cid, spec in topology.bolts.items() if _windowed(spec) is not None]
    if len(windows) != 1 or stateful:
        return None

    @functools.cache
    def paths(cid: str) -> int:
        subscribers = [
            bolt
            for bolt, spec in topology.bolts.items()
            for sub in spec.inputs
            if sub.component == cid
        ]
        return sum(paths(bolt) for bolt in subscribers) if subscribers else 1

    return windows[0] if paths(windows[0]) == 1 else None


class _Combining:
    """Where the compiler puts combine steps (``_combine``): before each input of a
    ``CombinerBolt`` that comes from a (not stateful) bolt, fields-grouped on part of the
    combiner's key, global or all, so that the combiner's task gets the same rows of each
    key as without the step."""

    def __init__(
        self,
        topology: StormTopology,
        stateful: frozenset[str],
        schemas: Mapping[str, str],
        enabled: bool,
    ) -> None:
        from engine import CombinerBolt

        from ._combine import partial_stream

        self.topology = topology
        #: (combiner, input index) -> (upstream bolt, the stream the combiner then reads)
        self.inputs: dict[tuple[str, int], tuple[str, str]] = {}
        #: upstream bolt -> [(its stream, combiner)]
        self.steps: dict[str, list[tuple[str, str]]] = {}
        #: upstream bolt -> streams only combine steps read
        self.drop: dict[str, set[str]] = {}
        #: combiner -> its output layout
        self.outputs: dict[str, OutputLayout] = {}
        for cid, spec in sorted(topology.bolts.items()):
            bolt = spec.component
            if not isinstance(bolt, CombinerBolt) or cid in stateful:
                continue
            self.outputs[cid] = _bolt_layout(cid, spec, schemas)
            key = set(bolt.key_fields())
            for i, sub in enumerate(spec.inputs):
                fits = grouper_class(sub.grouping).keeps_together(sub.grouping, list(key))
                upstream = topology.bolts.get(sub.component)
                if (
                    enabled
                    and fits
                    and upstream is not None
                    and sub.component not in stateful
                    and not isinstance(upstream.component, SparkSinkBolt)
                ):
                    self.inputs[cid, i] = (sub.component, partial_stream(cid, sub.stream))
                    self.steps.setdefault(sub.component, []).append((sub.stream, cid))
        for up, pairs in self.steps.items():
            for stream in sorted({s for s, _ in pairs}):
                readers = [
                    (bolt, i)
                    for bolt, spec in topology.bolts.items()
                    for i, sub in enumerate(spec.inputs)
                    if sub.component == up and sub.stream == stream
                ]
                if all(r in self.inputs for r in readers):
                    self.drop.setdefault(up, set()).add(stream)

    def spec(self, cid: str, inputs: Sequence[StreamLayout]) -> CombineSpec | None:
        """How combiner ``cid`` combines rows of ``inputs`` (None: ``cid`` is no combiner
        the runner runs): with Arrow when the aggregate and every key and value column it
        reads are typed."""
        from engine import CombinerBolt

        from ._combine import PARTIAL_PREFIX, CombineSpec

        if cid not in self.outputs:
            return None
        bolt = self.topology.bolts[cid].component
        assert isinstance(bolt, CombinerBolt)
        needed = [*bolt.key_fields(), *([bolt.value_field] if bolt.value_field else [])]
        typed = self.outputs[cid].streams[0].types[-1] is not None
        for layout in inputs:
            if layout.stream.startswith(PARTIAL_PREFIX):
                typed = typed and layout.typed
            else:
                typed = typed and all(layout.types[layout.fields.index(f)] for f in needed)
        return CombineSpec.of(cid, bolt, typed)

    def layout(
        self, cid: str, layout: OutputLayout
    ) -> tuple[OutputLayout, tuple[PartialStep, ...]]:
        """Bolt ``cid``'s output layout with a stream of partial aggregates per combine step
        it runs, and the steps."""
        from engine import CombinerBolt

        from ._combine import PartialStep, partial_stream

        steps: list[PartialStep] = []
        streams = list(layout.streams)
        for stream, combiner in self.steps.get(cid, ()):
            source = layout.stream(stream)
            bolt = self.topology.bolts[combiner].component
            assert isinstance(bolt, CombinerBolt)
            key = tuple(bolt.key_fields())
            out = self.outputs[combiner].streams[0]
            target = StreamLayout(
                cid,
                partial_stream(combiner, stream),
                len(streams),
                (*key, out.fields[-1]),
                (*(source.types[source.fields.index(f)] for f in key), out.types[-1]),
            )
            streams.append(target)
            spec = self.spec(combiner, [source])
            assert spec is not None
            steps.append(PartialStep(spec, source.index, target.index, source.fields))
        return OutputLayout(cid, tuple(streams)), tuple(steps)


#: The last line of a Python traceback: ``module.ExceptionName: message``.
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Exit|Interrupt)): (.+)$")


def failure_line(text: str) -> str | None:
    """What made a topology's query fail, in one line, from Spark's error text: the bolt
    task's failure (component, task, exception), else the first Python exception raised in
    a worker or in ``foreachBatch`` (a sink's), else None.

    Spark's message stops at "Return Message: Traceback (most recent call last):" and the
    cause sits below it in the text, between stack frames."""
    found: list[tuple[str, str]] = []
    for raw in text.splitlines():
        match = _EXCEPTION_LINE.match(raw.strip())
        if match:
            found.append((match.group(1), match.group(2)))
    for name, message in found:
        if name.rpartition(".")[2] == BoltFailure.__name__:
            return message
    for name, message in found:
        if not name.startswith(("pyspark.", "py4j.", "org.", "java.", "scala.")):
            short = name.rpartition(".")[2]
            return message if name.startswith("spark_io.") else f"{short}: {message}"
    return None


#: Spark's integer and floating-point types (``DataType.json()``).
_INTEGRAL_TYPES = frozenset({'"byte"', '"short"', '"integer"', '"long"'})
_FLOATING_TYPES = frozenset({'"float"', '"double"'})


def _key_casts(cid: str, spec: ComponentSpec, inputs: Sequence[StreamLayout]) -> dict[int, str]:
    """Key positions of bolt ``cid``'s fields groupings that its inputs type differently,
    and the type each is hashed as on every input. On the engine a key meets on one task
    whatever type it arrives as (``stable_hash``); Spark's murmur3 hashes an int's 4 bytes
    and a long's 8, so numbers are hashed as a long (as a double when one input's is
    floating: equal numbers stay equal). Other differences are refused."""
    keyed = []
    for sub, layout in zip(spec.inputs, inputs, strict=True):
        routing = grouper_class(sub.grouping).spark_routing(sub.grouping)
        if isinstance(routing, HashTask):
            keyed.append((layout, routing.fields))
    if len({len(fields) for _, fields in keyed}) != 1:
        return {}  # one input or none; or keys of different widths, which never meet
    casts: dict[int, str] = {}
    for j in range(len(keyed[0][1])):
        kinds = {layout.types[layout.fields.index(fields[j])] for layout, fields in keyed}
        if len(kinds) == 1:
            continue
        if kinds <= _INTEGRAL_TYPES:
            casts[j] = "bigint"
        elif kinds <= _INTEGRAL_TYPES | _FLOATING_TYPES:
            casts[j] = "double"
        else:
            typed = ", ".join(
                f"{layout.describe()} field {f!r} as "
                f"{_type_name(layout.types[layout.fields.index(f)])}"
                for layout, f in ((layout, fields[j]) for layout, fields in keyed)
            )
            raise SparkConfigError(
                f"bolt {cid!r}: its fields groupings hash {typed}; Spark hashes those types "
                f"differently, so equal keys would reach different tasks: give the fields one "
                f"Spark type in the runner's schemas= (untyped fields travel pickled)"
            )
    return casts


def _type_name(kind: str | None) -> str:
    """A stream field's Spark type in DDL (``pickled`` for an untyped field)."""
    if kind is None:
        return "pickled"
    from pyspark.sql.types import _parse_datatype_json_string

    return str(_parse_datatype_json_string(kind).simpleString())


def _seed(cid: str, i: int) -> int:
    import zlib

    return zlib.crc32(f"{cid}/{i}".encode())


def _merge(
    base: tuple[str | None, ...], override: tuple[str | None, ...]
) -> tuple[str | None, ...]:
    return tuple(o if o is not None else b for b, o in zip(base, override, strict=True))


def _bolt_layout(cid: str, spec: ComponentSpec, schemas: Mapping[str, str]) -> OutputLayout:
    streams = []
    for j, (name, info) in enumerate(spec.streams.items()):
        fields = tuple(info.fields)
        ddl = schemas.get(f"{cid}:{name}") or (schemas.get(cid) if name == "default" else None)
        where = f"schemas[{cid + ':' + name if name != 'default' else cid!r}]"
        types = (
            _declared_types(where, fields, _parse_ddl(where, ddl)) if ddl else (None,) * len(fields)
        )
        streams.append(StreamLayout(cid, name, j, fields, types, info.direct))
    return OutputLayout(cid, tuple(streams))


def _infer_types(
    cid: str, spout: ReplayableSpout, fields: tuple[str, ...], num_tasks: int
) -> tuple[str | None, ...]:
    """Spark types from the first rows the spout has (pyarrow's inference)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_type

    from engine import Fields
    from engine.runners import as_columns

    for t in range(num_tasks):
        start = spout.start_position(t, num_tasks)
        end = min(spout.end_position(t, num_tasks), start + _SAMPLE_ROWS)
        if end <= start:
            continue
        data = spout.read(t, num_tasks, start, end)
        columns, _ = as_columns(data, Fields(list(fields)), f"spout {cid!r}")
        types: list[str | None] = []
        for name, col in zip(fields, columns, strict=True):
            arr = col if isinstance(col, (pa.Array, pa.ChunkedArray)) else pa.array(col)
            if pa.types.is_null(arr.type):
                types.append(None)
                continue
            try:
                types.append(from_arrow_type(arr.type).json())
            except Exception as exc:
                raise SparkConfigError(
                    f"spout {cid!r}: field {name!r} has values of Arrow type {arr.type}, which "
                    f"Spark has no type for; give spark_schema() or the runner's schemas="
                ) from exc
        return tuple(types)
    raise SparkConfigError(
        f"spout {cid!r} has no rows to infer its Spark schema from; give "
        f"{type(spout).__name__}.spark_schema() or the runner's schemas={{{cid!r}: "
        f"'field TYPE, ...'}}"
    )


#: Files in a parquet folder whose schemas it reads at most (``_parquet_types``).
_SCHEMA_FILES = 64


def _parquet_types(source: Any, names: Sequence[str]) -> dict[str, str] | None:
    """Spark's types of columns ``names`` of a local parquet source, from its files'
    footers, as Spark's reader gives them (``df.schema``), or None to ask Spark.

    Spark infers a parquet schema with a job that reads a footer: 0.05-0.25 s of a
    topology's compile. Read here, for the plain case only: local files (one file, or a
    folder of files without partition folders or summary files), no reader options or
    given schema, every column named a flat primitive that Spark and parquet map one to
    one (boolean, signed integers, float, double, date, UTF-8 string), the same in every
    file. Anything else (timestamps, decimals, binary, unsigned or nested types, which
    depend on Spark's settings or on the file's stored Arrow schema), and a column of a
    file Spark wrote whose schema kept in the footer types it otherwise (an interval, a
    collated string: ``_stored_spark_types``), goes to Spark."""
    import pyarrow.parquet as pq

    from .._txn import SUMMARY_FILES, listed_by_spark

    if (
        source.kind != "files"
        or (source.format or "parquet") != "parquet"
        or source.options
        or source.schema
        or "://" in source.location
    ):
        return None
    root = Path(source.location)
    try:
        if root.is_file():
            files = [root]
        elif root.is_dir():
            entries = [e for e in os.scandir(root) if listed_by_spark(e.name)]
            if any(e.is_dir() or e.name.startswith(SUMMARY_FILES) for e in entries):
                return None
            files = sorted(Path(e.path) for e in entries if e.is_file())
        else:
            return None
    except OSError:
        return None  # (not listable here, a permission say) Spark says what is wrong
    if not files or len(files) > _SCHEMA_FILES:
        return None
    found: dict[str, str] | None = None
    for path in files:
        try:
            footer = pq.ParquetFile(path)
            schema = footer.schema
            stored = _stored_spark_types(footer.metadata.metadata)
        except (OSError, ValueError):
            return None  # Spark says what is wrong with it
        columns = {schema.column(i).path: schema.column(i) for i in range(len(schema))}
        types: dict[str, str] = {}
        for name in names:
            column = columns.get(name)
            kind = None if column is None else _spark_type(column)
            if kind is None or (stored is not None and stored.get(name) != kind):
                return None
            types[name] = kind
        if found is not None and found != types:
            return None
        found = types
    return found


#: Spark's type per parquet (physical type, logical type) it maps one to one.
_PARQUET_TYPES = {
    ("BOOLEAN", "None"): "boolean",
    ("INT32", "None"): "integer",
    ("INT32", "Int(bitWidth=8, isSigned=true)"): "byte",
    ("INT32", "Int(bitWidth=16, isSigned=true)"): "short",
    ("INT32", "Int(bitWidth=32, isSigned=true)"): "integer",
    ("INT32", "Date"): "date",
    ("INT64", "None"): "long",
    ("INT64", "Int(bitWidth=64, isSigned=true)"): "long",
    ("FLOAT", "None"): "float",
    ("DOUBLE", "None"): "double",
    ("BYTE_ARRAY", "String"): "string",
}


#: The footer key under which Spark keeps the schema of the rows it wrote.
_SPARK_ROW_METADATA = b"org.apache.spark.sql.parquet.row.metadata"


def _stored_spark_types(metadata: Mapping[bytes, bytes] | None) -> dict[str, str] | None:
    """The Spark types (as ``DataType.json()``) of a file Spark wrote, from the schema it
    kept in the footer, or None for a file without one. Spark reads that schema back
    rather than mapping the parquet types: an interval is an INT32 or INT64 column, a
    collated string a UTF-8 one (``ValueError`` when it is not a schema)."""
    raw = (metadata or {}).get(_SPARK_ROW_METADATA)
    if raw is None:
        return None
    from pyspark.sql.types import StructType

    try:
        struct = StructType.fromJson(json.loads(raw))
    except Exception as exc:
        raise ValueError(f"not a Spark schema: {raw[:80]!r}") from exc
    return {f.name: f.dataType.json() for f in struct.fields}


def _spark_type(column: Any) -> str | None:
    """The Spark type (as ``DataType.json()``) of a flat parquet column, or None."""
    if column.max_repetition_level or "." in column.path:
        return None
    kind = _PARQUET_TYPES.get((column.physical_type, str(column.logical_type)))
    return None if kind is None else json.dumps(kind)


def _sink_columns(
    cid: str, spec: ComponentSpec, topology: StormTopology, layouts: Mapping[str, OutputLayout]
) -> list[str]:
    sink = spec.component
    assert isinstance(sink, SparkSinkBolt)
    inputs = [layouts[s.component].stream(s.stream) for s in spec.inputs]
    if sink.fields is None:
        shapes = {layout.fields for layout in inputs}
        if len(shapes) != 1:
            raise SparkConfigError(
                f"sink {cid!r}: its inputs have different fields "
                f"{[list(s) for s in sorted(shapes)]}; pass fields=[...] to choose the columns"
            )
        columns = list(inputs[0].fields)
    else:
        columns = list(sink.fields)
    for layout in inputs:
        for c in columns:
            if c not in layout.fields:
                raise SparkConfigError(
                    f"sink {cid!r}: input {layout.component!r} stream {layout.stream!r} has no "
                    f"field {c!r} (its fields: {list(layout.fields)})"
                )
            if layout.types[layout.fields.index(c)] is None:
                key = (
                    layout.component
                    if layout.stream == "default"
                    else (f"{layout.component}:{layout.stream}")
                )
                raise SparkConfigError(
                    f"sink {cid!r} writes field {c!r} of {layout.describe()}, whose Spark type "
                    f"is unknown; give the stream's types in the runner's schemas={{{key!r}: "
                    f"'{', '.join(f + ' TYPE' for f in layout.fields)}'}}"
                )
    if sink.transactional and sink.key_field not in columns:
        raise SparkConfigError(
            f"sink {cid!r}: key_field {sink.key_field!r} is not among the columns {columns}"
        )
    return columns


def _direct_sink(leaves: Sequence[tuple[str, list[str] | None]]) -> bool:
    """The one leaf is a sink: the query's output is its rows as it writes them."""
    return len(leaves) == 1 and leaves[0][1] is not None


#: Formats whose staged files the transactional sink reads its keys back from (pyarrow).
_READ_BACK_FORMATS = ("parquet", "orc")


class StoppedDuringBatch(SparkIOError):
    """The query was stopped while its ``foreachBatch`` wrote a micro-batch: the batch
    was not committed, and a restart on the checkpoint runs it again."""


class _BatchSink:
    """The query's ``foreachBatch``: every leaf of one micro-batch, computed once."""

    def __init__(self, compiled: CompiledTopology, checkpoint: str) -> None:
        self.compiled = compiled
        self.checkpoint = checkpoint
        self._query_id: str | None = None

    def query_id(self) -> str:
        if self._query_id is None:
            path = Path(self.checkpoint) / "metadata"
            try:
                self._query_id = str(json.loads(path.read_text().splitlines()[0])["id"])
            except (OSError, ValueError, KeyError, IndexError) as exc:
                raise SinkError(
                    f"cannot read the query id from {str(path)!r} ({exc}); the transactional "
                    f"sinks name their transactions by it"
                ) from exc
        return self._query_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            self._write_all(batch, batch_id)
        except Exception as exc:
            if is_interruption(exc):
                # The query is stopping: Spark knows an interrupted Python foreachBatch only
                # by py4j's text and an interruption's name in this error's traceback
                # (``StreamExecution.PROXY_ERROR``), and its pattern recurses once per
                # character between the two: behind a JVM stack trace it overflowed the
                # query thread's stack (a ``StackOverflowError`` printed at every stop
                # during a write). Say just that, without the chain.
                raise StoppedDuringBatch(
                    f"py4j.protocol.Py4JJavaError: An error occurred while calling "
                    f"foreachBatch (micro-batch {batch_id}): java.lang.InterruptedException: "
                    f"the query was stopped"
                ) from None
            raise

    def _write_all(self, batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        topology = self.compiled.topology
        leaves = self.compiled.leaves
        if _direct_sink(leaves):
            # One sink and nothing else: the micro-batch is its rows, named and cast at
            # compile (``_leaves``); its write computes the micro-batch, once.
            cid = leaves[0][0]
            sink = topology.bolts[cid].component
            assert isinstance(sink, SparkSinkBolt)
            self._write(cid, sink, batch, batch_id)
        else:
            # The batch is cached and counted first, so that every leaf runs once, sinks
            # or not.
            batch = batch.persist()
            try:
                batch.count()
                for k, (cid, columns) in enumerate(leaves):
                    if columns is None:
                        continue
                    sink = topology.bolts[cid].component
                    assert isinstance(sink, SparkSinkBolt)
                    rows = batch.filter(F.col(LEAF) == k).select(
                        *[F.col(leaf_col(k, j)).alias(c) for j, c in enumerate(columns)]
                    )
                    if sink.schema:
                        rows = _cast(cid, rows, sink.schema)
                    self._write(cid, sink, rows, batch_id)
            finally:
                batch.unpersist()
        from ._commits import commit_micro_batch

        commit_micro_batch(self.checkpoint, batch_id, self.compiled.readers)

    def _write(self, cid: str, sink: SparkSinkBolt, rows: DataFrame, batch_id: int) -> None:
        target = sink.target
        try:
            writer = rows.write.mode("append").format(target.format).options(**target.options)
            if target.partition_by:
                writer = writer.partitionBy(*target.partition_by)
            path = _local_path(target.location) if target.kind == "files" else None
            if sink.transactional:
                assert path is not None and sink.key_field
                self._publish(cid, sink, path, rows, writer, batch_id)
            elif path is not None:
                from .._txn import publish_files, stage_dir

                staged = stage_dir(path)
                try:
                    writer.save(str(staged))
                    publish_files(staged, path)
                finally:
                    shutil.rmtree(staged, ignore_errors=True)
            elif target.kind == "table":
                writer.saveAsTable(target.location)
            else:
                writer.save(target.location)
        except SparkIOError:
            raise
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(
                exc,
                f"sink {cid!r} writing micro-batch {batch_id} to {target.describe()}",
                SinkError,
            ) from exc

    def _publish(
        self, cid: str, sink: SparkSinkBolt, path: Path, rows: DataFrame, writer: Any, batch_id: int
    ) -> None:
        """One transaction per non-empty micro-batch: staged, then published by one rename;
        a batch already published (it ran before a crash) is skipped."""
        import numpy as np

        from .._txn import RUN_ID, STAGING_DIR, TXID_COLUMN, TransactionLog, key_ranges

        txid = f"spark-{self.query_id()}-{batch_id:010d}"
        final = path / f"{TXID_COLUMN}={txid}"
        if final.exists():
            return
        path.mkdir(parents=True, exist_ok=True)
        log = TransactionLog(path, sink.key_field or "")
        staged = path / STAGING_DIR / f"t{RUN_ID}-{txid}"
        shutil.rmtree(staged, ignore_errors=True)
        key_field = str(sink.key_field)
        fmt = sink.target.format
        if fmt in _READ_BACK_FORMATS:
            # Written once, the keys read back from the staged files (no second pass):
            # those Spark lists (pyarrow's own listing leaves out a "_k=1" partition).
            import pyarrow.dataset as ds

            from .._txn import data_files

            writer.save(str(staged))
            files = [str(f) for f in data_files(staged)]
            keys = (
                ds.dataset(files, format=fmt, partitioning="hive", partition_base_dir=str(staged))
                .to_table(columns=[key_field])
                .column(0)
            )
        else:
            keys = rows.select(key_field).toArrow().column(0)
        if keys.null_count:
            shutil.rmtree(staged, ignore_errors=True)
            raise SinkError(
                f"sink {cid!r}: key_field {sink.key_field!r} is null in {keys.null_count} "
                f"row(s) of micro-batch {batch_id}"
            )
        if len(keys) == 0:
            shutil.rmtree(staged, ignore_errors=True)
            return  # an empty micro-batch publishes no transaction
        values = np.unique(keys.to_numpy().astype(np.int64, copy=False))
        if fmt not in _READ_BACK_FORMATS:
            writer.save(str(staged))
        starts, ends = key_ranges(values)
        log.write_manifest(staged, txid, starts, ends, len(keys))
        with log.locked():
            if not final.exists():
                log.publish(staged, txid, starts, ends)


def _cast(cid: str, rows: DataFrame, ddl: str) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, DoubleType, FloatType, IntegralType

    named = dict(_parse_ddl(f"sink {cid!r} schema", ddl))
    given = {f.name: f.dataType for f in rows.schema.fields}
    columns = []
    for c in rows.columns:
        if c not in named:
            columns.append(F.col(c))
            continue
        cast = F.col(c).cast(named[c])
        if isinstance(given[c], (FloatType, DoubleType, DecimalType)) and isinstance(
            named[c], IntegralType
        ):
            # Spark's cast cuts a fraction silently (1.7 -> 1, ANSI or not); the engine's
            # sink refuses the value (Arrow's safe cast), and so does this one.
            cast = F.when(F.col(c).isNull() | (F.col(c) == F.round(F.col(c))), cast).otherwise(
                F.raise_error(
                    F.concat(
                        F.lit(f"sink {cid!r}: field {c!r} is "),
                        F.col(c).cast("string"),
                        F.lit(f", which its schema's {named[c].simpleString()} cannot hold"),
                    )
                )
            )
        columns.append(cast.alias(c))
    return rows.select(*columns)


class SparkTopologyRun:
    """A running topology on Spark: its ``StreamingQuery`` and what it was compiled to."""

    def __init__(self, query: StreamingQuery, compiled: CompiledTopology) -> None:
        self.query = query
        self.compiled = compiled

    @property
    def id(self) -> str:
        """The query's id: the same across restarts on one checkpoint."""
        return str(self.query.id)

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait for the query to end (``availableNow``: all rows done); True if it ended.
        A failed query raises ``SparkIOError`` with Spark's cause."""
        try:
            if timeout is None:
                self.query.awaitTermination()
                return True
            return bool(self.query.awaitTermination(timeout))  # type: ignore[arg-type]
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            cause = failure_line(str(exc))
            if cause is None:
                raise map_spark_error(exc, "running the topology on Spark") from exc
            raise SparkIOError(f"the topology's Spark query failed: {cause}") from exc

    def process_all_available(self) -> None:
        self.query.processAllAvailable()

    def stop(self) -> None:
        self.query.stop()

    @property
    def is_active(self) -> bool:
        return bool(self.query.isActive)

    def last_progress(self) -> dict[str, Any] | None:
        progress = self.query.lastProgress
        return None if progress is None else dict(progress)
