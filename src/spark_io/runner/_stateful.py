"""Stateful and windowed bolts on Spark: each task's state in Spark state, keyed by task.

A stateful bolt's state belongs to its task (Storm's ``IStatefulBolt``), so on Spark the
grouping key is the task index (``__task``): in ``transformWithStateInPandas`` Spark calls
the processor once per task and micro-batch with that task's rows, and the task's
``KeyValueState`` is a Spark map state
(pickled keys and values, ``engine.state``'s encoding). The bolt gets the state in
``init_state`` after ``prepare``, as with the local engine, and its changes are handed to
Spark at the end of the micro-batch: Spark commits them with the batch, so state and
transactional output are exactly once together, through task retries and driver restarts
(Spark's checkpoint replaces the checkpoint spout and its barriers). A stateful windowed
bolt (``StatefulWindowedBolt``) has both, its map state and its window, committed together.

A windowed bolt (``engine.windowing``) is grouped by task the same way, in
``applyInPandasWithState`` (or, where a query cannot have one more of those, in
``transformWithStateInPandas``, as a value state): its window (the ``WindowManager`` with every tuple it holds,
the latest timestamps of event time) is the group's state, read back before the
micro-batch's rows and written after its tick, so
windows span micro-batches and a restart on the checkpoint finds the window of the last
committed micro-batch. Event time keeps the engine's own watermark (per task, the oldest
of its input streams' latest timestamps minus the lag), moved once per micro-batch: the
tick after the last row. Processing-time windows also get a processing-time timeout
while they hold tuples or owe a firing to those that left (``WindowManager.needs_time``),
so that they fire without new input, as on the engine's ticks. Tuples are done once the
micro-batch that holds them in the window is committed, not when they leave it.

The engine's wiring (``__checkpoint_spout``, ``CheckpointTupleForwarder``,
``StatefulBoltExecutor``, ``RewindableSpoutExecutor``) is taken off the topology first
(``unwire``): Spark needs none of it. A stateful bolt needs ``protobuf`` (Spark's state API)
and the RocksDB state store.

Why two Spark operators: ``applyInPandasWithState`` hands a group's rows over as slices of
Spark's Arrow batches and is planned without Python, while ``transformWithStateInPandas``
(in Spark 4.3) regroups its input one row at a time in Python and starts a Python worker
to plan the query (seconds before the first micro-batch); but only the latter has a map
state, which a ``KeyValueState`` needs so that a micro-batch writes only what changed,
and a query may hold any number of them (Spark allows one ``applyInPandasWithState``).
"""

from __future__ import annotations

import dataclasses
import pickle
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from engine import ComponentSpec, StormTopology
from engine.state import (
    CHECKPOINT_COMPONENT_ID,
    CHECKPOINT_STREAM_ID,
    CheckpointTupleForwarder,
    KeyValueState,
    RewindableSpoutExecutor,
    StatefulBoltExecutor,
    StateStore,
)

from ._task_keys import task_index

__all__ = [
    "STATE_STORE_CONF",
    "WINDOW_STATE_SCHEMA",
    "SparkMapStateStore",
    "stateful_processor",
    "unwire",
    "window_function",
]

#: Pickle protocol of a saved window (5: out-of-band buffers).
PICKLE_PROTOCOL = 5

#: The state of a windowed bolt's group (its task): the pickled window.
WINDOW_STATE_SCHEMA = "w BINARY"

#: transformWithStateInPandas keeps its state in RocksDB. With changelog checkpointing a
#: micro-batch's commit writes only the changes it made (a changelog file); snapshots of the
#: store are made in the background (Spark's maintenance task), instead of each commit
#: uploading the store's files and their zipped metadata (in the windows bench, 608 ms of
#: commits per micro-batch for its two tasks before, 260 ms after). Exactly once is Spark's
#: either way (a restart replays the changelogs since the last snapshot).
STATE_STORE_CONF = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}


def unwire(topology: StormTopology) -> tuple[StormTopology, frozenset[str]]:
    """The topology without the engine's checkpoint wiring, and the stateful bolts' ids."""
    stateful: set[str] = set()
    bolts: dict[str, ComponentSpec] = {}
    for cid, spec in topology.bolts.items():
        component = spec.component
        if isinstance(component, StatefulBoltExecutor):
            stateful.add(cid)
            component = component.delegate
        elif isinstance(component, CheckpointTupleForwarder):
            component = component.delegate
        bolts[cid] = dataclasses.replace(
            spec,
            component=component,
            inputs=tuple(
                s
                for s in spec.inputs
                if s.stream != CHECKPOINT_STREAM_ID and s.component != CHECKPOINT_COMPONENT_ID
            ),
            streams={k: v for k, v in spec.streams.items() if k != CHECKPOINT_STREAM_ID},
        )
    if not stateful and CHECKPOINT_COMPONENT_ID not in topology.spouts:
        return topology, frozenset()
    spouts = {
        k: dataclasses.replace(
            v,
            component=v.component.delegate,
            streams={s: f for s, f in v.streams.items() if s != CHECKPOINT_STREAM_ID},
        )
        if isinstance(v.component, RewindableSpoutExecutor)
        else v
        for k, v in topology.spouts.items()
        if k != CHECKPOINT_COMPONENT_ID
    }
    return StormTopology(spouts=spouts, bolts=bolts), frozenset(stateful)


class SparkMapStateStore(StateStore):
    """A ``StateStore`` over a Spark ``MapState`` of (key BINARY) -> (value BINARY):
    ``commit`` writes the prepared changes into it; Spark commits them with the batch."""

    def __init__(self, map_state: Any, namespace: str) -> None:
        self.map_state = map_state
        self.namespace = namespace
        self._prepared: dict[bytes, bytes | None] | None = None
        self._prepared_txid: int | None = None
        self._committed_txid: int | None = None

    def load(self) -> dict[bytes, bytes]:
        if not self.map_state.exists():
            return {}
        return {bytes(k[0]): bytes(v[0]) for k, v in self.map_state.iterator()}

    def prepare(self, txid: int, changes: Mapping[bytes, bytes | None]) -> None:
        self._prepared = dict(changes)
        self._prepared_txid = txid

    def commit(self, txid: int) -> None:
        if self._prepared is None or txid != self._prepared_txid:
            return
        for key, value in self._prepared.items():
            if value is None:
                self.map_state.removeKey((key,))
            else:
                self.map_state.updateValue((key,), (value,))
        self._prepared = None
        self._committed_txid = txid

    def rollback(self) -> None:
        self._prepared = None
        self._prepared_txid = None

    def prepared_txid(self) -> int | None:
        return self._prepared_txid

    def committed_txid(self) -> int | None:
        return self._committed_txid


def stateful_processor(
    plan_bytes: bytes, input_schema_json: str, *, kv: bool, window: bool, tick_ms: int | None
) -> Any:
    """A ``StatefulProcessor`` running one bolt task per grouping key (the task): with
    ``kv``, the task's ``KeyValueState`` is a Spark map state; with ``window``, the task's
    windowed bolt keeps its window in a Spark value state between micro-batches, and with
    ``tick_ms`` (processing-time windows) a processing-time timer ticks it while no input
    comes."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class BoltProcessor(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self._handle = handle
            if kv:
                self._map = handle.getMapState("squall_kv", "k BINARY", "v BINARY")
            if window:
                self._window = handle.getValueState("squall_window", WINDOW_STATE_SCHEMA)

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Any:
            # (the frames' column names are not the input's: match them by position)
            yield from self._run(
                key, _arrow_in(input_schema_json, rows, by_name=False), timerValues
            )

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
            yield from self._run(key, [], timerValues, expiredTimerInfo.getExpiryTimeInMs())

        def _run(
            self,
            key: Any,
            batches: Iterable[Any],
            timer_values: Any,
            expired_ms: int | None = None,
        ) -> Iterator[Any]:
            from ._bolt_task import BoltTask

            plan = pickle.loads(plan_bytes)
            tasks = plan.plan.component_tasks[plan.component]
            task_id = tasks[task_index(key[0], len(tasks))]
            task = BoltTask(plan, task_id, holds_inputs=window)
            state = None
            if kv:
                state = KeyValueState(SparkMapStateStore(self._map, f"{plan.component}/{task_id}"))
            saved = self._window.get() if window and self._window.exists() else None

            def after_prepare(bolt: Any) -> Any:
                # A stateful window empties its window in init_state (the local engine's
                # rollback): give it the state first, then the window Spark committed with it.
                result = None if state is None else bolt.init_state(state)
                if saved is not None:
                    bolt.restore_window_state(pickle.loads(bytes(saved[0])))
                return result

            task.after_prepare = after_prepare
            yield from _pandas_out(task.run(batches))
            if state is not None:
                state.prepare_commit(0)
                state.commit(0)
            if window:
                executor = task.bolt
                self._window.update((window_bytes(executor),))
                if tick_ms and executor.manager is not None and executor.manager.needs_time:
                    now = int(timer_values.getCurrentProcessingTimeInMs())
                    # (Spark deletes the timer being handled only after this call: it does
                    # not count, or the window would tick once and then wait for input)
                    if not [t for t in self._handle.listTimers() if t != expired_ms]:
                        self._handle.registerTimer(now + tick_ms)

        def close(self) -> None:
            pass

    return BoltProcessor()


#: What pandas 2 warns (``FutureWarning``) when pyspark's ``applyInPandasWithState`` pads a
#: group's output to its state's rows with all-NA rows and concatenates them
#: (``pyspark.worker``), as it does for every group call that emits fewer rows than it keeps
#: state: a warning about Spark's own code, which a user can do nothing about, on every
#: window task of every micro-batch.
PADDING_WARNING = "The behavior of DataFrame concatenation with empty or all-NA entries"


def quiet_spark_padding() -> None:
    """Ignore ``PADDING_WARNING`` from ``pyspark.worker`` in this process (a Python worker of
    Spark's); every other warning, and this one from other code, still shows."""
    warnings.filterwarnings(
        "ignore", message=PADDING_WARNING, category=FutureWarning, module="pyspark.worker"
    )


def window_function(plan_bytes: bytes, input_schema_json: str, *, tick_ms: int | None) -> Any:
    """The function ``applyInPandasWithState`` runs for a windowed bolt, once per task (the
    grouping key) and micro-batch: the task's window comes back from the group's state,
    takes the micro-batch's rows, ticks, and goes back into the state. With ``tick_ms``
    (processing-time windows) the group's processing-time timeout calls it again, without
    rows, while the window needs time (it holds tuples, or owes a firing to those that
    left)."""

    def run_window(key: Any, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        from ._bolt_task import BoltTask

        quiet_spark_padding()
        plan = pickle.loads(plan_bytes)
        tasks = plan.plan.component_tasks[plan.component]
        task_id = tasks[task_index(key[0], len(tasks))]
        task = BoltTask(plan, task_id, holds_inputs=True)
        saved = state.get[0] if state.exists else None

        def after_prepare(bolt: Any) -> None:
            if saved is not None:
                bolt.restore_window_state(pickle.loads(bytes(saved)))

        task.after_prepare = after_prepare
        rows = iter(()) if state.hasTimedOut else frames
        yield from _pandas_out(task.run(_arrow_in(input_schema_json, rows, by_name=True)))
        executor = task.bolt
        state.update((window_bytes(executor),))
        if tick_ms and executor.manager is not None and executor.manager.needs_time:
            state.setTimeoutDuration(tick_ms)

    return run_window


def window_bytes(executor: Any) -> bytes:
    """The window of a ``WindowedBoltExecutor`` pickled for Spark state (its manager
    pickles the rows it holds, not its arrays' free capacity: with 100,000 rows per task
    and micro-batch, 240 KB instead of 2.3 MB)."""
    return pickle.dumps(executor.window_state(), PICKLE_PROTOCOL)


def _arrow_in(input_schema_json: str, frames: Iterable[Any], *, by_name: bool) -> Iterator[Any]:
    """Spark's pandas frames of a task's rows as Arrow record batches of the bolt's input
    schema, converted by column (no Python object per row)."""
    import json

    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    schema = to_arrow_schema(StructType.fromJson(json.loads(input_schema_json)))
    names, types = schema.names, schema.types
    for frame in frames:
        # column by column: no copy of the frame, nor pandas' per-frame conversion steps
        # (pyarrow.pandas_compat), a third of this function's time
        series = (
            [frame[name] for name in names]
            if by_name
            else [frame.iloc[:, i] for i in range(len(names))]
        )
        yield pa.RecordBatch.from_arrays(
            [pa.Array.from_pandas(s, type=t) for s, t in zip(series, types, strict=True)],
            schema=schema,
        )


def _pandas_out(record_batches: Iterable[Any]) -> Iterator[Any]:
    for out in record_batches:
        if out.num_rows:
            yield out.to_pandas()
