"""``WindowedBoltExecutor``: runs a ``WindowedBolt`` as a rich ``Bolt`` (Storm's class of
the same name).

Tuples (one by one, or the rows of a ``TupleBatch``, which arrive as ``Tuple`` views) go
into a ``WindowManager``; tick tuples, at the slide or the watermark interval, move time on
the runtime's clock (``simulate`` drives it). Emits from ``execute(window)`` anchor to every
tuple of the window, as in Storm; the tuples are acked when they leave the window. Late
tuples (event time) go to the late tuple stream and are acked, or are counted in the
``late_tuples`` metric and acked; the first is also reported in the stats' errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._collector import OutputCollector
from .._component import Bolt, OutputFieldsDeclarer
from .._errors import InvalidComponentError
from .._tuple import SYSTEM_COMPONENT_ID, Tuple, is_tick_tuple
from ._manager import WindowManager
from ._window import TupleWindow

__all__ = ["WindowedBoltExecutor", "WindowedOutputCollector"]

_TICK = "topology.tick.tuple.freq.secs"


class WindowedOutputCollector(OutputCollector):
    """The collector a ``WindowedBolt`` gets: ``emit`` without ``anchors`` anchors to every
    tuple of the window being executed (Storm's ``WindowedOutputCollector``)."""

    def __init__(self, delegate: Any) -> None:
        super().__init__(delegate)
        self.window: TupleWindow | None = None

    def emit(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> Sequence[int]:
        if anchors is None and self.window is not None:
            anchors = self.window.get()
        return self._delegate.emit(values, stream, anchors)

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> None:
        if anchors is None and self.window is not None:
            anchors = self.window.get()
        self._delegate.emit_direct(task, values, stream, anchors)


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
        self.manager = WindowManager(
            b._length, b._slide, event_time=b.is_event_time, origin_ns=self._clock.now_ns()
        )
        self._event_time = b.is_event_time
        self._ts_field = b._timestamp_field
        self._extract = b._timestamp_extractor
        self._lag_ns = round(b._lag_secs * 1e9)
        self._late_stream = b._late_tuple_stream
        self._max_events = b._max_events
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
        self.out = WindowedOutputCollector(collector)
        return b.prepare(conf, context, self.out)

    def window_state(self) -> Any:
        """Everything the window holds between two firings, picklable: a runner that keeps
        a task's memory elsewhere between batches (the Spark runner, in Spark state) saves
        it after each batch and gives it back with ``restore_window_state``."""
        return (self.manager, dict(self._latest), self.late_tuples, self.refused_tuples)

    def restore_window_state(self, state: Any) -> None:
        """Put back what ``window_state`` saved, after ``prepare`` and before any tuple."""
        self.manager, latest, self.late_tuples, self.refused_tuples = state
        self._latest = dict(latest)

    def reset_window(self) -> None:
        """Fail every tuple the window holds (reliable spouts replay them) and start an
        empty window: what a stateful window does when its state rolls back."""
        manager = self.manager
        assert manager is not None
        fail = self._collector.fail
        for t in manager.take_evicted():
            fail(t)
        for t, _ in manager.events():
            fail(t)
        b = self.bolt
        self.manager = WindowManager(
            b._length, b._slide, event_time=b.is_event_time, origin_ns=self._clock.now_ns()
        )
        self._latest = {}

    def execute(self, tuple: Tuple) -> None:
        manager = self.manager
        assert manager is not None
        if is_tick_tuple(tuple):
            if self._event_time:
                windows = self._on_watermark_tick()
            else:
                windows = manager.advance(self._clock.now_ns())
            self._run(windows)
            return
        if self._event_time:
            try:
                ts = self._timestamp_of(tuple)
            except Exception as exc:
                self._collector.report_error(exc)
                self._collector.fail(tuple)
                return
            key = tuple.source_global_stream_id
            prev = self._latest.get(key)
            if prev is None or ts > prev:
                self._latest[key] = ts
            if manager.is_late(ts):
                self._late(tuple, ts)
                return
        else:
            ts = self._clock.now_ns()
        if self._max_events is not None and len(manager) >= self._max_events:
            self._refuse(tuple)
            return
        self._run(manager.add(tuple, ts))

    def _timestamp_of(self, tuple: Tuple) -> int:
        extract = self._extract
        value = extract(tuple) if extract is not None else tuple[self._ts_field]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(
                f"windowed bolt {self._id!r}: the timestamp of {tuple!r} is {value!r}; "
                f"timestamps are numbers (seconds)"
            )
        return round(value * 1e9)

    def _on_watermark_tick(self) -> list[TupleWindow]:
        latest = self._latest
        if not self._streams or any(key not in latest for key in self._streams):
            return []  # Storm's rule: a watermark once every input stream has spoken
        watermark = min(latest[key] for key in self._streams) - self._lag_ns
        assert self.manager is not None
        return self.manager.advance(watermark)

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
        assert self.manager is not None
        ack = self._collector.ack
        for t in self.manager.take_evicted():
            ack(t)

    def _late(self, tuple: Tuple, ts: int) -> None:
        self.late_tuples += 1
        self._late_metric.incr()
        if self._late_stream is not None:
            self._collector.emit([list(tuple.values), ts / 1e9], self._late_stream, tuple)
        elif not self._late_reported:
            self._late_reported = True
            wm = self.manager.watermark_ns / 1e9  # type: ignore[union-attr,operator]
            self._collector.report_error(
                f"windowed bolt {self._id!r}: late tuple {tuple!r} (timestamp {ts / 1e9:g} <= "
                f"watermark {wm:g}) acked without entering a window; counted in the "
                f"'late_tuples' metric (this is reported once); route late tuples with "
                f"with_late_tuple_stream(stream) or raise with_lag"
            )
        self._collector.ack(tuple)

    def _refuse(self, tuple: Tuple) -> None:
        self.refused_tuples += 1
        self._refused_metric.incr()
        if not self._refused_reported:
            self._refused_reported = True
            self._collector.report_error(
                f"windowed bolt {self._id!r}: the window holds "
                f"with_max_events_in_memory({self._max_events}) tuples; new tuples fail (and "
                f"are replayed by reliable spouts) until some leave; counted in the "
                f"'window_refused_tuples' metric (this is reported once); raise the limit, "
                f"shorten the window or add tasks"
            )
        self._collector.fail(tuple)

    def cleanup(self) -> Any:
        return self.bolt.cleanup()
