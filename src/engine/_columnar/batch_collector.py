"""Batch emits, acks and fails: Storm's XOR protocol on arrays (its rules: ``xor``).

A batch emit routes its rows once per subscriber (its ``Grouper``), draws every outgoing
copy's edge id in bulk, XORs them into the anchor rows' ack values, and appends one
``TupleBatch`` per target task to the executor's outgoing buffers. Acks and fails become
acker operations as arrays (``AckerOps.add_*``): no per-row Python object on the way, and
no list -> array conversion in the acker.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from itertools import chain
from typing import Any

import numpy as np

from acker_kernel import TreeIdSource, warm_up, zeroed

from .._model.errors import EmitError, TupleStateError
from .._monitor.stats import LatencyRecorder
from .batch import TupleBatch, as_columns, take_column
from .xor import (
    batch_ack_ops,
    batch_anchor,
    batch_children,
    batch_group_anchor,
    batch_roots,
    batch_spout_init,
)

__all__ = [
    "BatchCollector",
    "PendingTable",
    "RowBatches",
    "SpoutBatchEmitter",
    "anchor_rows",
    "partition",
]

DEFAULT = "default"
_PENDING, _ACKED, _FAILED = 0, 1, 2

#: The batch of the async ``execute_batch`` call running in this context. Each async call
#: runs in its own asyncio task, hence its own context: calls of one task in flight at once
#: each see their own batch (``BatchCollector.bind_call``).
_CALL_INPUT: ContextVar[TupleBatch | None] = ContextVar("squall_batch_call_input", default=None)


def anchor_rows(per_row_counts: Sequence[int] | np.ndarray) -> np.ndarray:
    """The anchor row of every output row of a flat map: row ``i`` repeated ``counts[i]``
    times."""
    counts = np.asarray(per_row_counts, np.int64)
    return np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)


#: A ``PendingTable`` starts with this many slots (a power of 2) and doubles past
#: ``_FULL`` of them taken (``make_room``: past ``_ROOM``).
_PENDING_SLOTS = 1024
#: A task's roots are consecutive, so a batch of them fills a run of slots and no two meet
#: while they span fewer roots than the table has slots: the table runs fuller than a hash
#: table. At half full, a time window holding 3.5 million trees grew its table from 8 to 16
#: million slots during its run (two fresh 128 MB arrays: 0.7-0.8 s on the loop here).
_FULL = 3 / 4
_ROOM = 11 / 16

#: A table grown to at least this many slots warms up the memory of its next growth (see
#: ``PendingTable.make_room``).
_WARM_UP_SLOTS = 1 << 20

#: Completions of at most this many roots are looked up one by one.
_FEW = 8

#: What ``PendingTable.pop`` returns for a root it does not hold (None is a valid default).
MISSING: Any = object()


class PendingTable:
    """A spout task's trees in flight: root -> message id (Storm's pending map), in
    arrays.

    Every tracked emit inserts one entry and every completion removes one: with a dict,
    a Python hash insert and pop per tree, about a fifth of what acking costs a batch word
    count. Here a root's slot is its low bits (``root & mask``): a task's roots are
    consecutive (``SpoutBatchEmitter._roots``), so a batch of emits fills a run of slots
    and a batch of completions reads them back, each a few numpy calls for the whole
    batch, with the message ids (any Python objects) in an object array beside the roots.
    A root whose slot is taken (a tree that has stayed in flight for a whole lap of the
    table, or a per-tuple emit's random root) waits in a small dict instead. Message ids
    are never None here: a None id means an untracked emit, which has no tree.

    A root completes once (the acker forgets it as it reports it), so a batch of
    completions never names a root twice; one it no longer holds is skipped, as Storm
    ignores completions for ids it no longer knows.
    """

    __slots__ = ("_keys", "_mask", "_n", "_overflow", "_vals")

    def __init__(self, slots: int = _PENDING_SLOTS) -> None:
        self._keys = np.zeros(slots, np.uint64)  # 0: a free slot (no root is 0)
        self._vals = np.full(slots, None, object)
        self._mask = np.uint64(slots - 1)
        self._n = 0  # entries in the slots (the rest are in ``_overflow``)
        self._overflow: dict[int, Any] = {}

    def __len__(self) -> int:
        return self._n + len(self._overflow)

    def __iter__(self) -> Iterator[int]:
        return iter(self.roots().tolist())

    def __getitem__(self, root: int) -> Any:
        msg_id = self.get(root)
        if msg_id is MISSING:
            raise KeyError(root)
        return msg_id

    def __setitem__(self, root: int, msg_id: Any) -> None:
        """One entry (a per-tuple emit's tree): ``root`` must not be pending."""
        if self._n + 1 > _FULL * self._keys.shape[0]:
            self._grow()
        slot = root & int(self._mask)
        if self._keys[slot]:
            self._overflow[root] = msg_id
            return
        self._keys[slot] = root
        self._vals[slot] = msg_id
        self._n += 1

    def get(self, root: int, default: Any = MISSING) -> Any:
        """The message id of ``root`` (``default`` if it is not pending)."""
        slot = root & int(self._mask)
        if int(self._keys[slot]) == root:
            return self._vals[slot]
        return self._overflow.get(root, default)

    def roots(self) -> np.ndarray:
        """Every pending root (uint64), the slots' first."""
        keys = self._keys
        held: np.ndarray = keys[keys != 0]
        if not self._overflow:
            return held
        return np.concatenate([held, np.fromiter(self._overflow, np.uint64, len(self._overflow))])

    def items(self) -> list[tuple[int, Any]]:
        """``(root, message id)`` of every pending tree."""
        keys = self._keys
        slots = np.flatnonzero(keys)
        return [
            *zip(keys[slots].tolist(), self._vals[slots].tolist(), strict=True),
            *self._overflow.items(),
        ]

    def add(self, roots: np.ndarray, msg_ids: Any) -> None:
        """Make ``msg_ids[i]`` (an iterable of as many non-None objects) the message id of
        ``roots[i]`` (uint64, distinct, none pending). Roots whose last is ``n - 1`` past
        their first are taken to be that range in ascending order (a spout's roots always
        are: ``SpoutBatchEmitter._roots``); checking it would cost a pass over them."""
        n = roots.shape[0]
        if n == 0:
            return
        ids = np.fromiter(msg_ids, object, n)  # never nests: a tuple id stays one object
        while self._n + n > _FULL * self._keys.shape[0]:
            self._grow()
        keys = self._keys
        consecutive = int(roots[-1]) - int(roots[0]) == n - 1
        if consecutive:
            first = int(roots[0]) & int(self._mask)
            if first + n <= keys.shape[0] and not keys[first : first + n].any():
                # One run of free slots (the common case): slices, no index array.
                keys[first : first + n] = roots
                self._vals[first : first + n] = ids
                self._n += n
                return
        slots = (roots & self._mask).astype(np.intp)
        free = keys[slots] == 0
        if not consecutive:
            # Not one run of consecutive roots: two of them may share a slot.
            free &= _first_in_slot(slots)
        if not free.all():
            taken = ~free
            self._overflow.update(zip(roots[taken].tolist(), ids[taken].tolist(), strict=True))
            roots, ids, slots = roots[free], ids[free], slots[free]
        keys[slots] = roots
        self._vals[slots] = ids
        self._n += roots.shape[0]

    def pop_many(self, roots: np.ndarray) -> list[Any]:
        """Remove ``roots`` (uint64, distinct); return the message ids of those that were
        pending, in the order of ``roots``."""
        if roots.shape[0] <= _FEW:  # a trickle: numpy's cost per call outweighs the loop's
            few = map(self.pop, roots.tolist())
            return [m for m in few if m is not MISSING]
        keys, vals = self._keys, self._vals
        n = roots.shape[0]
        ids: list[Any]
        if int(roots[-1]) - int(roots[0]) == n - 1:
            # Consecutive roots in order (a batch's trees, completing together): if they
            # hold one run of slots, slices (an object array's fancy indexing costs 4x).
            first = int(roots[0]) & int(self._mask)
            run = slice(first, first + n)
            if first + n <= keys.shape[0] and bool((keys[run] == roots).all()):
                ids = vals[run].tolist()
                keys[run] = 0
                vals[run] = None
                self._n -= n
                return ids
        slots = (roots & self._mask).astype(np.intp)
        hit = keys[slots] == roots
        if hit.all():
            ids = vals[slots].tolist()
            keys[slots] = 0
            vals[slots] = None
            self._n -= len(ids)
            return ids
        found = vals[slots]
        found[~hit] = MISSING
        held = slots[hit]
        keys[held] = 0
        vals[held] = None
        self._n -= held.shape[0]
        if self._overflow:
            pop = self._overflow.pop
            for i in np.flatnonzero(~hit).tolist():
                found[i] = pop(int(roots[i]), MISSING)
        return [m for m in found.tolist() if m is not MISSING]

    def pop(self, root: int, default: Any = MISSING) -> Any:
        """Remove ``root``; return its message id (``default`` if it was not pending)."""
        slot = root & int(self._mask)
        if int(self._keys[slot]) == root:
            msg_id = self._vals[slot]
            self._keys[slot] = 0
            self._vals[slot] = None
            self._n -= 1
            return msg_id
        return self._overflow.pop(root, default)

    def make_room(self) -> float:
        """Grow now if more than ``_ROOM`` (11/16) of the slots are taken (``add`` grows
        past ``_FULL``, 3/4): the spout executor calls it between turns, so that a growth,
        which takes a while with millions of trees in flight (0.1-0.3 s at 8 million
        slots, most of it the new array of message ids), falls between calls of the
        spout's ``next_tuple`` rather than inside one; unless a turn emits more than a
        sixteenth of the slots. Close to where ``add`` grows, so that a table is no larger
        than ``add`` alone would make it: at 3/8, 3 million trees took 16 million slots,
        and the growth to them 0.8 s.

        Grown to a million slots or more, it has the memory of its next growth warmed up
        on a thread at once (``acker_kernel.warm_up``; freed again, the pages stay backed
        for a while): the growth to 16 million slots took 0.8 s in fresh memory. Returns
        the seconds the growth took (0.0: none)."""
        if self._n <= _ROOM * self._keys.shape[0]:
            return 0.0
        start = time.perf_counter()
        self._grow()
        took = time.perf_counter() - start
        size = self._keys.shape[0]
        if size >= _WARM_UP_SLOTS:
            warm_up(32 * size)  # the next growth's keys and ids: 16 bytes a slot, twice
        return took

    @property
    def slots(self) -> int:
        """The table's size (its slots; the overflow aside)."""
        return int(self._keys.shape[0])

    def _grow(self) -> None:
        """Twice the slots; the entries move to their new slots, the overflow's too where
        its slot is free now.

        A held root's new slot is its old slot or that plus the old size (one more low bit
        of the root), so no two held roots meet in the new table: no collision check (a
        sort of every root, half a second at two million trees in flight)."""
        keys, vals = self._keys, self._vals
        held = np.flatnonzero(keys)
        roots = keys[held]
        size = keys.shape[0] * 2
        self._mask = np.uint64(size - 1)
        slots = (roots & self._mask).astype(np.intp)
        # Pages made resident on a thread: the run of free slots each ``add`` checks would
        # otherwise fault them in on the loop (0.3 s of a time window's run at 8 million).
        self._keys = zeroed(size, np.uint64, fault_in_background=True)
        self._keys[slots] = roots
        self._vals = np.full(size, None, object)
        self._vals[slots] = vals[held]
        self._n = held.shape[0]
        overflow, self._overflow = self._overflow, {}
        for root, msg_id in overflow.items():
            self[root] = msg_id


def _first_in_slot(slots: np.ndarray) -> np.ndarray:
    """True for the first occurrence of each slot in ``slots``."""
    first = np.zeros(slots.shape[0], bool)
    first[np.unique(slots, return_index=True)[1]] = True
    return first


class _BatchEmits:
    """Routing shared by spout and bolt batch emits."""

    def __init__(
        self,
        component_id: str,
        task: int,
        routes: dict[str, Any],
        out: list[Any],
        ops: Any,
        draw_ids: Callable[[int], np.ndarray],
        mark: Callable[[int], None],
    ) -> None:
        self._mark_rows = mark
        self._component_id = component_id
        self._task = task
        self._routes = routes
        self._out = out
        self._ops = ops
        self._draw = draw_ids
        # A task's ids come from its ``TreeIdSource`` (``draw_ids`` is its ``draw``): then
        # children of single-root rows take one fused pass (``TreeIdSource.children``).
        owner = getattr(draw_ids, "__self__", None)
        self._ids = owner if isinstance(owner, TreeIdSource) else None

    def _put(self, task: int, batch: TupleBatch) -> None:
        self._out[task].append(batch)
        self._mark_rows(batch.n)

    def _children(
        self, batch: TupleBatch, anchor: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Rule 2 on arrays for one copy of each output row (row ``j`` anchored to input
        row ``anchor[j]``): fresh edge ids, XORed into the anchors' ack values; returns
        the copies' ``(roots, edges, root_offsets)``."""
        ids = self._ids
        if ids is not None and batch.root_offsets is None:
            assert batch.roots is not None
            if batch.ack_vals is None:
                batch.ack_vals = np.zeros(batch.n, np.uint64)
            roots, edges = ids.children(anchor, batch.roots, batch.ack_vals)
            return roots, edges, None
        edges = self._draw(anchor.shape[0])
        batch_anchor(batch, anchor, edges)
        return batch_children(batch, anchor, edges)

    def _route(self, stream: str) -> Any:
        route = self._routes.get(stream)
        if route is None:
            raise EmitError(
                f"component {self._component_id!r} emitted on undeclared stream {stream!r}; "
                f"declared streams: {sorted(self._routes)}"
            )
        return route

    def _columns(self, route: Any, data: Any) -> tuple[list[Any], int]:
        try:
            return as_columns(
                data,
                route.source.fields,
                f"component {self._component_id!r} emit_batch on stream {route.source.stream!r}",
            )
        except ValueError as exc:
            raise EmitError(str(exc)) from None

    def _partitions(self, route: Any, columns: list[Any], n: int, tasks: Any) -> list[Any]:
        if route.direct:
            if tasks is None:
                raise EmitError(
                    f"component {self._component_id!r} emitted on direct stream "
                    f"{route.source.stream!r} without tasks; pass tasks=[...] (one task per row)"
                )
            task_col = np.asarray(tasks, np.int64)
            if task_col.shape != (n,):
                raise EmitError(
                    f"component {self._component_id!r}: emit_batch on direct stream "
                    f"{route.source.stream!r} needs one task per row ({n}), got {task_col.shape[0]}"
                )
            bad = sorted(set(np.unique(task_col).tolist()) - route.direct_tasks)
            if bad:
                raise EmitError(
                    f"component {self._component_id!r}: emit_batch to task {bad[0]} on stream "
                    f"{route.source.stream!r}, but that task does not subscribe to it with a "
                    f"direct grouping (direct subscribers' tasks: {sorted(route.direct_tasks)})"
                )
            order = np.argsort(task_col, kind="stable")
            uniq, starts = np.unique(task_col[order], return_index=True)
            bounds = [*starts.tolist(), n]
            return [(int(t), order[bounds[j] : bounds[j + 1]]) for j, t in enumerate(uniq.tolist())]
        if tasks is not None:
            raise EmitError(
                f"component {self._component_id!r}: tasks= is for direct streams; stream "
                f"{route.source.stream!r} is not direct"
            )
        parts: list[Any] = []
        for grouper in route.groupers:
            parts.extend(grouper.route(columns, n))
        return parts


class RowBatches(_BatchEmits):
    """Turns a per-tuple task's emits on one stream, collected during one input batch
    (``_collector.BasicCollector``), into one ``TupleBatch`` per target task: routed by
    the targets each ``emit`` already chose (so a custom grouping is called once per
    tuple, as ever), the rows kept as the user gave them, every copy's edge id drawn in
    bulk and XORed into its anchor row's ack value (rule 2 on arrays)."""

    def send(
        self,
        route: Any,
        rows: list[Sequence[Any]],
        targets: list[tuple[int, ...]] | None,
        batch: TupleBatch | None,
        anchor: Sequence[int],
    ) -> None:
        """``rows[j]`` emitted to ``targets[j]`` (None: every row to ``route.fixed``),
        anchored to row ``anchor[j]`` of ``batch`` (None or untracked: no anchor; an
        ``array('q')`` is read without a copy)."""
        n = len(rows)
        route.emitted += n
        src = route.source
        parts = (
            [(t, None) for t in route.fixed]
            if targets is None
            else partition(targets, route.one_each)
        )
        if batch is None or batch.roots is None:
            for task, idx in parts:
                self._put(
                    task, TupleBatch.from_rows(src, rows if idx is None else _pick(rows, idx))
                )
            return
        if isinstance(anchor, array):
            anchors = np.frombuffer(anchor, np.int64) if n else np.zeros(0, np.int64)
        else:
            anchors = np.fromiter(anchor, np.int64, n)
        for task, idx in parts:
            a = anchors if idx is None else anchors[idx]
            roots, edges, offsets = self._children(batch, a)
            sub = rows if idx is None else _pick(rows, idx)
            self._put(task, TupleBatch.from_rows(src, sub, roots, edges, offsets))


class SpoutBatchEmitter(_BatchEmits):
    """``emit_batch`` of a spout task: one root per row, INITs as arrays."""

    def __init__(
        self,
        *args: Any,
        acking: bool,
        pending: PendingTable,
        auto_acked: list[Any],
        now_ns: Callable[[], int],
        trace: Any,
    ) -> None:
        super().__init__(*args)
        self._acking = acking
        self._pending = pending
        self._auto_acked = auto_acked
        self._now_ns = now_ns
        self._trace = trace
        #: the next root id: a task's roots are consecutive from a random start
        self._next_root = int(self._draw(1)[0])

    def _roots(self, n: int) -> np.ndarray:
        """``n`` new root ids, consecutive (mod 2**64, never 0), unlike edge ids.

        A root is only a key: of the ledger's table, which hashes it, and of the spout's
        pending map, a dict, which does not. Consecutive keys sit side by side there and
        random ones scatter over the whole table, so with many trees in flight (a time
        window holds a second of them) each insert and pop of a random key is a cache
        miss: measured 4-5x slower at a million pending. Tasks start at random points of
        the 2**64 ids, so their runs meet with the odds random ids collide with.
        """
        start = self._next_root
        if start + n > 1 << 64:  # the run would wrap through 0
            start = 1
        self._next_root = start + n
        roots = np.arange(n, dtype=np.uint64)
        roots += np.uint64(start)
        return roots

    def emit_batch(
        self, data: Any, msg_ids: Any = None, stream: str = DEFAULT, tasks: Any = None
    ) -> int:
        """Emit the rows of ``data`` (columns, a mapping field -> column, or Arrow data);
        returns how many. With ``msg_ids`` (one per row) each row starts a tree of its own,
        and the spout hears ``ack`` or ``fail`` per message id, as for per-tuple emits;
        without, the rows are untracked and cost the acker nothing. Row ``j`` goes to task
        ``tasks[j]`` on a direct stream.

        Roots and INITs are made for the whole batch at once, so a spout that already holds
        its data as columns pays per batch, not per row, for reliability.
        """
        route = self._route(stream)
        columns, n = self._columns(route, data)
        if n == 0:
            return 0
        route.emitted += n
        parts = self._partitions(route, columns, n, tasks)
        src = route.source
        if msg_ids is not None:
            if isinstance(msg_ids, np.ndarray):
                ids = msg_ids.tolist()
            elif isinstance(msg_ids, (list, tuple, range)):
                ids = msg_ids  # copied where it is kept (the pending table, auto_acked)
            else:
                ids = list(msg_ids)
            if len(ids) != n:
                raise EmitError(
                    f"component {self._component_id!r}: emit_batch got {len(ids)} message ids "
                    f"for {n} rows; pass one message id per row (or msg_ids=None)"
                )
        if msg_ids is None or not self._acking:
            for task, rows in parts:
                self._put(task, _sub(src, columns, n, rows, None, None))
            if msg_ids is not None:
                self._auto_acked.extend(ids)
                if self._trace is not None:
                    for m in ids:
                        self._trace_record("ack", m, self._trace_record("emit", m, None))
            return n
        roots = self._roots(n)
        init = np.zeros(n, np.uint64)
        for task, rows in parts:
            m = n if rows is None else rows.shape[0]
            edges = self._draw(m)
            batch_spout_init(init, rows, edges)
            if rows is None:
                self._put(task, TupleBatch(src, columns, roots, edges, None, n=n))
            else:
                self._put(task, _sub(src, columns, n, rows, roots[rows], edges))
        self._pending.add(roots, ids)
        self._ops.add_inits(roots, init, self._task, self._now_ns())
        if self._trace is not None:
            for m, r in zip(ids, roots.tolist(), strict=True):
                self._trace_record("emit", m, r)
        return n

    def send_rows(
        self,
        route: Any,
        rows: list[Sequence[Any]],
        targets: list[tuple[int, ...]] | None,
        msg_ids: Sequence[Any],
        some_untracked: bool,
        emitted_ns: int,
    ) -> None:
        """The rows a spout task emitted one by one (``_collector.SpoutCollector``), with
        their targets (None: every row to ``route.fixed``) and message ids (None for an
        untracked row; ``some_untracked`` says whether there may be one), as one
        ``TupleBatch`` per target task: every tracked row its own tree (rule 1 on arrays),
        INITs as arrays, their emit time ``emitted_ns``."""
        n = len(rows)
        route.emitted += n
        src = route.source
        parts = (
            [(t, None) for t in route.fixed]
            if targets is None
            else partition(targets, route.one_each)
        )
        tracked = None
        if some_untracked:
            tracked = np.array([m is not None for m in msg_ids], bool)
            if tracked.all():
                tracked = None
            elif not tracked.any():
                msg_ids = []
        if not self._acking or not msg_ids:
            for task, idx in parts:
                sub = rows if idx is None else _pick(rows, idx)
                self._put(task, TupleBatch.from_rows(src, sub))
            if msg_ids and not self._acking:
                self._auto_acked.extend(m for m in msg_ids if m is not None)
            return
        roots = self._roots(n)
        init = np.zeros(n, np.uint64)
        for task, idx in parts:
            edges = self._draw(n if idx is None else idx.shape[0])
            batch_spout_init(init, idx, edges)
            sub = rows if idx is None else _pick(rows, idx)
            r = roots if idx is None else roots[idx]
            if tracked is None:
                self._put(task, TupleBatch.from_rows(src, sub, r, edges))
                continue
            # untracked rows among tracked ones: no root for them (CSR)
            mask = tracked if idx is None else tracked[idx]
            offsets = np.zeros(mask.shape[0] + 1, np.int64)
            np.cumsum(mask, out=offsets[1:])
            self._put(task, TupleBatch.from_rows(src, sub, r[mask], edges[mask], offsets))
        if tracked is None:
            self._pending.add(roots, msg_ids)
            self._ops.add_inits(roots, init, self._task, emitted_ns)
        else:
            ids = [m for m in msg_ids if m is not None]
            self._pending.add(roots[tracked], ids)
            self._ops.add_inits(roots[tracked], init[tracked], self._task, emitted_ns)

    def _trace_record(self, kind: str, msg_id: Any, root: Any) -> Any:
        return self._trace.record(
            self._now_ns() / 1e9, kind, self._component_id, self._task, msg_id, root
        )


class BatchCollector(_BatchEmits):
    """A batch bolt task's collector: emits anchored by row index; acks and fails rows.

    For a ``BasicBatchBolt`` the batch being executed is the anchor of every emit and the
    subject of ``fail(rows)``; a ``BatchBolt`` names the batch: ``ack(batch, rows)``.
    """

    def __init__(self, *args: Any, notify: Callable[[], None]) -> None:
        super().__init__(*args)
        self._notify = notify
        self._input: TupleBatch | None = None
        self.in_batch = False
        self.acked = 0
        self.failed = 0
        #: execute start -> ack, per row (a batch's rows share their start)
        self.process_latency = LatencyRecorder()

    @property
    def input(self) -> TupleBatch | None:
        """The batch being executed: the default anchor of emits and subject of acks and
        fails. A synchronous call's is set by the executor; an async call's is its own
        (``bind_call``), even while other calls of the task are in flight."""
        batch = self._input
        return _CALL_INPUT.get() if batch is None else batch

    @input.setter
    def input(self, batch: TupleBatch | None) -> None:
        self._input = batch

    def bind_call(self, batch: TupleBatch) -> None:
        """Make ``batch`` the input of the async call running in the current asyncio task
        (and of the tasks it starts)."""
        _CALL_INPUT.set(batch)

    # --- emits --------------------------------------------------------------------------
    def emit_batch(
        self,
        data: Any,
        anchors: Any = None,
        stream: str = DEFAULT,
        tasks: Any = None,
        anchor_batch: TupleBatch | None = None,
        anchor_groups: Sequence[Sequence[int]] | None = None,
    ) -> int:
        """Emit the rows of ``data`` (columns, a mapping field -> column, or Arrow data);
        row ``j`` is anchored to input row ``anchors[j]`` (default: row ``j``, when the
        output has as many rows as the input), or to every input row in
        ``anchor_groups[j]`` (an aggregate of several rows). On a direct stream, ``tasks``
        gives each row's task. Returns the number of rows emitted."""
        route = self._route(stream)
        columns, n = self._columns(route, data)
        batch = anchor_batch if anchor_batch is not None else self.input
        if anchor_groups is not None:
            if anchors is not None or tasks is not None:
                raise EmitError(
                    f"component {self._component_id!r}: emit_batch takes anchor_groups without "
                    f"anchors or tasks"
                )
            self._send_groups(route, columns, n, batch, anchor_groups)
            return n
        if batch is None:
            anchor = None
        elif anchors is None:
            if n != batch.n:
                raise EmitError(
                    f"component {self._component_id!r}: emit_batch of {n} rows from an input "
                    f"of {batch.n} needs anchors= (the input row of each output row), or use "
                    f"emit_flat"
                )
            anchor = None if n == 0 else np.arange(n, dtype=np.int64)
        else:
            anchor = np.asarray(anchors, np.int64)
            if anchor.shape != (n,):
                raise EmitError(
                    f"component {self._component_id!r}: anchors has {anchor.shape[0] if anchor.ndim else 1} "
                    f"entries for {n} output rows; give one input row per output row"
                )
            if n and (anchor.min() < 0 or anchor.max() >= batch.n):
                raise EmitError(
                    f"component {self._component_id!r}: anchors must be input row indexes in "
                    f"[0, {batch.n}), got {int(anchor.min())}..{int(anchor.max())}"
                )
        self._send(route, columns, n, batch, anchor, tasks)
        return n

    def emit_flat(self, per_row: Sequence[Sequence[Any]], stream: str = DEFAULT) -> int:
        """Flat-map shaped emit: ``per_row[i]`` lists the output rows anchored to input row
        ``i``. On a one-field stream each output row is the value itself; otherwise a
        sequence of the field values."""
        batch = self.input
        if batch is None:
            raise EmitError(f"component {self._component_id!r}: emit_flat outside execute_batch")
        if len(per_row) != batch.n:
            raise EmitError(
                f"component {self._component_id!r}: emit_flat got {len(per_row)} lists for "
                f"{batch.n} input rows; give one list (maybe empty) per input row"
            )
        route = self._route(stream)
        counts = list(map(len, per_row))
        flat = list(chain.from_iterable(per_row))
        width = len(route.source.fields)
        if width == 1:
            columns = [flat]
        else:
            try:
                columns = [list(c) for c in zip(*flat, strict=True)] or [[] for _ in range(width)]
            except (TypeError, ValueError):  # rows of unequal lengths, or not sequences
                columns = []
            if len(columns) != width:
                raise self._arity(route, flat, width)
        n = len(flat)
        self._send(route, columns, n, batch, anchor_rows(counts), None)
        return n

    def _arity(self, route: Any, flat: list[Any], width: int) -> EmitError:
        bad = next((r for r in flat if not hasattr(r, "__len__") or len(r) != width), flat[0])
        shown = list(bad) if hasattr(bad, "__len__") else bad
        return EmitError(
            f"component {self._component_id!r}: emit_flat emitted {shown!r} on stream "
            f"{route.source.stream!r}, which declares {width} fields "
            f"{list(route.source.fields)}; give each output row one value per field"
        )

    def _send(
        self,
        route: Any,
        columns: list[Any],
        n: int,
        batch: TupleBatch | None,
        anchor: np.ndarray | None,
        tasks: Any,
    ) -> None:
        if n == 0:
            return
        route.emitted += n
        parts = self._partitions(route, columns, n, tasks)
        src = route.source
        if batch is None or batch.roots is None or anchor is None:
            for task, rows in parts:
                self._put(task, _sub(src, columns, n, rows, None, None))
            return
        state = batch._state
        if state is not None and state[anchor].any():
            raise TupleStateError(
                f"component {self._component_id!r} emitted on stream {src.stream!r} anchored "
                f"to a row that was already acked or failed; emit a row's children before "
                f"you ack or fail it (Storm would silently time the tree out)"
            )
        for task, rows in parts:
            a = anchor if rows is None else anchor[rows]
            roots, edges, offsets = self._children(batch, a)
            cols = columns if rows is None else [take_column(c, rows) for c in columns]
            self._put(task, TupleBatch(src, cols, roots, edges, offsets, n=a.shape[0]))

    def _send_groups(
        self,
        route: Any,
        columns: list[Any],
        n: int,
        batch: TupleBatch | None,
        groups: Sequence[Sequence[int]],
    ) -> None:
        if len(groups) != n:
            raise EmitError(
                f"component {self._component_id!r}: anchor_groups has {len(groups)} entries for "
                f"{n} output rows; give the input rows of each output row"
            )
        if n == 0:
            return
        if batch is None or batch.roots is None:
            self._send(route, columns, n, batch, None, None)
            return
        counts = np.fromiter(map(len, groups), np.int64, n)
        flat = np.fromiter(chain.from_iterable(groups), np.int64, int(counts.sum()))
        if counts.min() < 1 or flat.min() < 0 or flat.max() >= batch.n:
            raise EmitError(
                f"component {self._component_id!r}: anchor_groups must give each output row "
                f"one or more input row indexes in [0, {batch.n})"
            )
        state = batch._state
        if state is not None and state[flat].any():
            raise TupleStateError(
                f"component {self._component_id!r} emitted on stream {route.source.stream!r} "
                f"anchored to a row that was already acked or failed; emit a row's children "
                f"before you ack or fail it"
            )
        route.emitted += n
        owner = np.repeat(np.arange(n, dtype=np.int64), counts)
        src = route.source
        for task, rows in self._partitions(route, columns, n, None):
            if rows is None:
                o, a, m, cols = owner, flat, n, columns
            else:
                at = np.full(n, -1, np.int64)
                at[rows] = np.arange(rows.shape[0])
                mine = at[owner] >= 0
                o, a, m = at[owner[mine]], flat[mine], int(rows.shape[0])
                cols = [take_column(c, rows) for c in columns]
            roots, edges, offsets = batch_group_anchor(batch, o, a, self._draw(a.shape[0]), m)
            self._put(task, TupleBatch(src, cols, roots, edges, offsets, n=m))

    # --- acks and fails ------------------------------------------------------------------
    def ack(self, batch: TupleBatch | None = None, rows: Any = None) -> None:
        """Ack ``rows`` (indexes or a boolean mask; default every row) of ``batch``."""
        batch, idx = self._rows(batch, rows, "ack")
        self._mark(batch, idx, _ACKED, "ack", every=rows is None)
        if batch.roots is not None and idx.shape[0]:
            self._ops.add_acks(*batch_ack_ops(batch, idx))
        k = int(idx.shape[0])
        self.acked += k
        if batch._started_ns and k:
            self.process_latency.add_mean(time.perf_counter_ns() - batch._started_ns, k)
        if not self.in_batch:
            self._notify()

    def ack_pending(self, batch: TupleBatch) -> None:
        """Ack every row of ``batch`` not acked or failed yet: a basic batch bolt's rows
        when its call returns (``ack`` without the checks its arguments need)."""
        state = batch._state
        idx: np.ndarray | None
        if state is None:  # every row (the common case): no index array
            idx, k = None, batch.n
            batch._state = np.full(k, _ACKED, np.uint8)
        else:
            idx = np.flatnonzero(state == _PENDING)
            state[idx] = _ACKED
            k = int(idx.shape[0])
        if not k:
            return
        if batch.roots is not None:
            self._ops.add_acks(*batch_ack_ops(batch, idx))
        self.acked += k
        if batch._started_ns:
            self.process_latency.add_mean(time.perf_counter_ns() - batch._started_ns, k)
        if not self.in_batch:
            self._notify()

    def fail(self, batch: Any = None, rows: Any = None) -> None:
        """Fail ``rows`` of ``batch`` (default every row): their trees fail at once.
        In a ``BasicBatchBolt``, ``fail(rows)`` names rows of the batch being executed."""
        if batch is not None and not isinstance(batch, TupleBatch):
            batch, rows = None, batch  # basic form: fail(rows)
        batch, idx = self._rows(batch, rows, "fail")
        self._mark(batch, idx, _FAILED, "fail", every=rows is None)
        if batch.roots is not None and idx.shape[0]:
            self._ops.add_fails(batch_roots(batch, idx))
        self.failed += int(idx.shape[0])
        if not self.in_batch:
            self._notify()

    def reset_timeout(self, batch: TupleBatch | None = None, rows: Any = None) -> None:
        """Push back the timeout of the trees of ``rows`` of ``batch``."""
        batch, idx = self._rows(batch, rows, "reset_timeout")
        if batch.roots is not None and idx.shape[0]:
            self._ops.add_resets(batch_roots(batch, idx))
        if not self.in_batch:
            self._notify()

    def pending_rows(self, batch: TupleBatch) -> np.ndarray:
        """Rows of ``batch`` neither acked nor failed yet."""
        if batch._state is None:
            return np.arange(batch.n, dtype=np.int64)
        return np.flatnonzero(batch._state == _PENDING)

    def _rows(
        self, batch: TupleBatch | None, rows: Any, what: str
    ) -> tuple[TupleBatch, np.ndarray]:
        if batch is None:
            batch = self.input
            if batch is None:
                raise TupleStateError(
                    f"component {self._component_id!r}: {what} needs the batch outside "
                    f"execute_batch: {what}(batch, rows)"
                )
        if rows is None:
            return batch, np.arange(batch.n, dtype=np.int64)
        idx = np.asarray(rows)
        if idx.dtype == bool:
            if idx.shape != (batch.n,):
                raise ValueError(
                    f"component {self._component_id!r}: {what} mask has {idx.shape[0]} entries for {batch.n} rows"
                )
            return batch, np.flatnonzero(idx)
        idx = idx.astype(np.int64, copy=False).reshape(-1)
        if idx.shape[0] and (idx.min() < 0 or idx.max() >= batch.n):
            raise ValueError(
                f"component {self._component_id!r}: {what} rows must be in [0, {batch.n}), "
                f"got {int(idx.min())}..{int(idx.max())}"
            )
        return batch, idx

    def _mark(self, batch: TupleBatch, idx: np.ndarray, to: int, what: str, every: bool) -> None:
        """``every``: ``idx`` is every row (no ``rows`` given), so it names none twice."""
        state = batch._state
        k = idx.shape[0]
        if state is None:
            state = batch._state = np.zeros(batch.n, np.uint8)
            if every:
                # every row of a fresh batch: nothing to check (rows such as [0, 0, 2] have
                # the length and the ends of every row, so given rows are always counted)
                state.fill(to)
                return
            before = 0
        else:
            before = int(np.count_nonzero(state))
            if state[idx].any():
                raise self._twice(batch, what)
        state[idx] = to
        if int(np.count_nonzero(state)) - before != k:  # a row named twice in ``rows``
            state[idx] = _PENDING
            raise self._twice(batch, what)

    def _twice(self, batch: TupleBatch, what: str) -> TupleStateError:
        return TupleStateError(
            f"component {self._component_id!r} called {what} on rows of a batch from "
            f"{batch.source_component!r} that were already acked or failed; every row is "
            f"acked or failed exactly once"
        )

    def report_error(self, error: BaseException | str) -> None:  # replaced by the executor
        """Record ``error`` in the topology's error log (counted, kept and grouped per
        task, as the UI shows them) without failing any row: Storm's ``reportError``, for
        trouble a bolt handled itself.

        The executor sets each task's reporter on the instance when it builds the
        collector, so a collector made outside an executor has none and raises.
        """
        raise NotImplementedError


def _sub(
    src: Any,
    columns: list[Any],
    n: int,
    rows: np.ndarray | None,
    roots: np.ndarray | None,
    edges: np.ndarray | None,
) -> TupleBatch:
    if rows is None:
        return TupleBatch(src, columns, roots, edges, None, n=n)
    return TupleBatch(
        src, [take_column(c, rows) for c in columns], roots, edges, None, n=int(rows.shape[0])
    )


def partition(
    targets: list[tuple[int, ...]], one_each: bool
) -> list[tuple[int, np.ndarray | None]]:
    """``[(task, rows)]`` for rows that went to ``targets[j]`` each (``rows`` an int64 index
    array in emit order, None for every row): how per-tuple emits become batches.
    ``one_each``: every ``targets[j]`` names one task (``Route.one_each``)."""
    n = len(targets)
    if one_each:  # the common case
        flat = list(chain.from_iterable(targets))
        first = flat[0]
        if flat.count(first) == n:
            return [(first, None)]
        tasks = np.array(flat, np.int64)
        order = np.argsort(tasks, kind="stable")
        uniq, starts = np.unique(tasks[order], return_index=True)
        bounds = [*starts.tolist(), n]
        return [(t, order[bounds[k] : bounds[k + 1]]) for k, t in enumerate(uniq.tolist())]
    rows_of: dict[int, list[int]] = {}
    for j, ts in enumerate(targets):
        for t in ts:
            rows_of.setdefault(t, []).append(j)
    return [(t, np.array(rows, np.int64)) for t, rows in sorted(rows_of.items())]


def _pick(rows: list[Any], idx: np.ndarray) -> list[Any]:
    get = rows.__getitem__
    return [get(i) for i in idx.tolist()]
