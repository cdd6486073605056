"""``WindowedBoltExecutor``: runs a ``WindowedBolt`` as a rich ``Bolt`` (Storm's class of
the same name).

The engine hands it each input whole (``execute_many``): a ``TupleBatch`` becomes one
segment of the window's ``RowTable`` as it is, its rows entering the ``WindowManager`` as
an id range (no ``Tuple`` per row), and per-tuple input is appended to a list segment.
Tick tuples, at the slide or the watermark interval, move time on the runtime's clock
(``simulate`` drives it). Emits from ``execute(window)`` anchor to every tuple of the
window, as in Storm (an emit on a stream nobody subscribes to goes nowhere, so it anchors
to nothing and makes no ``Tuple``); the tuples are acked when they leave the window, the
rows of a batch in one array operation. Late tuples (event time) go to the late tuple
stream and are acked, or are counted in the ``late_tuples`` metric and acked; the first is
also reported in the stats' errors. Wrapped by another bolt (a stateful window), it gets
tuples one by one through ``execute`` and acks them one by one through the wrapper's
collector.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .._columnar.batch import TupleBatch
from .._execution.collector import OutputCollector
from .._model.component import Bolt, OutputFieldsDeclarer
from .._model.config import TOPOLOGY_ACKER_EXECUTORS
from .._model.errors import InvalidComponentError
from .._model.tuple import SYSTEM_COMPONENT_ID, Source, Tuple, is_tick_tuple
from ._length import Duration
from ._manager import Ids, WindowManager
from ._rows import Rows, RowTable, Segment
from ._window import TupleWindow

__all__ = ["WindowedBoltExecutor", "WindowedOutputCollector"]

_TICK = "topology.tick.tuple.freq.secs"


class _EveryStream:
    def __contains__(self, stream: object) -> bool:
        return True


_EVERY_STREAM = _EveryStream()


class WindowedOutputCollector(OutputCollector):
    """The collector a ``WindowedBolt`` gets: ``emit`` without ``anchors`` anchors to every
    tuple of the window being executed (Storm's ``WindowedOutputCollector``) but those the
    bolt acked or failed itself: they stay in the window, their trees are done.

    ``subscribed`` (the streams someone subscribes to; None: all) spares the anchoring of
    emits that go nowhere.
    """

    def __init__(self, delegate: Any, subscribed: frozenset[str] | None = None) -> None:
        super().__init__(delegate)
        self.window: TupleWindow | None = None
        # An emit nobody subscribes to goes nowhere: no tree to extend, no anchors to make.
        self._anchored: Container[str] = _EVERY_STREAM if subscribed is None else subscribed

    def emit(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> Sequence[int]:
        if anchors is None and self.window is not None and stream in self._anchored:
            anchors = _pending(self.window.get())
        return self._delegate.emit(values, stream, anchors)

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> None:
        if anchors is None and self.window is not None and stream in self._anchored:
            anchors = _pending(self.window.get())
        self._delegate.emit_direct(task, values, stream, anchors)


def _pending(tuples: list[Tuple]) -> list[Tuple]:
    """The window's tuples the bolt did not ack or fail itself: an emit anchored to a done
    tuple is refused, and a bolt that failed a bad tuple (for its spout to replay) must
    still be able to emit for the windows that hold it until it leaves."""
    return [t for t in tuples if t._ack_val is not None]


class WindowedBoltExecutor(Bolt):
    """Runs ``bolt`` (a ``WindowedBolt``); ``set_bolt`` wraps windowed bolts in one.

    ``bolt`` is the user's object (``running.task_objects(cid)[task].bolt``); ``manager``
    its ``WindowManager`` once prepared.
    """

    def __init__(self, bolt: Any) -> None:
        # (``_bolt`` imports this module for ``as_bolt``: the check is by behaviour)
        if not callable(getattr(bolt, "check_declaration", None)):
            raise InvalidComponentError(
                f"WindowedBoltExecutor needs a WindowedBolt, got {type(bolt).__name__}"
            )
        self.bolt = bolt
        self.manager: WindowManager | None = None
        self.late_tuples = 0
        self.refused_tuples = 0

    # --- declaration: the bolt's, plus the late stream and the ticks ---------------------
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.bolt.declare_output_fields(declarer)
        self.bolt.declare_window_streams(declarer)

    def component_configuration(self) -> Mapping[str, Any] | None:
        conf = dict(self.bolt.component_configuration() or {})
        freq = self.bolt.tick_secs()
        if freq and _TICK not in conf:
            conf[_TICK] = freq
        return conf

    def validate_topology_conf(self, component_id: str, conf: Mapping[str, Any]) -> None:
        """``create_topology`` calls this with the bolt's own config, ``prepare`` with the
        topology's: the declaration must be whole and the timeout cover the window."""
        self.bolt.check_declaration(component_id)
        self.bolt.validate_topology_conf(component_id, conf)

    # --- running -------------------------------------------------------------------------
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> Any:
        b = self.bolt
        self._id = context.get_this_component_id()
        self.validate_topology_conf(self._id, conf)
        self._clock = context.clock
        self._collector = collector
        assert b._length is not None and b._slide is not None
        self._rows = RowTable()
        self.manager = WindowManager(
            b._length,
            b._slide,
            event_time=b.is_event_time,
            origin_ns=self._clock.now_ns(),
            rows=self._rows,
        )
        # The engine's own collector acks the rows of a batch with one array operation; a
        # wrapper's (a stateful bolt holds acks until its commit) is given Tuples.
        self._bulk = callable(getattr(collector, "ack_rows", None))
        self._event_time = b.is_event_time
        self._ts_field = b._timestamp_field
        self._extract = b._timestamp_extractor
        self._lag_ns = round(b._lag_secs * 1e9)
        self._late_stream = b._late_tuple_stream
        # A count window longer than the bound is refused at declaration; only a duration
        # window can fill up.
        self._max_events = b._max_events if isinstance(b._length, Duration) else None
        #: event time: latest timestamp per input stream; the watermark is their minimum
        # (system streams, e.g. checkpoint barriers around a stateful window, carry no time)
        self._streams = sorted(
            key
            for key in context.get_this_sources()
            if key[0] != SYSTEM_COMPONENT_ID and not key[1].startswith("__")
        )
        self._latest: dict[tuple[str, str], int] = {}
        self._late_metric = context.register_counter("late_tuples")
        self._refused_metric = context.register_counter("window_refused_tuples")
        self._late_reported = False
        self._refused_reported = False
        subscribed = frozenset(s for s, subs in context.get_this_targets().items() if subs)
        if conf.get(TOPOLOGY_ACKER_EXECUTORS) == 0:
            # No acker tracks a tree: anchoring an emit to the window would only make a
            # Tuple per row of it and edge ids nobody reads (so on a runner without ackers).
            subscribed = frozenset()
        self.out = WindowedOutputCollector(collector, subscribed)
        return b.prepare(conf, context, self.out)

    def window_state(self) -> Any:
        """Everything the window holds between two firings, picklable: a runner that keeps
        a task's memory elsewhere between batches (the Spark runner, in Spark state) saves
        it after each batch and gives it back with ``restore_window_state``."""
        return (self.manager, dict(self._latest), self.late_tuples, self.refused_tuples)

    def restore_window_state(self, state: Any) -> None:
        """Put back what ``window_state`` saved, after ``prepare`` and before any tuple."""
        self.manager, latest, self.late_tuples, self.refused_tuples = state
        self._rows = self.manager.rows
        self._latest = dict(latest)

    def snapshot_window(self) -> dict[str, Any]:
        """The window as plain picklable values, for a checkpoint to save (a stateful
        window whose spouts rewind): each tuple it still needs as its values and its
        source (no tree ids: the tuples ``restore_window_snapshot`` rebuilds are done, acked
        when the checkpoint committed), the ``WindowManager``'s bookkeeping
        (``snapshot``), the latest timestamp per input stream and the clock's time. What
        left the window is acked first (it is not saved). It costs time and space in
        proportion to the window's tuples, at every checkpoint."""
        self._ack_evicted()
        manager = self.manager
        assert manager is not None
        rows, book = manager.snapshot()
        sources: list[Source] = []
        place: dict[int, int] = {}
        which: list[int] = []
        values: list[Any] = []
        for seg, lo, hi in rows.pieces:
            if seg.items is not None:
                for t in seg.items[lo:hi]:
                    src = t._src
                    i = place.get(id(src))
                    if i is None:
                        i = place[id(src)] = len(sources)
                        sources.append(src)
                    which.append(i)
                    values.append(t.values)
            else:
                batch = seg.batch
                assert batch is not None  # a segment holds a batch or a list
                i = place.get(id(batch.source))
                if i is None:
                    i = place[id(batch.source)] = len(sources)
                    sources.append(batch.source)
                which += [i] * (hi - lo)
                values += batch.row_values()[lo:hi]
        return {
            "sources": sources,
            "which": which,
            "values": values,
            "book": book,
            "now_ns": self._clock.now_ns(),
            "latest": dict(self._latest),
            "late": self.late_tuples,
            "refused": self.refused_tuples,
        }

    def restore_window_snapshot(self, saved: dict[str, Any]) -> None:
        """Carry on from ``snapshot_window``'s ``saved`` (after ``prepare``, in place of the
        window held now, which the caller emptied): the window holds the same tuples, and
        fires as it would have from there. Processing time resumes where it stood: what
        passed since the snapshot (a rollback's, or a restart's) is skipped."""
        sources: list[Source] = saved["sources"]
        pairs = zip(saved["which"], saved["values"], strict=True)
        tuples = [Tuple(v, sources[i], None, 0) for i, v in pairs]
        for t in tuples:
            t._ack_val = None  # done: acked with the checkpoint that saved it
        b = self.bolt
        now = self._clock.now_ns()
        self._rows = RowTable()
        self.manager = WindowManager(
            b._length, b._slide, event_time=b.is_event_time, origin_ns=now, rows=self._rows
        )
        self.manager.restore_snapshot(tuples, saved["book"], now - saved["now_ns"])
        self._latest = dict(saved["latest"])
        self.late_tuples = saved["late"]
        self.refused_tuples = saved["refused"]

    def ack_held(self) -> None:
        """Ack every tuple the window holds that is not acked yet (it stays in the window):
        a checkpoint saved it, so its tree is complete once that commits."""
        manager = self.manager
        assert manager is not None
        self._complete(manager.held(), fail=False)

    def reset_window(self) -> None:
        """Fail every tuple the window holds (reliable spouts replay them) and start an
        empty window: what a stateful window does when its state rolls back."""
        manager = self.manager
        assert manager is not None
        for rows in (manager.take_evicted_rows(), manager.held()):
            self._complete(rows, fail=True)
        b = self.bolt
        self._rows = RowTable()
        self.manager = WindowManager(
            b._length,
            b._slide,
            event_time=b.is_event_time,
            origin_ns=self._clock.now_ns(),
            rows=self._rows,
        )
        self._latest = {}

    def execute(self, tuple: Tuple) -> None:
        """One tuple (what a wrapping bolt calls): ``execute_many`` of one."""
        if is_tick_tuple(tuple):
            self._tick()
        else:
            self._take_tuples([tuple])
        self._ack_evicted()

    def execute_many(self, tuples: list[Tuple] | TupleBatch) -> None:
        """An input whole, as the engine moves it: a list of tuples (one tick tuple, on
        its own) or a ``TupleBatch``."""
        if isinstance(tuples, TupleBatch) and not self._bulk:
            tuples = tuples.tuples()
        if isinstance(tuples, TupleBatch):
            self._take_batch(tuples)
        elif len(tuples) == 1 and is_tick_tuple(tuples[0]):
            self._tick()
        else:
            self._take_tuples(tuples)
        self._ack_evicted()

    def _tick(self) -> None:
        if self._event_time:
            windows = self._on_watermark_tick()
        else:
            manager = self.manager
            assert manager is not None
            windows = manager.advance(self._clock.now_ns())
        self._run(windows)

    # --- input ---------------------------------------------------------------------------
    def _take_tuples(self, tuples: list[Tuple]) -> None:
        if not self._event_time:
            seg, first = self._rows.add_items(tuples)
            n = len(tuples)
            self._admit(seg, range(first, first + n), self._clock.now_ns())
            return
        accepted: list[Tuple] = []
        stamps: list[int] = []
        latest = self._latest
        manager = self.manager
        assert manager is not None
        for t in tuples:
            try:
                ts = self._timestamp_of(t)
            except Exception as exc:
                self._collector.report_error(exc)
                self._collector.fail(t)
                continue
            key = t.source_global_stream_id
            prev = latest.get(key)
            if prev is None or ts > prev:
                latest[key] = ts
            if manager.is_late(ts):
                self._late(t, ts)
                continue
            accepted.append(t)
            stamps.append(ts)
        if accepted:
            seg, first = self._rows.add_items(accepted)
            ids = range(first, first + len(accepted))
            self._admit(seg, ids, stamps[0] if len(stamps) == 1 else np.array(stamps, np.int64))

    def _take_batch(self, batch: TupleBatch) -> None:
        seg = self._rows.add_batch(batch)
        n = batch.n
        ids = range(seg.base, seg.base + n)
        if not self._event_time:
            self._admit(seg, ids, self._clock.now_ns())
            return
        ts, ok = self._batch_timestamps(seg)
        if ok.any():
            key = (batch.source_component, batch.source_stream)
            newest = int(ts[ok].max())
            prev = self._latest.get(key)
            if prev is None or newest > prev:
                self._latest[key] = newest
        manager = self.manager
        assert manager is not None
        late = manager.late_rows(ts) & ok
        if late.any():
            views = seg.tuples()
            for i in np.flatnonzero(late).tolist():
                self._late(views[i], int(ts[i]))
            ok &= ~late
        if ok.all():
            self._admit(seg, ids, ts)
        else:
            self._admit(seg, np.arange(ids.start, ids.stop, dtype=np.int64)[ok], ts[ok])

    def _batch_timestamps(self, seg: Segment) -> tuple[np.ndarray, np.ndarray]:
        """Each row's timestamp (ns) and whether it has one: a numeric column converts at
        once; anything else (an extractor, bools, strings, NaN) goes row by row, the rows
        without a timestamp reported and failed."""
        batch = seg.batch
        assert batch is not None
        n = batch.n
        field = self._ts_field
        if self._extract is None and field in batch.source.fields:
            col = batch.column(field)
            values = (
                np.asarray(col)
                if type(col) is not list or bool not in set(map(type, col))
                else None
            )
            if values is not None and values.dtype.kind in "iuf":
                seconds = values.astype(np.float64)
                if bool(np.isfinite(seconds).all()):
                    return np.rint(seconds * 1e9).astype(np.int64), np.ones(n, bool)
        ts = np.zeros(n, np.int64)
        ok = np.ones(n, bool)
        for i, t in enumerate(seg.tuples()):
            try:
                ts[i] = self._timestamp_of(t)
            except Exception as exc:
                self._collector.report_error(exc)
                self._collector.fail(t)
                ok[i] = False
        return ts, ok

    def _timestamp_of(self, tuple: Tuple) -> int:
        extract = self._extract
        value = extract(tuple) if extract is not None else tuple[self._ts_field]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(
                f"windowed bolt {self._id!r}: the timestamp of {tuple!r} is {value!r}; "
                f"timestamps are numbers (seconds)"
            )
        return round(value * 1e9)

    def _admit(self, seg: Segment, ids: Ids, ts: np.ndarray | int) -> None:
        """Rows ``ids`` of ``seg`` enter the window (a full one refuses the rest); run the
        windows they fire."""
        manager = self.manager
        assert manager is not None
        n = len(ids)
        if self._max_events is None:
            seg.live += n
            windows = manager.add_ids(ids, ts)
            if windows:
                self._run(windows)
            return
        i = 0
        while i < n:
            j = n
            if self._max_events is not None:
                room = self._max_events - len(manager)
                if room <= 0:
                    rest = ids[i:]
                    if isinstance(rest, range):
                        self._refuse(self._rows.span(rest.start, rest.stop))
                    else:
                        self._refuse(self._rows.rows(rest))
                    return
                j = min(n, i + room)
            seg.live += j - i
            self._run(manager.add_ids(ids[i:j], ts if isinstance(ts, int) else ts[i:j]))
            i = j

    def _on_watermark_tick(self) -> list[TupleWindow]:
        latest = self._latest
        if not self._streams or any(key not in latest for key in self._streams):
            return []  # Storm's rule: a watermark once every input stream has spoken
        watermark = min(latest[key] for key in self._streams) - self._lag_ns
        assert self.manager is not None
        return self.manager.advance(watermark)

    # --- windows and acks ----------------------------------------------------------------
    def _run(self, windows: list[TupleWindow]) -> None:
        out = self.out
        for window in windows:
            out.window = window
            try:
                self.bolt.execute(window)
            except Exception as exc:
                # The window's tuples stay held and are acked when they leave: an error in
                # one firing neither loses nor replays them; it is reported with its traceback.
                self._collector.report_error(exc)
            finally:
                out.window = None

    def _ack_evicted(self) -> None:
        manager = self.manager
        assert manager is not None
        if not manager.has_evicted:
            return
        gone = manager.take_evicted_rows()
        if gone.n:
            self._complete(gone, fail=False)
            self._rows.release(gone)

    def _complete(self, rows: Rows, *, fail: bool) -> None:
        """Ack (or fail) ``rows``: a batch's rows in one array operation, ``Tuple`` rows
        one by one (a tuple the bolt acked or failed itself is left alone)."""
        collector = self._collector
        each = collector.fail if fail else collector.ack
        for seg, idx, lo, hi in rows.by_segment():
            if seg.viewed or not self._bulk:
                items = seg.tuples()
                chosen = items[lo:hi] if idx is None else [items[i] for i in idx.tolist()]
                if self._bulk and not fail and seg.batch is not None:
                    vals = [t._ack_val for t in chosen]
                    if None not in vals:
                        self._ack_views(seg.batch, chosen, vals, lo, hi, idx)
                        continue
                pending = [t for t in chosen if t._ack_val is not None]
                if self._bulk and not fail:
                    collector.ack_many(pending)
                else:
                    for t in pending:
                        each(t)
            else:
                # Rows done already (a saved window's, acked at a checkpoint) are left
                # out. (``getattr``: a segment pickled before this slot existed has none.)
                # A run of rows, the usual case, is checked and marked as a slice.
                done = getattr(seg, "completed", None)
                mark: np.ndarray | slice
                if idx is None:
                    if done is None or not done[lo:hi].any():
                        rows_idx, mark = np.arange(lo, hi, dtype=np.int64), slice(lo, hi)
                    else:
                        rows_idx = mark = np.flatnonzero(~done[lo:hi]) + lo
                else:
                    rows_idx = mark = idx if done is None else idx[~done[idx]]
                if not rows_idx.shape[0]:
                    continue
                if fail:
                    collector.fail_rows(seg.batch, rows_idx)
                else:
                    collector.ack_rows(seg.batch, rows_idx)
                seg.complete(mark)

    def _ack_views(
        self,
        batch: TupleBatch,
        views: list[Tuple],
        vals: list[int],
        lo: int,
        hi: int,
        idx: np.ndarray | None,
    ) -> None:
        """Ack rows of ``batch`` whose ``Tuple`` views the bolt read (``views``, none of
        them acked or failed by the bolt, ``vals`` their ack values: the bolt may have
        anchored emits to them) in one array operation, as if each view were acked: the
        views' ack values go back into the batch's, and the views are completed (a second
        ack of one is refused)."""
        rows_idx = np.arange(lo, hi, dtype=np.int64) if idx is None else idx
        if batch.roots is not None and (batch.ack_vals is not None or any(vals)):
            if batch.ack_vals is None:
                batch.ack_vals = np.zeros(batch.n, np.uint64)
            batch.ack_vals[rows_idx] = np.array(vals, np.uint64)
        for t in views:
            t._ack_val = None
        self._collector.ack_rows(batch, rows_idx)

    def _late(self, tuple: Tuple, ts: int) -> None:
        self.late_tuples += 1
        self._late_metric.incr()
        if self._late_stream is not None:
            self._collector.emit([list(tuple.values), ts / 1e9], self._late_stream, tuple)
        elif not self._late_reported:
            self._late_reported = True
            watermark = None if self.manager is None else self.manager.watermark_ns
            wm = float("nan") if watermark is None else watermark / 1e9
            self._collector.report_error(
                f"windowed bolt {self._id!r}: late tuple {tuple!r} (timestamp {ts / 1e9:g} <= "
                f"watermark {wm:g}) acked without entering a window; counted in the "
                f"'late_tuples' metric (this is reported once); route late tuples with "
                f"with_late_tuple_stream(stream) or raise with_lag"
            )
        self._collector.ack(tuple)

    def _refuse(self, rows: Rows) -> None:
        self.refused_tuples += rows.n
        self._refused_metric.incr_by(rows.n)
        if not self._refused_reported:
            self._refused_reported = True
            self._collector.report_error(
                f"windowed bolt {self._id!r}: the window holds "
                f"with_max_events_in_memory({self._max_events}) tuples; new tuples fail (and "
                f"are replayed by reliable spouts) until some leave; counted in the "
                f"'window_refused_tuples' metric (this is reported once); raise the limit, "
                f"shorten the window or add tasks"
            )
        self._complete(rows, fail=True)

    def cleanup(self) -> Any:
        return self.bolt.cleanup()
