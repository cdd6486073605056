"""``WindowManager``: the window core, with no engine in it (Storm's ``WindowManager`` with
its trigger and eviction policies in one small class).

Events go in with a timestamp (integer nanoseconds: arrival time on the runtime's clock, or
event time); time goes in through ``advance(now_ns)`` (processing time) or the watermark
(event time); windows come out as ``TupleWindow`` records, and the events that left the
window since the last call come out of ``take_evicted()`` for the caller to ack. It holds
every event that may still be in a window, so a stateful wrapper can save ``events()`` and
give them back with ``restore``. The rules, which the tests check against a naive model:

- Duration slide ``S``: windows end on a grid, ``origin + k*S`` (``k >= 0``) in processing
  time and ``k*S`` in event time. In processing time, an event that arrives at the instant
  a window fired counts as arriving just after it (1 ns later). Window ``E`` holds the events with ``E - L < ts <= E`` (duration
  length ``L``) or the last ``n`` events with ``ts <= E`` (count length ``n``). It fires once
  ``now`` (or the watermark) reaches ``E``, unless it is empty and nothing left it since
  the last firing (Storm skips every empty window; firing once more lets a bolt retract
  what left). An event leaves as soon as the last window that can hold it was processed: at
  the window end ``E`` with ``ts <= E + S - L`` (Storm acks it one slide later, at the next
  trigger).
- Count slide ``s`` (processing time only): every ``s``-th event fires the window (the last
  ``n`` events, or those with ``ts > now - L``).
- Count length ``n``: an event leaves when ``n`` newer events have arrived, or, with a count
  slide ``s``, when a firing leaves it out of the newest ``n - s`` (tumbling: at once).
- Event time: an event is late when ``ts <= watermark`` (every window that could hold it may
  have fired); ``is_late`` says so and the caller routes it, it never enters.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

from ._length import Count, Duration
from ._window import TupleWindow

__all__ = ["WindowManager"]

_NS = 1e9


class WindowManager:
    """Windows over events with timestamps; pure (no clock, no engine): easy to test and to
    drive from any wrapper.

    >>> m = WindowManager(Count(3), Count(2))
    >>> m.add("a", 1), [w.get() for w in m.add("b", 2)]
    ([], [['a', 'b']])
    >>> [w.get() for w in m.add("c", 3) + m.add("d", 4)], m.take_evicted()
    ([['b', 'c', 'd']], ['a'])
    """

    def __init__(
        self,
        length: Count | Duration,
        slide: Count | Duration,
        *,
        event_time: bool = False,
        origin_ns: int = 0,
    ) -> None:
        if event_time and not (isinstance(length, Duration) and isinstance(slide, Duration)):
            raise ValueError("event-time windows need a Duration length and a Duration slide")
        self.length = length
        self.slide = slide
        self.event_time = event_time
        self._len_ns = length.ns if isinstance(length, Duration) else 0
        self._slide_ns = slide.ns if isinstance(slide, Duration) else 0
        self._origin = 0 if event_time else origin_ns
        #: (ts_ns, seq, event), sorted by (ts, seq): arrival order in processing time
        self._events: list[tuple[int, int, Any]] = []
        self._head = 0  # events before this index left (compacted now and then)
        self._seq = 0
        self._since_fire = 0
        self._prev: set[int] = set()
        self._expired: list[Any] = []  # left since the last firing (reported)
        self._evicted: list[Any] = []  # left since the last take_evicted (to ack)
        # processing time: the first window ends at the origin (it holds what arrives then)
        self._next_end: int | None = None if event_time else origin_ns
        #: the latest watermark (event time), None before the first
        self.watermark_ns: int | None = None

    # --- contents -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._events) - self._head

    def events(self) -> list[tuple[Any, int]]:
        """Every event still held, with its timestamp (ns), oldest first: what a stateful
        wrapper saves."""
        return [(e, ts) for ts, _, e in self._events[self._head :]]

    def restore(self, events: Iterable[tuple[Any, int]]) -> None:
        """Put back events saved with ``events()`` (before any new one arrives)."""
        for event, ts in events:
            self._insert(event, ts)

    def take_evicted(self) -> list[Any]:
        """The events that left every window since the last call: ack them now."""
        out, self._evicted = self._evicted, []
        return out

    def is_late(self, ts_ns: int) -> bool:
        return self.watermark_ns is not None and ts_ns <= self.watermark_ns

    # --- input --------------------------------------------------------------------------
    def add(self, event: Any, ts_ns: int) -> list[TupleWindow]:
        """Add an event (not late: check ``is_late`` first); returns the windows it fires."""
        if self._slide_ns and not self.event_time:
            # Processing time: what arrives at the instant a window fired comes after it.
            done = self._next_end - self._slide_ns  # type: ignore[operator]
            if ts_ns <= done:
                ts_ns = done + 1
        self._insert(event, ts_ns)
        if isinstance(self.length, Count):
            extra = len(self) - self.length.n
            if extra > 0:
                self._leave(self._head + extra)
        if isinstance(self.slide, Count):
            self._since_fire += 1
            if self._since_fire == self.slide.n:
                self._since_fire = 0
                if isinstance(self.length, Duration):
                    self._evict_upto(ts_ns - self._len_ns)
                window = self._fire(self._events[self._head :], ts_ns)
                if isinstance(self.length, Count):
                    # the next window holds the newest n - s of these: the others left
                    keep = self.length.n - self.slide.n
                    if len(self) > keep:
                        self._leave(len(self._events) - keep)
                return [window] if window is not None else []
        return []

    def advance(self, now_ns: int) -> list[TupleWindow]:
        """Time moved to ``now_ns`` (the clock, or the watermark in event time): fire every
        window that ended, evict what left. Returns the windows fired, oldest first."""
        if self.event_time:
            if self.watermark_ns is not None and now_ns <= self.watermark_ns:
                return []
            self.watermark_ns = now_ns
        if isinstance(self.slide, Count):
            if isinstance(self.length, Duration):
                self._evict_upto(now_ns - self._len_ns)
            return []
        out: list[TupleWindow] = []
        step = self._slide_ns
        while len(self) or self._expired:
            end = self._next_end
            if self.event_time and len(self):
                # Windows before the oldest event's first window hold nothing: jump there
                # (once what left was reported).
                first = -(-self._events[self._head][0] // step) * step  # align up
                if end is None or (end < first and not self._expired):
                    end = first
            assert end is not None
            if end > now_ns:
                break
            if isinstance(self.length, Duration):
                self._evict_upto(end - self._len_ns)
            held = self._events[self._head :]
            if held and held[-1][0] > end:
                held = [x for x in held if x[0] <= end]
            window = self._fire(held, end)
            if window is not None:
                out.append(window)
            self._next_end = end + step
            if isinstance(self.length, Duration):
                # what the next window cannot hold left with this one
                self._evict_upto(end + step - self._len_ns)
        if not self.event_time and not len(self):
            # Nothing held: the windows up to now are empty; the next ends after now.
            end = self._next_end
            if end is not None and end <= now_ns:
                self._next_end = self._origin + ((now_ns - self._origin) // step + 1) * step
        return out

    # --- internals ----------------------------------------------------------------------
    def _insert(self, event: Any, ts_ns: int) -> None:
        item = (ts_ns, self._seq, event)
        self._seq += 1
        events = self._events
        if len(events) == self._head or events[-1][0] <= ts_ns:
            events.append(item)
        else:
            bisect.insort(events, item, lo=self._head, key=lambda x: (x[0], x[1]))

    def _evict_upto(self, limit_ns: int) -> None:
        """Every event with ``ts <= limit_ns`` leaves."""
        events = self._events
        if len(events) > self._head and events[self._head][0] <= limit_ns:
            i = bisect.bisect_right(events, limit_ns, lo=self._head, key=lambda x: x[0])
            self._leave(i)

    def _leave(self, upto: int) -> None:
        gone = [e for _, _, e in self._events[self._head : upto]]
        self._expired.extend(gone)
        self._evicted.extend(gone)
        self._head = upto
        if self._head > 1024 and self._head * 2 > len(self._events):
            del self._events[: self._head]
            self._head = 0

    def _fire(self, held: list[tuple[int, int, Any]], end_ns: int) -> TupleWindow | None:
        if not held and not self._expired:
            return None
        prev = self._prev
        tuples = [e for _, _, e in held]
        new = [e for _, seq, e in held if seq not in prev]
        self._prev = {seq for _, seq, _ in held}
        expired, self._expired = self._expired, []
        if isinstance(self.length, Duration) and isinstance(self.slide, Duration):
            start = end_ns - self._len_ns
        elif held:
            start = held[0][0]
            if isinstance(self.slide, Count):
                end_ns = held[-1][0]
        else:
            start = end_ns
        return TupleWindow(tuples, new, expired, start / _NS, end_ns / _NS)
