"""The acker executor: Storm's acker bolt, over ``acker_kernel.AckerLedger``.

Collectors append acker operations to plain Python lists (``AckerOps``): a list append per
operation is the only per-tuple cost. The acker turns the lists into numpy arrays once per
batch, shards them by ``root % ackers`` (Storm routes a root to ``hash(root) mod ackers``),
applies them in one kernel call per ledger, and hands the completed roots to their spout
tasks' control lanes. Each INIT carries its root's emit time, so the complete latency runs
from the spout's emit to the tree's completion however late the acker applies the INIT.

Timeouts and backpressure (Storm's replay storms: late trees replayed into full queues):
waiting in a queue is not a reason to replay. Before a sweep, the roots that are due are
checked against the roots of every tuple waiting in a queue or an outgoing buffer; those
still queued get their deadline reset instead, and a batch that waited long in an inbox has
its trees' deadlines reset when it starts executing (``AckerOps.add_protects``). Nothing in
a queue is ever lost in one process, so such a tuple is merely waiting, and replaying its
tree would only add load.

That protection is bounded: it holds only while a tree is younger than
``QUEUED_PROTECTION_TIMEOUTS`` (2) message timeouts, counted from its spout's emit. A tree
that never completes (tuples going round a cycle of bolts, a backlog that never drains)
would otherwise never time out; so every tree that does not complete is failed to its
spout within 3 timeouts of its emit, plus one sweep. Only a bolt's own ``reset_timeout``
extends a tree beyond that, as in Storm.

The acker runs as one coroutine (``AckerExecutor.run``): it sleeps until a collector wakes
it (``notify``, once per executed batch) or the next timeout sweep is due.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

import numpy as np

from acker_kernel import INITIAL_CAPACITY, MAX_LOAD_FACTOR, AckerLedger, Op, Outcome
from acker_kernel import Completions as LedgerCompletions

from .._model.config import QUEUED_PROTECTION_TIMEOUTS
from .._time.clock import Clock
from .channel import Inbox
from .control import Completions

__all__ = ["AckerExecutor", "AckerOps", "RootHolder", "scan_queued_roots"]

_INIT, _ACK, _FAIL, _RESET = (np.uint8(op) for op in (Op.INIT, Op.ACK, Op.FAIL, Op.RESET))

#: Operation arrays of at most this many go to the lists (joining many tiny arrays costs
#: more than converting their few values).
_SMALL = 64

#: Completion kinds as spouts see them.
ACKED = int(Outcome.ACKED)
FAILED = int(Outcome.FAILED)
TIMED_OUT = int(Outcome.TIMED_OUT)


class AckerOps:
    """Pending acker operations, appended to by every collector of the topology."""

    __slots__ = (
        "ack_roots",
        "ack_vals",
        "chunks",
        "fail_roots",
        "init_roots",
        "init_tasks",
        "init_times",
        "init_vals",
        "protect_chunks",
        "protect_roots",
        "reset_roots",
    )

    def __init__(self) -> None:
        self.init_roots: list[int] = []
        self.init_vals: list[int] = []
        self.init_tasks: list[int] = []
        #: when each root was emitted (the runtime's clock, ns): its latency starts there
        self.init_times: list[int] = []
        self.ack_roots: list[int] = []
        self.ack_vals: list[int] = []
        self.fail_roots: list[int] = []
        self.reset_roots: list[int] = []
        #: operations added as arrays by batch emits, acks and fails, taken after the
        #: lists' operations: (op, roots, values or None for 0, spout task, emit time),
        #: the last two for INITs; made into the kernel's arrays once, in ``take``
        self.chunks: list[tuple[np.uint8, np.ndarray, np.ndarray | None, int, int]] = []
        #: the engine's own resets (a tree that waited in a queue), applied only to trees
        #: still young enough (``QUEUED_PROTECTION_TIMEOUTS``); a bolt's ``reset_timeout`` is a RESET
        self.protect_roots: list[int] = []
        self.protect_chunks: list[np.ndarray] = []

    def __len__(self) -> int:
        return (
            len(self.init_roots)
            + len(self.ack_roots)
            + len(self.fail_roots)
            + len(self.reset_roots)
            + len(self.chunks)
            + len(self.protect_roots)
            + len(self.protect_chunks)
        )

    def add_inits(
        self, roots: np.ndarray, values: np.ndarray, spout_task: int, emitted_ns: int
    ) -> None:
        """INITs of ``roots`` (uint64) with ``values``, emitted by one spout task at
        ``emitted_ns`` (the runtime's clock)."""
        n = roots.shape[0]
        if n <= _SMALL:  # a few: the lists, rather than a handful of tiny arrays to join
            self.init_roots.extend(roots.tolist())
            self.init_vals.extend(values.tolist())
            self.init_tasks.extend([spout_task] * n)
            self.init_times.extend([emitted_ns] * n)
            return
        self.chunks.append((_INIT, roots, values, spout_task, emitted_ns))

    def add_acks(self, roots: np.ndarray, values: np.ndarray) -> None:
        """ACKs of ``roots`` (uint64) with ``values``, from a batch's acked rows (already
        folded per root by ``batch_ack_ops``). A few go to the lists the per-tuple path
        fills; more stay one array, so a large batch costs one append, not one per row."""
        if roots.shape[0] <= _SMALL:
            self.ack_roots.extend(roots.tolist())
            self.ack_vals.extend(values.tolist())
        else:
            self.chunks.append((_ACK, roots, values, 0, 0))

    def add_fails(self, roots: np.ndarray) -> None:
        """FAILs of ``roots`` (uint64), kept as ``add_acks`` keeps ACKs. A FAIL needs no
        value: the acker completes the tree as failed however much of it is still open."""
        if roots.shape[0] <= _SMALL:
            self.fail_roots.extend(roots.tolist())
        else:
            self.chunks.append((_FAIL, roots, None, 0, 0))

    def add_resets(self, roots: np.ndarray) -> None:
        """RESETs of ``roots`` (uint64), a bolt's ``reset_timeout`` on rows: each tree's
        timeout starts again, however old it is (unlike ``add_protects``)."""
        if roots.shape[0] <= _SMALL:
            self.reset_roots.extend(roots.tolist())
        else:
            self.chunks.append((_RESET, roots, None, 0, 0))

    def add_protects(self, roots: np.ndarray) -> None:
        """The engine's resets of ``roots`` (uint64): their tuples waited in a queue."""
        if roots.shape[0]:
            self.protect_chunks.append(roots)

    def take_protects(self) -> np.ndarray:
        """The roots (uint64, with repeats) of every pending protect, emptied."""
        parts = [np.array(self.protect_roots, np.uint64), *self.protect_chunks]
        self.protect_roots.clear()
        self.protect_chunks.clear()
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def take(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """All pending operations as kernel arrays (INITs, ACKs, FAILs, RESETs), emptied.

        Grouping by kind keeps Storm's outcomes: XOR is order-free, a FAIL is sticky
        whatever comes around it, and a RESET only moves a deadline.
        """
        ops, roots, vals, tasks, _ = self.take_with_starts()
        return ops, roots, vals, tasks

    def take_with_starts(
        self,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``take`` plus each INIT's emit time (int64, parallel; 0 for the other ops).

        The five arrays are allocated once, the lists' operations first; each chunk is
        then copied into its slice (its op, task and time as scalars: no per-chunk array
        of them)."""
        n_init, n_ack = len(self.init_roots), len(self.ack_roots)
        n_fail, n_reset = len(self.fail_roots), len(self.reset_roots)
        n_lists = n_init + n_ack + n_fail + n_reset
        chunks = self.chunks
        n = n_lists + sum(c[1].shape[0] for c in chunks)
        ops = np.empty(n, np.uint8)
        roots = np.empty(n, np.uint64)
        vals = np.zeros(n, np.uint64)
        tasks = np.zeros(n, np.int32)
        starts = np.zeros(n, np.int64)
        a, b, c = n_init, n_init + n_ack, n_init + n_ack + n_fail
        if n_init:
            ops[:a] = _INIT
            roots[:a] = self.init_roots
            vals[:a] = self.init_vals
            tasks[:a] = self.init_tasks
            starts[:a] = self.init_times
            self.init_roots.clear()
            self.init_vals.clear()
            self.init_tasks.clear()
            self.init_times.clear()
        if n_ack:
            ops[a:b] = _ACK
            roots[a:b] = self.ack_roots
            vals[a:b] = self.ack_vals
            self.ack_roots.clear()
            self.ack_vals.clear()
        if n_fail:
            ops[b:c] = _FAIL
            roots[b:c] = self.fail_roots
            self.fail_roots.clear()
        if n_reset:
            ops[c:n_lists] = _RESET
            roots[c:n_lists] = self.reset_roots
            self.reset_roots.clear()
        # FAILs and RESETs commute with the XOR of INITs and ACKs, and a FAIL is sticky:
        # the arrays' operations may simply follow the lists'.
        lo = n_lists
        for op, r, v, task, emitted_ns in chunks:
            hi = lo + r.shape[0]
            ops[lo:hi] = op
            roots[lo:hi] = r
            if v is not None:
                vals[lo:hi] = v
            if op == _INIT:
                tasks[lo:hi] = task
                starts[lo:hi] = emitted_ns
            lo = hi
        chunks.clear()
        return ops, roots, vals, tasks, starts


class RootHolder(Protocol):
    """What holds tuples not yet executed (an executor): it lists their roots."""

    def queued_roots(self, roots: list[int], arrays: list[np.ndarray]) -> None:
        """Append the roots of the tuples this holder has not executed yet: per-tuple
        ones to ``roots``, a batch's as its array to ``arrays`` (nothing copied per row).

        The acker's sweep calls it on every holder, so a young tree stuck behind a slow
        bolt is not timed out merely for waiting in a queue (``QUEUED_PROTECTION_TIMEOUTS``
        bounds how long that protection lasts).
        """
        ...


def scan_queued_roots(holders: Iterable[RootHolder]) -> np.ndarray:
    """The roots (uint64, with repeats) of every tuple queued, buffered or in transit in
    ``holders``: the trees a timeout sweep must not time out (see the module's doc)."""
    roots: list[int] = []
    arrays: list[np.ndarray] = []
    for holder in holders:
        holder.queued_roots(roots, arrays)
    if not arrays:
        return np.array(roots, dtype=np.uint64)
    return np.concatenate([np.array(roots, dtype=np.uint64), *arrays])


#: The largest table ``ledger_capacity`` keeps a ledger at (about 10 MB).
MAX_PRESIZED_CAPACITY = 1 << 18


def ledger_capacity(pending_trees: int | None, num_ackers: int) -> int:
    """The table size each of ``num_ackers`` ledgers keeps once grown to it (its
    ``keep_capacity``), when the spouts may have ``pending_trees`` trees in flight at most
    (None: no limit).

    Trees held in flight for a while (a stateful bolt acks them at its checkpoint, a
    window as they leave it) fill the ledger and empty it in waves: grown and shrunk at
    each wave, it would rehash every time; kept at the spouts' limit, it does not (up to
    ``MAX_PRESIZED_CAPACITY``). It still starts small: trees acked at once never fill
    it, and a small table stays in the cache (measured: a table sized up front costs a
    plain word count 1-2 % of its CPU time)."""
    if not pending_trees:
        return INITIAL_CAPACITY
    per_acker = -(-pending_trees // max(num_ackers, 1)) / MAX_LOAD_FACTOR
    capacity = INITIAL_CAPACITY
    while capacity < per_acker and capacity < MAX_PRESIZED_CAPACITY:
        capacity *= 2
    return capacity


class AckerExecutor:
    """Applies ``AckerOps`` to the ledgers and routes completions to spout tasks."""

    def __init__(
        self,
        num_ackers: int,
        timeout_ns: int,
        timeouts_enabled: bool,
        spout_inboxes: dict[int, Inbox] | None = None,
        queued_roots: Callable[[], np.ndarray] | None = None,
        capacity: int = INITIAL_CAPACITY,
    ) -> None:
        self.ops = AckerOps()
        #: the table size each ledger keeps once grown to it (``ledger_capacity``)
        self.capacity = capacity
        self.ledgers = [AckerLedger(timeout_ns, keep_capacity=capacity) for _ in range(num_ackers)]
        self.timeout_ns = timeout_ns
        self.timeouts_enabled = timeouts_enabled
        self._spout_inboxes: dict[int, Inbox] = {} if spout_inboxes is None else spout_inboxes
        self._queued_roots = queued_roots or _nothing_queued
        #: how long a queued tree is kept from timing out, from its emit (ns)
        self.protect_ns = QUEUED_PROTECTION_TIMEOUTS * timeout_ns
        self.protected = 0  # deadlines reset by a sweep because the tree was still queued
        #: trees timed out by a sweep although still queued: older than ``protect_ns``
        self.timed_out_queued = 0
        #: the acker coroutine's wake-up (``notify``); nothing is ever queued on it
        self._wakeup = Inbox(1)
        self._notified = False

    def register_spout(self, task: int, inbox: Inbox) -> None:
        """Completions of spout ``task``'s trees go to ``inbox`` from now on."""
        self._spout_inboxes[task] = inbox

    def notify(self) -> None:
        """Wake the acker if operations are pending (and it was not woken already)."""
        if not self._notified and len(self.ops):
            self._notified = True
            self._wakeup.wake()

    async def run(self, clock: Clock, sweep_secs: float) -> None:
        """The acker: apply the pending operations whenever woken, and time out the due
        trees every ``sweep_secs``; until cancelled."""
        sweep_ns = int(sweep_secs * 1e9)
        next_sweep = clock.now_ns() + sweep_ns
        while True:
            now = clock.now_ns()
            await self._wakeup.wait(max(0.0, (next_sweep - now) / 1e9))
            self._notified = False
            now = clock.now_ns()
            self.flush(now)
            if now >= next_sweep:
                self.expire(now)
                next_sweep = now + sweep_ns

    def reset_ledger(self, index: int) -> None:
        """Replace ledger ``index`` by an empty one (a crashed acker)."""
        self.ledgers[index] = AckerLedger(self.timeout_ns, keep_capacity=self.capacity)

    @property
    def pending(self) -> int:
        """How many trees the ledgers track, over all ackers: the operations applied so
        far (call ``flush`` first to count those still queued in ``ops``)."""
        return sum(len(ledger) for ledger in self.ledgers)

    def flush(self, now_ns: int) -> int:
        """Apply every pending operation; return how many there were."""
        ops = self.ops
        if not len(ops):
            return 0
        n = 0
        if len(ops) > len(ops.protect_roots) + len(ops.protect_chunks):
            op, roots, vals, tasks, starts = ops.take_with_starts()
            n = op.shape[0]
            if len(self.ledgers) == 1:
                done = self.ledgers[0].apply(op, roots, vals, tasks, now_ns, starts)
                self._deliver(done)
            else:
                shard = roots % np.uint64(len(self.ledgers))
                for i, ledger in enumerate(self.ledgers):
                    mask = shard == i
                    if mask.any():
                        done = ledger.apply(
                            op[mask], roots[mask], vals[mask], tasks[mask], now_ns, starts[mask]
                        )
                        self._deliver(done)
        if ops.protect_roots or ops.protect_chunks:
            # After the INITs above, so a tree emitted in this batch is known.
            protect = ops.take_protects()
            n += protect.shape[0]
            self._protect(protect, now_ns)
        return n

    def _protect(self, roots: np.ndarray, now_ns: int) -> int:
        """Reset the deadlines of ``roots`` still young enough; return how many."""
        if len(self.ledgers) == 1:
            return self.ledgers[0].reset_younger(roots, now_ns, self.protect_ns)
        shard = roots % np.uint64(len(self.ledgers))
        return sum(
            ledger.reset_younger(roots[shard == i], now_ns, self.protect_ns)
            for i, ledger in enumerate(self.ledgers)
        )

    def expire(self, now_ns: int) -> None:
        """Time out trees past their deadline, except those with tuples still queued that
        are younger than ``protect_ns``."""
        if not self.timeouts_enabled:
            return
        waiting: np.ndarray | None = None  # scanned once per sweep, if anything is due
        for ledger in self.ledgers:
            due = ledger.due(now_ns)
            if due.shape[0] == 0:
                continue
            if waiting is None:
                waiting = self._queued_roots()
            if waiting.shape[0]:
                keep = due[np.isin(due, waiting)]
                if keep.shape[0]:
                    kept = ledger.reset_younger(keep, now_ns, self.protect_ns)
                    self.protected += kept
                    self.timed_out_queued += int(keep.shape[0]) - kept
            self._deliver(ledger.expire(now_ns))

    def _deliver(self, done: LedgerCompletions) -> None:
        n = done.root.shape[0]
        if n == 0:
            return
        tasks = done.spout_task
        first = int(tasks[0])
        if n == 1 or (tasks == first).all():
            self._deliver_to(first, done.root, done.outcome, done.start_ns)
            return
        for task in np.unique(tasks).tolist():
            mask = tasks == task
            self._deliver_to(task, done.root[mask], done.outcome[mask], done.start_ns[mask])

    def _deliver_to(
        self, task: int, roots: np.ndarray, outcomes: np.ndarray, starts: np.ndarray
    ) -> None:
        inbox = self._spout_inboxes.get(task)
        if inbox is not None:  # a root from a spout task that no longer exists is dropped
            # The acked trees' emit times, as the ledger hands them back: the spout task
            # records the complete latency when it hears the ack (Storm 1.x measured it at
            # the spout, emit -> ack).
            emitted = starts[outcomes == ACKED]
            inbox.put_control(Completions(task, roots, outcomes, emitted))


def _nothing_queued() -> np.ndarray:
    return np.zeros(0, np.uint64)
