"""``AckerLedger``: the Python owner of the jitted pending-root table."""

from __future__ import annotations

import enum
import operator
import threading
from dataclasses import dataclass
from typing import NamedTuple, SupportsIndex, cast

import numpy as np

from . import _kernel
from ._constants import (
    ENTRY_DTYPE,
    FLAG_FAILED,
    FLAG_SPOUT_KNOWN,
    INITIAL_CAPACITY,
    MAX_LOAD_FACTOR,
    META_ACKED,
    META_COUNT,
    META_FAILED,
    META_LEN,
    META_MIN_DEADLINE,
    META_ORPHANS,
    META_TIMED_OUT,
    MIN_LOAD_FACTOR,
    OP_ACK,
    OP_FAIL,
    OP_INIT,
    OP_RESET,
    OUTCOME_ACKED,
    OUTCOME_FAILED,
    OUTCOME_TIMED_OUT,
    TABLE_ALIGNMENT,
)
from ._memory import OWN_MAPPING_MIN_BYTES, touch_pages, zeroed

__all__ = ["AckerLedger", "Completions", "LedgerStatistics", "Op", "Outcome", "Snapshot"]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


class Op(enum.IntEnum):
    """Operation codes of a batch: Storm's four acker streams."""

    INIT = OP_INIT
    ACK = OP_ACK
    FAIL = OP_FAIL
    RESET = OP_RESET


class Outcome(enum.IntEnum):
    """How a root completed."""

    ACKED = OUTCOME_ACKED
    FAILED = OUTCOME_FAILED
    TIMED_OUT = OUTCOME_TIMED_OUT


class Completions(NamedTuple):
    """Roots that completed in one call, in the order they completed (parallel arrays).

    ``start_ns`` is when each tree started: the emit time its INIT carried, else when its
    entry was made. The spout that hears the completion measures the complete latency from
    it on its own clock, so no time is converted on the way."""

    root: np.ndarray  # uint64
    spout_task: np.ndarray  # int32
    outcome: np.ndarray  # uint8, values of ``Outcome``
    start_ns: np.ndarray  # int64: the tree's start (emit) time

    def __len__(self) -> int:
        return int(self.root.shape[0])


class Snapshot(NamedTuple):
    """Every pending root of an ``AckerLedger`` (parallel arrays, in no particular order)."""

    root: np.ndarray  # uint64
    value: np.ndarray  # uint64: XOR of the edge ids still outstanding
    spout_task: np.ndarray  # int32, meaningful where ``spout_known``
    spout_known: np.ndarray  # bool: INIT seen
    failed: np.ndarray  # bool: FAIL seen, waiting for the INIT
    deadline_ns: np.ndarray  # int64
    start_ns: np.ndarray  # int64: the emit time its INIT carried, else its creation time

    def __len__(self) -> int:
        return int(self.root.shape[0])


@dataclass(frozen=True)
class LedgerStatistics:
    """A snapshot of an ``AckerLedger`` (see ``AckerLedger.statistics``)."""

    pending: int
    capacity: int
    bytes_used: int
    acked: int
    failed: int
    timed_out: int
    orphans: int
    rehashes: int


def _empty_completions() -> Completions:
    return Completions(
        np.empty(0, np.uint64), np.empty(0, np.int32), np.empty(0, np.uint8), np.empty(0, np.int64)
    )


_UINT8 = np.dtype(np.uint8)
_UINT64 = np.dtype(np.uint64)
_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)
_NO_STARTS = np.empty(0, np.int64)
_NO_STARTS.flags.writeable = False


def _check_array(name: str, value: object, dtype: np.dtype, n: int | None) -> np.ndarray:
    # Cheap on the happy path: the engine calls apply() for batches of a few ops too.
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of {dtype}, got {type(value).__name__}")
    if value.dtype is not dtype and value.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype}, got {value.dtype}")
    if value.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {value.shape}")
    if n is not None and value.shape[0] != n:
        raise ValueError(f"{name} has {value.shape[0]} elements, but ops has {n}")
    # The kernels take contiguous, aligned arrays (read-only ones are fine as they are).
    flags = value.flags
    if not (flags.c_contiguous and flags.aligned):
        value = value.copy()
    return value


def _check_int(name: str, value: object) -> int:
    try:
        # operator.index is the check: it raises TypeError for anything not an integer.
        return operator.index(cast(SupportsIndex, value))
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None


def _check_time(name: str, value: object) -> int:
    time = _check_int(name, value)
    if not _INT64_MIN <= time <= _INT64_MAX:
        raise ValueError(f"{name} must fit in int64, got {time}")
    return time


def _shift_for(capacity: int) -> int:
    return 64 - (capacity.bit_length() - 1)


def _allocate_table(capacity: int) -> np.ndarray:
    """A zeroed table whose first slot starts on a cache-line boundary (a large one mapped
    on its own: ``_memory.zeroed``)."""
    return zeroed(capacity, ENTRY_DTYPE, TABLE_ALIGNMENT)


#: A table of at least ``AHEAD_MIN_BYTES`` shrinks only after being nearly empty (below
#: ``MIN_LOAD_FACTOR``) this long, by the times the ledger is given, or once empty.
LARGE_SHRINK_AFTER_NS = 2 * 10**9

#: A ledger whose next table would take at least this many bytes has it made ahead (see
#: ``_TableAhead``); below it a fresh table costs little.
AHEAD_MIN_BYTES = OWN_MAPPING_MIN_BYTES
#: ... once it is this full: halfway from where a grown table starts (``MAX_LOAD_FACTOR``
#: / 2) to where it grows again (``MAX_LOAD_FACTOR``), so the thread has the time the
#: ledger takes to fill that last half (a 160 MB table took the thread 0.16-0.73 s here),
#: and a ledger that stays where it grew to makes none. At ``MAX_LOAD_FACTOR / 2`` every
#: growth made the next table at once: a time window holding 3 million trees in an
#: 8-million-slot table had a 640 MB table written on a thread it never used, a third of
#: a CPU second (time window, batch: 1.0-2.5M tuples/s per CPU second, by when it came).
AHEAD_LOAD_FACTOR = MAX_LOAD_FACTOR * 3 / 4


class _TableAhead:
    """The table a ledger will grow into, made on a thread of its own while it fills.

    Memory fresh from the system costs its first write a page fault per page, and on a
    virtual machine whose host takes freed pages back that is slow: growing a ledger from
    4 to 8 million slots (2.5 to 5 million trees in flight) took 0.4-0.9 s, with every
    spout and bolt of the loop stopped for it, against 0.04 s for the rehash itself into
    memory already touched. So the pages are touched here, off the loop (numpy lets go of
    the GIL while it writes), and ``take`` hands the table over once it is needed: the
    grow then stopped the loop for 0.03 s."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._table: np.ndarray | None = None
        self._thread = threading.Thread(target=self._make, name="acker-table-ahead", daemon=True)
        self._thread.start()

    def _make(self) -> None:
        table = _allocate_table(self.capacity)
        touch_pages(table)  # the faults happen here, off the loop
        self._table = table

    def take(self, capacity: int) -> np.ndarray | None:
        """The table, zeroed, if it has ``capacity`` slots (then waits for the thread, if
        it is still touching pages); else None, at once."""
        if capacity != self.capacity:
            return None
        self._thread.join()
        table, self._table = self._table, None
        return table


def _new_meta() -> np.ndarray:
    meta = np.zeros(META_LEN, np.int64)
    meta[META_MIN_DEADLINE] = _INT64_MAX
    return meta


class AckerLedger:
    """Storm's acker ledger: pending tuple trees keyed by 64-bit root id.

    Each root holds the XOR of the edge ids still outstanding. Feed it batches of
    operations; it returns the roots that completed. XOR is order-free, so an ACK may
    arrive before its INIT; a root is reported only once its spout task is known (INIT
    seen); a FAIL reports at once; a root whose deadline passes is reported as timed out by
    ``expire``.

    >>> import numpy as np
    >>> ledger = AckerLedger(timeout_ns=30 * 10**9)
    >>> ops = np.array([Op.INIT, Op.ACK], np.uint8)
    >>> roots = np.array([7, 7], np.uint64)
    >>> values = np.array([0b101, 0b101], np.uint64)
    >>> done = ledger.apply(ops, roots, values, np.array([3, 0], np.int32), now_ns=1_000)
    >>> done.root.tolist(), done.spout_task.tolist(), Outcome(done.outcome[0]).name
    ([7], [3], 'ACKED')
    """

    def __init__(
        self,
        timeout_ns: int = 30 * 10**9,
        initial_capacity: int = INITIAL_CAPACITY,
        keep_capacity: int = 0,
    ):
        """``keep_capacity``: once grown to it, the table never shrinks below it (trees
        that pile up and drain in waves would otherwise rehash at every wave); a size
        between two table sizes keeps the larger."""
        timeout_ns = _check_int("timeout_ns", timeout_ns)
        initial_capacity = _check_int("initial_capacity", initial_capacity)
        keep_capacity = _check_int("keep_capacity", keep_capacity)
        if not 0 < timeout_ns <= _INT64_MAX:
            raise ValueError(f"timeout_ns must be > 0 and fit in int64, got {timeout_ns}")
        if not 16 <= initial_capacity <= 2**62 or initial_capacity & (initial_capacity - 1):
            raise ValueError(
                f"initial_capacity must be a power of two >= 16, got {initial_capacity}"
            )
        self._timeout = timeout_ns
        self._min_capacity = initial_capacity
        # Tables are powers of two: the shrink halves down to the one kept, never past it.
        self._keep_capacity = 1 << (keep_capacity - 1).bit_length() if keep_capacity > 0 else 0
        self._table = _allocate_table(initial_capacity)
        self._shift = _shift_for(initial_capacity)
        self._meta = _new_meta()
        self._rehashes = 0
        self._ahead: _TableAhead | None = None
        self._low_since: int | None = None  # since when a large table is nearly empty
        self._ahead_at = self._ahead_count(initial_capacity)

    def __repr__(self) -> str:
        return (
            f"AckerLedger(timeout_ns={self._timeout}, pending={len(self)}, "
            f"capacity={self._table.shape[0]})"
        )

    @property
    def timeout_ns(self) -> int:
        """How long a root may stay pending, from its INIT or last RESET, before ``expire``
        reports it timed out (Storm's ``topology.message.timeout.secs``, in nanoseconds)."""
        return self._timeout

    def __len__(self) -> int:
        return int(self._meta[META_COUNT])

    def apply(
        self,
        ops: np.ndarray,
        roots: np.ndarray,
        values: np.ndarray,
        spout_tasks: np.ndarray,
        now_ns: int,
        start_ns: np.ndarray | None = None,
    ) -> Completions:
        """Apply a batch of operations in order and return the roots that completed.

        ``ops`` (uint8, values of ``Op``), ``roots`` and ``values`` (uint64) and
        ``spout_tasks`` (int32) are parallel arrays; ``values`` is read for INIT and ACK,
        ``spout_tasks`` for INIT only. New entries, FAILs and RESETs get the deadline
        ``now_ns + timeout_ns``.

        ``start_ns`` (int64, parallel, read for INIT only; optional) is when the spout
        emitted each root: the completion reports it as the tree's ``start_ns``, so a tree
        whose INIT reaches the ledger late (or in the same call as its last ACK) still
        reports its emit. Without it a tree starts when its entry is created.
        """
        now = self._check_now(now_ns)
        ops = _check_array("ops", ops, _UINT8, None)
        n = ops.shape[0]
        roots = _check_array("roots", roots, _UINT64, n)
        values = _check_array("values", values, _UINT64, n)
        spout_tasks = _check_array("spout_tasks", spout_tasks, _INT32, n)
        starts = _NO_STARTS if start_ns is None else _check_array("start_ns", start_ns, _INT64, n)
        if n == 0:
            return _empty_completions()
        out_root = np.empty(n, np.uint64)
        out_task = np.empty(n, np.int32)
        out_outcome = np.empty(n, np.uint8)
        out_start = np.empty(n, np.int64)
        # Python ints from the compiled kernel; numpy's under NUMBA_DISABLE_JIT.
        first: int | np.intp = 0
        n_out = 0
        while True:
            first, n_out = _kernel._apply(
                self._table, self._meta, ops, roots, values, spout_tasks, starts, first, now,
                self._timeout, self._shift, out_root, out_task, out_outcome, out_start, n_out,
            )  # fmt: skip
            if first == n:
                break
            if first < 0:  # the kernel checks the op codes before it changes anything
                bad = int(ops[-1 - first])
                raise ValueError(f"ops holds an unknown op code {bad}; use the values of Op")
            self._resize(self._table.shape[0] * 2)
        if self._meta[META_COUNT] > self._ahead_at:
            self._make_ahead()
        if self._table.shape[0] > self._min_capacity:
            self._maybe_shrink(now)
        return Completions(
            out_root[:n_out], out_task[:n_out], out_outcome[:n_out], out_start[:n_out]
        )

    def expire(self, now_ns: int) -> Completions:
        """Remove every root whose deadline is ``<= now_ns``.

        Roots whose spout task is known come back as ``Outcome.TIMED_OUT`` (in no
        particular order); the others are orphans (for instance late acks of a root that
        already completed) and are only counted in ``statistics().orphans``. The sweep is
        O(capacity), but skipped while no deadline can have passed.
        """
        now = _check_time("now_ns", now_ns)
        count = len(self)
        if count == 0 or now < self._meta[META_MIN_DEADLINE]:
            return _empty_completions()  # nothing can be due: skip the sweep
        out = (
            np.empty(count, np.uint64),
            np.empty(count, np.int32),
            np.empty(count, np.uint8),
            np.empty(count, np.int64),
        )
        n_out = _kernel._expire(self._table, self._meta, now, self._shift, *out)
        self._maybe_shrink(now)
        return Completions(*(a[:n_out] for a in out))

    def reset_younger(self, roots: np.ndarray, now_ns: int, max_age_ns: int) -> int:
        """RESET each of ``roots`` (uint64) whose entry started less than ``max_age_ns``
        before ``now_ns``: its deadline becomes ``now_ns + timeout_ns``. Older and unknown
        roots keep their deadlines. Returns how many were reset (repeats counted).

        A root's start is the emit time its INIT carried, else when its entry was created,
        so this bounds how long a caller can keep a tree from timing out (the engine's
        protection of trees still queued).
        """
        now = self._check_now(now_ns)
        max_age = _check_int("max_age_ns", max_age_ns)
        if max_age < 0:
            raise ValueError(f"max_age_ns must be >= 0, got {max_age}")
        roots = _check_array("roots", roots, _UINT64, None)
        if len(self) == 0 or roots.shape[0] == 0:
            return 0
        # The oldest start still young enough (a start that far back is never reached).
        min_start = max(now - max_age + 1, _INT64_MIN)
        n = int(
            _kernel._reset_younger(self._table, roots, now, self._timeout, min_start, self._shift)
        )
        # On a clock that stepped back, the new deadline may come before the earliest one
        # known: lower it, or expire() and due() would skip the sweep past the reset roots.
        deadline = now + self._timeout
        if n and deadline < self._meta[META_MIN_DEADLINE]:
            self._meta[META_MIN_DEADLINE] = deadline
        return n

    def due(self, now_ns: int) -> np.ndarray:
        """Roots (with a known spout task) that ``expire(now_ns)`` would time out."""
        now = _check_time("now_ns", now_ns)
        if len(self) == 0 or now < self._meta[META_MIN_DEADLINE]:
            return np.empty(0, np.uint64)
        out = np.empty(len(self), np.uint64)
        n = _kernel._due(self._table, now, out)
        return out[:n]

    def snapshot(self) -> Snapshot:
        """Copy out every pending root, for inspection and tests (O(capacity))."""
        table = self._table
        live = table[table["flags"] != 0]
        flags = live["flags"]
        return Snapshot(
            root=live["root"].copy(),
            value=live["val"].copy(),
            spout_task=live["spout_task"].copy(),
            spout_known=(flags & FLAG_SPOUT_KNOWN) != 0,
            failed=(flags & FLAG_FAILED) != 0,
            deadline_ns=live["deadline"].copy(),
            start_ns=live["start"].copy(),
        )

    def statistics(self) -> LedgerStatistics:
        """A frozen snapshot of the ledger's size and lifetime counters."""
        meta = self._meta
        return LedgerStatistics(
            pending=int(meta[META_COUNT]),
            capacity=int(self._table.shape[0]),
            bytes_used=int(self._table.nbytes + TABLE_ALIGNMENT + meta.nbytes),
            acked=int(meta[META_ACKED]),
            failed=int(meta[META_FAILED]),
            timed_out=int(meta[META_TIMED_OUT]),
            orphans=int(meta[META_ORPHANS]),
            rehashes=self._rehashes,
        )

    def _check_now(self, now_ns: object) -> int:
        now = _check_time("now_ns", now_ns)
        if now > _INT64_MAX - self._timeout:
            raise ValueError(f"now_ns + timeout_ns must fit in int64, got now_ns={now}")
        return now

    def _resize(self, capacity: int) -> None:
        ahead, self._ahead = self._ahead, None
        new = ahead.take(capacity) if ahead is not None else None
        if new is None:
            new = _allocate_table(capacity)
        self._ahead_at = self._ahead_count(capacity)
        shift = _shift_for(capacity)
        _kernel._rehash(self._table, new, shift)
        self._table = new
        self._shift = shift
        self._rehashes += 1
        if capacity > self._min_capacity and self._min_capacity < self._keep_capacity:
            self._min_capacity = min(capacity, self._keep_capacity)  # grown: kept from now

    @staticmethod
    def _ahead_count(capacity: int) -> int | float:
        """How many pending roots start making the next table ahead (never, for a small
        table)."""
        if 2 * capacity * ENTRY_DTYPE.itemsize < AHEAD_MIN_BYTES:
            return float("inf")
        return int(capacity * AHEAD_LOAD_FACTOR)

    def _make_ahead(self) -> None:
        self._ahead_at = float("inf")  # once per table
        self._ahead = _TableAhead(self._table.shape[0] * 2)

    def _maybe_shrink(self, now: int) -> None:
        capacity = self._table.shape[0]
        count = len(self)
        if capacity <= self._min_capacity or count >= capacity * MIN_LOAD_FACTOR:
            self._low_since = None
            return
        if count and capacity * ENTRY_DTYPE.itemsize >= AHEAD_MIN_BYTES:
            # A large table shrinks once it has stayed this empty for a while (or emptied):
            # trees held and let go in waves (a time window's slides) would otherwise
            # shrink and regrow it at each wave, 0.1-0.2 s each time at millions of slots.
            if self._low_since is None or now < self._low_since:
                self._low_since = now
            if now - self._low_since < LARGE_SHRINK_AFTER_NS:
                return
        self._low_since = None
        # Halve while the result stays at most half full, so the next burst does not regrow.
        while capacity > self._min_capacity and count <= capacity // 2 * MAX_LOAD_FACTOR / 2:
            capacity //= 2
        self._resize(capacity)
