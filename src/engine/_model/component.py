"""Base classes users subclass: ``Spout``, ``Bolt``, ``BasicBolt``; and the declarer.

Every user method may be a plain function or an ``async def`` (then it is awaited). An async
``execute`` lets one bolt task have several tuples in flight
(``topology.bolt.max.inflight``), which Storm cannot do.

Components are copied per task with ``pickle`` (as Storm serializes them), so they must be
picklable, and state that is not (connections, sockets) belongs in ``open``/``prepare``.

This module is the model: it imports no machinery. The ``context`` a task receives is an
``engine.TopologyContext`` and the collectors are ``engine.SpoutOutputCollector``,
``engine.OutputCollector`` and ``engine.BasicOutputCollector``; they are typed ``Any`` here so
that a subclass may annotate its parameters with those classes (or leave them bare) without
narrowing the base class's signature.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidDeclarationError
from .fields import Fields
from .tuple import Tuple

__all__ = [
    "DEFAULT_STREAM_ID",
    "BasicBolt",
    "Bolt",
    "Component",
    "OutputFieldsDeclarer",
    "Spout",
    "StreamInfo",
]

#: Storm's ``Utils.DEFAULT_STREAM_ID``.
DEFAULT_STREAM_ID = "default"


@dataclass(frozen=True)
class StreamInfo:
    """A declared output stream: its fields and whether it is direct."""

    fields: Fields
    direct: bool = False


class OutputFieldsDeclarer:
    """Collects a component's output streams in ``declare_output_fields``.

    A component says up front what it emits, so that ``create_topology`` can check every
    subscription and grouping against it before anything runs.

    >>> from engine import OutputFieldsDeclarer
    >>> declarer = OutputFieldsDeclarer("split")
    >>> declarer.declare(["word"])
    >>> declarer.declare_stream("errors", ["line", "reason"])
    >>> {stream: list(info.fields) for stream, info in declarer.streams.items()}
    {'default': ['word'], 'errors': ['line', 'reason']}
    """

    def __init__(self, component_id: str = "") -> None:
        self._component_id = component_id
        self.streams: dict[str, StreamInfo] = {}

    def declare(self, fields: Fields | Iterable[str], direct: bool = False) -> None:
        """Declare the ``default`` stream."""
        self.declare_stream(DEFAULT_STREAM_ID, fields, direct)

    def declare_stream(
        self, stream_id: str, fields: Fields | Iterable[str], direct: bool = False
    ) -> None:
        """Declare stream ``stream_id`` with ``fields``; ``direct=True`` makes it a stream
        whose every tuple names its receiving task (``emit_direct``). Bolts subscribe to a
        stream by its id, and what they may group on is these fields, so a mistake here
        (a reserved ``__`` id, a stream declared twice, a bare string for the fields) is
        an ``InvalidDeclarationError`` naming the component."""
        where = f"component {self._component_id!r}: " if self._component_id else ""
        if not isinstance(stream_id, str) or not stream_id:
            raise InvalidDeclarationError(
                f"{where}stream ids must be non-empty strings, got {stream_id!r}"
            )
        if stream_id.startswith("__"):
            raise InvalidDeclarationError(
                f"{where}stream id {stream_id!r} is reserved (ids starting with '__' belong "
                f"to the system); rename the stream"
            )
        if stream_id in self.streams:
            raise InvalidDeclarationError(f"{where}stream {stream_id!r} is declared twice")
        if isinstance(fields, str):
            raise InvalidDeclarationError(
                f"{where}stream {stream_id!r}: pass Fields({fields!r}) or a list of names, "
                f"not a bare string"
            )
        if not isinstance(fields, Fields):
            try:
                fields = Fields(list(fields))
            except InvalidDeclarationError as exc:
                raise InvalidDeclarationError(f"{where}stream {stream_id!r}: {exc}") from None
        self.streams[stream_id] = StreamInfo(fields, bool(direct))


class Component:
    """What spouts and bolts share: their outputs, their configuration, their logger."""

    @property
    def logger(self) -> logging.Logger:
        """This component's logger, ``engine.component.<component id>`` once its task is
        set up (the engine logs the component's errors there too), like streamparse's
        ``self.logger``."""
        name = getattr(self, "_squall_logger", None)
        return logging.getLogger(name or f"engine.component.{type(self).__name__}")

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare output streams with ``declarer.declare`` / ``declare_stream``."""

    def component_configuration(self) -> Mapping[str, Any] | None:
        """Config keys overriding the topology's for this component (Storm's allow-list)."""
        return None


class Spout(Component):
    """A source of tuples.

    >>> from engine import Spout
    >>> class Numbers(Spout):
    ...     def open(self, conf, context, collector):
    ...         self.collector, self.n = collector, 0
    ...     def next_tuple(self):
    ...         self.n += 1
    ...         self.collector.emit([self.n], msg_id=self.n)   # reliable: acked or failed
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["n"])
    """

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> Any:
        """Called once per task before anything else, with the topology's config, the task's
        ``TopologyContext`` and its ``SpoutOutputCollector``."""

    def close(self) -> Any:
        """Called when the topology shuts down."""

    def activate(self) -> Any:
        """Called after ``open`` and whenever the topology is activated again."""

    def deactivate(self) -> Any:
        """Called when the topology is deactivated; ``next_tuple`` is not called meanwhile."""

    def next_tuple(self) -> Any:
        """Emit zero or more tuples. Must not block: return when there is nothing to emit."""
        raise NotImplementedError

    def ack(self, msg_id: Any) -> Any:
        """The tuple tree of the tuple emitted with ``msg_id`` was fully processed."""

    def fail(self, msg_id: Any) -> Any:
        """The tree failed or timed out: replay the message if it must not be lost."""

    def ack_batch(self, msg_ids: list[Any]) -> Any:
        """The trees of every message in ``msg_ids`` were fully processed. Override it to
        take acks in bulk (a spout that emits with ``emit_batch``, say); by default it
        calls ``ack`` for each, and the engine calls ``ack`` itself when this is not
        overridden."""
        for msg_id in msg_ids:
            self.ack(msg_id)

    def is_exhausted(self) -> bool:
        """For finite spouts (Storm's ``CompletableSpout``): True once nothing is left to
        emit or replay. A topology whose spouts are all exhausted, with nothing pending,
        completes. A spout that cannot go on (its source is broken) raises the error here
        instead, once what it emitted is done: the run ends with it
        (``wait_until_complete`` raises it)."""
        return False


class Bolt(Component):
    """Processes tuples; anchors its emits and acks or fails every input itself.

    >>> from engine import Bolt
    >>> class Split(Bolt):
    ...     def prepare(self, conf, context, collector):
    ...         self.collector = collector
    ...     def execute(self, tuple):
    ...         for word in tuple[0].split():
    ...             self.collector.emit([word], anchors=[tuple])
    ...         self.collector.ack(tuple)
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["word"])
    """

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> Any:
        """Called once per task before the first ``execute``, with the topology's config, the
        task's ``TopologyContext`` and its ``OutputCollector``."""

    def execute(self, tuple: Tuple) -> Any:
        """Process one tuple. Every input must eventually be acked or failed."""
        raise NotImplementedError

    def cleanup(self) -> Any:
        """Called when the topology shuts down."""


class BasicBolt(Component):
    """A bolt whose emits anchor to the input and whose input is acked after ``execute``.

    Raise ``FailedException`` to fail the input instead, ``ReportedFailedException`` to
    also report the error.

    >>> from engine import BasicBolt
    >>> class Upper(BasicBolt):
    ...     def execute(self, tuple, collector):
    ...         collector.emit([tuple[0].upper()])
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["word"])
    """

    def prepare(self, conf: Mapping[str, Any], context: Any) -> Any:
        """Called once per task before the first ``execute``, with the topology's config and
        the task's ``TopologyContext``."""

    def execute(self, tuple: Tuple, collector: Any) -> Any:
        """Process one tuple; ``collector`` is a ``BasicOutputCollector`` anchored to it."""
        raise NotImplementedError

    def cleanup(self) -> Any:
        """Called when the topology shuts down."""
