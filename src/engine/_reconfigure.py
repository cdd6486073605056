"""Reconfiguration of a running topology: Storm's rebalance, and crashed tasks and
ackers. Executors are replaced one reconfiguration at a time (``_reconfiguring``); the
tasks keep their ids, and restarted ones get fresh component objects and contexts.

``Reconfiguration`` is a part of ``Runtime`` (``_lifecycle``): what it uses of the rest is
declared below.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ._acker import TIMED_OUT, AckerExecutor, AckerOps
from ._clock import Clock
from ._context import TaskPlan, split_tasks
from ._control import Completions
from ._copying import copy_component
from ._errors import TopologyStateError
from ._executor import BoltExecutor, Executor, SpoutExecutor
from ._rebalance import RebalancePlan, check_rebalance
from ._topology import StormTopology

__all__ = ["MAX_POLL_SECS", "POLL_SECS", "Reconfiguration"]

#: How often idleness is polled (seconds, on the topology's clock).
POLL_SECS = 0.001
MAX_POLL_SECS = 0.016


class Reconfiguration:
    """Rebalance and crashes, as methods of ``Runtime``."""

    # --- what the runtime provides ---------------------------------------------------------
    name: str
    topology: StormTopology
    conf: dict[str, Any]
    plan: TaskPlan
    status: str
    clock: Clock
    crashes: int
    delayed: int
    acker: AckerExecutor
    acker_ops: AckerOps
    executors: list[Executor]
    spout_executors: list[SpoutExecutor]
    bolt_executors: list[BoltExecutor]
    _executor_of: dict[int, Executor]
    _executor_tasks: dict[Executor, asyncio.Task[Any]]
    _opened: set[Executor]
    _reconfiguring: asyncio.Lock

    def set_active(self, active: bool) -> None:
        raise NotImplementedError

    def pending(self) -> int:
        raise NotImplementedError

    def is_idle(self) -> bool:
        raise NotImplementedError

    def _add_executor(
        self, cid: str, tasks: tuple[int, ...], instances: dict[int, Any]
    ) -> Executor:
        raise NotImplementedError

    def _wire(self, ex: Executor) -> None:
        raise NotImplementedError

    def _spawn(self, ex: Executor) -> None:
        raise NotImplementedError

    def _fresh_contexts(self, tasks: Sequence[int]) -> None:
        raise NotImplementedError

    # --- reconfiguration -------------------------------------------------------------------
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
        """
        plan = self.check_rebalance({component_id: num_executors}, wait_secs)
        if plan.wait_secs is None:
            timeout = self.conf["topology.message.timeout.secs"]
            wait = timeout + min(1.0, timeout / 8) + MAX_POLL_SECS
        else:
            wait = plan.wait_secs
        applied = plan.executors[component_id]
        async with self._reconfiguring:
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
        tasks = {cid: len(t) for cid, t in self.plan.component_tasks.items()}
        user = {cid: n for cid, n in tasks.items() if cid in self.topology.components}
        return check_rebalance(self.name, user, num_executors, wait_secs, **fields)

    def _busy(self) -> str:
        """What keeps the topology from being idle, for error messages."""
        parts = [f"pending trees: {self.pending()}"]
        queued = sum(ex.inbox.size for ex in self.executors)
        buffered = sum(ex.buffered() for ex in self.executors)
        executing = sum(ex.inflight for ex in self.bolt_executors)
        for what, n in (
            ("queued tuples", queued),
            ("buffered tuples", buffered),
            ("async calls in flight", executing),
            ("acker ops", len(self.acker_ops)),
            ("delayed batches", self.delayed),
        ):
            if n:
                parts.append(f"{what}: {n}")
        return ", ".join(parts)

    async def _rebalance(self, component_id: str, num_executors: int, wait_secs: float) -> None:
        was_active = self.status == "ACTIVE"
        self.set_active(False)
        deadline = self.clock.now_ns() + int(wait_secs * 1e9)
        try:
            while not self.is_idle():
                if self.clock.now_ns() >= deadline:
                    raise TimeoutError(
                        f"rebalance of {component_id!r} in topology {self.name!r}: the "
                        f"topology did not become idle within wait_secs={wait_secs:g} s "
                        f"({self._busy()}); nothing was moved. Give it a longer wait_secs"
                    )
                await self.clock.sleep(POLL_SECS)
        except BaseException:  # a timeout, or the caller gave up (cancelled): as it was
            if was_active and self.status == "INACTIVE":
                self.set_active(True)
            raise
        old = [ex for ex in self.executors if ex.component_id == component_id]
        instances: dict[int, Any] = {}
        for ex in old:
            await self._remove_executor(ex)
            await ex.stop()  # type: ignore[attr-defined]
            instances.update(ex.instances)
        self._fresh_contexts(self.plan.component_tasks[component_id])
        ranges = split_tasks(self.plan.component_tasks[component_id], num_executors)
        self.plan = dataclasses.replace(
            self.plan, executors={**self.plan.executors, component_id: ranges}
        )
        await self._start_executors(component_id, ranges, instances)
        if was_active:
            self.set_active(True)

    async def _remove_executor(self, ex: Executor) -> None:
        """Stop ``ex``'s coroutine and take it out of the topology (no cleanup call)."""
        task = self._executor_tasks.pop(ex)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self.executors.remove(ex)
        self._opened.discard(ex)
        if isinstance(ex, SpoutExecutor):
            self.spout_executors.remove(ex)
        else:
            self.bolt_executors.remove(ex)  # type: ignore[arg-type]

    async def _start_executors(
        self, component_id: str, ranges: Sequence[tuple[int, ...]], instances: dict[int, Any]
    ) -> list[Executor]:
        fresh = [self._add_executor(component_id, r, {t: instances[t] for t in r}) for r in ranges]
        for ex in fresh:
            self._wire(ex)
        for ex in self.executors:
            ex.retarget(self._executor_of)
        for ex in fresh:
            await ex.start()  # type: ignore[attr-defined]
            self._opened.add(ex)
            self._spawn(ex)
        return fresh

    async def crash_task(self, component_id: str, task_index: int = 0) -> int:
        """Crash the executor running that task, as a process crash would: every tuple it
        held (queued, buffered, executing) is lost, no ``cleanup``/``close`` runs, and its
        tasks restart with fresh component objects through ``prepare``/``open``. Returns
        the crashed task id."""
        tasks = self.plan.component_tasks.get(component_id)
        if not tasks or not 0 <= task_index < len(tasks):
            raise TopologyStateError(
                f"topology {self.name!r} has no task {task_index} of component "
                f"{component_id!r} to crash"
            )
        task_id = tasks[task_index]
        async with self._reconfiguring:
            ex = self._executor_of[task_id]
            await self._remove_executor(ex)
            ex.inbox.close()  # its queue is lost; producers blocked on it must not hang
            if isinstance(ex, SpoutExecutor):
                ex.abandon_pending()  # and with it what its spout tasks had in flight
            self.crashes += 1
            self._fresh_contexts(ex.tasks)
            spec = self.topology.components[component_id]
            fresh = await self._start_executors(
                component_id,
                [ex.tasks],
                {
                    t: copy_component(spec.component, f"component {component_id!r}")
                    for t in ex.tasks
                },
            )
            for sx in fresh:
                if isinstance(sx, SpoutExecutor) and self.status == "ACTIVE":
                    sx.set_active(True)
        return task_id

    def crash_acker(self, index: int = 0) -> None:
        """Crash acker ``index``: its ledger is lost. As in Storm, the spouts then time out
        the trees it was tracking (after the message timeout) and replay them."""
        if not 0 <= index < len(self.acker.ledgers):
            raise TopologyStateError(
                f"topology {self.name!r} has no acker {index} (ackers: {len(self.acker.ledgers)})"
            )
        self.acker.reset_ledger(index)
        self.crashes += 1
        n = len(self.acker.ledgers)
        delay = self.conf["topology.message.timeout.secs"]
        loop = asyncio.get_running_loop()
        for sx in self.spout_executors:
            for task, collector in sx.collectors.items():
                lost = [r for r in collector.pending if r % n == index]
                if lost:
                    item = Completions(task, lost, [TIMED_OUT] * len(lost))
                    loop.call_later(delay, sx.inbox.put_control, item)
