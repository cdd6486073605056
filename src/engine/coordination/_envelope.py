"""The envelope: a request id carried around a bolt's own values, like IP around TCP.

On the wire every tuple of a coordinated topology starts with its request (or batch) id,
as in Storm. A delegate wrapped with ``CoordinatedBolt(..., envelope=True)`` never sees that
field: it receives ``EnvelopeTuple`` s holding only its payload, declares and emits only its
payload, and the envelope puts the id back in front of everything it emits. Bolts of both
kinds interoperate, because the wire format is the same.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Sequence
from typing import Any

from .._execution.collector import OutputCollector
from .._model.errors import EmitError
from .._model.tuple import Tuple

__all__ = ["ENVELOPE_ID_FIELD", "EnvelopeTuple", "request_id_of"]

#: The name of the id field the envelope prepends to every declared stream.
ENVELOPE_ID_FIELD = "id"

_MISSING: Any = object()

#: The id of the request whose tuple (or finish / timeout callback) is running right now.
#: A context variable, so each tuple an async bolt has in flight sees its own.
current_request_id: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "squall_current_request_id", default=_MISSING
)


class EnvelopeTuple(Tuple):
    """What an enveloped delegate receives: the payload of a wire tuple, without its id.

    Values, fields and sources read like any tuple's; ``request_id`` is the id the envelope
    carried, ``outer`` the wire tuple itself. Ack, fail and anchor to it as usual.

    >>> # def execute(self, tuple, collector):           # in an enveloped BasicBolt
    >>> #     collector.emit([tuple["word"].upper()])    # the envelope adds the id
    """

    __slots__ = ("outer", "request_id")

    def __init__(self, outer: Tuple, src: Any) -> None:
        values = outer.values
        Tuple.__init__(self, values[1:], src, None, 0)
        self.outer = outer
        self.request_id = values[0]

    @property
    def completed(self) -> bool:
        return self.outer.completed

    @property
    def anchors_to_ids(self) -> dict[int, int]:
        return self.outer.anchors_to_ids

    @property
    def root_ids(self) -> frozenset[int]:
        """The wire tuple's roots: acking or anchoring to the envelope acts on the tree the
        request travels in."""
        return self.outer.root_ids

    def __repr__(self) -> str:
        return (
            f"EnvelopeTuple({list(self.values)!r}, request_id={self.request_id!r}, "
            f"source={self.source_component!r}:{self.source_stream!r}@{self.source_task})"
        )


def request_id_of(tuple: Tuple) -> Any:
    """The request / batch id a tuple belongs to: its envelope's, or its first value."""
    if type(tuple) is EnvelopeTuple:
        return tuple.request_id
    return tuple.values[0]


def _outer(t: Tuple) -> Tuple:
    return t.outer if type(t) is EnvelopeTuple else t


class EnvelopeOutputCollector(OutputCollector):
    """Wraps a coordinated collector: puts the request id in front of every emit and hands
    the wire tuples, not the envelopes, to ``ack``, ``fail`` and anchoring."""

    def __init__(self, delegate: OutputCollector, component_id: str) -> None:
        super().__init__(delegate)
        self._component_id = component_id

    def _unwrap(
        self, anchors: Tuple | Iterable[Tuple] | None
    ) -> tuple[Tuple | list[Tuple] | None, Any]:
        if anchors is None:
            return None, self._current_id()
        if isinstance(anchors, Tuple):
            return _outer(anchors), request_id_of(anchors)
        outer: list[Tuple] = []
        rid = _MISSING
        for a in anchors:
            outer.append(_outer(a))
            aid = request_id_of(a)
            if rid is _MISSING:
                rid = aid
            elif aid != rid:
                raise EmitError(
                    f"component {self._component_id!r} anchored one emit to tuples of two "
                    f"requests ({rid!r} and {aid!r}); the envelope can carry one request id"
                )
        if rid is _MISSING:
            rid = self._current_id()
        return outer, rid

    def _current_id(self) -> Any:
        rid = current_request_id.get()
        if rid is _MISSING:
            raise EmitError(
                f"component {self._component_id!r} emitted without anchors outside execute, "
                f"finished_id or timeout_id, so the envelope has no request id to carry; "
                f"anchor the emit to a tuple of the request"
            )
        return rid

    def emit(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> Sequence[int]:
        outer, rid = self._unwrap(anchors)
        return self._delegate.emit([rid, *values], stream, outer)

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> None:
        outer, rid = self._unwrap(anchors)
        self._delegate.emit_direct(task, [rid, *values], stream, outer)

    def ack(self, tuple: Tuple) -> None:
        self._delegate.ack(_outer(tuple))

    def fail(self, tuple: Tuple) -> None:
        self._delegate.fail(_outer(tuple))

    def reset_timeout(self, tuple: Tuple) -> None:
        self._delegate.reset_timeout(_outer(tuple))
