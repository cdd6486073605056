"""``Runtime``: one running topology's lifecycle on the running event loop.

It wires the plan into executors (``Wiring``, into its ``ExecutorTable``), hands them the
``Services`` record, and runs every coroutine it starts (executors, the acker, tick timers,
crash timers) in one ``asyncio.TaskGroup`` it owns: an engine failure is never lost in a
forgotten task, and when ``run`` ends every task object gets ``cleanup``/``close``. It
holds its ``Reconfiguration`` (Storm's rebalance, crashed tasks and ackers), which replaces
executors in the same table, and its ``FaultInjector``.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from .._execution.acker import AckerExecutor, ledger_capacity, scan_queued_roots
from .._execution.control import Tick
from .._execution.services import Services
from .._model.config import merged_config
from .._model.context import TaskPlan, TopologyContext, build_plan
from .._model.copying import copy_component
from .._model.errors import TopologyStateError
from .._model.faults import CrashAcker, CrashTask, Fault, Trace
from .._model.fields import Fields
from .._model.topology import StormTopology
from .._model.tuple import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, Source, Tuple
from .._monitor.error_log import ErrorLog
from .._monitor.stats import TopologyInfo
from .._time.clock import Clock, SystemClock
from .fault_injection import FaultInjector
from .gc import ManagedGC
from .reconfigure import MAX_POLL_SECS, POLL_SECS, Reconfigurable, Reconfiguration
from .report import topology_info
from .table import ExecutorTable, TaskExecutor
from .wiring import Wiring

__all__ = ["MAX_POLL_SECS", "POLL_SECS", "Runtime"]

_TICK_FIELDS = Fields("rate_secs")


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
        #: the executors now, and the plan they carry out (``Reconfiguration`` changes both)
        self.table = ExecutorTable(build_plan(topology, self.conf["topology.max.task.parallelism"]))
        ackers = self.conf["topology.acker.executors"]
        self.num_ackers = 1 if ackers is None else ackers
        self.acking = self.num_ackers > 0
        self._rngs: dict[int, random.Random] = {}
        self._contexts: dict[int, TopologyContext] = {}
        self.metrics: dict[int, dict[str, Any]] = {}
        self.status = "INACTIVE"
        self._start_ns = self.clock.now_ns()
        #: set once every task is open / prepared (or ``run`` failed)
        self.started = asyncio.Event()
        self._task_group_tasks: list[asyncio.Task[Any]] = []
        self.trace: Trace | None = Trace() if trace else None
        self.faults = FaultInjector(
            name,
            list(topology.components),
            self.seed,
            self.clock,
            self.uptime_secs,
            self._start_task,
        )
        self._pending_crashes: list[CrashTask | CrashAcker] = []
        self._tg: asyncio.TaskGroup | None = None
        self.acker = AckerExecutor(
            max(self.num_ackers, 1),
            int(self.conf["topology.message.timeout.secs"] * 1e9),
            bool(self.conf["topology.enable.message.timeouts"]),
            queued_roots=lambda: scan_queued_roots(self.table.executors),
            capacity=ledger_capacity(self._max_pending_trees(), self.num_ackers),
        )
        self.acker_ops = self.acker.ops
        #: every error of every task, for the topology's lifetime (executors come and go)
        self.errors = ErrorLog(self.conf, self.clock)
        self.services = Services(
            acker_ops=self.acker.ops,
            acking=self.acking,
            clock=self.clock,
            notify_acker=self.acker.notify,
            uptime_secs=self.uptime_secs,
            rng_for=self.rng_for,
            context_for=self.context_for,
            trace=self.trace,
            on_error=self.errors.record,
        )
        self.wiring = Wiring(
            topology, self.conf, self.services, self.table, self.acker, self.faults
        )
        self.reconfiguration = Reconfiguration(
            self.table,
            self.wiring,
            Reconfigurable(
                name=name,
                topology=topology,
                conf=self.conf,
                clock=self.clock,
                acker=self.acker,
                status=lambda: self.status,
                set_active=self.set_active,
                is_idle=self.is_idle,
                busy=self.busy,
                fresh_contexts=self._fresh_contexts,
                launch=self._launch,
                fail=self._fail,
            ),
        )
        for fault in faults:  # before any executor exists: every one is wired through them
            self.inject(fault)
        for cid in sorted(topology.components):
            for tasks in self.plan.executors[cid]:
                spec = topology.components[cid]
                instances = {
                    t: copy_component(spec.component, f"component {cid!r}", spec.serialized)
                    for t in tasks
                }
                self.wiring.add_executor(cid, tasks, instances)
        for ex in self.table.executors:
            self.wiring.wire(ex)

    def _max_pending_trees(self) -> int | None:
        """The most trees the spouts may have in flight (``topology.max.spout.pending``
        per spout task); None when some spout has no limit."""
        total = 0
        for cid, spec in self.topology.spouts.items():
            limit = spec.config.get(
                "topology.max.spout.pending", self.conf["topology.max.spout.pending"]
            )
            if limit is None:
                return None
            total += limit * len(self.table.plan.component_tasks[cid])
        return total

    @property
    def plan(self) -> TaskPlan:
        """The task plan as carried out now."""
        return self.table.plan

    @property
    def executors(self) -> list[TaskExecutor]:
        """Every executor running now."""
        return self.table.executors

    # --- services ------------------------------------------------------------------------
    def rng_for(self, task: int) -> random.Random:
        """The task's own random source, derived from the topology's seed."""
        rng = self._rngs.get(task)
        if rng is None:
            rng = self._rngs[task] = random.Random(self.seed * 1_000_003 + task)
        return rng

    def context_for(self, task: int) -> TopologyContext:
        """The task's ``TopologyContext`` (a fresh one after a restart)."""
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

    def uptime_secs(self) -> float:
        """Seconds since the topology started, on its clock."""
        return (self.clock.now_ns() - self._start_ns) / 1e9

    def _start_task(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` in the topology's task group (a fault's delayed delivery or crash),
        among the tasks ``shutdown`` cancels, until it ends."""
        assert self._tg is not None  # only called while executors run
        task = self._tg.create_task(coro)
        tasks = self._task_group_tasks
        tasks.append(task)
        task.add_done_callback(tasks.remove)

    # --- faults ----------------------------------------------------------------------------
    def inject(self, fault: Fault) -> None:
        """Inject ``fault`` (see ``engine.testing``): crashes happen at their ``at`` time on
        the topology's clock; edge and bolt faults apply within their window."""
        crash = self.faults.add(fault)
        if crash is not None:
            if self._tg is None:  # not running yet: scheduled when it starts
                self._pending_crashes.append(crash)
            else:
                self._start_task(self._crash_at(crash))
            return
        for ex in self.table.executors:  # wired already: through the faults now
            self.wiring.rewire(ex)

    async def _crash_at(self, fault: CrashTask | CrashAcker) -> None:
        delay = fault.at - self.uptime_secs()
        if delay > 0:
            await self.clock.sleep(delay)
        if isinstance(fault, CrashTask):
            await self.reconfiguration.crash_task(fault.component, fault.task_index)
        else:
            self.reconfiguration.crash_acker(fault.index)

    # --- running -------------------------------------------------------------------------
    async def run(self) -> None:
        """Open and prepare every task, then run until cancelled or ``shutdown``."""
        self._start_ns = self.clock.now_ns()
        managed_gc = (
            ManagedGC(held=lambda: [self.acker, *self.table.executors])
            if self.conf["topology.python.gc.managed"]
            else None
        )
        try:
            if managed_gc is not None:
                managed_gc.__enter__()
            for ex in self.table.executors:
                await ex.start()
                self.table.opened.add(ex)
            self.status = "ACTIVE"
            for sx in self.table.spouts:
                sx.set_active(True)
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tasks = self._task_group_tasks
                for crash in self._pending_crashes:
                    self._start_task(self._crash_at(crash))
                self._pending_crashes.clear()
                sweep_secs = min(1.0, self.conf["topology.message.timeout.secs"] / 8)
                tasks.append(
                    tg.create_task(
                        self.acker.run(self.clock, sweep_secs), name=f"{self.name}:__acker"
                    )
                )
                if managed_gc is not None:
                    tasks.append(tg.create_task(self._gc_loop(managed_gc)))
                for ex in self.table.executors:
                    self._spawn(ex)
                for cid, spec in self.topology.bolts.items():
                    freq = spec.config.get(
                        "topology.tick.tuple.freq.secs", self.conf["topology.tick.tuple.freq.secs"]
                    )
                    if freq:
                        tasks.append(tg.create_task(self._ticker(cid, freq)))
                self.started.set()
        finally:
            self.started.set()
            if self.status != "COMPLETED":
                self.status = "KILLED"
            try:
                # The executors live now (restarted ones included, crashed ones not) that
                # had started: their objects get cleanup / close.
                for ex in reversed(self.table.live()):
                    await ex.stop()
            finally:  # also when a cancellation cuts an async cleanup / close short
                self.errors.close()
                if managed_gc is not None:
                    managed_gc.__exit__()

    def _spawn(self, ex: TaskExecutor) -> None:
        assert self._tg is not None  # executors start inside run()'s task group
        task = self._tg.create_task(
            ex.run(),
            name=f"{self.name}:{ex.component_id}:{list(ex.tasks)}",
        )
        self._task_group_tasks.append(task)
        self.table.running[ex] = task

    async def _launch(self, ex: TaskExecutor) -> None:
        """Start (open / prepare) a new executor, then run it (a restart, a rebalance)."""
        await ex.start()
        self.table.opened.add(ex)
        self._spawn(ex)

    def _fail(self, error: BaseException) -> None:
        """Stop the topology on ``error``, one it cannot run on (a rebalance that could not
        be undone): ``run`` raises it, as it does a crashed task's failed restart."""

        async def raise_it() -> None:
            raise error

        self._start_task(raise_it())

    async def _gc_loop(self, managed_gc: ManagedGC) -> None:
        interval = self.conf["topology.python.gc.interval.secs"]
        while True:
            await self.clock.sleep(interval)
            managed_gc.collect()

    async def _ticker(self, cid: str, freq: float) -> None:
        source = Source(SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, -1, _TICK_FIELDS)
        tasks = self.plan.component_tasks[cid]
        executor_of = self.table.of_task
        while True:
            await self.clock.sleep(freq)
            # The executors serving the tasks now: crashes and rebalances replace them.
            for task in tasks:
                executor_of[task].inbox.put_control(Tick(task, Tuple([freq], source, None, 0)))

    def shutdown(self) -> None:
        """Stop: cancel every coroutine the runtime started (``run`` then stops the tasks)."""
        for task in self._task_group_tasks:
            task.cancel()

    def set_active(self, active: bool) -> None:
        """Activate or deactivate every spout (Storm's activate / deactivate)."""
        if self.status in ("KILLED", "COMPLETED"):
            raise TopologyStateError(f"topology {self.name!r} is {self.status.lower()}")
        self.status = "ACTIVE" if active else "INACTIVE"
        for sx in self.table.spouts:
            sx.set_active(active)

    # --- state ---------------------------------------------------------------------------
    def pending(self) -> int:
        """Trees emitted with a message id and not yet acked or failed."""
        return sum(sx.pending() for sx in self.table.spouts)

    def is_idle(self) -> bool:
        """Nothing queued, buffered, executing or pending anywhere."""
        return (
            not len(self.acker_ops)
            and not self.faults.delayed
            and all(ex.idle() for ex in self.table.executors)
            and self.pending() == 0
        )

    def busy(self) -> str:
        """What keeps the topology from being idle, for error messages."""
        executors = self.table.executors
        parts = [f"pending trees: {self.pending()}"]
        for what, n in (
            ("queued tuples", sum(ex.inbox.size for ex in executors)),
            ("buffered tuples", sum(ex.buffered() for ex in executors)),
            ("async calls in flight", sum(ex.inflight for ex in self.table.bolts)),
            ("acker ops", len(self.acker_ops)),
            ("delayed batches", self.faults.delayed),
        ):
            if n:
                parts.append(f"{what}: {n}")
        return ", ".join(parts)

    def is_complete(self) -> bool:
        """Every spout is exhausted, nothing is pending and no reconfiguration runs."""
        if self.reconfiguration.in_progress:  # a task is being restarted or moved
            return False
        return all(sx.exhausted() for sx in self.table.spouts) and self.is_idle()

    def in_flight_roots(self) -> set[int]:
        """The roots of every tracked tree not yet acked or failed."""
        return {r for sx in self.table.spouts for c in sx.collectors.values() for r in c.pending}

    def info(self) -> TopologyInfo:
        """Per component and task: emitted, transferred, executed, acked, failed, ..."""
        return topology_info(
            name=self.name,
            status=self.status,
            seed=self.seed,
            topology=self.topology,
            executors=self.table.executors,
            acker=self.acker,
            num_ackers=self.num_ackers,
            metrics=self.metrics,
            uptime_ns=self.clock.now_ns() - self._start_ns,
            errors=self.errors,
        )
