"""``Reconfiguration``: what changes a running topology's executors — Storm's rebalance,
and crashed tasks and ackers.

It is an object of its own, held by the ``Runtime``: it holds the topology's
``ExecutorTable`` and ``Wiring`` and gets what else it needs of the runtime as a
``Reconfigurable`` record. Executors are replaced one reconfiguration at a time; the tasks
keep their ids, and restarted ones get fresh component objects and contexts.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._execution.acker import TIMED_OUT, AckerExecutor
from .._execution.control import Completions
from .._execution.executor import SpoutExecutor
from .._model.context import split_tasks
from .._model.copying import copy_component
from .._model.errors import TopologyStateError
from .._model.rebalance import RebalancePlan, check_rebalance
from .._model.topology import StormTopology
from .._time.clock import Clock
from .table import ExecutorTable, TaskExecutor
from .wiring import Wiring

__all__ = ["MAX_POLL_SECS", "POLL_SECS", "Reconfigurable", "Reconfiguration"]

#: How often idleness is polled (seconds, on the topology's clock).
POLL_SECS = 0.001
MAX_POLL_SECS = 0.016


@dataclass(frozen=True, slots=True)
class Reconfigurable:
    """What reconfiguration needs of a running topology, besides its executor table and
    its wiring."""

    name: str
    topology: StormTopology
    conf: Mapping[str, Any]
    clock: Clock
    acker: AckerExecutor
    #: ``ACTIVE``, ``INACTIVE``, ``KILLED`` or ``COMPLETED``
    status: Callable[[], str]
    #: activate or deactivate the topology
    set_active: Callable[[bool], None]
    #: nothing is queued, buffered, executing or pending anywhere
    is_idle: Callable[[], bool]
    #: what keeps the topology from being idle, for messages
    busy: Callable[[], str]
    #: restarted tasks get a new ``TopologyContext`` and empty user metrics
    fresh_contexts: Callable[[Sequence[int]], None]
    #: start (open / prepare) an executor and run it in the topology's task group
    launch: Callable[[TaskExecutor], Awaitable[None]]
    #: stop the topology on an error it cannot run on (``run`` raises it)
    fail: Callable[[BaseException], None]


class Reconfiguration:
    """Rebalances and crashes of one running topology, one at a time."""

    def __init__(self, table: ExecutorTable, wiring: Wiring, runtime: Reconfigurable) -> None:
        self._table = table
        self._wiring = wiring
        self._runtime = runtime
        #: tasks and ackers crashed so far
        self.crashes = 0
        self._lock = asyncio.Lock()

    @property
    def in_progress(self) -> bool:
        """A task is being restarted or moved (the topology is not complete meanwhile)."""
        return self._lock.locked()

    async def rebalance(
        self, component_id: str, num_executors: int, *, wait_secs: float | None = None
    ) -> int:
        """Spread ``component_id``'s tasks over ``num_executors`` executors (Storm's
        rebalance: the task count is fixed for the topology's life, so at most one executor
        per task); returns the executors applied, capped at the component's task count.

        As Storm's ``rebalance -w wait_secs``, the topology is deactivated and in-flight
        trees get up to ``wait_secs`` (default: the message timeout, plus one acker sweep,
        by when every tree stuck in user code has timed out; at most a day) to finish. If it
        is still busy then, nothing is moved, its previous activation is restored and a
        ``TimeoutError`` says what is still pending. The tasks keep their component
        objects, which are prepared (or opened) again with fresh contexts. Values out of
        range raise ``InvalidRebalanceError`` before anything is deactivated.

        When a task's ``prepare`` / ``open`` fails on the new executors, the rebalance is
        undone rather than left half-done (deactivated, with executors that never run):
        the new executors go, the tasks are prepared again on their previous executors and
        the previous activation is restored (a Storm rebalance, too, always ends in the
        topology's previous status); the ``TaskStartError``, recorded in ``info().errors``,
        is raised with a note saying so. If the tasks fail there too, the component cannot
        run: the topology stops on that error.
        """
        plan = self.check_rebalance({component_id: num_executors}, wait_secs)
        if plan.wait_secs is None:
            timeout = self._runtime.conf["topology.message.timeout.secs"]
            wait = timeout + min(1.0, timeout / 8) + MAX_POLL_SECS
        else:
            wait = plan.wait_secs
        applied = plan.executors[component_id]
        async with self._lock:
            await self._rebalance(component_id, applied, wait)
        return applied

    def check_rebalance(
        self,
        num_executors: Mapping[str, Any],
        wait_secs: Any = None,
        **fields: str,
    ) -> RebalancePlan:
        """``check_rebalance`` against this topology's task counts (``fields``: how the
        caller names its arguments, for the messages)."""
        components = self._runtime.topology.components
        tasks = self._table.plan.component_tasks
        user = {cid: len(t) for cid, t in tasks.items() if cid in components}
        return check_rebalance(self._runtime.name, user, num_executors, wait_secs, **fields)

    async def _rebalance(self, component_id: str, num_executors: int, wait_secs: float) -> None:
        runtime = self._runtime
        clock = runtime.clock
        was_active = runtime.status() == "ACTIVE"
        runtime.set_active(False)
        deadline = clock.now_ns() + int(wait_secs * 1e9)
        try:
            while not runtime.is_idle():
                if clock.now_ns() >= deadline:
                    raise TimeoutError(
                        f"rebalance of {component_id!r} in topology {runtime.name!r}: the "
                        f"topology did not become idle within wait_secs={wait_secs:g} s "
                        f"({runtime.busy()}); nothing was moved. Give it a longer wait_secs"
                    )
                await clock.sleep(POLL_SECS)
        except BaseException:  # a timeout, or the caller gave up (cancelled): as it was
            self._reactivate(was_active)
            raise
        table = self._table
        instances: dict[int, Any] = {}
        for ex in table.executors:
            if ex.component_id == component_id:
                instances.update(ex.instances)
        tasks = table.plan.component_tasks[component_id]
        previous = table.plan.executors[component_id]
        try:
            await self._move(component_id, split_tasks(tasks, num_executors), instances)
        except Exception as exc:
            # Half-moved, the topology would stay deactivated, with executors in the table
            # that never run and tuples for them piling up: put it back as it was.
            try:
                await self._move(component_id, previous, instances)
            except Exception as again:
                runtime.fail(again)
                raise
            exc.add_note(
                f"rebalance of {component_id!r} in topology {runtime.name!r} undone: its "
                f"tasks run on their previous {len(previous)} executor(s)"
            )
            self._reactivate(was_active)
            raise
        self._reactivate(was_active)

    def _reactivate(self, was_active: bool) -> None:
        """Give the spouts back their activity, unless the topology changed status
        meanwhile: a kill that began during the rebalance keeps them off (it has made the
        topology KILLED), as the timeout path does."""
        if was_active and self._runtime.status() == "INACTIVE":
            self._runtime.set_active(True)

    async def _move(
        self, component_id: str, ranges: Sequence[tuple[int, ...]], instances: dict[int, Any]
    ) -> None:
        """Run ``component_id``'s tasks on ``ranges``, on executors started afresh; the
        executors it has now (its previous ones, or those of a move that failed) are taken
        out first, those that had started getting ``cleanup`` / ``close``."""
        table = self._table
        for ex in [ex for ex in table.executors if ex.component_id == component_id]:
            started = ex in table.opened
            await table.remove(ex)
            if started:
                await ex.stop()
        self._runtime.fresh_contexts(table.plan.component_tasks[component_id])
        table.plan = dataclasses.replace(
            table.plan, executors={**table.plan.executors, component_id: tuple(ranges)}
        )
        await self._start_executors(component_id, ranges, instances)

    async def _start_executors(
        self, component_id: str, ranges: Sequence[tuple[int, ...]], instances: dict[int, Any]
    ) -> list[TaskExecutor]:
        wiring = self._wiring
        fresh = [wiring.add_executor(component_id, r, {t: instances[t] for t in r}) for r in ranges]
        for ex in fresh:
            wiring.wire(ex)
        for ex in self._table.executors:
            wiring.rewire(ex)
        for ex in fresh:
            await self._runtime.launch(ex)
        return fresh

    async def crash_task(self, component_id: str, task_index: int = 0) -> int:
        """Crash the executor running that task, as a process crash would: every tuple it
        held (queued, buffered, executing) is lost, no ``cleanup``/``close`` runs, and its
        tasks restart with fresh component objects through ``prepare``/``open``. Returns
        the crashed task id."""
        runtime = self._runtime
        tasks = self._table.plan.component_tasks.get(component_id)
        if not tasks or not 0 <= task_index < len(tasks):
            raise TopologyStateError(
                f"topology {runtime.name!r} has no task {task_index} of component "
                f"{component_id!r} to crash"
            )
        task_id = tasks[task_index]
        async with self._lock:
            ex = self._table.of_task[task_id]
            await self._table.remove(ex)
            ex.inbox.close()  # its queue is lost; producers blocked on it must not hang
            if isinstance(ex, SpoutExecutor):
                ex.abandon_pending()  # and with it what its spout tasks had in flight
            self.crashes += 1
            runtime.fresh_contexts(ex.tasks)
            spec = runtime.topology.components[component_id]
            fresh = await self._start_executors(
                component_id,
                [ex.tasks],
                {
                    t: copy_component(
                        spec.component, f"component {component_id!r}", spec.serialized
                    )
                    for t in ex.tasks
                },
            )
            for sx in fresh:
                if isinstance(sx, SpoutExecutor) and runtime.status() == "ACTIVE":
                    sx.set_active(True)
        return task_id

    def crash_acker(self, index: int = 0) -> None:
        """Crash acker ``index``: its ledger is lost. As in Storm, the spouts then time out
        the trees it was tracking (after the message timeout) and replay them."""
        runtime = self._runtime
        acker = runtime.acker
        if not 0 <= index < len(acker.ledgers):
            raise TopologyStateError(
                f"topology {runtime.name!r} has no acker {index} (ackers: {len(acker.ledgers)})"
            )
        acker.reset_ledger(index)
        self.crashes += 1
        n = len(acker.ledgers)
        delay = runtime.conf["topology.message.timeout.secs"]
        loop = asyncio.get_running_loop()
        for sx in self._table.spouts:
            for task, collector in sx.collectors.items():
                roots = collector.pending.roots()
                lost = roots[roots % np.uint64(n) == index]
                if lost.shape[0]:
                    outcomes = np.full(lost.shape[0], TIMED_OUT, np.uint8)
                    item = Completions(task, lost, outcomes)
                    loop.call_later(delay, sx.inbox.put_control, item)
