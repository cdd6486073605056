"""One bolt task inside a Spark task: the function the Spark runner gives ``mapInArrow``.

Spark partition ``i`` of a bolt's input is task index ``i`` (the runner routes every row
there, ``__task``), so each Spark task builds the bolt's task ``i`` with the engine's own
collector and ``TopologyContext`` (``engine.runners.BoltTaskRun``; the same task ids as in
local mode), ``prepare``, then every Arrow record batch of the micro-batch, as ``Tuple``
views for per-tuple bolts and as a ``TupleBatch`` with Arrow columns for batch bolts (no
per-row Python on the way in or out of a batch bolt). Emits become the output's Arrow
record batches, one per stream and input batch.

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
import pickle
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from engine import CombinerBolt, Fields, StormTopology, TupleBatch
from engine.runners import BoltTaskRun, Emitted, Source, TaskPlan

from .._layout import INPUT, SOURCE_TASK, OutputLayout, StreamLayout, in_col
from ._combine import PARTIAL_PREFIX, Accumulator, CombineSpec, PartialStep

__all__ = [
    "BoltFailure",
    "BoltPlan",
    "BoltTask",
    "WallClock",
    "run_bolt_partition",
    "run_bolt_task",
]

_RETRIED = (
    "on Spark the Spark task fails and is retried (spark.task.maxFailures), then the query fails"
)


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


class WallClock:
    """The machine's wall clock (Unix time), for a bolt whose times outlive its Spark task
    (a processing-time window, saved in Spark state): the next micro-batch may run that
    task on another executor, or after a restart, where a monotonic clock counts from
    another start. Spark's own processing time and timers are wall-clock time too."""

    def now_ns(self) -> int:
        return time.time_ns()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Output:
    """A task's emits as record batches of the bolt's output schema; the combine steps fed
    on the way."""

    def __init__(self, plan: BoltPlan, task_id: int) -> None:
        self.plan = plan
        self.task_id = task_id
        self.component = plan.component
        self.schema = plan.output.arrow_schema()
        self.types = [s.arrow_types() for s in plan.output.streams]
        self.index = {s.stream: s.index for s in plan.output.streams}
        self.partials: dict[int, list[tuple[PartialStep, Accumulator]]] = {}
        for step in plan.partials:
            bolt = plan.topology.components[step.spec.component].component
            assert isinstance(bolt, CombinerBolt)
            self.partials.setdefault(step.source, []).append((step, Accumulator(step.spec, bolt)))

    def batches(self, emitted: Iterable[Emitted]) -> Iterator[Any]:
        for e in emitted:
            out = self._batch(self.index[e.stream], e.columns, e.n, e.tasks)
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
            try:
                acc.add(key, acc.values(step.fields, cols, n, source))
            except Exception as exc:
                raise BoltFailure(
                    f"bolt {self.component!r} task {self.task_id} raised {exc!r} in the combine "
                    f"step of combiner bolt {step.spec.component!r}; {_RETRIED}"
                ) from exc
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

    context_of_spark = TaskContext.get()
    task_index = context_of_spark.partitionId() if context_of_spark is not None else 0
    return run_bolt_task(plan_bytes, task_index, record_batches)


def run_bolt_task(
    plan_bytes: bytes, task_index: int, record_batches: Iterable[Any]
) -> Iterator[Any]:
    """Task index ``task_index`` of the bolt of ``plan_bytes`` over ``record_batches`` (its
    input's layout): the bolt's output record batches."""
    plan: BoltPlan = pickle.loads(plan_bytes)
    tasks = plan.plan.component_tasks[plan.component]
    task_id = tasks[task_index % len(tasks)]
    yield from BoltTask(plan, task_id).run(record_batches)


def _reported(errors: list[str], shown: int = 5) -> str:
    """The errors a task reported, for a message: the first ``shown`` and how many more."""
    if not errors:
        return ""
    more = len(errors) - shown
    return f"; reported errors: {errors[:shown]}" + (f" and {more:,} more" if more > 0 else "")


class BoltTask:
    """One task of a bolt over one micro-batch's input (also usable without Spark).

    ``holds_inputs``: the bolt keeps tuples past the micro-batch in Spark state (a windowed
    bolt), so they are done once the micro-batch that stored them is committed and no ack
    is due by its end, and its clock is the wall clock (``WallClock``)."""

    def __init__(self, plan: BoltPlan, task_id: int, holds_inputs: bool = False) -> None:
        self.plan = plan
        self.task_id = task_id
        self.holds_inputs = holds_inputs
        self.task = BoltTaskRun(
            plan.topology,
            plan.plan,
            plan.conf,
            plan.component,
            task_id,
            clock=WallClock() if holds_inputs else None,
        )
        self.bolt: Any = self.task.bolt
        self.output = _Output(plan, task_id)
        #: called with the bolt after ``prepare`` (a stateful bolt's ``init_state``)
        self.after_prepare: Callable[[Any], Any] | None = None

    def run(self, record_batches: Iterable[Any]) -> Iterator[Any]:
        plan, task = self.plan, self.task
        try:
            task.prepare(self.after_prepare)
            if plan.combine is not None:
                yield from self._combine(plan.combine, record_batches)
                return
            for record_batch in record_batches:
                for batch in _input_batches(plan, record_batch):
                    self._execute(task.execute, batch)
                yield from self.output.batches(task.take_emitted())
            if plan.tick_secs is not None:
                self._execute(task.tick, plan.tick_secs)
                yield from self.output.batches(task.take_emitted())
            yield from self.output.drain_partials()
            if task.pending and not self.holds_inputs:
                raise BoltFailure(
                    f"bolt {plan.component!r} task {self.task_id} left {task.pending} "
                    f"tuple(s) neither acked nor failed at the end of its micro-batch; on Spark "
                    f"a bolt's memory ends with the micro-batch, so ack or fail every input "
                    f"before then (ticks come once per micro-batch, after the last input)"
                )
        finally:
            task.cleanup()

    def _execute(self, call: Callable[[Any], None], arg: Any) -> None:
        task = self.task
        try:
            call(arg)
        except Exception as exc:
            method = "execute_batch" if task.is_batch else "execute"
            raise BoltFailure(
                f"bolt {self.plan.component!r} task {self.task_id} raised {exc!r} in "
                f"{method}; {_RETRIED}"
            ) from exc
        if task.failed:
            raise BoltFailure(
                f"bolt {self.plan.component!r} task {self.task_id} failed {task.failed} "
                f"tuple(s); {_RETRIED}, whose restart runs the micro-batch again"
                + _reported(task.errors)
            )

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
        except Exception as exc:
            raise BoltFailure(
                f"combiner bolt {self.plan.component!r} task {self.task_id} raised {exc!r} "
                f"combining its micro-batch; {_RETRIED}"
            ) from exc
        if n:
            yield from self.output.batches([Emitted("default", [*keys, values], n)])
