"""Executors: the coroutines that run a component's tasks.

An executor owns one ``Inbox`` and a range of its component's tasks (one component object
per task). It takes a batch of tuples, runs the user code on each synchronously, then
flushes its outgoing buffers (one list per target task) with one queue operation per
batch; it awaits only when a downstream inbox is full (backpressure), and yields to the
loop once per batch so no executor starves the others.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import time
import traceback
from collections.abc import Awaitable, Callable
from sys import getrefcount
from typing import Any

import numpy as np

from acker_kernel import TreeIdSource

from .._columnar.batch import TupleBatch
from .._columnar.batch_collector import MISSING, BatchCollector
from .._model.batch_component import BasicBatchBolt, BatchBolt
from .._model.component import BasicBolt, Spout
from .._model.errors import (
    FailedException,
    ReportedFailedException,
    SquallError,
    TaskStartError,
)
from .._model.tuple import Tuple, extend_roots
from .._monitor.stats import ErrorInfo, LatencyRecorder
from .._time.clock import SystemClock
from .acker import ACKED, TIMED_OUT, AckerOps
from .channel import Delivery, Destination, Inbox, OutBuffer
from .collector import (
    BasicCollector,
    BasicOutputCollector,
    BoltCollector,
    Route,
    SpoutCollector,
    TracedSpoutCollector,
    UntrackedBasicCollector,
)
from .control import Completions, Tick
from .gate import AckHold, InputGate
from .services import Services

__all__ = ["BoltExecutor", "Executor", "SpoutExecutor", "as_batch"]


async def maybe_await(result: Any) -> Any:
    if inspect.isawaitable(result):
        return await result
    return result


class Executor:
    """What spout and bolt executors share: tasks, outgoing buffers, flushing, errors."""

    #: "spout" or "bolt", as messages name the component
    kind = "component"

    def __init__(
        self,
        services: Services,
        component_id: str,
        tasks: tuple[int, ...],
        conf: dict[str, Any],
        instances: dict[int, Any],
        max_task: int,
    ) -> None:
        self.services = services
        self.component_id = component_id
        self.tasks = tasks
        self.conf = conf
        self.instances = instances
        self.inbox = Inbox(conf["topology.executor.receive.buffer.size"])
        self.batch_size = min(conf["topology.producer.batch.size"], self.inbox.capacity)
        #: flush mid-turn once this many tuples wait in the outgoing buffers
        self.flush_threshold = 4 * self.batch_size
        #: target task -> outgoing buffer; indexed by task id (None where not a target)
        self.out: list[OutBuffer | None] = [None] * (max_task + 1)
        self._targets: list[tuple[int, OutBuffer, Destination]] = []
        self.in_transit: list[Delivery] = []  # batches handed to a full inbox's put()
        self.acker_ops: AckerOps = services.acker_ops
        self.clock = services.clock
        self.trace = services.trace
        self.notify_acker = services.notify_acker
        # A batch that waited in the inbox longer than this has its trees' timeouts reset
        # when it starts executing: waiting behind backpressure is not a reason to replay.
        self.reset_after_ns = int(conf["topology.message.timeout.secs"] * 1e9 / 4)
        #: the component's logger (``engine.component.<id>``; also ``self.logger`` of its
        #: objects): errors with tracebacks, blocking warnings, ``topology.debug`` samples
        self.log = logging.getLogger(f"engine.component.{component_id}")
        for instance in instances.values():
            instance._squall_logger = self.log.name
        self.debug = bool(conf["topology.debug"])
        self.debug_rate = float(conf["topology.debug.sample.rate"])
        self.block_warn_ns = int(conf["topology.blocking.warn.secs"] * 1e9)
        self._next_block_warn = 0
        self.busy_ns = 0
        self.executed: dict[int, int] = dict.fromkeys(tasks, 0)
        self.transferred: dict[int, int] = dict.fromkeys(tasks, 0)
        self.routes: dict[int, dict[str, Route]] = {}
        self.stopping = False
        #: True while a batch executes synchronously: acks then reach the acker when the
        #: batch ends; outside (callbacks, other tasks) each ack wakes the acker itself
        self.in_batch = False
        #: rows of the ``TupleBatch`` items in the outgoing buffers
        self.batch_rows = 0

    async def start(self) -> None:
        """Make each task's collector and call its component's ``prepare`` / ``open``:
        before ``run``, so user code is ready before the first tuple reaches it."""
        raise NotImplementedError

    async def run(self) -> None:
        """Execute the tasks until ``stopping`` is set or the coroutine is cancelled: the
        executor's whole life on the event loop, one turn per batch."""
        raise NotImplementedError

    async def stop(self) -> None:
        """Call each task's ``cleanup`` / ``close`` (after ``run`` ended), recording any
        exception as the task's error: one task's failing cleanup does not skip the rest."""
        raise NotImplementedError

    def rng_for(self, task: int) -> random.Random:
        """The task's random generator, seeded from the topology's seed: groupings and ids
        drawn from it repeat run after run, which is what makes a simulation replayable."""
        return self.services.rng_for(task)

    def draw_ids_for(self, task: int) -> Callable[[int], np.ndarray]:
        """The task's bulk source of nonzero 64-bit root and edge ids, seeded from the
        topology's seed (a counter-based generator in ``acker_kernel``)."""
        return TreeIdSource(self.rng_for(task).getrandbits(64)).draw

    def note_batch(self, rows: int) -> None:
        """``rows`` more rows went into the outgoing buffers as a ``TupleBatch``: ``flush``
        then cuts batches to the inboxes' capacity (per-tuple buffers never need it)."""
        self.batch_rows += rows

    def add_target(self, task: int, destination: Destination) -> None:
        """Send to ``task`` through ``destination`` (its inbox, or a wrapper): the wiring
        calls it once per subscribed task; calling it again for a task changes nothing
        (``retarget`` points a buffer elsewhere)."""
        if self.out[task] is None:
            buf: OutBuffer = []
            self.out[task] = buf
            self._targets.append((task, buf, destination))

    def retarget(self, destination_of: Callable[[int], Destination]) -> None:
        """Point outgoing buffers at the destinations now serving their tasks (the inboxes
        of restarted or rebalanced executors, faults injected since)."""
        self._targets = [(task, buf, destination_of(task)) for task, buf, _ in self._targets]

    def buffered(self) -> int:
        """Tuples waiting in the outgoing buffers."""
        return sum(len(buf) for _, buf, _ in self._targets) + self.batch_rows

    def has_output(self) -> bool:
        """Whether emits wait to be flushed: an idle executor flushes them before it
        sleeps, so nothing stays behind once its input runs dry."""
        return any(buf for _, buf, _ in self._targets)

    async def flush(self) -> None:
        """Hand every outgoing buffer to its target inbox; wait while one is full."""
        stamp = self.clock.now_ns()
        for task, buf, inbox in self._targets:
            if buf:
                # Asked per buffer, and counted down by what leaves: while this flush waits
                # for room, another (an async call's) may take buffers this one has not
                # reached yet, and emits may add batches to them.
                items: list[Any]
                if self.batch_rows > 0:
                    items = _split_runs(buf, inbox.capacity)
                    self.batch_rows -= sum(x.n for x in items if type(x) is TupleBatch)
                else:
                    items = [buf.copy()]
                buf.clear()
                for batch in items:
                    self._count_transferred(batch)
                    if self.debug:
                        self._debug_log(task, batch)
                    if not inbox.put_nowait(task, batch, stamp):
                        self.in_transit.append(batch)
                        try:
                            await inbox.put(task, batch, stamp)
                        finally:
                            self.in_transit.remove(batch)

    def flush_ready(self) -> None:
        """Hand each outgoing buffer to its target inbox now if it fits, without waiting.

        A buffer whose inbox is full (backpressure) or that a destination refuses without
        waiting (a faulty edge's) stays for the next ``flush``."""
        stamp = self.clock.now_ns()
        has_batches = self.batch_rows > 0
        for task, buf, inbox in self._targets:
            if not buf:
                continue
            items: list[Any] = _split_runs(buf, inbox.capacity) if has_batches else [buf.copy()]
            sent = 0
            for batch in items:
                if not inbox.put_nowait(task, batch, stamp):
                    break
                self._count_transferred(batch)
                sent += 1
            if sent == len(items):
                buf.clear()
            elif sent:  # the rest waits for the next flush, in order
                buf[:] = [x for item in items[sent:] for x in _as_items(item)]
        if has_batches:
            self.batch_rows = sum(
                len(x) for _, buf, _ in self._targets for x in buf if type(x) is TupleBatch
            )

    def _count_transferred(self, batch: list[Tuple] | TupleBatch) -> None:
        if len(self.tasks) == 1:
            self.transferred[self.tasks[0]] += len(batch)
        elif type(batch) is TupleBatch:
            self.transferred[batch.source.task] += batch.n
        else:
            counts = self.transferred
            for t in batch:
                counts[t._src.task] += 1

    def record_error(self, task: int, error: str, tb: str) -> None:
        """An error of ``task`` (an exception in user code, ``report_error``): the
        topology's ``ErrorLog`` counts, keeps, groups and logs it (throttled)."""
        self.services.on_error(
            ErrorInfo(self.component_id, task, self.services.uptime_secs(), error, tb)
        )

    def start_failed(self, task: int, method: str, exc: Exception) -> Exception:
        """``task``'s ``open`` / ``prepare`` (``method``) raised ``exc``: it is recorded as
        the task's error, and the error to raise names the task. A user's exception alone
        does not say which component would not start: it becomes the ``__cause__`` of a
        ``TaskStartError``. The engine's own errors (a component checking its wiring or
        its config when it starts) already name it, and keep their type."""
        self.record_exception(task, exc)
        if isinstance(exc, SquallError):
            return exc
        error = TaskStartError(
            f"{self.kind} {self.component_id!r} task {task} failed in {method}: {exc!r}"
        )
        error.__cause__ = exc
        return error

    def record_exception(self, task: int, exc: BaseException) -> None:
        """``record_error`` for an exception, with its traceback: what user code raised
        is recorded and the task goes on (Storm would restart its worker)."""
        self.record_error(task, repr(exc), "".join(traceback.format_exception(exc)))

    def check_blocking(self, task: int, took_ns: int, where: str) -> None:
        """Warn (at most every 10 s per executor) when one synchronous call of user code
        held the event loop longer than ``topology.blocking.warn.secs``: everything else in
        the process (other components, timers, the progress line, signals) waited for it.

        ``took_ns`` is one call, or one step of an async call (``StepTimer``): never the
        time an async call spent awaiting, never the sum of many quick calls, which leave
        the loop between batches anyway."""
        if took_ns > self.block_warn_ns:
            now = time.monotonic_ns()
            if now >= self._next_block_warn:
                self._next_block_warn = now + _BLOCK_WARN_EVERY_NS
                self.log.warning(
                    "%s %r task %d blocked the event loop for %.3f s in %s "
                    "(topology.blocking.warn.secs = %s): make blocking calls async or run "
                    "them in a thread (asyncio.to_thread)",
                    self.kind,
                    self.component_id,
                    task,
                    took_ns / 1e9,
                    where,
                    self.block_warn_ns / 1e9,
                )

    def timed(self, coro: Any, task: int, method: str) -> StepTimer:
        """``await executor.timed(obj.method(...), task, "method")``: the coroutine, each
        of its synchronous steps checked by ``check_blocking``."""
        return StepTimer(coro, self, task, f"async {method} between two awaits")

    def _debug_log(self, task: int, batch: list[Tuple] | TupleBatch) -> None:
        """``topology.debug``: log a sample of what goes to ``task``, like Storm's
        "Emitting: ..." lines (``topology.debug.sample.rate`` of the tuples)."""
        rows = batch.tuples() if type(batch) is TupleBatch else batch
        rate = self.debug_rate
        rand = self.services.rng_for(-1 - task).random
        for t in rows:
            if rate >= 1.0 or rand() < rate:
                src = t._src
                self.log.debug(
                    "Emitting: %s task %d stream %s -> task %d: %r",
                    src.component,
                    src.task,
                    src.stream,
                    task,
                    list(t.values),
                )

    def _reset_timeouts(self, batch: list[Tuple] | TupleBatch) -> None:
        # The engine's protection of waiting trees, bounded by their age (``acker``).
        if type(batch) is TupleBatch:
            self.acker_ops.add_protects(batch.root_ids())
        else:
            extend_roots(self.acker_ops.protect_roots, batch)

    def queued_roots(self, roots: list[int], arrays: list[np.ndarray]) -> None:
        """Add the roots of every tuple this executor holds without having executed it
        (for timeouts): per-tuple ones to ``roots``, batches' as arrays to ``arrays``."""
        for _, batch, _ in self.inbox.data:
            _roots_of(batch, roots, arrays)
        for _, buf, _ in self._targets:
            _roots_of(buf, roots, arrays)
        for batch in self.in_transit:
            _roots_of(batch, roots, arrays)

    def idle(self) -> bool:
        """Nothing is queued, in transit or waiting to be flushed: with every executor
        idle and no tree pending, a finite topology has completed."""
        return not (self.inbox.data or self.inbox.control or self.in_transit or self.has_output())


class BoltExecutor(Executor):
    """Runs bolt tasks: ``execute`` per tuple, in batches; async bolts concurrently."""

    kind = "bolt"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: task -> its collector, of the kind its bolt needs (made in ``start``): a rich
        #: or async bolt's ``BoltCollector``, a synchronous basic bolt's ``BasicCollector``,
        #: a batch bolt's ``BatchCollector``. Each path reads its own kind's map below,
        #: the same collectors typed, so no path tests a collector's kind.
        self.collectors: dict[int, BoltCollector | BasicCollector | BatchCollector] = {}
        self.rich_collectors: dict[int, BoltCollector] = {}
        self.basic_collectors: dict[int, BasicCollector] = {}
        self.batch_collectors: dict[int, BatchCollector] = {}
        self.execute_latency = {t: LatencyRecorder() for t in self.tasks}
        sample = next(iter(self.instances.values()))
        #: an ``InputGate`` (engine.state's checkpoint wrappers) runs its delegate on the
        #: path of the delegate's kind, and sees every input first (``admit``)
        self.gated = isinstance(sample, InputGate)
        #: task -> the object whose execute methods run (a gate's delegate)
        self.bolts: dict[int, Any] = (
            {t: i.delegate for t, i in self.instances.items()} if self.gated else self.instances
        )
        sample = self.bolts[self.tasks[0]]
        self.admit: dict[int, Callable[[Any], Any]] = {}
        self.is_basic = isinstance(sample, (BasicBolt, BasicBatchBolt))
        self.is_batch = isinstance(sample, (BasicBatchBolt, BatchBolt))
        self.is_async = inspect.iscoroutinefunction(
            sample.execute_batch if self.is_batch else sample.execute
        )
        #: a rich bolt with ``execute_many`` (a windowed bolt's executor) takes each input
        #: whole, a ``TupleBatch`` without a ``Tuple`` per row
        self.executes_many = (
            not self.is_batch and not self.is_basic and hasattr(sample, "execute_many")
        )
        self.inflight = 0
        #: when an async call last completed, or the first one started (clock ns)
        self.progress_ns = 0
        #: an async bolt with calls in flight and no progress for this long is stalled
        self.stall_ns = int(self.conf["topology.message.timeout.secs"] * 1e9)
        #: per task, the async calls it may still start (``topology.bolt.max.inflight``)
        self._slots = {
            t: asyncio.Semaphore(self.conf["topology.bolt.max.inflight"]) for t in self.tasks
        }
        self._dispatching: list[Tuple] = []
        self._dispatch_index = 0
        self._tasks: asyncio.TaskGroup | None = None
        #: runs one inbox item (a task's list of tuples, or a batch): ``_execute_batch``,
        #: or the wrapper fault injection puts around it when the topology is wired (a run
        #: without faults carries none of their code)
        self.execute_item: Callable[[int, list[Tuple] | TupleBatch], Awaitable[None]] = (
            self._execute_batch
        )

    async def start(self) -> None:
        for task in self.tasks:
            bolt = self.instances[task]
            # A sync basic bolt gets one collector that anchors to the current input; an
            # async one gets a BasicOutputCollector per tuple in flight (see _execute_async).
            collector: BoltCollector | BasicCollector | BatchCollector
            if self.is_batch:
                collector = self.batch_collectors[task] = self._new_batch_collector(task)
            elif not self.is_basic or self.is_async:
                collector = self.rich_collectors[task] = BoltCollector(
                    self, task, self.routes[task]
                )
            else:
                # no ackers: no row has a tree, no emit records its anchor row
                kind = BasicCollector if self.services.acking else UntrackedBasicCollector
                collector = self.basic_collectors[task] = kind(self, task, self.routes[task])
            self.collectors[task] = collector
            if self.gated:
                bolt.bind(
                    self._new_batch_collector(task),
                    lambda task=task: self.hold_acks(task),
                    lambda collector=collector: collector.failed,
                )
                self.admit[task] = bolt.admit
            context = self.services.context_for(task)
            try:
                if self.is_basic:
                    await maybe_await(bolt.prepare(self.conf, context))
                else:
                    await maybe_await(bolt.prepare(self.conf, context, collector))
            except Exception as exc:
                raise self.start_failed(task, "prepare", exc)  # noqa: B904 (its cause is set)

    async def stop(self) -> None:
        for task in self.tasks:
            try:
                await maybe_await(self.instances[task].cleanup())
            except Exception as exc:
                self.record_exception(task, exc)

    async def run(self) -> None:
        inbox = self.inbox
        notify_acker = self.notify_acker
        acking = self.services.acking
        async with asyncio.TaskGroup() as tg:
            self._tasks = tg
            while not self.stopping:
                if inbox.control:
                    while inbox.control:  # tick tuples
                        tick: Tick = inbox.control.popleft()
                        if self.is_batch and self.is_async:
                            await self._slots[tick.task].acquire()
                        await self.execute_item(tick.task, [tick.tuple])
                    await self.flush()
                    notify_acker()
                if not inbox.data:
                    if self.has_output():
                        await self.flush()
                    await inbox.wait()
                    continue
                # One turn executes what was queued when it began (several producers may
                # have queued a batch each since the last turn), so queues stay short.
                budget = inbox.size
                while budget > 0:
                    item = (
                        await self._take() if self.is_batch and self.is_async else inbox.take_data()
                    )
                    if item is None:
                        break
                    task, batch, stamp = item
                    budget -= len(batch)
                    if acking and self.clock.now_ns() - stamp > self.reset_after_ns:
                        self._reset_timeouts(batch)
                    if self.gated:
                        for part in self.admit[task](batch):
                            await self.execute_item(task, part)
                    else:
                        await self.execute_item(task, batch)
                    if budget > 0 and self.buffered() > self.flush_threshold:
                        await self.flush()
                await self.flush()
                notify_acker()
                await asyncio.sleep(0)
            self._tasks = None

    def _new_batch_collector(self, task: int) -> BatchCollector:
        """A new ``BatchCollector`` of ``task``: a batch bolt's, or a gate's own (its
        emits, barriers, go out beside the task's, and its acks are never held)."""
        collector = BatchCollector(
            self.component_id,
            task,
            self.routes[task],
            self.out,
            self.acker_ops,
            self.draw_ids_for(task),
            self.note_batch,
            notify=self.notify_acker,
        )
        # The instance's reporter replaces the class's stub (a method, hence the Any view).
        reported: Any = collector
        reported.report_error = self._error_reporter(task)
        return collector

    def hold_acks(self, task: int) -> AckHold:
        """Hold ``task``'s ACKs from now on (every ack of its bolt, automatic or not, per
        tuple or per batch) instead of sending them; FAILs and RESETs still go out. The
        caller releases or fails what it takes out of the hold (``AckHold``)."""
        hold = AckHold(self.acker_ops, self.notify_acker)
        collector: Any = self.collectors[task]
        collector._ops = hold  # every collector's array acks
        if isinstance(collector, BoltCollector):  # a rich bolt's per-tuple acks
            collector._ack_root = hold.ack_roots.append
            collector._ack_val = hold.ack_vals.append
        return hold

    async def _take(self) -> tuple[int, Any, int] | None:
        """The oldest queued batch, once its task has a free slot for an async call (an
        async batch bolt's): until then it stays in the inbox, where the timeout sweep
        sees it, and its wait there is the backpressure upstream feels."""
        inbox = self.inbox
        if not inbox.data:
            return None
        slots = self._slots[inbox.data[0][0]]
        await slots.acquire()
        item = inbox.take_data()  # None only if the inbox was closed meanwhile (a crash)
        if item is None:
            slots.release()
        return item

    async def _execute_batch(self, task: int, item: list[Tuple] | TupleBatch) -> None:
        if self.is_batch:
            if self.is_async:
                self._start_async_batch(task, item)
            else:
                await self._run_batch_bolt(task, item)
            return
        if self.executes_many:
            self._run_many(task, item)
            return
        if self.is_basic and not self.is_async:
            self._run_basic(task, item)
            return
        # A per-tuple bolt gets one Tuple view per row of a batch.
        batch = item.tuples() if isinstance(item, TupleBatch) else item
        if self.is_async:
            # Tuples of this batch not yet started are still waiting: keep them visible to
            # the acker's timeout sweep (``queued_roots``) while we wait for a free slot.
            self._dispatching = batch
            slots = self._slots[task]
            for i, t in enumerate(batch):
                self._dispatch_index = i
                if slots.locked():
                    await slots.acquire()
                    # It waited for a slot: that wait does not count toward its timeout.
                    if self.services.acking:
                        self._reset_timeouts([t])
                else:
                    await slots.acquire()
                if not self.inflight:
                    self.progress_ns = self.clock.now_ns()
                self.inflight += 1
                assert self._tasks is not None
                self._tasks.create_task(self._execute_async(task, t))
            self._dispatching = []
            return
        start = time.perf_counter_ns()
        self.in_batch = True
        try:
            end = self._run_bolt(task, batch, start)
        finally:
            self.in_batch = False
        self._account(task, end - start, len(batch))

    def _account(self, task: int, took: int, n: int) -> None:
        """Count ``n`` tuples executed by ``task`` in ``took`` ns."""
        self.busy_ns += took
        if n:
            self.execute_latency[task].add_mean(took / n, n)
        self.executed[task] += n

    def _run_bolt(self, task: int, batch: list[Tuple], start: int) -> int:
        """``execute`` each tuple; returns when it ended (``perf_counter_ns``). The calls
        are timed in runs of ``_CLOCK_EVERY`` (``check_calls``): one that held the loop
        is warned about, many quick ones are not."""
        execute = self.bolts[task].execute
        collector = self.rich_collectors[task]
        clock = time.perf_counter_ns
        warn_ns = self.block_warn_ns
        last = start
        mark = 0
        every = _CLOCK_EVERY - 1
        # Process latency (execute start -> ack, which may come in a later batch) is
        # measured on every PROCESS_SAMPLE-th tuple.
        starts = collector.process_starts
        if len(starts) > 4096:
            starts.clear()  # sampled tuples that were never acked
        for i, t in enumerate(batch):
            if not i & every:
                now = clock()
                if now - last > warn_ns:
                    self.check_calls(task, now - last, i - mark, "execute")
                last, mark = now, i
                if not i % PROCESS_SAMPLE:
                    starts[id(t)] = now
            try:
                execute(t)
            except Exception as exc:
                self._on_execute_error(task, collector, t, exc)
        now = clock()
        if now - last > warn_ns:
            self.check_calls(task, now - last, len(batch) - mark, "execute")
        return now

    def _run_many(self, task: int, item: list[Tuple] | TupleBatch) -> None:
        """One ``execute_many`` call over the whole batch (a windowed bolt's): one
        synchronous call, timed as one for the blocking warning."""
        start = time.perf_counter_ns()
        self.in_batch = True
        try:
            self.bolts[task].execute_many(item)
        except Exception as exc:
            self.record_exception(task, exc)
        finally:
            self.in_batch = False
        took = time.perf_counter_ns() - start
        self.check_blocking(task, took, "one call of execute_many")
        self._account(task, took, len(item))

    def check_calls(self, task: int, took_ns: int, calls: int, method: str) -> None:
        """``calls`` consecutive quick-looking calls of ``method`` took ``took_ns`` together,
        more than ``topology.blocking.warn.secs``. Reading the clock costs about as much
        as a quick call, so the loops read it once per ``_CLOCK_EVERY`` calls; the run's
        time less the typical call (the executor's mean so far) for each of the others is
        what its longest call took at least, warned about as ``check_blocking`` does when
        it is over the threshold (quick calls adding up never are)."""
        if calls > 1:
            executed = sum(self.executed.values())
            typical = self.busy_ns // executed if executed else 0
            took_ns -= typical * (calls - 1)
        if took_ns > self.block_warn_ns:
            self.check_blocking(task, took_ns, f"one call of {method}")

    def _run_basic(self, task: int, item: list[Tuple] | TupleBatch) -> None:
        """A synchronous basic bolt over one input batch: ``execute`` per row, then the
        collector sends the rows' emits on and acks the rows, as arrays (``seal``).

        A ``TupleBatch``'s rows are shown to ``execute`` through one ``Tuple`` view, its
        values and ids set per row, and replaced by a fresh one only when user code kept a
        reference to it (CPython's reference count, as ``zip`` reuses its result tuple): a
        kept tuple stays what it was. Per-tuple input runs on its own tuples. The calls
        are timed in runs of ``_CLOCK_EVERY`` (``check_calls``), as in ``_run_bolt``; an
        untracked batch's rows run without an index (no anchor row to record)."""
        collector = self.basic_collectors[task]
        tuples: list[Tuple] | None
        batch: TupleBatch | None = None
        if len(item) <= _PER_TUPLE:
            # A handful of rows (a trickle of tuples): one by one costs less than arrays.
            tuples = item.tuples() if isinstance(item, TupleBatch) else item
        elif isinstance(item, TupleBatch):
            batch, tuples = item, None
        else:
            batch, tuples = TupleBatch.from_tuples(item), item
        n = batch.n if batch is not None else len(item)
        execute = self.bolts[task].execute
        clock = time.perf_counter_ns
        warn_ns = self.block_warn_ns
        failed: list[int] = []
        start = last = clock()
        mark = 0
        every = _CLOCK_EVERY - 1
        self.in_batch = True
        try:
            if batch is None:
                assert tuples is not None
                collector.begin_tuples(tuples)
            else:
                collector.begin(batch)
            if tuples is not None:
                for i, t in enumerate(tuples):
                    if not i & every:
                        now = clock()
                        if now - last > warn_ns:
                            self.check_calls(task, now - last, i - mark, "execute")
                        last, mark = now, i
                    collector._row = i
                    try:
                        execute(t, collector)
                    except Exception as exc:
                        failed.append(i)
                        self._on_basic_error(task, exc)
            else:
                assert batch is not None
                # The view's tree is the current row's (``BasicCollector`` knows it). The
                # rows run in chunks of ``_CLOCK_EVERY``, the clock read between two chunks.
                src = batch.source
                view = Tuple((), src, collector, 0)
                refs, kept_refs = getrefcount, _VIEW_REFS
                rows = batch.row_values()
                chunk = _CLOCK_EVERY
                if batch.roots is None:
                    # No tree (no ackers, no message id upstream): the emits need no anchor
                    # row and a failed row is only counted, so the rows need no index.
                    for lo in range(0, n, chunk):
                        now = clock()
                        if now - last > warn_ns:
                            self.check_calls(task, now - last, lo - mark, "execute")
                        last, mark = now, lo
                        for values in rows[lo : lo + chunk]:
                            view.values = values
                            try:
                                execute(view, collector)
                            except Exception as exc:
                                failed.append(lo)  # counted only: no tree to fail
                                self._on_basic_error(task, exc)
                            if refs(view) > kept_refs:  # kept: a tuple of no tree, done
                                view._root = view._ack_val = None
                                view = Tuple((), src, collector, 0)
                else:
                    for lo in range(0, n, chunk):
                        now = clock()
                        if now - last > warn_ns:
                            self.check_calls(task, now - last, lo - mark, "execute")
                        last, mark = now, lo
                        for i, values in enumerate(rows[lo : lo + chunk], lo):
                            view.values = values
                            collector._row = i
                            try:
                                execute(view, collector)
                            except Exception as exc:
                                failed.append(i)
                                self._on_basic_error(task, exc)
                            if refs(view) > kept_refs:  # kept: it becomes this row's tuple
                                # at once: the next rows' execute may read its tree
                                own = batch._view(i, values)
                                view._root, view._edge = own._root, own._edge
                                view._ack_val = None
                                view = Tuple((), src, collector, 0)
            if batch is None:
                assert tuples is not None
                collector.seal_tuples(tuples, failed)
            else:
                if tuples is not None:
                    for t in tuples:
                        t._ack_val = None  # acked or failed with the batch
                collector.seal(batch, failed)
        finally:
            self.in_batch = False
        now = clock()
        if now - last > warn_ns:
            self.check_calls(task, now - last, n - mark, "execute")
        self._account(task, now - start, n)

    def _on_basic_error(self, task: int, exc: Exception) -> None:
        """A basic bolt's ``execute`` raised: the row fails (with the batch); the error is
        recorded unless it is a plain ``FailedException`` (Storm's BasicBoltExecutor)."""
        if not isinstance(exc, FailedException) or isinstance(exc, ReportedFailedException):
            self.record_exception(task, exc)

    async def _run_batch_bolt(self, task: int, item: list[Tuple] | TupleBatch) -> None:
        batch = as_batch(item)
        collector = self.batch_collectors[task]
        bolt = self.bolts[task]
        n = batch.n
        start = batch._started_ns = time.perf_counter_ns()
        collector.input = batch
        collector.in_batch = True
        try:
            try:
                if self.is_basic:
                    bolt.execute_batch(batch, collector)
                else:
                    bolt.execute_batch(batch)
            except Exception as exc:
                took = time.perf_counter_ns() - start
                self._batch_done(task, collector, batch, exc)
            else:
                took = time.perf_counter_ns() - start
                self._batch_done(task, collector, batch, None)
        finally:
            collector.in_batch = False
            collector.input = None
        self.check_blocking(task, took, "one call of execute_batch")
        self._account(task, took, n)

    def _start_async_batch(self, task: int, item: list[Tuple] | TupleBatch) -> None:
        """Start an async ``execute_batch`` call in the executor's task group (the task
        holds one of its slots): up to ``topology.bolt.max.inflight`` batches per task are
        in flight at once, each acked or failed as its own call completes."""
        batch = as_batch(item)
        if not self.inflight:
            self.progress_ns = self.clock.now_ns()
        self.inflight += 1
        assert self._tasks is not None
        self._tasks.create_task(self._execute_batch_async(task, batch))

    async def _execute_batch_async(self, task: int, batch: TupleBatch) -> None:
        collector = self.batch_collectors[task]
        bolt = self.bolts[task]
        n = batch.n
        start = batch._started_ns = time.perf_counter_ns()
        # The call's own input (its asyncio task has its own context): emits and acks
        # that name no batch go to this call's batch, whatever other calls are in flight.
        collector.bind_call(batch)
        try:
            # Its children are emitted during the call; its rows are acked (or failed)
            # when it completes, then the children leave and the acker is told.
            try:
                if self.is_basic:
                    await self.timed(bolt.execute_batch(batch, collector), task, "execute_batch")
                else:
                    await self.timed(bolt.execute_batch(batch), task, "execute_batch")
            except Exception as exc:
                self._batch_done(task, collector, batch, exc)
            else:
                self._batch_done(task, collector, batch, None)
        finally:
            self._account(task, time.perf_counter_ns() - start, n)
            self.inflight -= 1
            self.progress_ns = self.clock.now_ns()
            self._slots[task].release()
        await self.flush()
        self.notify_acker()

    def _batch_done(
        self, task: int, collector: BatchCollector, batch: TupleBatch, error: Exception | None
    ) -> None:
        """A batch bolt's call returned or raised ``error``: a basic bolt's rows it left
        pending are acked; on an error, every row left pending is failed (and the error
        recorded, unless it is a plain ``FailedException``)."""
        if error is not None:
            if not isinstance(error, FailedException) or isinstance(error, ReportedFailedException):
                self.record_exception(task, error)
            rows = collector.pending_rows(batch)
            if rows.shape[0]:
                collector.fail(batch, rows)
        elif self.is_basic:
            collector.ack_pending(batch)

    def _error_reporter(self, task: int) -> Callable[[BaseException | str], None]:
        def report_error(error: BaseException | str) -> None:
            if isinstance(error, BaseException):
                self.record_exception(task, error)
            else:
                self.record_error(task, str(error), "")

        return report_error

    def _on_execute_error(
        self, task: int, collector: BoltCollector, t: Tuple, exc: Exception
    ) -> None:
        if not isinstance(exc, FailedException) or isinstance(exc, ReportedFailedException):
            self.record_exception(task, exc)
        if t._ack_val is not None:
            collector.fail(t)

    async def _execute_async(self, task: int, t: Tuple) -> None:
        collector = self.rich_collectors[task]
        bolt = self.bolts[task]
        start = time.perf_counter_ns()
        try:
            if self.is_basic:
                basic = BasicOutputCollector(collector)
                basic._input = t
                await self.timed(bolt.execute(t, basic), task, "execute")
                if t._ack_val is not None:
                    collector.ack(t)
            else:
                await self.timed(bolt.execute(t), task, "execute")
        except Exception as exc:
            self._on_execute_error(task, collector, t, exc)
        finally:
            took = time.perf_counter_ns() - start
            self.busy_ns += took
            self.execute_latency[task].add_one(took)
            self.executed[task] += 1
            self.inflight -= 1
            self.progress_ns = self.clock.now_ns()
            self._slots[task].release()
        await self.flush()
        self.notify_acker()

    def stalled(self) -> bool:
        """Async calls are in flight and none has completed for a message timeout (a hung
        call, say)."""
        return bool(self.inflight) and self.clock.now_ns() - self.progress_ns >= self.stall_ns

    def queued_roots(self, roots: list[int], arrays: list[np.ndarray]) -> None:
        # The tuples queued behind a stalled executor are not protected from timing out:
        # they may wait forever, and their spout must hear ``fail`` (STORM-3514's stall).
        if self.is_async and self.stalled():
            return
        super().queued_roots(roots, arrays)
        extend_roots(roots, self._dispatching[self._dispatch_index :])

    def idle(self) -> bool:
        return self.inflight == 0 and not self._dispatching and super().idle()


class SpoutExecutor(Executor):
    """Runs spout tasks: acks and fails first, then ``next_tuple`` in batches."""

    kind = "spout"

    def __init__(self, *args: Any, acking: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.acking = acking
        self.collectors: dict[int, SpoutCollector] = {}
        self.acked: dict[int, int] = dict.fromkeys(self.tasks, 0)
        self.failed: dict[int, int] = dict.fromkeys(self.tasks, 0)
        self.timed_out: dict[int, int] = dict.fromkeys(self.tasks, 0)
        self.latency: dict[int, LatencyRecorder] = {t: LatencyRecorder() for t in self.tasks}
        self.max_pending: int | None = self.conf["topology.max.spout.pending"]
        self.wait_secs = self.conf["topology.sleep.spout.wait.strategy.time.ms"] / 1000.0
        self.flush_ns = int(self.conf["topology.batch.flush.interval.millis"] * 1e6)
        self.active = False
        #: every task's ``open`` has completed: until then no other spout method runs
        self.opened = False
        self._flusher: asyncio.Future[None] | None = None
        self._activation_changed = False
        self._idle_rounds = 0
        sample = next(iter(self.instances.values()))
        self._async = {
            name: inspect.iscoroutinefunction(getattr(sample, name))
            for name in ("next_tuple", "ack", "fail")
        }
        #: the spout takes acks in bulk (it overrides ``Spout.ack_batch``)
        self._ack_batch = type(sample).ack_batch is not Spout.ack_batch
        #: neither ``ack`` nor ``ack_batch`` is overridden: an ack calls nothing (``Spout.ack``
        #: does nothing), so a completion only takes the tree off the pending table (set
        #: once the tasks are open: ``open`` may set ``ack`` on the spout)
        self._ack_noop = False

    async def start(self) -> None:
        # An async spout's emits arm a flush timer: it may await before it returns.
        on_emit = self.on_async_emit if any(self._async.values()) else None
        kind = SpoutCollector if self.trace is None else TracedSpoutCollector
        for task in self.tasks:
            collector = kind(self, task, self.routes[task], self.acking, on_emit)
            self.collectors[task] = collector
            spout = self.instances[task]
            context = self.services.context_for(task)
            try:
                await maybe_await(spout.open(self.conf, context, collector))
            except Exception as exc:
                raise self.start_failed(task, "open", exc)  # noqa: B904 (its cause is set)
        self._ack_noop = not self._ack_batch and all(
            getattr(type(spout), "ack", None) is Spout.ack
            and "ack" not in getattr(spout, "__dict__", {})
            for spout in self.instances.values()
        )
        self.opened = True

    def seal(self) -> None:
        """Send what the spout tasks emitted one by one since the last flush on to the
        outgoing buffers, as batches (``SpoutCollector.seal``)."""
        for collector in self.collectors.values():
            collector.seal()

    async def flush(self) -> None:
        self.seal()
        await super().flush()

    def flush_ready(self) -> None:
        self.seal()
        super().flush_ready()

    def has_output(self) -> bool:
        return any(c._runs for c in self.collectors.values()) or super().has_output()

    async def stop(self) -> None:
        for task in self.tasks:
            try:
                await maybe_await(self.instances[task].close())
            except Exception as exc:
                self.record_exception(task, exc)

    def set_active(self, active: bool) -> None:
        """Activate or deactivate the spout tasks (Storm's ``activate`` / ``deactivate``):
        applied by the run loop, which calls the spouts' hooks between turns, so a hook
        never runs in the middle of a ``next_tuple``."""
        if active != self.active:
            self.active = active
            self._activation_changed = True
            self.inbox.wake()

    async def _apply_activation(self) -> None:
        self._activation_changed = False
        for task in self.tasks:
            spout = self.instances[task]
            try:
                await maybe_await(spout.activate() if self.active else spout.deactivate())
            except Exception as exc:
                self.record_exception(task, exc)

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            if self._flusher is not None:
                self._flusher.cancel()

    def _make_room(self) -> None:
        """Grow the tasks' pending tables that filled past 7/16 now, between turns, rather
        than inside a call of ``next_tuple`` whose emit finds its table half full (the
        growth would count as the user's call; see ``PendingTable.make_room``)."""
        for task in self.tasks:
            pending = self.collectors[task].pending
            took = pending.make_room()
            if took:
                self.log.debug(
                    "task %d: its table of pending trees grew to %d slots in %.3f s",
                    task,
                    pending.slots,
                    took,
                )

    async def _run(self) -> None:
        inbox = self.inbox
        notify_acker = self.notify_acker
        while not self.stopping:
            if self._activation_changed:
                await self._apply_activation()
            while inbox.control:
                await self._complete(inbox.control.popleft())
            emitted = 0
            if self.active:
                # The turn's budget, shared by the executor's tasks (each gets at least
                # one call): then the loop runs everything else.
                turn_end = self.clock.now_ns() + _SPOUT_TURN_NS
                for task in self.tasks:
                    emitted += await self._emit_batch(task, turn_end)
                if emitted:
                    await self.flush()
                    notify_acker()
                    self._make_room()
            if self.acking is False:
                await self._auto_ack()
            if not emitted and self.has_output():
                # Tuples emitted from ack(), fail() or activate() (a replay, say).
                await self.flush()
                notify_acker()
            if emitted:
                self._idle_rounds = 0
                await asyncio.sleep(0)
            elif not inbox.control and not self._activation_changed:
                # Nothing to emit: a progressive sleep wait strategy (1x, 2x, ... 16x the
                # configured wait), cut short at once by acks, fails and (de)activation.
                wait = self.wait_secs * (1 << min(self._idle_rounds, 4))
                self._idle_rounds += 1
                await inbox.wait(wait if self.active else None)

    async def _emit_batch(self, task: int, turn_end: int) -> int:
        """Call ``next_tuple`` until the batch is full, the spout has nothing to emit, the
        flush interval has passed or the turn ends (``turn_end``), both on the topology's
        clock and checked after every call: a ``next_tuple`` that blocks holds the loop for
        that one call only. (Under ``simulate`` the clock stands still while a call blocks,
        so turns end by count as they always did, and a seeded run stays reproducible; no
        virtual time passes meanwhile, so nothing waits on the virtual clock either.)"""
        spout = self.instances[task]
        collector = self.collectors[task]
        pending = collector.pending
        limit = self.max_pending if self.acking else None
        next_tuple = spout.next_tuple
        is_async = self._async["next_tuple"]
        clock = self.clock
        deadline = min(turn_end, clock.now_ns() + self.flush_ns)
        # One clock read per call: with the system clock, the reading that times a call
        # (for the blocking warning) is also the turn's clock.
        system = type(clock) is SystemClock
        real = time.monotonic_ns if system else time.perf_counter_ns
        warn_ns = self.block_warn_ns
        calls = 0
        before = collector.emits
        started = real()
        size = self.batch_size
        if system and limit is None and not is_async:
            # The common case (a synchronous spout, no pending limit, the system clock)
            # in a loop of its own: per call, the call, one clock read and three tests.
            full = before + size
            while calls < size:
                mark = collector.emits
                try:
                    next_tuple()
                except Exception as exc:
                    ended = real()
                    if ended - started > warn_ns:
                        self.check_blocking(task, ended - started, "one call of next_tuple")
                    self.record_exception(task, exc)
                    break
                ended = real()
                if ended - started > warn_ns:
                    self.check_blocking(task, ended - started, "one call of next_tuple")
                calls += 1
                emits = collector.emits
                if emits == mark or emits >= full or ended >= deadline:
                    break  # nothing to emit now, the batch is full, or the turn is over
                started = ended
            return collector.emits - before
        # A batch emit counts its rows: one call that emits a batch may fill the turn.
        while calls < size and collector.emits - before < size:
            # This turn's emits are sealed (and pending) when it ends: count them as pending.
            if limit is not None and len(pending) + collector.emits - before >= limit:
                break
            mark = collector.emits
            try:
                if is_async:
                    await self.timed(next_tuple(), task, "next_tuple")
                else:
                    next_tuple()
            except Exception as exc:
                self.record_exception(task, exc)
                break
            finally:
                ended = real()
                if ended - started > warn_ns and not is_async:
                    self.check_blocking(task, ended - started, "one call of next_tuple")
            calls += 1
            if collector.emits == mark:
                break  # nothing to emit right now
            if (ended if system else clock.now_ns()) >= deadline:
                break  # let the loop run the others; let the batch go downstream
            started = ended
        return collector.emits - before

    def on_async_emit(self) -> None:
        """An async spout emitted: whatever it awaits next, the tuple leaves within the
        flush interval (``_flush_on_time``)."""
        if self._flusher is None:
            self._flusher = asyncio.ensure_future(self._flush_on_time())

    async def _flush_on_time(self) -> None:
        """A flush interval after an async spout's emit, hand what is buffered on to the
        inboxes with room (it never waits there, so cancelling it loses nothing); again
        while something is left (a full inbox)."""
        interval = max(self.flush_ns, _MIN_FLUSH_NS) / 1e9
        try:
            while self.has_output():
                await self.clock.sleep(interval)
                self.flush_ready()
                self.notify_acker()
        finally:
            self._flusher = None

    async def _complete(self, completions: Completions) -> None:
        task, roots, outcomes, acked_emitted_ns = completions
        if acked_emitted_ns is not None and acked_emitted_ns.shape[0]:
            # Complete latency: from the emit to now, as the spout hears the ack.
            self.latency[task].add(self.clock.now_ns() - acked_emitted_ns)
        spout = self.instances[task]
        pending = self.collectors[task].pending
        ack, fail = spout.ack, spout.fail
        ack_async, fail_async = self._async["ack"], self._async["fail"]
        trace = self.trace
        if trace is None and (
            acked_emitted_ns.shape[0] == roots.shape[0]
            if acked_emitted_ns is not None
            else not (outcomes != ACKED).any()
        ):
            # Every tree acked (the common case): the message ids looked up in bulk (ids
            # it no longer knows skipped); a spout that overrides ``ack_batch`` hears them
            # in one call.
            ids = pending.pop_many(roots)
            if self._ack_batch:
                try:
                    await maybe_await(spout.ack_batch(ids))
                except Exception as exc:
                    self.record_exception(task, exc)
            elif self._ack_noop:
                pass
            elif ack_async:
                for msg_id in ids:
                    try:
                        await ack(msg_id)
                    except Exception as exc:
                        self.record_exception(task, exc)
            else:
                for msg_id in ids:
                    try:
                        ack(msg_id)
                    except Exception as exc:
                        self.record_exception(task, exc)
            self.acked[task] += len(ids)
            return
        acked = failed = timed_out = 0
        # A spout with ``ack_batch`` hears the acks of a mixed completion in one call too.
        ack_batch = spout.ack_batch if self._ack_batch else None
        acked_ids: list[Any] = []
        for root, outcome in zip(roots.tolist(), outcomes.tolist(), strict=True):
            msg_id = pending.pop(root, MISSING)
            if msg_id is MISSING:
                continue  # Storm ignores completions for ids it no longer knows
            if ack_batch is not None and outcome == ACKED:
                acked_ids.append(msg_id)
                continue
            if trace is not None:
                kind = "ack" if outcome == ACKED else "timeout" if outcome == TIMED_OUT else "fail"
                trace.record(self.clock.now_ns() / 1e9, kind, self.component_id, task, msg_id, root)
            try:
                if outcome == ACKED:
                    acked += 1
                    if ack_async:
                        await ack(msg_id)
                    else:
                        ack(msg_id)
                else:
                    failed += 1
                    timed_out += outcome == TIMED_OUT
                    if fail_async:
                        await fail(msg_id)
                    else:
                        fail(msg_id)
            except Exception as exc:
                self.record_exception(task, exc)
        if acked_ids and ack_batch is not None:  # (only ack_batch collects acked_ids)
            acked += len(acked_ids)
            try:
                await maybe_await(ack_batch(acked_ids))
            except Exception as exc:
                self.record_exception(task, exc)
        self.acked[task] += acked
        self.failed[task] += failed
        self.timed_out[task] += timed_out

    async def _auto_ack(self) -> None:
        """Without ackers every message is acked once emitted: in one ``ack_batch`` call
        when the spout overrides it, as acks from the acker are."""
        for task in self.tasks:
            collector = self.collectors[task]
            if collector.auto_acked:
                ids = collector.auto_acked.copy()
                collector.auto_acked.clear()
                if self._ack_batch:
                    try:
                        await maybe_await(self.instances[task].ack_batch(ids))
                    except Exception as exc:
                        self.record_exception(task, exc)
                    self.acked[task] += len(ids)
                    continue
                if self._ack_noop:
                    self.acked[task] += len(ids)
                    continue
                ack: Callable[[Any], Any] = self.instances[task].ack
                is_async = self._async["ack"]
                for msg_id in ids:
                    try:
                        if is_async:
                            await ack(msg_id)
                        else:
                            ack(msg_id)
                    except Exception as exc:
                        self.record_exception(task, exc)
                self.acked[task] += len(ids)

    def pending(self) -> int:
        """Trees this executor's tasks emitted with a message id and that have not
        completed: what ``topology.max.spout.pending`` bounds, and what has to reach 0
        before a finite topology completes."""
        return sum(len(c.pending) for c in self.collectors.values())

    def abandon_pending(self) -> None:
        """This executor crashed: the outcomes of its pending trees have no task to go to
        any more (Storm's pending map dies with its worker). Traced as ``abandon``, so the
        message report tells them from trees the engine lost (``MessageReport``)."""
        trace = self.trace
        if trace is None:
            return
        now = self.clock.now_ns() / 1e9
        for task, collector in self.collectors.items():
            for root, msg_id in collector.pending.items():
                trace.record(now, "abandon", self.component_id, task, msg_id, root)

    def exhausted(self) -> bool:
        """Every task's spout says it has nothing left to emit (``is_exhausted``)."""
        # Not before open has completed: the object may not be usable yet (a restart).
        return self.opened and all(self.instances[t].is_exhausted() for t in self.tasks)

    def idle(self) -> bool:
        return super().idle() and not any(c.auto_acked for c in self.collectors.values())


class StepTimer:
    """Awaits a coroutine and times each of its steps: each stretch the event loop runs it,
    from one await to the next, which is the time it held the loop. The time it spends
    awaiting is not counted: the loop ran everything else meanwhile.

    It drives the coroutine as ``await`` does (``send``, ``throw``, ``close``), so what it
    awaits, returns and raises (cancellation included) passes through unchanged.
    """

    __slots__ = ("_coro", "_executor", "_task", "_where")

    def __init__(self, coro: Any, executor: Executor, task: int, where: str) -> None:
        self._coro = coro
        self._executor = executor
        self._task = task
        self._where = where

    def __await__(self) -> Any:
        coro = self._coro
        clock = time.perf_counter_ns
        warn_ns = self._executor.block_warn_ns
        value: Any = None
        thrown: BaseException | None = None
        while True:
            start = clock()
            try:
                if thrown is None:
                    step = coro.send(value)
                else:
                    step, thrown = coro.throw(thrown), None
            except StopIteration as stop:
                self._check(clock() - start, warn_ns)
                return stop.value
            except BaseException:
                self._check(clock() - start, warn_ns)
                raise
            self._check(clock() - start, warn_ns)
            try:
                value = yield step
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                # Thrown in by the task (a cancellation, say): the coroutine decides what
                # becomes of it, as it would under a plain ``await``.
                value, thrown = None, exc

    def _check(self, took_ns: int, warn_ns: int) -> None:
        if took_ns > warn_ns:
            self._executor.check_blocking(self._task, took_ns, self._where)


#: At most one "blocked the event loop" warning per executor this often.
_BLOCK_WARN_EVERY_NS = 10 * 10**9
#: How long one turn of a spout executor may hold the event loop calling ``next_tuple``
#: (on the topology's clock; the flush interval, 1 ms by default, usually ends it first):
#: long enough for full batches of quick calls, short enough that timers, signals and the
#: other executors run every few milliseconds.
_SPOUT_TURN_NS = 2_000_000
#: The shortest wait of an async spout's flush timer (a flush interval of 0 included).
_MIN_FLUSH_NS = 100_000
#: A basic bolt runs inputs of at most this many rows tuple by tuple (``Tuple`` emits,
#: per-tuple acks), larger ones over arrays: below it, numpy's cost per call outweighs
#: what the arrays save (a trickle of tuples, a spout paced at a few per millisecond).
_PER_TUPLE = 16
#: The per-tuple loops read the clock once per this many calls (see ``check_calls``); a
#: power of two. Between two reads the loop does nothing else: with 64, the reads and
#: the chunking cost a few ns per call, the typical call subtracted (``check_calls``)
#: still finds the one long call among them.
_CLOCK_EVERY = 64
#: References to a basic bolt's row view while ``_run_basic`` holds it: its own variable and
#: ``getrefcount``'s argument. Any more and user code kept it.
_VIEW_REFS = 2
#: One tuple in this many has its process latency measured (rich bolts).
PROCESS_SAMPLE = 64


def as_batch(item: list[Tuple] | TupleBatch) -> TupleBatch:
    """An inbox item as the batch a batch bolt's call gets."""
    return item if isinstance(item, TupleBatch) else TupleBatch.from_tuples(item)


def _roots_of(item: Any, roots: list[int], arrays: list[np.ndarray]) -> None:
    if type(item) is TupleBatch:
        if item.roots is not None:
            arrays.append(item.root_ids())
        return
    for x in item:
        if type(x) is TupleBatch:
            if x.roots is not None:
                arrays.append(x.root_ids())
        else:
            root = x._root
            if type(root) is int:
                roots.append(root)
            elif root is not None:
                roots.extend(root)


def _as_items(item: Any) -> list[Any]:
    """An inbox item back as outgoing buffer entries (a batch, or a run's tuples)."""
    return [item] if type(item) is TupleBatch else item


def _split_runs(buf: list[Any], capacity: int) -> list[Any]:
    """An outgoing buffer as inbox items: runs of per-tuple emits as lists, each batch on
    its own (cut to the inbox's capacity), in emit order."""
    items: list[Any] = []
    run: list[Any] = []
    for x in buf:
        if type(x) is TupleBatch:
            if run:
                items.append(run)
                run = []
            if x.n <= capacity:
                items.append(x)
            else:
                for lo in range(0, x.n, capacity):
                    items.append(x.take(np.arange(lo, min(lo + capacity, x.n), dtype=np.int64)))
        else:
            run.append(x)
    if run:
        items.append(run)
    return items
