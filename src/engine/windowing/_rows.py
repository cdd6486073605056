"""Where a window's tuples live: *segments* of rows, addressed by integer row ids.

Every input a window takes becomes a segment whose rows get consecutive ids in arrival
order: a ``TupleBatch`` is one segment as it came (its columns and its tree bookkeeping
arrays, untouched), and per-tuple input (``Tuple`` objects, or any events for a bare
``WindowManager``) is appended to an open list segment. The ``WindowManager`` orders and
evicts row *ids* (numpy arrays); what leaves it and what a window holds are ``Rows``: runs
of consecutive rows of segments. So a window over batches costs no Python per row:

- ``Rows.column(field)`` slices the batches' own columns (lists, numpy or Arrow);
- the executor acks the rows of a batch segment with one array operation when they leave;
- ``Tuple`` views of a batch's rows are made only when user code asks for tuples
  (``Rows.items()``), once per segment; from then on the views carry the rows' ack values
  (a bolt may anchor emits to them), and the segment is acked tuple by tuple. Rows acked
  or failed by the arrays before that (``Segment.completed``) get views that are done.

A segment is dropped once every row it gave the window was released (acked, failed or
handed back by ``WindowManager.take_evicted``) and it is no longer the open list.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._columnar.batch import TupleBatch, column_as_list

__all__ = ["RowTable", "Rows", "Segment"]

#: Rows appended to one list segment before a new one opens (so old ones can be freed).
LIST_SEGMENT_ROWS = 4096

#: Dropped segments at the front of the table before the lists are compacted.
_COMPACT_AFTER = 64


class Segment:
    """Consecutive rows from ``base`` on: a ``TupleBatch`` (``batch``), or a list of items
    (``items``: ``Tuple`` objects or events). A batch segment gets ``items`` (its ``Tuple``
    views) the first time they are asked for."""

    __slots__ = ("_columns", "base", "batch", "completed", "end", "items", "live")

    def __init__(self, base: int, batch: TupleBatch | None, items: list[Any] | None) -> None:
        self.base = base
        self.batch = batch
        self.items = items
        #: the id after its last row (a list segment's grows as items are appended)
        if batch is not None:
            n = batch.n
        else:
            assert items is not None  # a segment holds a batch or a list
            n = len(items)
        self.end = base + n
        #: rows that entered the window and were not released yet
        self.live = 0
        #: a batch's rows acked or failed by the arrays, before any view was made (made on
        #: the first); their views, made later, are done
        self.completed: np.ndarray | None = None
        #: field -> the rows' values (a batch's columns; for a list segment, the items'
        #: values so far, built on first use and extended)
        self._columns: dict[str | int, list[Any]] | None = None

    def __len__(self) -> int:
        return self.end - self.base

    @property
    def viewed(self) -> bool:
        """True when the rows are ``Tuple`` objects (list segments, or a batch whose views
        were made): acks and anchors then go through them."""
        return self.items is not None

    def tuples(self) -> list[Any]:
        """Every row as an item: a batch's ``Tuple`` views are made (once) with the ack
        values its rows have so far."""
        items = self.items
        if items is None:
            batch = self.batch
            assert batch is not None
            items = self.items = batch.tuples()
            if batch.ack_vals is not None and batch.roots is not None:
                for t, v in zip(items, batch.ack_vals.tolist(), strict=True):
                    t._ack_val = v
            # (``getattr``: a segment pickled before this slot existed, in a Spark
            # runner's state, has none)
            completed = getattr(self, "completed", None)
            if completed is not None:
                # Rows that left the window before the bolt asked for tuples (it reads
                # ``get_expired()`` one firing later): a view of one is as done as a
                # Tuple acked when it left, so acking it again is refused, not sent twice.
                for i in np.flatnonzero(completed).tolist():
                    items[i]._ack_val = None
        return items

    def complete(self, rows: np.ndarray | slice) -> None:
        """``rows`` (indexes into the batch, or a slice of it; no view made) were acked or
        failed."""
        completed = getattr(self, "completed", None)
        if completed is None:
            assert self.batch is not None
            completed = self.completed = np.zeros(self.batch.n, bool)
        completed[rows] = True

    def column(self, field: str | int) -> Any:
        """All the rows' values of ``field`` (a name or an index), as one column."""
        cols = self._columns
        batch = self.batch
        if batch is not None:
            # (a batch's columns do not change: each is looked up once, as a window fires
            # every few rows and reads its columns each time)
            if cols is not None:
                col = cols.get(field)
                if col is not None:
                    return col
            else:
                cols = self._columns = {}
            if type(field) is int:
                col = cols[field] = batch.columns[field]
                return col
            try:
                col = cols[field] = batch.column(field)
            except ValueError:  # ``Fields.index``
                raise _no_field(field, batch.source, batch.source.fields) from None
            return col
        items = self.items
        assert items is not None
        if cols is None:
            cols = self._columns = {}
        col = cols.get(field)
        if col is None:
            col = cols[field] = []
        if len(col) < len(items):  # a list segment grows: extend what was read before
            try:
                col.extend([t[field] for t in items[len(col) :]])
            except ValueError:  # ``Fields.index``: a tuple of a stream without that field
                for t in items:
                    if isinstance(field, str) and hasattr(t, "fields") and field not in t.fields:
                        raise _no_field(field, t._src, t.fields) from None
                raise
        return col


class Rows:
    """Rows of segments, in window order: ``pieces`` are ``(segment, lo, hi)`` runs."""

    __slots__ = ("n", "pieces")

    def __init__(self, pieces: list[tuple[Segment, int, int]], n: int) -> None:
        self.pieces = pieces
        self.n = n

    def __len__(self) -> int:
        return self.n

    def items(self) -> list[Any]:
        """The rows as items (``Tuple`` views for batch rows), oldest first."""
        pieces = self.pieces
        if len(pieces) == 1:
            seg, lo, hi = pieces[0]
            return seg.tuples()[lo:hi]
        out: list[Any] = []
        for seg, lo, hi in pieces:
            out += seg.tuples()[lo:hi]
        return out

    def column(self, field: str | int, skip: int = 0) -> Any:
        """The rows' values of ``field`` (from position ``skip`` on): a numpy array when
        every piece comes from numpy columns, else a list."""
        pieces = self.pieces
        if skip and len(pieces) > 1:
            pieces = self.tail(skip).pieces
            skip = 0
        if len(pieces) == 1:
            seg, lo, hi = pieces[0]
            if skip:
                lo = lo + skip if lo + skip < hi else hi
            col = seg.column(field)
            if type(col) is list or isinstance(col, np.ndarray):
                return col[lo:hi]
            return column_as_list(_slice(col, lo, hi))
        out: list[Any] = []
        for seg, lo, hi in pieces:  # list columns (the common case): one pass
            col = seg.column(field)
            if type(col) is not list:
                break
            out += col[lo:hi]
        else:
            return out
        parts = [_slice(seg.column(field), lo, hi) for seg, lo, hi in pieces]
        if parts and all(isinstance(p, np.ndarray) for p in parts):
            return np.concatenate(parts)
        out = []
        for p in parts:
            out += p if type(p) is list else column_as_list(p)
        return out

    @staticmethod
    def joined(parts: Sequence[Rows]) -> Rows:
        """``parts`` one after the other (a run that goes on where the last one ended is
        merged into it)."""
        pieces: list[tuple[Segment, int, int]] = []
        n = 0
        for part in parts:
            n += part.n
            for seg, lo, hi in part.pieces:
                if pieces and pieces[-1][0] is seg and pieces[-1][2] == lo:
                    pieces[-1] = (seg, pieces[-1][1], hi)
                else:
                    pieces.append((seg, lo, hi))
        return Rows(pieces, n)

    def head(self, k: int) -> Rows:
        """The first ``k`` rows (``k <= n``)."""
        pieces = []
        left = k
        for seg, lo, hi in self.pieces:
            if left <= hi - lo:
                pieces.append((seg, lo, lo + left))
                break
            pieces.append((seg, lo, hi))
            left -= hi - lo
        return Rows(pieces, k)

    def tail(self, k: int) -> Rows:
        """The rows from position ``k`` on."""
        if k <= 0:
            return self
        if len(self.pieces) == 1:
            seg, lo, hi = self.pieces[0]
            return Rows([(seg, min(lo + k, hi), hi)], max(0, self.n - k))
        pieces = []
        skip = k
        for seg, lo, hi in self.pieces:
            if skip >= hi - lo:
                skip -= hi - lo
                continue
            pieces.append((seg, lo + skip, hi))
            skip = 0
        return Rows(pieces, max(0, self.n - k))

    def by_segment(self) -> list[tuple[Segment, np.ndarray | None, int, int]]:
        """Per segment: the row indexes (None for one run ``lo:hi``) -- what a bulk ack
        or fail takes."""
        pieces = self.pieces
        if len(pieces) == 1 or (len(pieces) == 2 and pieces[0][0] is not pieces[1][0]):
            return [(seg, None, lo, hi) for seg, lo, hi in pieces]
        runs: dict[int, list[tuple[int, int]]] = {}
        segs: dict[int, Segment] = {}
        for seg, lo, hi in self.pieces:
            runs.setdefault(id(seg), []).append((lo, hi))
            segs[id(seg)] = seg
        out: list[tuple[Segment, np.ndarray | None, int, int]] = []
        for key, spans in runs.items():
            if len(spans) == 1:
                lo, hi = spans[0]
                out.append((segs[key], None, lo, hi))
            else:
                idx = np.concatenate([np.arange(lo, hi, dtype=np.int64) for lo, hi in spans])
                out.append((segs[key], idx, 0, 0))
        return out


_EMPTY = Rows([], 0)


class RowTable:
    """The segments of one window, by row id (see the module docstring)."""

    def __init__(self) -> None:
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._head = 0  # segments before this index were dropped
        self._next_id = 0
        self._open: Segment | None = None
        self._bases_array: np.ndarray | None = None

    def __len__(self) -> int:
        """Segments held."""
        return len(self._segments) - self._head

    # --- input ----------------------------------------------------------------------------
    def add_batch(self, batch: TupleBatch) -> Segment:
        """A batch as one segment; its rows' ids are ``segment.base + row``."""
        seg = Segment(self._next_id, batch, None)
        self._append(seg)
        self._next_id += batch.n
        self._open = None
        return seg

    def add_items(self, items: Sequence[Any]) -> tuple[Segment, int]:
        """Append items (``Tuple`` objects or events) to the open list segment; returns it
        and the id of the first item (the others follow)."""
        seg = self._open
        k = len(items)
        held = None if seg is None else seg.items
        if seg is None or held is None or len(held) + k > LIST_SEGMENT_ROWS:
            held = []
            seg = self._open = Segment(self._next_id, None, held)
            self._append(seg)
        first = self._next_id
        held.extend(items)
        seg.end += k
        self._next_id += k
        return seg, first

    def _append(self, seg: Segment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base)
        self._bases_array = None

    # --- lookup ---------------------------------------------------------------------------
    def rows(self, ids: np.ndarray, *, ascending: bool = False) -> Rows:
        """The rows of ``ids`` (in that order) as runs of segments. ``ascending``: the
        caller knows the ids increase (then ``n`` of them from ``first`` to ``first + n
        - 1`` are one run, with no check)."""
        n = int(ids.shape[0])
        if n == 0:
            return _EMPTY
        first = int(ids[0])
        last = int(ids[-1])
        if last - first == n - 1 and (ascending or n < 3 or bool(np.all(np.diff(ids) == 1))):
            return Rows(self._run(first, last + 1), n)
        return Rows(self._gather(ids), n)

    def span(self, first: int, end: int) -> Rows:
        """The rows of ids ``first`` to ``end - 1``."""
        return Rows(self._run(first, end), end - first)

    def _run(self, first: int, end: int) -> list[tuple[Segment, int, int]]:
        segs = self._segments
        i = bisect.bisect_right(self._bases, first, self._head) - 1
        pieces = []
        while first < end:
            seg = segs[i]
            base = seg.base
            stop = seg.end if seg.end < end else end
            pieces.append((seg, first - base, stop - base))
            first = stop
            i += 1
        return pieces

    def _gather(self, ids: np.ndarray) -> list[tuple[Segment, int, int]]:
        bases = self._bases_array
        if bases is None:
            bases = self._bases_array = np.array(self._bases[self._head :], np.int64)
        which = np.searchsorted(bases, ids, side="right") - 1
        breaks = np.flatnonzero((np.diff(ids) != 1) | (np.diff(which) != 0)) + 1
        starts = [0, *breaks.tolist()]
        ends = [*breaks.tolist(), int(ids.shape[0])]
        segs = self._segments
        head = self._head
        id_list = ids.tolist()
        which_list = which.tolist()
        pieces = []
        for s, e in zip(starts, ends, strict=True):
            seg = segs[head + which_list[s]]
            pieces.append((seg, id_list[s] - seg.base, id_list[e - 1] - seg.base + 1))
        return pieces

    # --- lifetime -------------------------------------------------------------------------
    def release(self, rows: Rows) -> None:
        """``rows`` left the window for good: segments with nothing left in it go."""
        for seg, lo, hi in rows.pieces:
            seg.live -= hi - lo
        segs = self._segments
        head = self._head
        while head < len(segs) and segs[head].live <= 0 and segs[head] is not self._open:
            segs[head] = None  # type: ignore[call-overload]
            head += 1
        if head != self._head:
            self._head = head
            self._bases_array = None
            if head > _COMPACT_AFTER and head * 2 > len(segs):
                del segs[:head]
                del self._bases[:head]
                self._head = 0

    def segments(self) -> list[Segment]:
        """The segments held, oldest first."""
        return self._segments[self._head :]


def _slice(col: Any, lo: int, hi: int) -> Any:
    if type(col) is list or isinstance(col, np.ndarray):
        return col[lo:hi]
    if lo == 0 and hi == len(col):
        return col
    if hasattr(col, "slice"):  # Arrow
        return col.slice(lo, hi - lo)
    return col[lo:hi]


def _no_field(field: str | int, src: Any, fields: Any) -> KeyError:
    return KeyError(
        f"window tuples from {src.component!r} on stream {src.stream!r} have no field "
        f"{field!r} (fields: {list(fields)})"
    )
