"""``WindowManager``: the window core, with no engine in it (Storm's ``WindowManager`` with
its trigger and eviction policies in one small class).

Events go in with a timestamp (integer nanoseconds: arrival time on the runtime's clock, or
event time); time goes in through ``advance(now_ns)`` (processing time) or the watermark
(event time); windows come out as ``TupleWindow`` records, and the events that left the
window since the last call come out of ``take_evicted()`` for the caller to ack. It holds
every event that may still be in a window, so a stateful wrapper can save it whole with
``snapshot()`` and carry on from there with ``restore_snapshot`` (``events()`` and
``restore`` are the events alone). The rules, which the tests check against a naive model:

- Duration slide ``S``: windows end on a grid, ``origin + k*S`` (``k >= 0``) in processing
  time and ``k*S`` in event time. In processing time, an event that arrives at the instant
  a window fired counts as arriving just after it (1 ns later). Window ``E`` holds the
  events with ``E - L < ts <= E`` (duration length ``L``) or the last ``n`` events with
  ``ts <= E`` (count length ``n``). It fires once ``now`` (or the watermark) reaches ``E``,
  unless it is empty and nothing left it since the last firing (Storm skips every empty
  window; firing once more lets a bolt retract what left). An event leaves as soon as the
  last window that can hold it was processed: at the window end ``E`` with
  ``ts <= E + S - L`` (Storm acks it one slide later, at the next trigger).
- Count slide ``s`` (processing time only): every ``s``-th event fires the window (the last
  ``n`` events, or those with ``ts > now - L``).
- Count length ``n``: an event leaves when ``n`` newer events have arrived, or, with a count
  slide ``s``, when a firing leaves it out of the newest ``n - s`` (tumbling: at once).
- Event time: an event is late when ``ts <= watermark`` (every window that could hold it may
  have fired); ``is_late`` says so and the caller routes it, it never enters.

How it is held: the events' row ids (``RowTable``) and timestamps are two numpy arrays
sorted by (timestamp, arrival). Every rule above only ever removes a prefix of that order
(what leaves is the oldest), a window is a contiguous run of it, and what is new in a window
is a suffix of the run (the events past the previous window's end, or, with a count slide,
those that arrived since it fired). So adding a batch of events, firing and evicting are a
few array operations, whatever the number of events; ``add_ids`` is that batch entry point,
``add`` the one-event form.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ._length import Count, Duration
from ._rows import Rows, RowTable
from ._window import TupleWindow

__all__ = ["WindowManager"]

_NS = 1e9

#: Initial capacity of the id and timestamp arrays (they double as needed).
_INITIAL_ROWS = 1024


class WindowManager:
    """Windows over events with timestamps; pure (no clock, no engine): easy to test and to
    drive from any wrapper.

    >>> m = WindowManager(Count(3), Count(2))
    >>> m.add("a", 1), [w.get() for w in m.add("b", 2)]
    ([], [['a', 'b']])
    >>> [w.get() for w in m.add("c", 3) + m.add("d", 4)], m.take_evicted()
    ([['b', 'c', 'd']], ['a', 'b', 'c'])

    ``b`` and ``c`` are evicted as soon as ``[b, c, d]`` fires: the next window is ``[d, e,
    f]``, so no window to come holds them and they can be acked without waiting.

    ``rows`` is where the events live (``RowTable``); the windowed executor passes its own,
    whose segments are the batches it received, and adds row ids with ``add_ids``.
    """

    def __init__(
        self,
        length: Count | Duration,
        slide: Count | Duration,
        *,
        event_time: bool = False,
        origin_ns: int = 0,
        rows: RowTable | None = None,
    ) -> None:
        if event_time and not (isinstance(length, Duration) and isinstance(slide, Duration)):
            raise ValueError("event-time windows need a Duration length and a Duration slide")
        self.length = length
        self.slide = slide
        self.event_time = event_time
        self.rows = RowTable() if rows is None else rows
        self._count_n = length.n if isinstance(length, Count) else 0
        self._count_s = slide.n if isinstance(slide, Count) else 0
        self._len_ns = length.ns if isinstance(length, Duration) else 0
        self._slide_ns = slide.ns if isinstance(slide, Duration) else 0
        self._origin = 0 if event_time else origin_ns
        #: held ids increase (arrival order is timestamp order) unless in event time, or
        #: until someone adds an event earlier than the latest
        self._ascending = not event_time
        #: held events: ``_ids[_lo:_hi]`` and ``_ts[_lo:_hi]``, sorted by (ts, id)
        self._ids = np.empty(_INITIAL_ROWS, np.int64)
        self._ts = np.empty(_INITIAL_ROWS, np.int64)
        self._lo = 0
        self._hi = 0
        self._since_fire = 0
        #: what is new in the next window: past this end (duration slides), or past this
        #: id (count slides); None before the first firing
        self._prev_end: int | None = None
        self._prev_last_id = -1
        # Resolved to rows as they leave: the caller may release (and the table drop) them
        # before the next firing reports them.
        self._expired: list[Rows] = []  # left since the last firing (reported)
        self._evicted: list[Rows] = []  # left since the last take (to ack)
        # processing time: the first window ends at the origin (it holds what arrives then)
        self._next_end: int | None = None if event_time else origin_ns
        #: the latest watermark (event time), None before the first
        self.watermark_ns: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with the held events' ids and timestamps only: the arrays grow to hold
        whatever arrived between two firings (an event-time window that fires at a tick
        after a whole batch), and their free capacity is not state (a runner that keeps
        the window in Spark state pickles it after every micro-batch)."""
        state = self.__dict__.copy()
        lo, hi = self._lo, self._hi
        state["_ids"] = self._ids[lo:hi].copy()
        state["_ts"] = self._ts[lo:hi].copy()
        state["_lo"], state["_hi"] = 0, hi - lo
        return state

    # --- contents -----------------------------------------------------------------------
    def __len__(self) -> int:
        return self._hi - self._lo

    def held(self) -> Rows:
        """Every event still held, oldest first, as rows of ``rows``."""
        return self.rows.rows(self._ids[self._lo : self._hi], ascending=self._ascending)

    def events(self) -> list[tuple[Any, int]]:
        """Every event still held, with its timestamp (ns), oldest first: what a stateful
        wrapper saves."""
        return list(zip(self.held().items(), self._ts[self._lo : self._hi].tolist(), strict=True))

    def restore(self, events: Iterable[tuple[Any, int]]) -> None:
        """Put back events saved with ``events()`` (before any new one arrives)."""
        for event, ts in events:
            seg, first = self.rows.add_items([event])
            seg.live += 1
            self._insert(np.array([first], np.int64), np.array([ts], np.int64))

    def snapshot(self) -> tuple[Rows, dict[str, Any]]:
        """Everything needed to carry on exactly from here, for a checkpoint: the rows the
        manager still needs (those that left since the last firing, which the next window
        reports as expired, then those held) and its bookkeeping as plain values (what
        fired already, the watermark, the held events' timestamps, ...), in which a row is
        named by its rank in arrival order among those rows. The caller saves the rows'
        contents, in that order, and gives both to ``restore_snapshot``. Take what left
        first (``take_evicted``)."""
        assert not self._evicted, "take_evicted before snapshot"
        held = self._ids[self._lo : self._hi]
        parts = [_row_ids(r) for r in self._expired]
        ids = np.concatenate([*parts, held]) if parts else held
        order = np.argsort(ids, kind="stable")
        saved = ids[order]  # arrival order: ranks keep every comparison of ids true
        book = {
            "order": order,
            "held": np.searchsorted(saved, held),
            "ts": self._ts[self._lo : self._hi].copy(),
            "expired": [np.searchsorted(saved, p) for p in parts],
            # a count slide tells new events by id: the last one fired, as a rank
            "prev_last": int(np.searchsorted(saved, self._prev_last_id, "right")) - 1,
            "ascending": self._ascending,
            "since_fire": self._since_fire,
            "prev_end": self._prev_end,
            "next_end": self._next_end,
            "origin": self._origin,
            "watermark": self.watermark_ns,
        }
        # (what left is read from its rows: the table may have dropped their segments)
        return Rows.joined([*self._expired, self.held()]), book

    def restore_snapshot(self, items: list[Any], book: dict[str, Any], shift_ns: int = 0) -> None:
        """Carry on from a ``snapshot``: ``items`` are its rows' contents, in their order. Call it
        on a new manager, before any event. ``shift_ns`` moves every processing time on (the
        time that passed since the snapshot: a clock that restarted with the process), so
        the held events keep their age and the next window its distance; event time is
        the events' own and is never moved."""
        if self.event_time:
            shift_ns = 0
        order = book["order"].tolist()
        seg, first = self.rows.add_items([items[i] for i in order] if order else [])
        held = book["held"] + first
        n = int(held.shape[0])
        seg.live += n
        cap = max(_INITIAL_ROWS, 2 * n)
        self._ids = np.empty(cap, np.int64)
        self._ts = np.empty(cap, np.int64)
        self._ids[:n] = held
        self._ts[:n] = book["ts"] + shift_ns
        self._lo, self._hi = 0, n
        self._expired = [self.rows.rows(p + first) for p in book["expired"] if p.shape[0]]
        self._evicted = []
        self._prev_last_id = first + book["prev_last"]
        self._ascending = book["ascending"]
        self._since_fire = book["since_fire"]
        self.watermark_ns = book["watermark"]
        prev_end, next_end = book["prev_end"], book["next_end"]
        self._prev_end = None if prev_end is None else prev_end + shift_ns
        self._next_end = None if next_end is None else next_end + shift_ns
        self._origin = book["origin"] + shift_ns

    def take_evicted(self) -> list[Any]:
        """The events that left every window since the last call: ack them now."""
        gone = self.take_evicted_rows()
        out = gone.items()
        self.rows.release(gone)
        return out

    @property
    def has_evicted(self) -> bool:
        """Events left since the last ``take_evicted``."""
        return bool(self._evicted)

    @property
    def needs_time(self) -> bool:
        """Whether time alone (``advance``) may still fire a window or evict an event:
        events are held, or, with a duration slide, some left since the last firing (the
        next window fires to report them, even empty). A runner that moves time only on
        demand (a Spark timer) moves it while this holds."""
        return self._hi > self._lo or (bool(self._expired) and not self._count_s)

    def take_evicted_rows(self) -> Rows:
        """``take_evicted`` as rows; the caller acks them, then ``rows.release``-s them."""
        return _take(self._evicted)

    def is_late(self, ts_ns: int) -> bool:
        """Whether an event at ``ts_ns`` is behind the watermark: its windows have fired,
        so it can join none and goes to the late stream instead of being lost."""
        return self.watermark_ns is not None and ts_ns <= self.watermark_ns

    def late_rows(self, ts_ns: np.ndarray) -> np.ndarray:
        """``is_late`` for an array of timestamps (a boolean mask)."""
        if self.watermark_ns is None:
            return np.zeros(ts_ns.shape[0], bool)
        return ts_ns <= self.watermark_ns

    # --- input --------------------------------------------------------------------------
    def add(self, event: Any, ts_ns: int) -> list[TupleWindow]:
        """Add an event (not late: check ``is_late`` first); returns the windows it fires."""
        seg, first = self.rows.add_items([event])
        seg.live += 1
        return self.add_ids(range(first, first + 1), ts_ns)

    def add_ids(self, ids: Ids, ts_ns: np.ndarray | int) -> list[TupleWindow]:
        """Add events by row id (int64, in arrival order: an array, or a ``range`` of
        consecutive ids) with their timestamps (an array, or one int: they all arrived
        then), as if ``add``-ed one by one (none late); returns the windows they fire,
        oldest first."""
        n = len(ids)
        if n == 0:
            return []
        if self._slide_ns and not self.event_time:
            # Processing time: what arrives at the instant a window fired comes after it.
            next_end = self._next_end
            assert next_end is not None  # (in processing time, from the start)
            done = next_end - self._slide_ns
            if isinstance(ts_ns, np.ndarray):
                ts_ns = np.maximum(ts_ns, done + 1)
            elif ts_ns <= done:
                ts_ns = done + 1
        if not self._count_s:
            self._insert(ids, ts_ns)
            if self._count_n:
                self._evict_over_count()
            return []
        return self._add_counting(ids, ts_ns)

    def _add_counting(self, ids: Ids, ts_ns: np.ndarray | int) -> list[TupleWindow]:
        """``add_ids`` under a count slide ``s`` (processing time: arrival order is
        timestamp order), every firing of the batch at once. Positions are indexes into
        the held arrays. The ``j``-th firing comes with row ``q[j]`` (every ``s``-th row);
        its window is ``[a[j], q[j]]``, where ``a[j]`` is the first row that has not left:
        with a count length ``n``, ``q[j] + 1 - n`` (what overflowed on insert, or what
        the previous firing's "keep the newest n - s" let go: the same row), with a
        duration length ``L``, the first row later than ``ts[q[j]] - L``. What left
        between two firings is ``[a[j - 1], a[j])``; everything that left in the batch is
        one run from the old ``lo`` on."""
        s = self._count_s
        n_len = self._count_n
        k = len(ids)
        self._insert(ids, ts_ns)
        lo, hi = self._lo, self._hi - k  # (inserting may have moved the held rows)
        end = hi + k
        first_q = hi + s - self._since_fire - 1
        fires = 0 if first_q >= end else (end - 1 - first_q) // s + 1
        self._since_fire = (self._since_fire + k) % s
        out: list[TupleWindow] = []
        head = new_lo = lo
        window = _NO_ROWS
        if fires:
            q = list(range(first_q, first_q + s * fires, s))
            if n_len:
                starts = [lo if p + 1 - n_len < lo else p + 1 - n_len for p in q]
            else:
                limits = np.array(_at(self._ts, q), np.int64) - self._len_ns
                found = np.searchsorted(self._ts[lo:end], limits, "right") + lo
                starts = found.tolist()
            out, window = self._counted_windows(q, starts, lo)
            head = new_lo = starts[-1]
            self._prev_last_id = int(self._ids[q[-1]])
            if n_len:
                new_lo = max(new_lo, q[-1] + 1 - (n_len - s))  # keep the newest n - s
        if n_len:
            new_lo = max(new_lo, end - n_len)  # rows after the last firing overflow
        if new_lo > lo:
            self._evicted.append(self._span(lo, new_lo))
            if new_lo > head:
                left = new_lo - head
                self._expired.append(
                    window.head(left) if left <= window.n else self._span(head, new_lo)
                )
            self._lo = new_lo
        return out

    def _counted_windows(
        self, q: list[int], starts: list[int], lo: int
    ) -> tuple[list[TupleWindow], Rows]:
        """The windows ``[starts[j], q[j]]`` of ``_add_counting``, each reporting what left
        since the one before (the first: since ``lo``, and what left before this batch);
        and the last window's rows."""
        ids, rows = self._ids, self.rows
        # ids and timestamps at the ends of each window, read once for the whole batch:
        # when the held ids run without a gap (processing time, no restore), the ids are
        # arithmetic, and the timestamps one gather
        f = len(q)
        first_id = int(ids[lo])
        last = q[-1]
        if f > 2 and self._ascending and int(ids[last]) - first_id == last - lo:
            base = first_id - lo
            a_ids = [base + a for a in starts]
            q_ids = [base + p for p in q]
            stamps = self._ts[starts + q].tolist()
            a_ts, q_ts = stamps[:f], stamps[f:]
        else:
            a_ids = _at(ids, starts)
            q_ids = _at(ids, q)
            a_ts = _at(self._ts, starts)
            q_ts = _at(self._ts, q)
        out: list[TupleWindow] = []
        expired = self._expired
        span = rows.span
        of_rows = TupleWindow.of_rows
        head = lo
        prev_q = -1
        window = _NO_ROWS
        for j, a in enumerate(starts):
            b = q[j] + 1
            gone = _NO_ROWS
            if head < a:
                # what left since the previous window: its first rows, if they are all
                left = a - head
                gone = window.head(left) if left <= window.n else self._span(head, a)
            if expired:  # what left before (the first window of the batch)
                expired.append(gone)
                gone = _take(expired)
            first = a_ids[j]
            contiguous = q_ids[j] - first == b - 1 - a
            if contiguous:  # no gap: one id range
                window = span(first, q_ids[j] + 1)
            else:
                window = rows.rows(ids[a:b], ascending=True)
            if j:
                new_from = prev_q + 1 - a if prev_q + 1 > a else 0
            elif contiguous:
                new_from = min(max(0, self._prev_last_id + 1 - first), b - a)
            else:
                new_from = int(np.searchsorted(ids[a:b], self._prev_last_id, "right"))
            out.append(of_rows(window, new_from, gone, a_ts[j] / _NS, q_ts[j] / _NS))
            head = a
            prev_q = b - 1
        return out, window

    def _span(self, a: int, b: int) -> Rows:
        """The rows held at positions ``[a, b)`` (ids increasing)."""
        ids = self._ids
        first = int(ids[a])
        if int(ids[b - 1]) - first == b - 1 - a:
            return self.rows.span(first, first + b - a)
        return self.rows.rows(ids[a:b], ascending=True)

    def advance(self, now_ns: int) -> list[TupleWindow]:
        """Time moved to ``now_ns`` (the clock, or the watermark in event time): fire every
        window that ended, evict what left. Returns the windows fired, oldest first."""
        if self.event_time:
            if self.watermark_ns is not None and now_ns <= self.watermark_ns:
                return []
            self.watermark_ns = now_ns
        if self._count_s:
            if self._len_ns:
                self._evict_upto(now_ns - self._len_ns)
            return []
        out: list[TupleWindow] = []
        step = self._slide_ns
        ts = self._ts
        while self._hi > self._lo or self._expired:
            end = self._next_end
            if self.event_time and self._hi > self._lo:
                # Windows before the oldest event's first window hold nothing: jump there
                # (once what left was reported).
                first = -(-int(ts[self._lo]) // step) * step  # align up
                if end is None or (end < first and not self._expired):
                    end = first
            assert end is not None
            if end > now_ns:
                break
            if self._len_ns:
                self._evict_upto(end - self._len_ns)
            upto = self._lo + int(np.searchsorted(ts[self._lo : self._hi], end, "right"))
            window = self._fire(upto, end)
            if window is not None:
                out.append(window)
            self._next_end = end + step
            if self._len_ns:
                # what the next window cannot hold left with this one
                self._evict_upto(end + step - self._len_ns)
        if not self.event_time and self._hi == self._lo:
            # Nothing held: the windows up to now are empty; the next ends after now.
            end = self._next_end
            if end is not None and end <= now_ns:
                self._next_end = self._origin + ((now_ns - self._origin) // step + 1) * step
        return out

    # --- internals ----------------------------------------------------------------------
    def _insert(self, ids: Ids, ts_ns: np.ndarray | int) -> None:
        k = len(ids)
        if self._hi + k > self._ids.shape[0]:
            self._reserve(k)
        lo, hi = self._lo, self._hi
        all_ids, all_ts = self._ids, self._ts
        if isinstance(ts_ns, int):
            earliest = ts_ns
            ordered = True
        else:
            earliest = int(ts_ns[0])
            ordered = k == 1 or bool(np.all(ts_ns[1:] >= ts_ns[:-1]))
        if ordered and (hi == lo or earliest >= all_ts[hi - 1]):
            if k == 1:  # (one element: no array made or sliced)
                all_ids[hi] = ids[0]
                all_ts[hi] = earliest
            else:
                all_ids[hi : hi + k] = _id_array(ids)
                all_ts[hi : hi + k] = ts_ns
        else:
            self._ascending = False
            if isinstance(ts_ns, int):
                ts_ns = np.full(k, ts_ns, np.int64)
            # Out of order (event time): merge into the tail from the first held event
            # that is later than the earliest new one. A stable sort on the timestamps keeps
            # arrival order among equal ones, held events (earlier ids) first.
            at = lo + int(np.searchsorted(all_ts[lo:hi], ts_ns.min(), "right"))
            merged_ts = np.concatenate([all_ts[at:hi], ts_ns])
            merged_ids = np.concatenate([all_ids[at:hi], _id_array(ids)])
            order = np.argsort(merged_ts, kind="stable")
            all_ts[at : hi + k] = merged_ts[order]
            all_ids[at : hi + k] = merged_ids[order]
        self._hi = hi + k

    def _reserve(self, k: int) -> None:
        cap = self._ids.shape[0]
        if self._hi + k <= cap:
            return
        held = self._hi - self._lo
        if held + k > cap // 2:
            cap = max(cap * 2, 2 * (held + k))
        ids = np.empty(cap, np.int64)
        ts = np.empty(cap, np.int64)
        ids[:held] = self._ids[self._lo : self._hi]
        ts[:held] = self._ts[self._lo : self._hi]
        self._ids, self._ts = ids, ts
        self._lo, self._hi = 0, held

    def _evict_over_count(self) -> None:
        if self._count_n:
            extra = len(self) - self._count_n
            if extra > 0:
                self._leave(self._lo + extra)

    def _evict_upto(self, limit_ns: int) -> None:
        """Every event with ``ts <= limit_ns`` leaves."""
        lo, hi = self._lo, self._hi
        if hi > lo and self._ts[lo] <= limit_ns:
            self._leave(lo + int(np.searchsorted(self._ts[lo:hi], limit_ns, "right")))

    def _leave(self, upto: int) -> None:
        gone = self.rows.rows(self._ids[self._lo : upto], ascending=self._ascending)
        self._expired.append(gone)
        self._evicted.append(gone)
        self._lo = upto

    def _fire(self, upto: int, end_ns: int) -> TupleWindow | None:
        """The window of the held events before ``upto``, ending at ``end_ns``."""
        lo = self._lo
        if upto == lo and not self._expired:
            return None
        ids = self._ids[lo:upto]
        rows = self.rows.rows(ids, ascending=self._ascending)
        if self._count_s:
            # a count slide is processing time: the ids increase, the new ones are last
            new_from = int(np.searchsorted(ids, self._prev_last_id, "right")) if rows.n else 0
            if upto > lo:
                self._prev_last_id = int(ids[-1])
        else:
            prev = self._prev_end
            new_from = 0 if prev is None else int(np.searchsorted(self._ts[lo:upto], prev, "right"))
            self._prev_end = end_ns
        expired = _take(self._expired)
        if self._len_ns and self._slide_ns:
            start = end_ns - self._len_ns
        elif upto > lo:
            start = int(self._ts[lo])
            if self._count_s:
                end_ns = int(self._ts[upto - 1])
        else:
            start = end_ns
        return TupleWindow.of_rows(rows, new_from, expired, start / _NS, end_ns / _NS)


_NO_ROWS = Rows([], 0)

#: Row ids: an int64 array, or a ``range`` of consecutive ones.
Ids = np.ndarray | range


def _id_array(ids: Ids) -> np.ndarray:
    return np.arange(ids.start, ids.stop, dtype=np.int64) if isinstance(ids, range) else ids


def _at(values: np.ndarray, positions: list[int]) -> list[int]:
    """``values`` at ``positions``, as ints (one read each for a few, else one gather)."""
    if len(positions) <= 4:
        return [int(values[p]) for p in positions]
    gathered: list[int] = values[positions].tolist()  # numpy types tolist() as Any
    return gathered


def _row_ids(rows: Rows) -> np.ndarray:
    """The ids of ``rows``, in order."""
    runs = [np.arange(seg.base + lo, seg.base + hi, dtype=np.int64) for seg, lo, hi in rows.pieces]
    return np.concatenate(runs) if runs else np.zeros(0, np.int64)


def _take(parts: list[Rows]) -> Rows:
    """The rows of ``parts``, in order, as one ``Rows`` (``parts`` is emptied)."""
    if not parts:
        return _NO_ROWS
    out = parts[0] if len(parts) == 1 else Rows.joined(parts)
    parts.clear()
    return out
