"""``WindowedBolt``: Storm's ``BaseWindowedBolt``, the class users subclass.

A ``WindowedBolt`` is declared with ``set_bolt`` like any bolt; ``TopologyBuilder`` runs it
inside a ``WindowedBoltExecutor`` (as Storm's ``setBolt(id, IWindowedBolt)`` does), which
buffers the tuples, fires the windows, anchors the bolt's emits and acks the tuples when
they leave the window.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from .._model.component import Component
from .._model.errors import InvalidComponentError, InvalidConfigError
from ._length import Count, Duration

__all__ = ["LATE_TUPLE_FIELDS", "WindowedBolt"]

#: The fields of the late tuple stream: the late tuple's values (a list) and its timestamp.
LATE_TUPLE_FIELDS = ("late_tuple", "timestamp")

#: Storm's default watermark interval (``topology.bolts.watermark.event.interval.ms``).
DEFAULT_WATERMARK_INTERVAL_SECS = 1.0


class WindowedBolt(Component):
    """A bolt that processes windows of tuples instead of single tuples.

    >>> from engine.windowing import Count, Duration, WindowedBolt
    >>> class Sum(WindowedBolt):
    ...     def prepare(self, conf, context, collector):
    ...         self.collector = collector
    ...     def execute(self, window):               # every 2 s: the last 10 s of tuples
    ...         total = sum(t["n"] for t in window.get())
    ...         self.collector.emit([total])          # anchored to every tuple in the window
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["sum"])
    >>> bolt = Sum().with_window(Duration(10), Duration(2))
    >>> event_time = Sum().with_tumbling_window(Duration(60)).with_timestamp_field("ts") \\
    ...     .with_lag(5).with_late_tuple_stream("late")
    >>> # builder.set_bolt("sum", bolt, 2).fields_grouping("numbers", Fields("key"))

    The window's tuples are acked when they leave it (so the topology's message timeout must
    exceed length + slide of a duration window, length + half its length if it slides by
    count; starting a topology whose timeout is shorter is refused, naming the bolt).
    Timestamps are seconds (numbers).
    """

    _length: Count | Duration | None = None
    _slide: Count | Duration | None = None
    _timestamp_field: str | None = None
    _timestamp_extractor: Callable[[Any], float] | None = None
    _lag_secs: float = 0.0
    _watermark_interval_secs: float | None = None
    _late_tuple_stream: str | None = None
    _max_events: int | None = None

    # --- Storm's builder methods ------------------------------------------------------
    def with_window(
        self, length: Count | Duration, slide: Count | Duration | None = None
    ) -> WindowedBolt:
        """A sliding window of ``length`` that fires every ``slide`` (default: every tuple
        for a count window, ``length`` for a duration window... i.e. tumbling)."""
        name = type(self).__name__
        for what, v in (("length", length), ("slide", slide)):
            if v is not None and not isinstance(v, (Count, Duration)):
                raise InvalidComponentError(
                    f"windowed bolt {name}: window {what} must be Count(n) or "
                    f"Duration(seconds), got {v!r}"
                )
        if slide is None:
            slide = Count(1) if isinstance(length, Count) else length
        if isinstance(length, Count) and isinstance(slide, Count):
            too_far = slide.n > length.n
        elif isinstance(length, Duration) and isinstance(slide, Duration):
            too_far = slide.seconds > length.seconds
        else:
            too_far = False
        if too_far:
            raise InvalidComponentError(
                f"windowed bolt {name}: slide {slide!r} is longer than the window "
                f"{length!r}: tuples between two windows would never be seen; make the "
                f"slide at most the length"
            )
        self._length, self._slide = length, slide
        return self

    def with_tumbling_window(self, length: Count | Duration) -> WindowedBolt:
        """Windows of ``length`` that do not overlap."""
        return self.with_window(length, length)

    def with_timestamp_field(self, field: str) -> WindowedBolt:
        """Event time: each tuple's timestamp (seconds) is its ``field``."""
        if not isinstance(field, str) or not field:
            raise InvalidComponentError(
                f"windowed bolt {type(self).__name__}: with_timestamp_field needs a field "
                f"name, got {field!r}"
            )
        self._timestamp_field = field
        return self

    def with_timestamp_extractor(self, extract: Callable[[Any], float]) -> WindowedBolt:
        """Event time: ``extract(tuple)`` gives each tuple's timestamp (seconds). It must
        pickle (a module-level function), as the bolt is copied per task."""
        if not callable(extract):
            raise InvalidComponentError(
                f"windowed bolt {type(self).__name__}: with_timestamp_extractor needs a "
                f"callable, got {extract!r}"
            )
        self._timestamp_extractor = extract
        return self

    def with_lag(self, seconds: float) -> WindowedBolt:
        """Event time: how far out of order tuples may arrive; the watermark trails the
        latest timestamp by this much."""
        self._lag_secs = _non_negative(self, "with_lag", seconds)
        return self

    def with_watermark_interval(self, seconds: float) -> WindowedBolt:
        """Event time: how often the watermark is computed (default 1 s)."""
        if _non_negative(self, "with_watermark_interval", seconds) == 0:
            raise InvalidComponentError(
                f"windowed bolt {type(self).__name__}: with_watermark_interval needs "
                f"seconds > 0, got {seconds!r}"
            )
        self._watermark_interval_secs = float(seconds)
        return self

    def with_late_tuple_stream(self, stream: str) -> WindowedBolt:
        """Event time: late tuples are emitted on ``stream`` (fields ``late_tuple``,
        ``timestamp``; declared for you) and then acked. Without it they are counted (the
        ``late_tuples`` metric) and acked."""
        if not isinstance(stream, str) or not stream or stream.startswith("__"):
            raise InvalidComponentError(
                f"windowed bolt {type(self).__name__}: with_late_tuple_stream needs a stream "
                f"id (not starting with '__'), got {stream!r}"
            )
        self._late_tuple_stream = stream
        return self

    def with_max_events_in_memory(self, n: int) -> WindowedBolt:
        """At most ``n`` tuples held per task. A count window longer than ``n`` is refused
        at declaration; a duration window that is full fails each new tuple (its spout
        replays it later) and reports why, instead of growing without bound."""
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise InvalidComponentError(
                f"windowed bolt {type(self).__name__}: with_max_events_in_memory needs a "
                f"positive int, got {n!r}"
            )
        self._max_events = n
        return self

    # --- what users implement ----------------------------------------------------------
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> Any:
        """Called once per task with the topology's config, the ``TopologyContext`` and an
        ``OutputCollector`` whose emits anchor to the current window's tuples."""

    def execute(self, window: Any) -> Any:
        """Process one ``TupleWindow``. Do not ack its tuples: they are acked when they leave
        the window."""
        raise NotImplementedError

    def cleanup(self) -> Any:
        """Called when the topology shuts down."""

    def as_bolt(self) -> Any:
        """The ``Bolt`` that runs this one: ``set_bolt`` calls it, as Storm's ``setBolt``
        wraps an ``IWindowedBolt`` in a ``WindowedBoltExecutor``."""
        from ._executor import WindowedBoltExecutor

        return WindowedBoltExecutor(self)

    # --- declaration ---------------------------------------------------------------------
    @property
    def is_event_time(self) -> bool:
        """Whether windows follow the tuples' own timestamps rather than the clock.

        Declaring a timestamp (field or extractor) is what switches a bolt to event time, so
        there is no separate flag to keep in step: windows then close on the watermark (which
        ticks advance every watermark interval), and tuples behind it are late.
        """
        return self._timestamp_field is not None or self._timestamp_extractor is not None

    def check_declaration(self, component_id: str) -> None:
        """Raise ``InvalidComponentError`` (naming ``component_id``) for a bolt declared
        wrongly; ``TopologyBuilder`` calls it."""
        where = f"windowed bolt {component_id!r} ({type(self).__name__})"
        if type(self).execute is WindowedBolt.execute:
            raise InvalidComponentError(f"{where} does not implement execute(window)")
        if inspect.iscoroutinefunction(type(self).execute):
            raise InvalidComponentError(
                f"{where}: execute(window) must be a plain method, not async def"
            )
        if self._length is None or self._slide is None:
            raise InvalidComponentError(
                f"{where} has no window: call with_window(length, slide) or "
                f"with_tumbling_window(length)"
            )
        if self._timestamp_field is not None and self._timestamp_extractor is not None:
            raise InvalidComponentError(
                f"{where}: give with_timestamp_field or with_timestamp_extractor, not both"
            )
        if self.is_event_time and not (
            isinstance(self._length, Duration) and isinstance(self._slide, Duration)
        ):
            raise InvalidComponentError(
                f"{where}: event-time windows need Duration length and slide, got "
                f"{self._length!r} / {self._slide!r}"
            )
        if not self.is_event_time:
            for what, used in (
                ("with_lag", self._lag_secs),
                ("with_watermark_interval", self._watermark_interval_secs),
                ("with_late_tuple_stream", self._late_tuple_stream),
            ):
                if used:
                    raise InvalidComponentError(
                        f"{where}: {what} needs event time; add with_timestamp_field(name) "
                        f"or with_timestamp_extractor(fn)"
                    )
        if (
            self._max_events is not None
            and isinstance(self._length, Count)
            and self._length.n > self._max_events
        ):
            raise InvalidComponentError(
                f"{where}: the window holds {self._length.n} tuples but "
                f"with_max_events_in_memory({self._max_events}) allows fewer; raise the "
                f"limit or shorten the window"
            )

    def declare_window_streams(self, declarer: Any) -> None:
        """Declare the streams the window adds to the bolt's own: the late tuple stream."""
        if self._late_tuple_stream is not None:
            declarer.declare_stream(self._late_tuple_stream, LATE_TUPLE_FIELDS)

    def tick_secs(self) -> float | None:
        """How often time must move for this window (the tick tuples' period), or None."""
        if self.is_event_time:
            return self._watermark_interval_secs or DEFAULT_WATERMARK_INTERVAL_SECS
        if isinstance(self._slide, Duration):
            return self._slide.seconds
        if isinstance(self._length, Duration):  # evict by time between count-slide firings
            return self._length.seconds / 2
        return None

    def window_span_secs(self) -> float:
        """How long a duration window may hold a tuple (what must fit in the message
        timeout): length + slide, or, sliding by count, length + the period of the ticks
        that evict by time (a tuple that arrives just after one leaves at most a tick
        after its length); 0 for a count window."""
        span = 0.0
        if isinstance(self._length, Duration):
            span += self._length.seconds
            if isinstance(self._slide, Duration):
                span += self._slide.seconds
            else:
                span += self._length.seconds / 2  # (``tick_secs``)
        return span

    def _span_words(self) -> str:
        """What ``window_span_secs`` adds up, for error messages."""
        if isinstance(self._slide, Duration):
            return f"length + slide ({self.window_span_secs():g} s)"
        return (
            f"length + the period of the ticks that evict from it under a count slide, half "
            f"its length ({self.window_span_secs():g} s)"
        )

    def validate_topology_conf(self, component_id: str, conf: Mapping[str, Any]) -> None:
        """Refuse a message timeout shorter than the window: its tuples would time out (and
        replay) before they leave it."""
        timeout = conf.get("topology.message.timeout.secs")
        enabled = conf.get("topology.enable.message.timeouts", True)
        span = self.window_span_secs()
        if timeout is not None and enabled and span and timeout < span:
            raise InvalidConfigError(
                f"windowed bolt {component_id!r}: topology.message.timeout.secs = {timeout} "
                f"is shorter than the window's {self._span_words()}: its tuples would time "
                f"out before they leave the window; set "
                f"the timeout above {span:g} s or shorten the window"
            )


def _non_negative(bolt: WindowedBolt, what: str, seconds: Any) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise InvalidComponentError(
            f"windowed bolt {type(bolt).__name__}: {what} needs seconds >= 0, got {seconds!r}"
        )
    return float(seconds)
