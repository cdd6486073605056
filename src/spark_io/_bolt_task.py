"""One bolt task inside a Spark task: the function the Spark runner gives ``mapInArrow``.

Spark partition ``i`` of a bolt's input is task index ``i`` (the runner routes every row
there, ``__task``), so each Spark task builds the bolt's task ``i``: a fresh copy of the
component, its ``TopologyContext`` (the same task ids as in local mode), ``prepare``, then
every Arrow record batch of the micro-batch, as ``Tuple`` views for per-tuple bolts and as
a ``TupleBatch`` with Arrow columns for batch bolts. Emits become the output's Arrow record
batches, one per stream and input batch.

What Storm's per-tuple reliability becomes here: the micro-batch is the unit of replay. A
failed tuple (``fail``, ``FailedException``, an exception in user code) fails the Spark
task, which Spark retries (``spark.task.maxFailures``, ``local[N,F]``) and, past that, fails
the query: a restart runs the batch again from the spout's positions. A bolt with ticks
configured gets one tick tuple per micro-batch, after its last input; it must have acked
or failed every input by then, since its memory ends with the task (Storm would time
those trees out).
"""

from __future__ import annotations

import asyncio
import inspect
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine import (
    SYSTEM_COMPONENT_ID,
    SYSTEM_TICK_STREAM_ID,
    BasicBatchBolt,
    BatchBolt,
    Bolt,
    CombinerBolt,
    FailedException,
    Fields,
    StormTopology,
    SystemClock,
    TopologyContext,
    Tuple,
    TupleBatch,
)
from engine._batch import as_columns
from engine._context import TaskPlan
from engine._tuple import Source

from ._combine import PARTIAL_PREFIX, Accumulator, CombineSpec, PartialStep
from ._layout import INPUT, SOURCE_TASK, OutputLayout, StreamLayout, in_col

__all__ = ["BoltFailure", "BoltPlan", "run_bolt_partition"]

_TICK_FIELDS = Fields("rate_secs")


class BoltFailure(RuntimeError):
    """A tuple failed in a bolt on Spark: the Spark task fails and is retried."""


@dataclass
class BoltPlan:
    """Everything a bolt task needs on an executor (pickled into the ``mapInArrow`` call)."""

    topology: StormTopology
    plan: TaskPlan
    conf: dict[str, Any]
    component: str
    #: per input (the ``__input`` value is the position): the upstream stream's layout
    inputs: tuple[StreamLayout, ...]
    output: OutputLayout
    #: ``topology.tick.tuple.freq.secs`` of the bolt, or None
    tick_secs: float | None
    #: combine steps for combiner bolts downstream, run over this bolt's output
    partials: tuple[PartialStep, ...] = ()
    #: indexes of streams whose raw rows nobody reads (only their partials travel)
    drop: frozenset[int] = frozenset()
    #: set when this bolt is a ``CombinerBolt``: the runner combines its input itself
    combine: CombineSpec | None = None


def _run(result: Any, loop: list[asyncio.AbstractEventLoop]) -> Any:
    """Await ``result`` if a user method was ``async def``, on one loop per Spark task."""
    if not inspect.isawaitable(result):
        return result
    if not loop:
        loop.append(asyncio.new_event_loop())
    return loop[0].run_until_complete(result)


class _Emits:
    """Buffered output of one task: per-tuple rows and batch columns, per stream."""

    def __init__(self, plan: BoltPlan, task_id: int, holds_inputs: bool = False) -> None:
        self.plan = plan
        self.task_id = task_id
        #: the bolt keeps tuples past the micro-batch (in Spark state): no ack is due
        self.holds_inputs = holds_inputs
        self.component = plan.component
        self.schema = plan.output.arrow_schema()
        self.types = [s.arrow_types() for s in plan.output.streams]
        self.by_name = {s.stream: s for s in plan.output.streams}
        self.rows: dict[int, list[Sequence[Any]]] = {}
        self.direct: dict[int, list[int]] = {}
        self.chunks: list[tuple[int, list[Any], int, Any]] = []
        topology, tasks = plan.topology, plan.plan
        #: per direct stream: the task ids its subscribers have
        self.direct_targets = {
            s.stream: {
                t
                for bolt, _ in topology.subscribers(plan.component, s.stream)
                for t in tasks.component_tasks[bolt]
            }
            for s in plan.output.streams
            if s.direct
        }
        self.partials: dict[int, list[tuple[PartialStep, Accumulator]]] = {}
        for step in plan.partials:
            bolt = topology.components[step.spec.component].component
            assert isinstance(bolt, CombinerBolt)
            self.partials.setdefault(step.source, []).append((step, Accumulator(step.spec, bolt)))

    def stream(self, name: str, direct: bool) -> StreamLayout:
        layout = self.by_name.get(name)
        if layout is None:
            raise BoltFailure(
                f"bolt {self.component!r} emitted on stream {name!r}, which it does not "
                f"declare (its streams: {sorted(self.by_name)}); declare it in "
                f"declare_output_fields"
            )
        if layout.direct != direct:
            raise BoltFailure(
                f"bolt {self.component!r}: stream {name!r} is "
                + (
                    "direct: emit on it with emit_direct(task, ...)"
                    if layout.direct
                    else "not direct: emit_direct needs a stream declared with direct=True"
                )
            )
        return layout

    def emit(self, values: Sequence[Any], stream: str, task: int | None = None) -> None:
        layout = self.stream(stream, task is not None)
        if len(values) != len(layout.fields):
            raise BoltFailure(
                f"bolt {self.component!r} emitted {len(values)} values on stream {stream!r}, "
                f"which declares {len(layout.fields)} fields {list(layout.fields)}"
            )
        self.rows.setdefault(layout.index, []).append(values)
        if task is not None:
            self._check_target(stream, [task])
            self.direct.setdefault(layout.index, []).append(task)

    def _check_target(self, stream: str, tasks: Iterable[int]) -> None:
        allowed = self.direct_targets[stream]
        for task in tasks:
            if task not in allowed:
                raise BoltFailure(
                    f"bolt {self.component!r}: emit_direct to task {task} on stream "
                    f"{stream!r}, which no subscriber of the stream has (its subscribers' "
                    f"tasks: {sorted(allowed)})"
                )

    def emit_columns(self, data: Any, stream: str, tasks: Any = None) -> int:
        layout = self.stream(stream, tasks is not None)
        where = f"bolt {self.component!r} emit_batch on stream {stream!r}"
        try:
            columns, n = as_columns(data, Fields(list(layout.fields)), where)
        except ValueError as exc:
            raise BoltFailure(str(exc)) from exc
        if tasks is not None:
            tasks = np.asarray(tasks, np.int64).reshape(-1)
            if tasks.shape[0] != n:
                raise BoltFailure(f"{where}: tasks has {tasks.shape[0]} entries for {n} rows")
            self._check_target(stream, set(tasks.tolist()))
        if n:
            self.chunks.append((layout.index, columns, n, tasks))
        return n

    def drain(self) -> Iterator[Any]:
        """The buffered output as record batches of the output schema."""
        streams = self.plan.output.streams
        rows, self.rows = self.rows, {}
        direct, self.direct = self.direct, {}
        chunks, self.chunks = self.chunks, []
        for j, values in rows.items():
            width = len(streams[j].fields)
            columns = [list(c) for c in zip(*values, strict=True)] or [[] for _ in range(width)]
            out = self._batch(j, columns, len(values), direct.get(j))
            if out is not None:
                yield out
        for j, columns, n, tasks in chunks:
            out = self._batch(j, columns, n, tasks)
            if out is not None:
                yield out

    def _batch(self, j: int, columns: list[Any], n: int, tasks: Any) -> Any:
        layout = self.plan.output.streams[j]
        try:
            arrays = layout.to_arrow(columns, self.types[j])
        except TypeError as exc:
            raise BoltFailure(f"bolt {self.component!r}: {exc}") from exc
        for step, acc in self.partials.get(j, ()):
            cols = arrays if step.spec.arrow else columns
            key = [cols[step.fields.index(f)] for f in step.spec.key]
            source = Source(self.component, layout.stream, self.task_id, Fields(list(step.fields)))
            acc.add(key, acc.values(step.fields, cols, n, source))
        if j in self.plan.drop:
            return None
        return self.plan.output.record_batch(self.schema, j, arrays, n, self.task_id, tasks)

    def drain_partials(self) -> Iterator[Any]:
        """The partial aggregates of the task's micro-batch, one record batch per step."""
        for steps in self.partials.values():
            for step, acc in steps:
                keys, values, n = acc.result()
                if n:
                    yield self._batch(step.target, [*keys, values], n, None)


class _TaskState:
    """Acks and fails of one task's inputs: every input must be acked or failed."""

    def __init__(self, component: str, task_id: int) -> None:
        self.component = component
        self.task_id = task_id
        self.pending = 0
        self.failed: list[str] = []
        self.errors: list[str] = []

    def fail(self, what: str) -> None:
        self.failed.append(what)

    def check(self) -> None:
        if self.failed:
            raise BoltFailure(
                f"bolt {self.component!r} task {self.task_id} failed {len(self.failed)} "
                f"tuple(s) (first: {self.failed[0]}); on Spark a failure fails the "
                f"Spark task, which Spark retries (spark.task.maxFailures) and then fails the "
                f"query, whose restart runs the micro-batch again"
                + (f"; reported errors: {self.errors}" if self.errors else "")
            )


class _OutputCollector:
    """A rich ``Bolt``'s collector on Spark (``engine.OutputCollector``'s methods)."""

    def __init__(self, emits: _Emits, state: _TaskState) -> None:
        self._emits = emits
        self._state = state

    def emit(
        self, values: Sequence[Any], stream: str = "default", anchors: Any = None
    ) -> Sequence[int]:
        self._emits.emit(values, stream)
        return []  # the targets are chosen by Spark's exchange, after the task

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = "default", anchors: Any = None
    ) -> None:
        self._emits.emit(values, stream, task)

    def _complete(self, tuple: Tuple, what: str) -> None:
        if tuple.source_component == SYSTEM_COMPONENT_ID:
            return  # tick tuples need no ack
        if tuple._ack_val is None:
            raise BoltFailure(
                f"bolt {self._state.component!r} called {what} on {tuple!r}, which was "
                f"already acked or failed; every tuple is acked or failed exactly once"
            )
        tuple._ack_val = None
        self._state.pending -= 1

    def ack(self, tuple: Tuple) -> None:
        self._complete(tuple, "ack")

    def fail(self, tuple: Tuple) -> None:
        self._complete(tuple, "fail")
        self._state.fail(repr(tuple))

    def reset_timeout(self, tuple: Tuple) -> None:
        """No timeouts on Spark: a micro-batch runs until it ends."""

    def report_error(self, error: BaseException | str) -> None:
        self._state.errors.append(repr(error) if isinstance(error, BaseException) else error)


class _HoldingCollector(_OutputCollector):
    """The collector of a bolt that holds tuples across micro-batches in Spark state (a
    windowed bolt): a tuple is done once the micro-batch that stored it is committed, so
    its later ``ack`` is bookkeeping; a ``fail`` still fails the Spark task."""

    def ack(self, tuple: Tuple) -> None:
        pass

    def fail(self, tuple: Tuple) -> None:
        self._state.fail(repr(tuple))


class _BasicCollector(_OutputCollector):
    """A ``BasicBolt``'s collector: ``emit(values, stream)``."""

    def emit(  # type: ignore[override]
        self, values: Sequence[Any], stream: str = "default"
    ) -> Sequence[int]:
        self._emits.emit(values, stream)
        return []

    def emit_direct(  # type: ignore[override]
        self, task: int, values: Sequence[Any], stream: str = "default"
    ) -> None:
        self._emits.emit(values, stream, task)


class _BatchCollector:
    """A batch bolt's collector (``BasicBatchBolt`` and ``BatchBolt`` forms)."""

    def __init__(self, emits: _Emits, state: _TaskState) -> None:
        self._emits = emits
        self._state = state
        self.input: TupleBatch | None = None

    def emit_batch(
        self,
        data: Any,
        anchors: Any = None,
        stream: str = "default",
        tasks: Any = None,
        anchor_batch: Any = None,
        anchor_groups: Any = None,
    ) -> int:
        return self._emits.emit_columns(data, stream, tasks)

    def emit_flat(self, per_row: Sequence[Sequence[Any]], stream: str = "default") -> int:
        batch = self.input
        if batch is not None and len(per_row) != batch.n:
            raise BoltFailure(
                f"bolt {self._state.component!r}: emit_flat got {len(per_row)} lists for "
                f"{batch.n} input rows; give one list (maybe empty) per input row"
            )
        layout = self._emits.stream(stream, False)
        flat = [v for r in per_row for v in r]
        width = len(layout.fields)
        columns = (
            [flat]
            if width == 1
            else [list(c) for c in zip(*flat, strict=True)] or [[] for _ in range(width)]
        )
        return self._emits.emit_columns(columns, stream)

    def _rows(self, batch: Any, rows: Any, what: str) -> tuple[TupleBatch, np.ndarray]:
        if batch is not None and not isinstance(batch, TupleBatch):
            batch, rows = None, batch  # basic form: fail(rows)
        if batch is None:
            batch = self.input
            if batch is None:
                raise BoltFailure(
                    f"bolt {self._state.component!r}: {what} needs the batch outside "
                    f"execute_batch: {what}(batch, rows)"
                )
        if rows is None:
            return batch, np.arange(batch.n, dtype=np.int64)
        idx = np.asarray(rows)
        if idx.dtype == bool:
            return batch, np.flatnonzero(idx)
        return batch, idx.astype(np.int64, copy=False).reshape(-1)

    def _mark(self, batch: TupleBatch, idx: np.ndarray, what: str) -> None:
        if batch.source_component == SYSTEM_COMPONENT_ID:
            return
        state = batch._state
        if state is None:
            state = batch._state = np.zeros(batch.n, np.uint8)
        if state[idx].any() or np.unique(idx).shape[0] != idx.shape[0]:
            raise BoltFailure(
                f"bolt {self._state.component!r} called {what} on rows of a batch from "
                f"{batch.source_component!r} that were already acked or failed; every row is "
                f"acked or failed exactly once"
            )
        state[idx] = 1
        self._state.pending -= int(idx.shape[0])

    def ack(self, batch: Any = None, rows: Any = None) -> None:
        batch, idx = self._rows(batch, rows, "ack")
        self._mark(batch, idx, "ack")

    def fail(self, batch: Any = None, rows: Any = None) -> None:
        batch, idx = self._rows(batch, rows, "fail")
        self._mark(batch, idx, "fail")
        if idx.shape[0]:
            self._state.fail(f"{idx.shape[0]} row(s) of a batch from {batch.source_component!r}")

    def reset_timeout(self, batch: Any = None, rows: Any = None) -> None:
        """No timeouts on Spark."""

    def pending_rows(self, batch: TupleBatch) -> np.ndarray:
        if batch._state is None:
            return np.arange(batch.n, dtype=np.int64)
        return np.flatnonzero(batch._state == 0)

    def report_error(self, error: BaseException | str) -> None:
        self._state.errors.append(repr(error) if isinstance(error, BaseException) else error)


def _input_batches(plan: BoltPlan, record_batch: Any) -> Iterator[TupleBatch]:
    """The record batch as ``TupleBatch``es, one per (input, upstream task)."""
    import pyarrow.compute as pc

    inputs = plan.inputs
    parts: list[tuple[int, Any]]
    if len(inputs) == 1:
        parts = [(0, record_batch)]
    else:
        which = record_batch.column(INPUT)
        parts = [(i, record_batch.filter(pc.equal(which, i))) for i in range(len(inputs))]
    for i, part in parts:
        if part.num_rows == 0:
            continue
        layout = inputs[i]
        fields = Fields(list(layout.fields))
        names = [in_col(i, k) for k in range(len(layout.fields))]
        tasks = part.column(SOURCE_TASK)
        distinct = pc.unique(tasks).to_pylist()
        for task in distinct:
            rows = part if len(distinct) == 1 else part.filter(pc.equal(tasks, task))
            columns = layout.from_arrow([rows.column(name) for name in names])
            source = Source(layout.component, layout.stream, int(task), fields)
            yield TupleBatch(source, columns, n=rows.num_rows)


def run_bolt_partition(plan_bytes: bytes, record_batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow``'s function for one bolt (``functools.partial`` binds the plan)."""
    from pyspark import TaskContext

    plan: BoltPlan = pickle.loads(plan_bytes)
    context_of_spark = TaskContext.get()
    task_index = context_of_spark.partitionId() if context_of_spark is not None else 0
    tasks = plan.plan.component_tasks[plan.component]
    task_id = tasks[task_index % len(tasks)]
    yield from BoltTask(plan, task_id).run(record_batches)


class BoltTask:
    """One task of a bolt over one micro-batch's input (also usable without Spark)."""

    def __init__(self, plan: BoltPlan, task_id: int, holds_inputs: bool = False) -> None:
        self.plan = plan
        self.task_id = task_id
        #: the bolt keeps tuples past the micro-batch (in Spark state): no ack is due
        self.holds_inputs = holds_inputs
        self.bolt: Any = plan.topology.components[plan.component].component
        self.state = _TaskState(plan.component, task_id)
        self.emits = _Emits(plan, task_id)
        self.context = TopologyContext(
            plan.topology, plan.plan, plan.conf, task_id, clock=SystemClock()
        )
        self._loop: list[asyncio.AbstractEventLoop] = []
        #: called with the bolt after ``prepare`` (a stateful bolt's ``init_state``)
        self.after_prepare: Callable[[Any], Any] | None = None

    def run(self, record_batches: Iterable[Any]) -> Iterator[Any]:
        bolt, plan = self.bolt, self.plan
        conf = dict(plan.conf)
        is_batch = isinstance(bolt, (BasicBatchBolt, BatchBolt))
        rich = isinstance(bolt, (Bolt, BatchBolt))
        collector: Any
        if is_batch:
            collector = _BatchCollector(self.emits, self.state)
        elif self.holds_inputs:
            collector = _HoldingCollector(self.emits, self.state)
        elif rich:
            collector = _OutputCollector(self.emits, self.state)
        else:
            collector = _BasicCollector(self.emits, self.state)
        try:
            if rich:
                _run(bolt.prepare(conf, self.context, collector), self._loop)
            else:
                _run(bolt.prepare(conf, self.context), self._loop)
            if self.after_prepare is not None:
                _run(self.after_prepare(bolt), self._loop)
            if plan.combine is not None:
                yield from self._combine(plan.combine, record_batches)
                return
            for record_batch in record_batches:
                for batch in _input_batches(plan, record_batch):
                    self._execute(batch, collector, is_batch, rich)
                yield from self.emits.drain()
            if plan.tick_secs is not None:
                source = Source(SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, -1, _TICK_FIELDS)
                tick = Tuple([plan.tick_secs], source, None, 0)
                tick_input = TupleBatch.from_tuples([tick]) if is_batch else tick
                self._execute(tick_input, collector, is_batch, rich, tick=True)
                yield from self.emits.drain()
            yield from self.emits.drain_partials()
            if self.state.pending:
                raise BoltFailure(
                    f"bolt {plan.component!r} task {self.task_id} left {self.state.pending} "
                    f"tuple(s) neither acked nor failed at the end of its micro-batch; on Spark "
                    f"a bolt's memory ends with the micro-batch, so ack or fail every input "
                    f"before then (ticks come once per micro-batch, after the last input)"
                )
        finally:
            try:
                _run(bolt.cleanup(), self._loop)
            finally:
                for loop in self._loop:
                    loop.close()

    def _combine(self, spec: CombineSpec, record_batches: Iterable[Any]) -> Iterator[Any]:
        """A ``CombinerBolt``'s task: every row (or partial aggregate) of the micro-batch
        combined per key, then one row per key."""
        acc = Accumulator(spec, self.bolt)
        try:
            for record_batch in record_batches:
                for batch in _input_batches(self.plan, record_batch):
                    columns = batch.columns
                    if batch.source_stream.startswith(PARTIAL_PREFIX):
                        acc.add(columns[:-1], columns[-1])
                        continue
                    key = [batch.column(f) for f in spec.key]
                    acc.add(key, acc.values(batch.fields, columns, batch.n, batch.source))
            keys, values, n = acc.result()
        except BoltFailure:
            raise
        except Exception as exc:
            raise BoltFailure(
                f"combiner bolt {self.plan.component!r} task {self.task_id} raised {exc!r} "
                f"combining its micro-batch; on Spark the Spark task fails and is retried "
                f"(spark.task.maxFailures), then the query fails"
            ) from exc
        if n:
            self.emits.emit_columns([*keys, values], "default")
        yield from self.emits.drain()

    def _execute(
        self, batch: Any, collector: Any, is_batch: bool, rich: bool, tick: bool = False
    ) -> None:
        bolt, state = self.bolt, self.state
        try:
            if is_batch:
                collector.input = batch
                if not tick:
                    state.pending += batch.n
                try:
                    if rich:
                        _run(bolt.execute_batch(batch), self._loop)
                    else:
                        try:
                            _run(bolt.execute_batch(batch, collector), self._loop)
                        except FailedException as exc:
                            collector.fail(batch, collector.pending_rows(batch))
                            if not isinstance(exc, BoltFailure):
                                collector.report_error(exc)
                        else:
                            if not tick:
                                pending = collector.pending_rows(batch)
                                if pending.shape[0]:
                                    collector.ack(batch, pending)
                finally:
                    collector.input = None
            else:
                tuples = [batch] if tick else batch.tuples()
                if not tick and not self.holds_inputs:
                    state.pending += len(tuples)
                if rich:
                    for t in tuples:
                        _run(bolt.execute(t), self._loop)
                else:
                    for t in tuples:
                        try:
                            _run(bolt.execute(t, collector), self._loop)
                        except FailedException as exc:
                            collector.fail(t)
                            collector.report_error(exc)
                        else:
                            if not tick:
                                collector.ack(t)
        except BoltFailure:
            raise
        except Exception as exc:
            raise BoltFailure(
                f"bolt {self.plan.component!r} task {self.task_id} raised {exc!r} in "
                f"{'execute_batch' if is_batch else 'execute'}; on Spark the Spark task fails "
                f"and is retried (spark.task.maxFailures), then the query fails"
            ) from exc
        state.check()
