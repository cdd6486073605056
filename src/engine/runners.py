"""The engine as a library for other runners: what the Spark runner (``spark_io.runner``) is
built on, public so that a runner imports no private name of the engine.

- ``load_topology("MODULE:FUNCTION")``: the topology and conf that ``squall run`` loads.
- ``task_plan(topology)``: every component's task ids, the same in every runner, so that
  a bolt's ``TopologyContext`` says the same thing wherever it runs.
- ``BoltTaskRun``: one bolt task outside the engine's runtime, with the engine's own
  collector and context: batches of tuples in, the emitted rows out per stream, every
  input acked or failed as the engine's executor does it.
- ``grouper_class(grouping)``: the engine's class for a declared grouping; its
  ``spark_routing(grouping)`` describes how a columnar runner routes the rows
  (``HashTask``, ``RandomTask``, ``FirstTask``, ``EveryTask``, ``ChosenTask``,
  ``LocalTask``, or ``NoColumnRouting`` with the reason), and ``keeps_together(grouping,
  key)`` says whether equal keys reach the same task(s).
- ``RUNNERS_GROUP``: the entry point group a runner registers its command under
  (``spark = spark_io.runner:main``); ``squall submit --runner NAME ARGS...`` calls
  ``main(ARGS)`` of the one named ``NAME``.

>>> from engine.runners import BoltTaskRun, task_plan
>>> plan = task_plan(topology)                                         # doctest: +SKIP
>>> run = BoltTaskRun(topology, plan, {}, "split", plan.component_tasks["split"][0])
...                                                                    # doctest: +SKIP
>>> run.prepare(); run.execute(batch); emitted = run.take_emitted()   # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._columnar.batch import TupleBatch, as_columns, column_as_list
from ._columnar.batch_collector import BatchCollector
from ._command.cli import RUNNERS_GROUP, _CliError, _load, _parse_conf
from ._execution.acker import AckerOps
from ._execution.collector import BasicCollector, BasicOutputCollector, BoltCollector, Route
from ._execution.groupers import (
    ChosenTask,
    EveryTask,
    FirstTask,
    HashTask,
    LocalTask,
    NoColumnRouting,
    RandomTask,
    SparkRouting,
    grouper_class,
    make_grouper,
)
from ._model.batch_component import BasicBatchBolt, BatchBolt
from ._model.component import BasicBolt, Bolt
from ._model.config import (
    DEFAULTS,
    TOPOLOGY_ACKER_EXECUTORS,
    TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL,
)
from ._model.context import TaskPlan, TopologyContext, build_plan
from ._model.copying import copy_component
from ._model.errors import FailedException, ReportedFailedException, SquallError
from ._model.faults import Trace
from ._model.fields import Fields
from ._model.grouping import Grouping, GroupingKind
from ._model.topology import StormTopology
from ._model.tuple import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, Source, Tuple
from ._time.clock import Clock, SystemClock

__all__ = [
    "RUNNERS_GROUP",
    "BoltTaskRun",
    "ChosenTask",
    "Emitted",
    "EveryTask",
    "FirstTask",
    "HashTask",
    "LocalTask",
    "NoColumnRouting",
    "RandomTask",
    "RunnerUsageError",
    "Source",
    "SparkRouting",
    "TaskPlan",
    "as_columns",
    "column_as_list",
    "grouper_class",
    "load_topology",
    "parse_conf",
    "task_plan",
]

_TICK_FIELDS = Fields("rate_secs")


class RunnerUsageError(SquallError, ValueError):
    """A runner's command was misused: a target that does not load, a bad ``--conf``.
    ``code`` is the exit status the command should end with."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def load_topology(target: str) -> tuple[StormTopology, dict[str, Any]]:
    """The ``(topology, conf)`` that ``MODULE:FUNCTION`` returns, as ``squall run`` loads
    it (the current directory on ``sys.path``); ``RunnerUsageError`` says what is wrong."""
    try:
        return _load(target)
    except _CliError as exc:
        raise RunnerUsageError(str(exc), exc.code) from exc


def parse_conf(items: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` settings as ``squall run --conf`` reads them (Python literals where
    they parse, strings otherwise)."""
    try:
        return _parse_conf(list(items))
    except _CliError as exc:
        raise RunnerUsageError(str(exc), exc.code) from exc


def task_plan(topology: StormTopology) -> TaskPlan:
    """Every component's task ids (from 1, per component in sorted id order, as Storm)."""
    return build_plan(topology)


@dataclass(frozen=True)
class Emitted:
    """Rows a task emitted on one stream: ``columns`` (as emitted: lists, numpy or Arrow)
    and, for ``emit_direct``, the task each row goes to (``tasks``), else None."""

    stream: str
    columns: list[Any]
    n: int
    tasks: np.ndarray | None = None


class _Host:
    """What the engine's collectors need of an executor, for one task outside it."""

    def __init__(
        self, component: str, size: int, slots: Sequence[int], clock: Clock, max_logged: int
    ) -> None:
        self.component_id = component
        self.out: list[list[Any] | None] = [None] * size
        for slot in slots:
            self.out[slot] = []
        self.in_batch = True
        self.acker_ops = AckerOps()
        self.clock = clock
        self.trace: Trace | None = None
        self.errors: list[str] = []
        #: reported errors logged per run, with their tracebacks; the rest are counted
        self.max_logged = max_logged
        self._rng = random.Random(0)
        self.notify_acker: Callable[[], None] = _nothing

    def rng_for(self, task: int) -> random.Random:
        return self._rng

    def draw_ids_for(self, task: int) -> Callable[[int], np.ndarray]:
        rng = np.random.default_rng(task)
        return lambda n: rng.integers(1, 2**63, n, dtype=np.uint64)

    def note_batch(self, rows: int) -> None:
        pass

    def record_error(self, task: int, error: str, tb: str) -> None:
        # No topology stats or error log outside the runtime: the first few of a task's run
        # are logged here with their tracebacks (as the engine's log would), and all are kept
        # for the runner's own message.
        self.errors.append(error)
        if len(self.errors) <= self.max_logged:
            logging.getLogger(f"engine.component.{self.component_id}").error(
                "task %d: %s%s", task, error, f"\n{tb.rstrip()}" if tb else ""
            )

    def log_unlogged(self, task: int) -> None:
        """Say how many reported errors were only counted (past ``max_logged``)."""
        more = len(self.errors) - self.max_logged
        if more > 0:
            logging.getLogger(f"engine.component.{self.component_id}").error(
                "task %d: %s more error(s) not logged in this run, the last: %s (at most %d "
                "are logged per run: topology.max.error.report.per.interval)",
                task,
                f"{more:,}",
                self.errors[-1],
                self.max_logged,
            )


class BoltTaskRun:
    """One task of bolt ``component`` outside the engine's runtime (a Spark task, say).

    The bolt is a copy of the topology's (as each task of the engine gets), or ``bolt``.
    ``prepare`` it, ``execute`` batches (a per-tuple bolt gets ``Tuple`` views), ``tick``
    it, ``take_emitted`` what it emitted, ``cleanup``. A bolt's ``FailedException`` fails
    the tuples (or rows) as in the engine, counted in ``failed``; any other exception
    propagates, for the runner to decide. ``pending`` counts the inputs neither acked nor
    failed yet; ``errors`` what the bolt reported (``report_error`` and
    ``ReportedFailedException``). ``async def`` methods run to completion on a loop of
    the task's own. No acker runs here (the runner's step is the unit of replay), so the
    conf the bolt gets says ``topology.acker.executors`` = 0, and what anchors only for an
    acker's sake (a window anchoring its emits to its tuples) is left out.
    """

    def __init__(
        self,
        topology: StormTopology,
        plan: TaskPlan,
        conf: Mapping[str, Any],
        component: str,
        task_id: int,
        *,
        bolt: Any = None,
        clock: Clock | None = None,
    ) -> None:
        spec = topology.components[component]
        self.component = component
        self.task_id = task_id
        self.conf = {**conf, TOPOLOGY_ACKER_EXECUTORS: 0}
        self.bolt: Any = (
            copy_component(spec.component, f"bolt {component!r}") if bolt is None else bolt
        )
        self.context = TopologyContext(
            topology, plan, self.conf, task_id, clock=clock or SystemClock()
        )
        self.is_batch = isinstance(self.bolt, (BasicBatchBolt, BatchBolt))
        self.is_basic = isinstance(self.bolt, (BasicBolt, BasicBatchBolt))
        if not self.is_batch and not isinstance(self.bolt, (Bolt, BasicBolt)):
            raise TypeError(f"component {component!r} is not a bolt")
        self.is_async = inspect.iscoroutinefunction(
            self.bolt.execute_batch if self.is_batch else self.bolt.execute
        )
        #: a rich bolt with ``execute_many`` (a windowed bolt's executor) takes a batch whole
        self.executes_many = (
            not self.is_batch and not self.is_basic and hasattr(self.bolt, "execute_many")
        )
        # Non-direct emits land in one capture slot past every task id; direct ones in the
        # slot of the task they go to.
        capture = max(plan.task_component) + 1
        routes: dict[str, Route] = {}
        direct_slots: set[int] = set()
        for stream, info in spec.streams.items():
            source = Source(component, stream, task_id, info.fields)
            if info.direct:
                targets = frozenset(
                    t
                    for bolt, _ in topology.subscribers(component, stream)
                    for t in plan.component_tasks[bolt]
                )
                direct_slots |= targets
                routes[stream] = Route(source, True, [], targets)
            else:  # every row to the capture slot, as one fixed target
                every_row = make_grouper(
                    Grouping(GroupingKind.GLOBAL),
                    info.fields,
                    [capture],
                    random.Random(0),
                    None,
                    (component, stream),
                )
                routes[stream] = Route(source, False, [every_row], frozenset())
        self._slots = [capture, *sorted(direct_slots)]
        self._host = _Host(
            component,
            capture + 1,
            self._slots,
            self.context.clock,
            int(
                self.conf.get(
                    TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL,
                    DEFAULTS[TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL],
                )
            ),
        )
        self.collector: Any
        if self.is_batch:
            host = self._host
            collector = BatchCollector(
                component,
                task_id,
                routes,
                host.out,
                host.acker_ops,
                host.draw_ids_for(task_id),
                host.note_batch,
                notify=host.notify_acker,
            )
            collector.report_error = self._report  # type: ignore[method-assign]
            collector.in_batch = True
            self.collector = collector
        elif self.is_basic and not self.is_async:
            self.collector = BasicCollector(self._host, task_id, routes)
        else:
            self.collector = BoltCollector(self._host, task_id, routes)
        self.inputs = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- what a runner calls --------------------------------------------------------------
    @property
    def errors(self) -> list[str]:
        """The errors the bolt reported (``report_error``), in order, for the runner's own
        error message: it has no topology stats to put them in."""
        return self._host.errors

    @property
    def failed(self) -> int:
        """Inputs the bolt failed so far: where the engine would replay them from the spout,
        a runner fails its whole step so that the step runs again."""
        return int(self.collector.failed)

    @property
    def pending(self) -> int:
        """Inputs neither acked nor failed yet. A runner whose task lives only for one step
        (a Spark micro-batch) refuses to end the step with any pending."""
        return self.inputs - int(self.collector.acked) - int(self.collector.failed)

    def prepare(self, then: Callable[[Any], Any] | None = None) -> None:
        """``prepare`` the bolt, then ``then(bolt)`` (a stateful bolt's ``init_state``)."""
        if self.is_basic:
            self._await(self.bolt.prepare(self.conf, self.context))
        else:
            self._await(self.bolt.prepare(self.conf, self.context, self.collector))
        if then is not None:
            self._await(then(self.bolt))

    def execute(self, batch: TupleBatch) -> None:
        """Run the bolt over ``batch`` as the engine's executor does."""
        self.inputs += batch.n
        if self.is_batch:
            self._execute_batch(batch)
        elif self.executes_many:
            self._await(self.bolt.execute_many(batch))
        elif isinstance(self.collector, BasicCollector):
            self._execute_basic(batch)
        else:
            for t in batch.tuples():
                self._execute_one(t)

    def tick(self, secs: float) -> None:
        """One tick tuple (Storm's ``__tick`` stream), which needs no ack."""
        source = Source(SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, -1, _TICK_FIELDS)
        tick = Tuple([secs], source, None, 0)
        if self.is_batch:
            self._execute_batch(TupleBatch.from_tuples([tick]), tick=True)
        elif self.executes_many:
            self._await(self.bolt.execute_many([tick]))
        elif isinstance(self.collector, BasicCollector):
            self.inputs += 1  # sealed with the rows it emits: counted as acked
            self._execute_basic(TupleBatch.from_tuples([tick]))
        else:
            self._execute_one(tick, tick=True)

    def take_emitted(self) -> list[Emitted]:
        """What the task emitted since the last call, in order, grouped per stream run."""
        out: list[Emitted] = []
        capture = self._slots[0]
        for slot in self._slots:
            items = self._host.out[slot]
            assert items is not None
            if not items:
                continue
            self._host.out[slot] = []
            target = None if slot == capture else slot
            rows: list[Any] = []
            stream: str | None = None
            for item in items:
                if isinstance(item, TupleBatch):
                    if rows:
                        out.append(_rows(stream, rows, target))
                        rows = []
                    tasks = None if target is None else np.full(item.n, target, np.int64)
                    out.append(Emitted(item.source.stream, item.columns, item.n, tasks))
                    continue
                if rows and item._src.stream != stream:
                    out.append(_rows(stream, rows, target))
                    rows = []
                stream = item._src.stream
                rows.append(item)
            if rows:
                out.append(_rows(stream, rows, target))
        return out

    def cleanup(self) -> None:
        """The bolt's ``cleanup``, then the task's private event loop is closed."""
        try:
            self._await(self.bolt.cleanup())
        finally:
            self._host.log_unlogged(self.task_id)
            if self._loop is not None:
                self._loop.close()
                self._loop = None

    # --- the executor's rules -------------------------------------------------------------
    def _report(self, error: BaseException | str) -> None:
        if isinstance(error, BaseException):
            tb = "".join(traceback.format_exception(error))
            self._host.record_error(self.task_id, repr(error), tb)
        else:
            self._host.record_error(self.task_id, error, "")

    def _await(self, result: Any) -> Any:
        if not inspect.isawaitable(result):
            return result
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(result)

    def _execute_batch(self, batch: TupleBatch, tick: bool = False) -> None:
        collector = self.collector
        collector.input = batch
        try:
            if self.is_basic:
                self._await(self.bolt.execute_batch(batch, collector))
            else:
                self._await(self.bolt.execute_batch(batch))
        except FailedException as exc:
            if isinstance(exc, ReportedFailedException):
                self._report(exc)
            rows = collector.pending_rows(batch)
            if rows.shape[0] and not tick:
                collector.fail(batch, rows)
        else:
            if self.is_basic and not tick:
                rows = collector.pending_rows(batch)
                if rows.shape[0]:
                    collector.ack(batch, rows)
        finally:
            collector.input = None

    def _execute_basic(self, batch: TupleBatch) -> None:
        """A synchronous basic bolt: ``execute`` per row, then the collector sends the
        emits on and acks the rows (fails those that raised ``FailedException``)."""
        collector = self.collector
        execute = self.bolt.execute
        failed: list[int] = []
        for i, t in enumerate(batch.tuples()):
            collector._row = i
            try:
                execute(t, collector)
            except FailedException as exc:
                if isinstance(exc, ReportedFailedException):
                    self._report(exc)
                failed.append(i)
            t._ack_val = None  # acked or failed with the batch
        collector.seal(batch, failed)

    def _execute_one(self, t: Tuple, tick: bool = False) -> None:
        collector = self.collector
        try:
            if self.is_basic:
                basic = BasicOutputCollector(collector)
                basic._input = t
                self._await(self.bolt.execute(t, basic))
            else:
                self._await(self.bolt.execute(t))
        except FailedException as exc:
            if isinstance(exc, ReportedFailedException):
                self._report(exc)
            if not tick and t._ack_val is not None:
                collector.fail(t)
            return
        if self.is_basic and not tick and t._ack_val is not None:
            collector.ack(t)


def _nothing() -> None:
    pass


def _rows(stream: str | None, tuples: list[Tuple], target: int | None) -> Emitted:
    assert stream is not None
    width = len(tuples[0]._src.fields)
    columns = [list(c) for c in zip(*(t.values for t in tuples), strict=True)] or [
        [] for _ in range(width)
    ]
    tasks = None if target is None else np.full(len(tuples), target, np.int64)
    return Emitted(stream, columns, len(tuples), tasks)
