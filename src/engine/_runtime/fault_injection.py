"""Fault injection: the wrappers that carry out ``engine.testing``'s fault records, put in
place when the topology is wired.

Crashes (``CrashTask``, ``CrashAcker``) are the runtime's to carry out at their time, by its
``Reconfiguration``. Every other fault wraps what it disturbs, so a run without faults
carries none of their code:

- an edge fault (``DropTuples``, ``DelayTuples``) wraps the sending executor's destination
  for each task of the target component in a ``FaultyEdge``;
- a bolt fault (``SlowBolt``, ``FailTuples``) wraps the bolt executor's ``execute_item`` in
  a ``FaultyExecution``.

The wiring asks ``FaultInjector.edge`` for every destination and ``FaultInjector.wrap`` for
every executor it builds, restarted and rebalanced ones included; a fault injected into a
running topology has every executor wired again. All faults draw on one random source
derived from the topology's seed, so a seeded simulation with faults is reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import numpy as np

from .._columnar.batch import TupleBatch
from .._columnar.xor import batch_roots
from .._execution.channel import Delivery, Destination, Inbox
from .._execution.executor import BoltExecutor, as_batch
from .._model.errors import TopologyStateError
from .._model.faults import (
    CrashAcker,
    CrashTask,
    DelayTuples,
    DropTuples,
    FailTuples,
    Fault,
    SlowBolt,
)
from .._model.tuple import Tuple
from .._time.clock import Clock
from .table import TaskExecutor

__all__ = ["FaultInjector", "FaultyEdge", "FaultyExecution"]

#: What a bolt executor runs per inbox item (``BoltExecutor.execute_item``).
Step = Callable[[int, "list[Tuple] | TupleBatch"], Awaitable[None]]


class FaultInjector:
    """The edge and bolt faults of one topology, the random source they draw on, and what
    they did (``dropped``, ``delayed``)."""

    def __init__(
        self,
        name: str,
        components: Sequence[str],
        seed: int,
        clock: Clock,
        uptime_secs: Callable[[], float],
        start: Callable[[Coroutine[Any, Any, None]], object],
    ) -> None:
        """``start`` runs a coroutine in the topology's task group (a delayed delivery)."""
        self._name = name
        self._components = sorted(components)
        self._edge: list[DropTuples | DelayTuples] = []
        self._bolt: list[SlowBolt | FailTuples] = []
        self.rng = random.Random(seed ^ 0x5EED_FA17)
        self.clock = clock
        self.uptime_secs = uptime_secs
        self._start = start
        #: tuples dropped by ``DropTuples`` faults
        self.dropped = 0
        #: batches held back by ``DelayTuples`` faults and not delivered yet
        self.delayed = 0

    def check_component(self, cid: str, what: str) -> None:
        """Refuse a fault (``what``) that names no component of the topology."""
        if cid not in self._components:
            raise TopologyStateError(
                f"{what}: topology {self._name!r} has no component {cid!r} "
                f"(components: {self._components})"
            )

    def add(self, fault: Fault) -> CrashTask | CrashAcker | None:
        """Check ``fault`` and keep it; a crash is returned for the runtime to schedule.
        Executors wired already must be wired again to meet it."""
        if isinstance(fault, (CrashTask, CrashAcker)):
            if isinstance(fault, CrashTask):
                self.check_component(fault.component, "CrashTask")
            return fault
        if isinstance(fault, (DropTuples, DelayTuples)):
            for cid in (fault.source, fault.target):
                self.check_component(cid, type(fault).__name__)
            self._edge.append(fault)
        elif isinstance(fault, (SlowBolt, FailTuples)):
            self.check_component(fault.component, type(fault).__name__)
            self._bolt.append(fault)
        else:
            raise TypeError(f"not a fault: {fault!r}")
        return None

    def edge(self, source: str, target: str, inbox: Inbox) -> Destination:
        """Where ``source``'s executors hand the batches for a task of ``target`` whose
        inbox is ``inbox``: the inbox itself, or a ``FaultyEdge`` if the edge has faults."""
        faults = [f for f in self._edge if f.source == source and f.target == target]
        return FaultyEdge(inbox, faults, self) if faults else inbox

    def wrap(self, ex: TaskExecutor) -> None:
        """Wrap a bolt executor's ``execute_item`` in its component's bolt faults (again:
        the faults now, whatever it was wrapped in before)."""
        if not isinstance(ex, BoltExecutor):
            return
        step = ex.execute_item
        if isinstance(step, FaultyExecution):
            step = step.inner
        faults = [f for f in self._bolt if f.component == ex.component_id]
        ex.execute_item = FaultyExecution(ex, step, faults, self) if faults else step

    def drop(self, batch: Any, probability: float) -> Any:
        """``batch`` without the tuples a ``DropTuples`` fault drops (each with
        ``probability``)."""
        rng = self.rng
        if type(batch) is TupleBatch:
            keep = [i for i in range(batch.n) if rng.random() >= probability]
            self.dropped += batch.n - len(keep)
            return batch.take(np.array(keep, np.int64))
        kept = [t for t in batch if rng.random() >= probability]
        self.dropped += len(batch) - len(kept)
        return kept

    def deliver_later(self, delay: float, inbox: Inbox, task: int, batch: Any, stamp: int) -> None:
        """Put ``batch`` into ``inbox`` ``delay`` seconds from now (a ``DelayTuples``
        fault); the topology is not idle meanwhile."""
        self.delayed += 1

        async def deliver() -> None:
            try:
                await self.clock.sleep(delay)
                await inbox.put(task, batch, stamp)
            finally:
                self.delayed -= 1

        self._start(deliver())


class FaultyEdge:
    """A target task's inbox as seen through the drop and delay faults of one edge.

    It takes nothing without waiting (``put_nowait`` refuses), so a sender hands it every
    batch through ``put``, and the faults draw once per batch; a sender's non-waiting flush
    (an async spout's timer) leaves the batch for its next ``flush``.
    """

    __slots__ = ("_faults", "_inbox", "_injector")

    def __init__(
        self, inbox: Inbox, faults: list[DropTuples | DelayTuples], injector: FaultInjector
    ) -> None:
        self._inbox = inbox
        self._faults = faults
        self._injector = injector

    @property
    def capacity(self) -> int:
        """The target inbox's capacity (the sender cuts its runs to it)."""
        return self._inbox.capacity

    def put_nowait(self, task: int, batch: Delivery, stamp: int = 0) -> bool:
        """Refuse: every batch goes through ``put``, where the faults draw."""
        return False

    async def put(self, task: int, batch: Delivery, stamp: int = 0) -> None:
        """Drop or hold back ``batch`` as the active faults say, then put what is left."""
        injector = self._injector
        now = injector.uptime_secs()
        for fault in self._faults:
            if not fault.active(now):
                continue
            if isinstance(fault, DropTuples):
                batch = injector.drop(batch, fault.probability)
            elif len(batch):  # DelayTuples
                injector.deliver_later(fault.delay_secs, self._inbox, task, batch, stamp)
                return
        if len(batch):
            await self._inbox.put(task, batch, stamp)


class FaultyExecution:
    """A bolt executor's ``execute_item`` as seen through the faults of its bolt.

    ``FailTuples`` fails each anchored input with its probability instead of executing it;
    ``SlowBolt`` makes the executor spend ``secs_per_tuple`` (clock time) per input it
    executed, after running the item and before it takes the next one (an async bolt's
    executor: after starting its calls).
    """

    __slots__ = ("_executor", "_faults", "_injector", "inner")

    def __init__(
        self,
        executor: BoltExecutor,
        inner: Step,
        faults: list[SlowBolt | FailTuples],
        injector: FaultInjector,
    ) -> None:
        self._executor = executor
        #: the step it wraps
        self.inner = inner
        self._faults = faults
        self._injector = injector

    async def __call__(self, task: int, item: list[Tuple] | TupleBatch) -> None:
        injector = self._injector
        now = injector.uptime_secs()
        active = [f for f in self._faults if f.active(now)]
        for fault in active:
            if isinstance(fault, FailTuples):
                item = self._fail(task, item, fault.probability)
        await self.inner(task, item)
        slow = sum(f.secs_per_tuple for f in active if isinstance(f, SlowBolt))
        if slow:
            await injector.clock.sleep(slow * len(item))

    def _fail(
        self, task: int, item: list[Tuple] | TupleBatch, probability: float
    ) -> list[Tuple] | TupleBatch:
        """``item`` without the inputs a ``FailTuples`` fault fails (each anchored input
        with ``probability``); those are failed through the task's collector."""
        rng = self._injector.rng
        executor = self._executor
        if executor.is_batch:
            batch = as_batch(item)
            collector = executor.batch_collectors[task]
            fail = np.array([rng.random() < probability for _ in range(batch.n)], bool)
            if batch.roots is not None and fail.any():
                collector.fail(batch, fail)
                batch = batch.take(np.flatnonzero(~fail))
            return batch
        if executor.is_basic and not executor.is_async:
            return self._fail_rows(task, item, probability)
        tuples = item.tuples() if isinstance(item, TupleBatch) else item
        bolt_collector = executor.rich_collectors[task]  # a rich or an async basic bolt's
        kept = []
        for t in tuples:
            if rng.random() < probability and t._ack_val is not None:
                bolt_collector.fail(t)
            else:
                kept.append(t)
        return kept

    def _fail_rows(
        self, task: int, item: list[Tuple] | TupleBatch, probability: float
    ) -> list[Tuple] | TupleBatch:
        """``_fail`` for a synchronous basic bolt, whose collector acks and fails its input
        rows as arrays: the rows drawn fail at once, as the acker's arrays."""
        executor = self._executor
        batch = as_batch(item)
        fail = np.array([self._injector.rng.random() < probability for _ in range(batch.n)], bool)
        if not fail.any():
            return item
        rows = np.flatnonzero(fail)
        if batch.roots is not None:
            executor.acker_ops.add_fails(batch_roots(batch, rows))
        collector = executor.basic_collectors[task]
        collector.failed += int(rows.shape[0])
        keep = np.flatnonzero(~fail)
        if isinstance(item, TupleBatch) or not keep.shape[0]:  # (no rows: an empty batch)
            return batch.take(keep)
        for i in rows.tolist():
            item[i]._ack_val = None
        return [item[i] for i in keep.tolist()]
