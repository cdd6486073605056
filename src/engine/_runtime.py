"""The runtime: turns a ``StormTopology`` into executors on the running event loop.

``run_topology`` is the embedding API: ``async with run_topology(topology, conf) as
running``. Every coroutine the runtime starts (executors, the acker, tick timers) lives in
one ``asyncio.TaskGroup`` the runtime owns: an engine failure is never lost in a forgotten
task, and leaving the ``async with`` block stops everything and calls ``cleanup``/``close``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import numpy as np

from ._acker import TIMED_OUT, AckerExecutor
from ._batch_routing import make_batch_router
from ._clock import Clock, SystemClock
from ._collector import Route
from ._config import merged_config
from ._context import TaskPlan, TopologyContext, build_plan, split_tasks
from ._copying import copy_component
from ._errors import TopologyStateError
from ._executor import BoltExecutor, Executor, SpoutExecutor, TickItem
from ._faults import (
    BoltFaults,
    CrashAcker,
    CrashTask,
    DelayTuples,
    DropTuples,
    EdgeFaults,
    FailTuples,
    Fault,
    MessageReport,
    SlowBolt,
    Trace,
)
from ._fields import Fields
from ._gc import ManagedGC
from ._groupers import constant_targets, make_grouper
from ._grouping import GroupingKind
from ._metrics import read_metric
from ._stats import ComponentStats, ErrorInfo, LatencySummary, TaskStats, TopologyInfo
from ._topology import StormTopology
from ._tuple import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, Source, Tuple
from ._virtual import clock_for_running_loop

__all__ = ["RunningTopology", "Runtime", "run_topology", "start_topology"]

_TICK_FIELDS = Fields("rate_secs")
#: How often completion is polled by ``wait_until_complete`` (seconds, on the clock).
_POLL_SECS = 0.001
_MAX_POLL_SECS = 0.016


class Runtime:
    """One running topology. Use ``run_topology`` or ``LocalCluster`` rather than this."""

    def __init__(
        self,
        topology: StormTopology,
        conf: Mapping[str, Any] | None = None,
        *,
        name: str = "topology",
        clock: Clock | None = None,
        trace: bool = False,
        faults: Sequence[Fault] = (),
    ) -> None:
        if not isinstance(topology, StormTopology):
            raise TypeError(
                f"expected a StormTopology (from TopologyBuilder.create_topology()), got "
                f"{type(topology).__name__}"
            )
        self.topology = topology
        self.conf = merged_config(conf)
        self.conf["topology.name"] = name
        # Storm's per-submission id: names this run (checkpoints record which run wrote them)
        self.conf["storm.id"] = f"{name}-{uuid.uuid4().hex[:12]}"
        self.name = name
        self.clock: Clock = clock or SystemClock()
        seed = self.conf["topology.seed"]
        self.seed: int = random.SystemRandom().getrandbits(63) if seed is None else int(seed)
        self.conf["topology.seed"] = self.seed  # the effective seed, for every component
        self.plan: TaskPlan = build_plan(topology, self.conf["topology.max.task.parallelism"])
        ackers = self.conf["topology.acker.executors"]
        self.num_ackers = 1 if ackers is None else ackers
        self.acking = self.num_ackers > 0
        self._rngs: dict[int, random.Random] = {}
        self._contexts: dict[int, TopologyContext] = {}
        self.metrics: dict[int, dict[str, Any]] = {}
        self._errors_seen = 0
        self.status = "INACTIVE"
        self._start_ns = self.clock.now_ns()
        self._started = asyncio.Event()
        self._acker_notified = False
        self._task_group_tasks: list[asyncio.Task[Any]] = []
        self._executor_tasks: dict[Executor, asyncio.Task[Any]] = {}
        #: executors whose start (open / prepare) completed and that were not removed since
        self._opened: set[Executor] = set()
        self.crashes = 0
        self.dropped = 0
        self.delayed = 0  # batches held back by a DelayTuples fault
        self.trace: Trace | None = Trace() if trace else None
        self._edge_faults: list[DropTuples | DelayTuples] = []
        self._bolt_faults: list[SlowBolt | FailTuples] = []
        self._fault_rng = random.Random(self.seed ^ 0x5EED_FA17)
        self._pending_crashes: list[CrashTask | CrashAcker] = []
        self._tg: asyncio.TaskGroup | None = None
        # Crashes and rebalances replace executors: one at a time.
        self._reconfiguring = asyncio.Lock()

        max_task = max(self.plan.task_component, default=0)
        self.executors: list[Executor] = []
        self.spout_executors: list[SpoutExecutor] = []
        self.bolt_executors: list[BoltExecutor] = []
        self._executor_of: dict[int, Executor] = {}
        self.acker = AckerExecutor(
            max(self.num_ackers, 1),
            int(self.conf["topology.message.timeout.secs"] * 1e9),
            bool(self.conf["topology.enable.message.timeouts"]),
            spout_inboxes={},
            queued_roots=self._queued_roots,
        )
        self.acker_ops = self.acker.ops
        self._max_task = max_task
        for fault in faults:  # before any executor exists, so no batch runs without them
            self.inject(fault)
        for cid in sorted(topology.components):
            for tasks in self.plan.executors[cid]:
                component = topology.components[cid].component
                instances = {t: copy_component(component, f"component {cid!r}") for t in tasks}
                self._add_executor(cid, tasks, instances)
        for ex in self.executors:
            for t in ex.tasks:
                ex.routes[t] = self._routes_for(ex, t)

    def _add_executor(
        self, cid: str, tasks: tuple[int, ...], instances: dict[int, Any]
    ) -> Executor:
        spec = self.topology.components[cid]
        comp_conf = {**self.conf, **spec.config}
        executor: Executor
        if spec.is_spout:
            sx = SpoutExecutor(
                self, cid, tasks, comp_conf, instances, self._max_task, acking=self.acking
            )
            self.spout_executors.append(sx)
            for t in tasks:
                self.acker._spout_inboxes[t] = sx.inbox
            executor = sx
        else:
            bx = BoltExecutor(self, cid, tasks, comp_conf, instances, self._max_task)
            self.bolt_executors.append(bx)
            executor = bx
        self.executors.append(executor)
        for t in tasks:
            self._executor_of[t] = executor
        self._install_faults(executor)
        return executor

    # --- faults ----------------------------------------------------------------------------
    def inject(self, fault: Fault) -> None:
        """Inject ``fault`` (see ``engine.testing``): crashes happen at their ``at`` time on
        the topology's clock; edge and bolt faults apply within their window."""
        if isinstance(fault, (CrashTask, CrashAcker)):
            if isinstance(fault, CrashTask):
                self._check_component(fault.component, "CrashTask")
            if self._tg is None:  # not running yet: scheduled when it starts
                self._pending_crashes.append(fault)
            else:
                self._task_group_tasks.append(self._tg.create_task(self._crash_at(fault)))
            return
        if isinstance(fault, (DropTuples, DelayTuples)):
            for cid in (fault.source, fault.target):
                self._check_component(cid, type(fault).__name__)
            self._edge_faults.append(fault)
        elif isinstance(fault, (SlowBolt, FailTuples)):
            self._check_component(fault.component, type(fault).__name__)
            self._bolt_faults.append(fault)
        else:
            raise TypeError(f"not a fault: {fault!r}")
        for ex in self.executors:
            self._install_faults(ex)

    def _check_component(self, cid: str, what: str) -> None:
        if cid not in self.topology.components:
            raise TopologyStateError(
                f"{what}: topology {self.name!r} has no component {cid!r} "
                f"(components: {sorted(self.topology.components)})"
            )

    def _install_faults(self, ex: Executor) -> None:
        edge = [f for f in self._edge_faults if f.source == ex.component_id]
        if edge:
            faults = EdgeFaults(self._fault_rng)
            for f in edge:
                for t in self.plan.component_tasks[f.target]:
                    faults.by_task.setdefault(t, []).append(f)
            ex.edge_faults = faults
        bolt = [f for f in self._bolt_faults if f.component == ex.component_id]
        if bolt and isinstance(ex, BoltExecutor):
            bf = BoltFaults(self._fault_rng)
            bf.faults = bolt
            ex.bolt_faults = bf

    async def _crash_at(self, fault: CrashTask | CrashAcker) -> None:
        delay = fault.at - self.uptime_secs()
        if delay > 0:
            await self.clock.sleep(delay)
        if isinstance(fault, CrashTask):
            await self.crash_task(fault.component, fault.task_index)
        else:
            self.crash_acker(fault.index)

    def deliver_later(
        self, delay: float, inbox: Any, task: int, batch: list[Tuple], stamp: int
    ) -> None:
        self.delayed += 1

        async def deliver() -> None:
            try:
                await self.clock.sleep(delay)
                await inbox.put(task, batch, stamp)
            finally:
                self.delayed -= 1

        assert self._tg is not None  # only called by running executors
        self._tg.create_task(deliver())

    # --- wiring --------------------------------------------------------------------------
    def rng_for(self, task: int) -> random.Random:
        """The task's own random source, derived from the topology's seed."""
        rng = self._rngs.get(task)
        if rng is None:
            rng = self._rngs[task] = random.Random(self.seed * 1_000_003 + task)
        return rng

    def context_for(self, task: int) -> TopologyContext:
        ctx = self._contexts.get(task)
        if ctx is None:
            cid = self.plan.task_component[task]
            comp_conf = {**self.conf, **self.topology.components[cid].config}
            metrics = self.metrics.setdefault(task, {})
            ctx = self._contexts[task] = TopologyContext(
                self.topology, self.plan, comp_conf, task, metrics, self.clock
            )
        return ctx

    def _fresh_contexts(self, tasks: Sequence[int]) -> None:
        """Restarted tasks get a new ``TopologyContext`` and empty user metrics: their
        ``open``/``prepare`` registers its metrics again, and they count from zero."""
        for t in tasks:
            self._contexts.pop(t, None)
            self.metrics[t] = {}

    def _routes_for(self, ex: Executor, task: int) -> dict[str, Route]:
        cid = ex.component_id
        spec = self.topology.components[cid]
        routes: dict[str, Route] = {}
        for stream, info in spec.streams.items():
            subs = []
            routers = []
            direct_tasks: set[int] = set()
            for target, grouping in self.topology.subscribers(cid, stream):
                target_tasks = list(self.plan.component_tasks[target])
                for t in target_tasks:
                    ex.add_target(t, self._executor_of[t].inbox)
                if grouping.kind is GroupingKind.DIRECT:
                    direct_tasks.update(target_tasks)
                    continue
                if grouping.kind is GroupingKind.CUSTOM:
                    custom = copy_component(
                        grouping.custom, f"custom grouping of {target!r} on {cid!r}"
                    )
                    grouping = type(grouping)(grouping.kind, grouping.fields, custom)
                chooser = make_grouper(
                    grouping,
                    info.fields,
                    target_tasks,
                    self.rng_for(task),
                    self.context_for(task),
                    (cid, stream),
                )
                assert chooser is not None
                subs.append(chooser)
                routers.append(
                    make_batch_router(
                        grouping, info.fields, target_tasks, chooser, constant_targets(chooser)
                    )
                )
            route = Route(
                Source(cid, stream, task, info.fields), info.direct, subs, frozenset(direct_tasks)
            )
            route.batch_routers = routers
            routes[stream] = route
        return routes

    # --- running -------------------------------------------------------------------------
    def uptime_secs(self) -> float:
        return (self.clock.now_ns() - self._start_ns) / 1e9

    def on_error(self, info: ErrorInfo) -> None:
        self._errors_seen += 1

    def notify_acker(self) -> None:
        if not self._acker_notified and len(self.acker_ops):
            self._acker_notified = True
            self._acker_inbox.wake()

    async def run(self) -> None:
        """Open and prepare every task, then run until cancelled or ``shutdown``."""
        from ._channel import Inbox

        self._acker_inbox = Inbox(1)
        self._start_ns = self.clock.now_ns()
        managed_gc = ManagedGC() if self.conf["topology.python.gc.managed"] else None
        try:
            if managed_gc is not None:
                managed_gc.__enter__()
            for ex in self.executors:
                await ex.start()  # type: ignore[attr-defined]
                self._opened.add(ex)
            self.status = "ACTIVE"
            for sx in self.spout_executors:
                sx.set_active(True)
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tasks = self._task_group_tasks
                for crash in self._pending_crashes:
                    tasks.append(tg.create_task(self._crash_at(crash)))
                self._pending_crashes.clear()
                tasks.append(tg.create_task(self._acker_loop(), name=f"{self.name}:__acker"))
                if managed_gc is not None:
                    tasks.append(tg.create_task(self._gc_loop(managed_gc)))
                for ex in self.executors:
                    self._spawn(ex)
                for cid, spec in self.topology.bolts.items():
                    freq = spec.config.get(
                        "topology.tick.tuple.freq.secs", self.conf["topology.tick.tuple.freq.secs"]
                    )
                    if freq:
                        tasks.append(tg.create_task(self._ticker(cid, freq)))
                self._started.set()
        finally:
            self._started.set()
            if self.status != "COMPLETED":
                self.status = "KILLED"
            # The executors live now (restarted ones included, crashed ones not) that had
            # started: their objects get cleanup / close.
            live = [ex for ex in self.executors if ex in self._opened]
            for ex in reversed(live):
                await ex.stop()  # type: ignore[attr-defined]
            if managed_gc is not None:
                managed_gc.__exit__()

    def _spawn(self, ex: Executor) -> None:
        assert self._tg is not None  # executors start inside run()'s task group
        task = self._tg.create_task(
            ex.run(),  # type: ignore[attr-defined]
            name=f"{self.name}:{ex.component_id}:{list(ex.tasks)}",
        )
        self._task_group_tasks.append(task)
        self._executor_tasks[ex] = task

    async def rebalance(
        self, component_id: str, num_executors: int, *, wait_secs: float | None = None
    ) -> None:
        """Spread ``component_id``'s tasks over ``num_executors`` executors (Storm's
        rebalance: the task count is fixed for the topology's life).

        As Storm's ``rebalance -w wait_secs``, the topology is deactivated and in-flight
        trees get up to ``wait_secs`` (default: the message timeout, plus one acker sweep,
        by when every tree stuck in user code has timed out) to finish. If it is still
        busy then, nothing is moved, its previous activation is restored and a
        ``TimeoutError`` says what is still pending. The tasks keep their component
        objects, which are prepared (or opened) again with fresh contexts.
        """
        if component_id not in self.topology.components:
            raise TopologyStateError(
                f"topology {self.name!r} has no component {component_id!r} to rebalance "
                f"(components: {sorted(self.topology.components)})"
            )
        if not isinstance(num_executors, int) or num_executors <= 0:
            raise TopologyStateError(
                f"rebalance of {component_id!r}: num_executors must be a positive int, got "
                f"{num_executors!r}"
            )
        if wait_secs is None:
            timeout = self.conf["topology.message.timeout.secs"]
            wait_secs = timeout + min(1.0, timeout / 8) + _MAX_POLL_SECS
        elif not isinstance(wait_secs, (int, float)) or wait_secs < 0:
            raise TopologyStateError(
                f"rebalance of {component_id!r}: wait_secs must be a number >= 0, got {wait_secs!r}"
            )
        async with self._reconfiguring:
            await self._rebalance(component_id, num_executors, float(wait_secs))

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
        while not self.is_idle():
            if self.clock.now_ns() >= deadline:
                if was_active:
                    self.set_active(True)
                raise TimeoutError(
                    f"rebalance of {component_id!r} in topology {self.name!r}: the "
                    f"topology did not become idle within wait_secs={wait_secs:g} s "
                    f"({self._busy()}); nothing was moved. Give it a longer wait_secs"
                )
            await self.clock.sleep(_POLL_SECS)
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
            for t in ex.tasks:
                ex.routes[t] = self._routes_for(ex, t)
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
                    item = (task, lost, [TIMED_OUT] * len(lost))
                    loop.call_later(delay, sx.inbox.put_control, item)

    async def _acker_loop(self) -> None:
        acker = self.acker
        clock = self.clock
        sweep_ns = int(min(1.0, self.conf["topology.message.timeout.secs"] / 8) * 1e9)
        next_sweep = clock.now_ns() + sweep_ns
        while True:
            now = clock.now_ns()
            await self._acker_inbox.wait(max(0.0, (next_sweep - now) / 1e9))
            self._acker_notified = False
            now = clock.now_ns()
            acker.flush(now)
            if now >= next_sweep:
                acker.expire(now)
                next_sweep = now + sweep_ns

    async def _gc_loop(self, managed_gc: ManagedGC) -> None:
        interval = self.conf["topology.python.gc.interval.secs"]
        while True:
            await self.clock.sleep(interval)
            managed_gc.collect()

    async def _ticker(self, cid: str, freq: float) -> None:
        source = Source(SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, -1, _TICK_FIELDS)
        tasks = self.plan.component_tasks[cid]
        executor_of = self._executor_of
        while True:
            await self.clock.sleep(freq)
            # The executors serving the tasks now: crashes and rebalances replace them.
            for task in tasks:
                executor_of[task].inbox.put_control(TickItem(task, Tuple([freq], source, None, 0)))

    def _queued_roots(self) -> np.ndarray:
        roots: list[int] = []
        arrays: list[np.ndarray] = []
        for ex in self.executors:
            ex.queued_roots(roots, arrays)
        if not arrays:
            return np.array(roots, dtype=np.uint64)
        return np.concatenate([np.array(roots, dtype=np.uint64), *arrays])

    def shutdown(self) -> None:
        for task in self._task_group_tasks:
            task.cancel()

    def set_active(self, active: bool) -> None:
        if self.status in ("KILLED", "COMPLETED"):
            raise TopologyStateError(f"topology {self.name!r} is {self.status.lower()}")
        self.status = "ACTIVE" if active else "INACTIVE"
        for sx in self.spout_executors:
            sx.set_active(active)

    # --- state ---------------------------------------------------------------------------
    def pending(self) -> int:
        """Trees emitted with a message id and not yet acked or failed."""
        return sum(sx.pending() for sx in self.spout_executors)

    def is_idle(self) -> bool:
        """Nothing queued, buffered, executing or pending anywhere."""
        return (
            not len(self.acker_ops)
            and not self.delayed
            and all(ex.idle() for ex in self.executors)
            and self.pending() == 0
        )

    def is_complete(self) -> bool:
        if self._reconfiguring.locked():  # a task is being restarted or moved
            return False
        return all(sx.exhausted() for sx in self.spout_executors) and self.is_idle()

    def info(self) -> TopologyInfo:
        components: dict[str, ComponentStats] = {}
        for cid in sorted(self.topology.components):
            spec = self.topology.components[cid]
            tasks: dict[int, TaskStats] = {}
            executors = [ex for ex in self.executors if ex.component_id == cid]
            for ex in executors:
                for t in ex.tasks:
                    tasks[t] = self._task_stats(ex, t)
            components[cid] = ComponentStats(
                cid, "spout" if spec.is_spout else "bolt", tasks, len(executors)
            )
        queues = {
            f"{ex.component_id}{list(ex.tasks)}": {
                "capacity": ex.inbox.capacity,
                "queued": ex.inbox.size,
                "max_queued": ex.inbox.max_size,
                "blocked_puts": ex.inbox.blocked_puts,
            }
            for ex in self.executors
        }
        stats = [ledger.statistics() for ledger in self.acker.ledgers]
        acker = {
            "ackers": self.num_ackers,
            "pending_roots": sum(s.pending for s in stats),
            "acked": sum(s.acked for s in stats),
            "failed": sum(s.failed for s in stats),
            "timed_out": sum(s.timed_out for s in stats),
            "orphans": sum(s.orphans for s in stats),
            "timeouts_deferred_while_queued": self.acker.protected,
            "bytes_used": sum(s.bytes_used for s in stats),
        }
        return TopologyInfo(
            name=self.name,
            status=self.status,
            uptime_secs=self.uptime_secs(),
            seed=self.seed,
            components=components,
            pending_trees=self.pending(),
            acker=acker,
            queues=queues,
        )

    def _task_stats(self, ex: Executor, task: int) -> TaskStats:
        emitted = {stream: r.emitted for stream, r in ex.routes[task].items()}
        transferred = ex.transferred[task]
        uptime_ns = max(1, self.clock.now_ns() - self._start_ns)
        metrics = {name: read_metric(m) for name, m in self.metrics.get(task, {}).items()}
        if isinstance(ex, SpoutExecutor):
            return TaskStats(
                task=task,
                emitted=emitted,
                transferred=transferred,
                executed=0,
                acked=ex.acked[task],
                failed=ex.failed[task],
                timed_out=ex.timed_out[task],
                complete_latency=ex.latency[task].summary(),
                execute_latency_ms=0.0,
                capacity=0.0,
                errors=tuple(ex.errors[task]),
                pending=len(ex.collectors[task].pending) if task in ex.collectors else 0,
                metrics=metrics,
            )
        assert isinstance(ex, BoltExecutor)
        executed = ex.executed[task]
        total = sum(ex.executed.values())
        busy = ex.busy_ns * (executed / total) if total else 0.0
        collector = ex.collectors.get(task)
        execute_latency = ex.execute_latency[task].summary()
        # A basic bolt acks each input as its execute returns: process = execute latency.
        process_latency = (
            execute_latency
            if ex.is_basic or collector is None
            else collector.process_latency.summary()
        )
        return TaskStats(
            task=task,
            emitted=emitted,
            transferred=transferred,
            executed=executed,
            acked=collector.acked if collector else 0,
            failed=collector.failed if collector else 0,
            timed_out=0,
            complete_latency=LatencySummary.empty(),
            execute_latency_ms=busy / executed / 1e6 if executed else 0.0,
            capacity=busy / uptime_ns,
            errors=tuple(ex.errors[task]),
            pending=0,
            metrics=metrics,
            execute_latency=execute_latency,
            process_latency=process_latency,
        )


class RunningTopology:
    """A handle on a topology running inside the current event loop."""

    def __init__(self, runtime: Runtime, task: asyncio.Task[None]) -> None:
        self._runtime = runtime
        self._task = task

    @property
    def name(self) -> str:
        return self._runtime.name

    @property
    def seed(self) -> int:
        return self._runtime.seed

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    @property
    def topology(self) -> StormTopology:
        return self._runtime.topology

    @property
    def conf(self) -> Mapping[str, Any]:
        """The topology's effective configuration (defaults merged in)."""
        return self._runtime.conf

    @property
    def status(self) -> str:
        """``ACTIVE``, ``INACTIVE``, ``KILLED`` or ``COMPLETED``."""
        return self._runtime.status

    @property
    def clock(self) -> Clock:
        return self._runtime.clock

    async def rebalance(
        self, component_id: str, num_executors: int, wait_secs: float | None = None
    ) -> None:
        """Spread ``component_id``'s tasks over ``num_executors`` executors (Storm's
        rebalance), waiting up to ``wait_secs`` for in-flight trees first."""
        await self._runtime.rebalance(component_id, num_executors, wait_secs=wait_secs)

    def info(self) -> TopologyInfo:
        """Per component and task: emitted, transferred, executed, acked, failed, ..."""
        return self._runtime.info()

    def task_objects(self, component_id: str) -> dict[int, Any]:
        """The live component object of each of ``component_id``'s tasks, by task id.

        In-process only: read final state after ``wait_until_complete`` (tests, examples).
        """
        objects = {
            t: obj
            for ex in self._runtime.executors
            if ex.component_id == component_id
            for t, obj in ex.instances.items()
        }
        if not objects:
            raise TopologyStateError(
                f"topology {self.name!r} has no component {component_id!r} "
                f"(components: {sorted(self._runtime.topology.components)})"
            )
        return dict(sorted(objects.items()))

    def inject(self, fault: Fault) -> None:
        """Inject a fault now (crashes happen at their ``at`` time)."""
        self._runtime.inject(fault)

    def report(self) -> dict[str, MessageReport]:
        """What became of every spout message so far (needs ``trace=True``)."""
        trace = self._runtime.trace
        if trace is None:
            raise TopologyStateError(
                f"topology {self.name!r} was started without trace=True: no message report"
            )
        in_flight = {
            r
            for sx in self._runtime.spout_executors
            for c in sx.collectors.values()
            for r in c.pending
        }
        return trace.report(in_flight)

    def activate(self) -> None:
        self._runtime.set_active(True)

    def deactivate(self) -> None:
        self._runtime.set_active(False)

    def _check_alive(self) -> None:
        if self._task.done():
            if not self._task.cancelled() and self._task.exception() is not None:
                raise self._task.exception()  # type: ignore[misc]
            raise TopologyStateError(f"topology {self.name!r} is no longer running")

    async def wait_until_idle(self, timeout: float | None = None) -> None:
        """Until nothing is queued, executing or pending (Storm's tracked topology)."""
        await self._wait_for(self._runtime.is_idle, timeout, "idle")

    async def wait_until_complete(self, timeout: float | None = None) -> None:
        """Until every spout is exhausted (``Spout.is_exhausted``) and nothing is pending."""
        await self._wait_for(self._runtime.is_complete, timeout, "complete")
        self._runtime.status = "COMPLETED"

    async def _wait_for(self, condition: Any, timeout: float | None, what: str) -> None:
        clock = self._runtime.clock
        deadline = None if timeout is None else clock.now_ns() + int(timeout * 1e9)
        # Two consecutive observations, so a batch handed between two executors in the
        # same loop turn cannot slip past.
        seen = 0
        poll = _POLL_SECS
        while seen < 2:
            self._check_alive()
            seen = seen + 1 if condition() else 0
            if deadline is not None and clock.now_ns() >= deadline:
                errors = self._runtime.info().errors
                last = (
                    f"; last error: [{errors[-1].component} task {errors[-1].task}] "
                    f"{errors[-1].error}"
                    if errors
                    else ""
                )
                raise TimeoutError(
                    f"topology {self.name!r} did not become {what} within {timeout} s "
                    f"(pending trees: {self._runtime.pending()}{last})"
                )
            await clock.sleep(poll)
            poll = _POLL_SECS if seen else min(poll * 2, _MAX_POLL_SECS)

    async def kill(self, wait_secs: float | None = 0) -> None:
        """Deactivate, let in-flight trees finish for up to ``wait_secs``, then stop."""
        if self._task.done():
            return
        if self._runtime.status == "ACTIVE":
            self._runtime.set_active(False)
        if wait_secs:
            with contextlib.suppress(TimeoutError):
                await self.wait_until_idle(wait_secs)
        self._runtime.shutdown()
        await self._task


async def start_topology(
    topology: StormTopology,
    conf: Mapping[str, Any] | None = None,
    *,
    name: str = "topology",
    clock: Clock | None = None,
    faults: Sequence[Fault] = (),
    trace: bool = False,
) -> RunningTopology:
    """Start ``topology`` in the running loop; returns once every task is open/prepared.

    The caller owns the result and must ``await running.kill()``; prefer ``run_topology``.
    """
    runtime = Runtime(
        topology,
        conf,
        name=name,
        clock=clock or clock_for_running_loop(),
        trace=trace,
        faults=faults,
    )
    task = asyncio.ensure_future(runtime.run())
    started = asyncio.ensure_future(runtime._started.wait())
    await asyncio.wait([task, started], return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        started.cancel()
        task.result()  # open() or prepare() failed: raise it here
    return RunningTopology(runtime, task)


@contextlib.asynccontextmanager
async def run_topology(
    topology: StormTopology,
    conf: Mapping[str, Any] | None = None,
    *,
    name: str = "topology",
    clock: Clock | None = None,
    faults: Sequence[Fault] = (),
    trace: bool = False,
    ui: int | None = None,
) -> AsyncIterator[RunningTopology]:
    """Run ``topology`` in the running event loop for the duration of the block; with
    ``ui=PORT`` it is shown on the web UI at ``http://127.0.0.1:PORT/`` (``engine.ui``).

    >>> async def main(topology):
    ...     async with run_topology(topology, {"topology.max.spout.pending": 1000}) as running:
    ...         await running.wait_until_complete(timeout=60)
    ...         print(running.info().components["count"].executed)
    """
    running = await start_topology(
        topology, conf, name=name, clock=clock, faults=faults, trace=trace
    )
    try:
        if ui is None:
            yield running
        else:
            from .ui import attach_ui  # the ui extra (aiohttp); the UI needs only the model

            async with attach_ui(running, ui):
                yield running
    finally:
        await running.kill(0)
