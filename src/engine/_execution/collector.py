"""Output collectors: how spouts and bolts emit, ack and fail.

What each kind of component emits through is a Protocol, Storm's interfaces in snake_case:
``IOutputCollector`` (a rich ``Bolt``'s), ``IBasicOutputCollector`` (a ``BasicBolt``'s)
and ``ISpoutOutputCollector`` (a ``Spout``'s). ``OutputCollector``,
``BasicOutputCollector`` and ``SpoutOutputCollector`` are Storm's classes of those names:
each wraps another collector (its *delegate*) and forwards every call, so a wrapper
subclasses one and overrides only what it intercepts; ``AnchoringOutputCollector`` is the
one wrapper that anchors emits naming no anchors to what its owner says (a window, a held
batch, a request's tuples). The engine hands each task a collector of its own that does
the work itself, without a delegate, to keep the hot path short.

Acking is Storm's XOR protocol, whose rules live in ``_columnar.xor``: the collectors apply them
per tuple (rich bolts) or on arrays for whole batches (basic bolts and spouts, whose emits
are collected as rows and sent on as ``TupleBatch`` es), checked against ``_columnar.xor`` by tests.
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable, Iterable, MutableSequence, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from .._columnar.batch import TupleBatch
from .._columnar.batch_collector import PendingTable, RowBatches, SpoutBatchEmitter
from .._columnar.xor import (
    ack,
    anchored_copy,
    batch_ack_ops,
    batch_roots,
    fail,
    multi_anchored_copy,
    reset,
    spout_tree,
)
from .._model.errors import EmitError, TupleStateError
from .._model.faults import Trace
from .._model.tuple import Source, Tuple
from .._monitor.stats import LatencyRecorder
from .._time.clock import Clock, SystemClock
from .acker import AckerOps
from .channel import OutBuffer
from .groupers import Grouper

__all__ = [
    "AnchoringOutputCollector",
    "BasicOutputCollector",
    "IBasicOutputCollector",
    "IOutputCollector",
    "ISpoutOutputCollector",
    "OutputCollector",
    "Route",
    "SpoutOutputCollector",
]

DEFAULT = "default"

#: What ``emit`` takes as anchors: one tuple, several, or none.
Anchors = Tuple | Iterable[Tuple] | None


class IOutputCollector(Protocol):
    """What a rich ``Bolt`` emits, acks and fails through (Storm's ``IOutputCollector``)."""

    def emit(
        self, values: Sequence[Any], stream: str = DEFAULT, anchors: Anchors = None
    ) -> Sequence[int]:
        """Emit ``values`` on ``stream`` anchored to ``anchors``; returns the target tasks."""
        ...

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = DEFAULT, anchors: Anchors = None
    ) -> None:
        """Emit to one ``task`` of a subscriber of the direct ``stream``."""
        ...

    def ack(self, tuple: Tuple) -> None:
        """``tuple`` was fully processed (after its children were emitted)."""
        ...

    def fail(self, tuple: Tuple) -> None:
        """``tuple`` failed: its trees fail at once (their spouts replay them)."""
        ...

    def reset_timeout(self, tuple: Tuple) -> None:
        """Push back the timeout of every tree ``tuple`` belongs to."""
        ...

    def report_error(self, error: BaseException | str) -> None:
        """Record an error of this task (the stats, the UI, the log)."""
        ...


class IBasicOutputCollector(Protocol):
    """What a ``BasicBolt`` emits through (Storm's ``IBasicOutputCollector``): every emit
    is anchored to the input being executed, which is acked when ``execute`` returns."""

    def emit(self, values: Sequence[Any], stream: str = DEFAULT) -> Sequence[int]:
        """Emit ``values`` on ``stream``, anchored to the input; returns the target tasks."""
        ...

    def emit_direct(self, task: int, values: Sequence[Any], stream: str = DEFAULT) -> None:
        """Emit ``values`` to ``task`` on the direct ``stream``, anchored to the input."""
        ...

    def reset_timeout(self, tuple: Tuple) -> None:
        """Push back the timeout of every tree the input belongs to."""
        ...

    def report_error(self, error: BaseException | str) -> None:
        """Record an error of this task."""
        ...


class ISpoutOutputCollector(Protocol):
    """What a ``Spout`` emits through (Storm's ``ISpoutOutputCollector``)."""

    def emit(
        self, values: Sequence[Any], stream: str = DEFAULT, msg_id: Any = None
    ) -> Sequence[int]:
        """Emit ``values``; with a ``msg_id`` the tree is tracked. Returns the target tasks."""
        ...

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = DEFAULT, msg_id: Any = None
    ) -> None:
        """Emit ``values`` to ``task`` on the direct ``stream``."""
        ...

    def emit_batch(
        self, data: Any, msg_ids: Any = None, stream: str = DEFAULT, tasks: Any = None
    ) -> int:
        """Emit many rows at once, each with its message id; returns the number of rows."""
        ...

    def pending_count(self) -> int:
        """Trees emitted with a message id and not yet acked or failed."""
        ...

    def report_error(self, error: BaseException | str) -> None:
        """Record an error of this task."""
        ...


class OutputCollector:
    """What a ``Bolt`` emits through. Wrap one by subclassing and passing it the delegate.

    >>> class Counting(OutputCollector):
    ...     def __init__(self, delegate):
    ...         super().__init__(delegate)
    ...         self.emits = 0
    ...     def emit(self, values, stream="default", anchors=None):
    ...         self.emits += 1
    ...         return super().emit(values, stream, anchors)
    """

    def __init__(self, delegate: IOutputCollector) -> None:
        self._delegate = delegate

    def emit(
        self,
        values: Sequence[Any],
        stream: str = DEFAULT,
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> Sequence[int]:
        """Emit ``values`` on ``stream`` anchored to ``anchors``; returns the target tasks."""
        return self._delegate.emit(values, stream, anchors)

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = DEFAULT,
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> None:
        """Emit to one ``task`` of a subscriber of the direct ``stream``."""
        self._delegate.emit_direct(task, values, stream, anchors)

    def ack(self, tuple: Tuple) -> None:
        """``tuple`` was fully processed: ack it after emitting its children, since its
        tree completes once every tuple in it is acked and children added later would
        belong to a tree already reported done. Each tuple is acked or failed once."""
        self._delegate.ack(tuple)

    def fail(self, tuple: Tuple) -> None:
        """``tuple`` could not be processed: its trees fail at once, without waiting for
        the timeout, and their spouts hear ``fail`` and may replay them."""
        self._delegate.fail(tuple)

    def reset_timeout(self, tuple: Tuple) -> None:
        """Push back the timeout of every tree ``tuple`` belongs to."""
        self._delegate.reset_timeout(tuple)

    def report_error(self, error: BaseException | str) -> None:
        """Record ``error`` in the topology's error log (counted and grouped per task, as
        the UI shows them) without failing anything: for trouble the bolt handled."""
        self._delegate.report_error(error)


class SpoutOutputCollector:
    """What a ``Spout`` emits through. Wrap one by subclassing and passing it the delegate."""

    def __init__(self, delegate: ISpoutOutputCollector) -> None:
        self._delegate = delegate

    def emit(
        self, values: Sequence[Any], stream: str = DEFAULT, msg_id: Any = None
    ) -> Sequence[int]:
        """Emit ``values``; with a ``msg_id`` the tree is tracked and the spout hears
        ``ack(msg_id)`` or ``fail(msg_id)``. Returns the target tasks."""
        return self._delegate.emit(values, stream, msg_id)

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = DEFAULT, msg_id: Any = None
    ) -> None:
        """Emit ``values`` to one ``task`` of a subscriber of the direct ``stream``, the
        spout choosing the task instead of a grouping (``TopologyContext`` lists the
        subscribers' tasks); ``msg_id`` tracks the tree as for ``emit``."""
        self._delegate.emit_direct(task, values, stream, msg_id)

    def emit_batch(
        self, data: Any, msg_ids: Any = None, stream: str = DEFAULT, tasks: Any = None
    ) -> int:
        """Emit many rows at once, each with its message id (see ``TupleBatch``): ``data``
        is one column per declared field, a mapping field -> column, or Arrow data."""
        return self._delegate.emit_batch(data, msg_ids, stream, tasks)

    def pending_count(self) -> int:
        """Trees emitted with a message id and not yet acked or failed."""
        return self._delegate.pending_count()

    def report_error(self, error: BaseException | str) -> None:
        """Record ``error`` in the topology's error log (counted and grouped per task, as
        the UI shows them) without failing anything: for trouble the spout handled."""
        self._delegate.report_error(error)


class BasicOutputCollector:
    """A ``BasicBolt``'s collector over a rich one: emits anchor to the input being executed
    (``_input``, set by whoever runs the bolt)."""

    __slots__ = ("_input", "out")

    def __init__(self, out: IOutputCollector) -> None:
        self.out = out
        self._input: Tuple | None = None

    def emit(self, values: Sequence[Any], stream: str = DEFAULT) -> Sequence[int]:
        """Emit ``values`` on ``stream``, anchored to the input; returns the target tasks."""
        return self.out.emit(values, stream, self._input)

    def emit_direct(self, task: int, values: Sequence[Any], stream: str = DEFAULT) -> None:
        """Emit ``values`` to ``task`` on the direct ``stream``, anchored to the input."""
        self.out.emit_direct(task, values, stream, self._input)

    def reset_timeout(self, tuple: Tuple) -> None:
        """Push back the timeout of every tree ``tuple`` belongs to."""
        self.out.reset_timeout(tuple)

    def report_error(self, error: BaseException | str) -> None:
        """Record an error of this task."""
        self.out.report_error(error)


class AnchoringOutputCollector(OutputCollector):
    """An ``OutputCollector`` whose emits that name no anchors are anchored to
    ``anchors_for(stream)``: ``default_anchors``, which its owner sets (the tuples of a held
    batch, of a request, of a window) and clears. A subclass overrides ``anchors_for`` to
    anchor by stream (say, not at all on a stream nobody subscribes to).

    >>> class Holding(Bolt):  # doctest: +SKIP
    ...     def prepare(self, conf, context, collector):
    ...         self.out = AnchoringOutputCollector(collector)
    ...     def flush(self, held):
    ...         self.out.default_anchors = held   # every emit below is anchored to them
    ...         self.out.emit(["done", len(held)])
    ...         self.out.default_anchors = None
    """

    def __init__(self, delegate: IOutputCollector) -> None:
        super().__init__(delegate)
        self.default_anchors: Anchors = None

    def anchors_for(self, stream: str) -> Anchors:
        """The anchors of an emit on ``stream`` that names none."""
        return self.default_anchors

    def emit(
        self,
        values: Sequence[Any],
        stream: str = DEFAULT,
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> Sequence[int]:
        if anchors is None:
            anchors = self.anchors_for(stream)
        return self._delegate.emit(values, stream, anchors)

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = DEFAULT,
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> None:
        if anchors is None:
            anchors = self.anchors_for(stream)
        self._delegate.emit_direct(task, values, stream, anchors)


class Route:
    """One stream of one sending task: its subscribers' groupers and the counters."""

    __slots__ = (
        "arity",
        "choose",
        "direct",
        "direct_tasks",
        "emitted",
        "fixed",
        "groupers",
        "one_each",
        "source",
        "subs",
    )

    def __init__(
        self,
        source: Source,
        direct: bool,
        groupers: list[Grouper],
        direct_tasks: frozenset[int],
    ) -> None:
        self.source = source
        self.arity = len(source.fields)
        self.direct = direct
        #: one grouper per (non-direct) subscriber: per-tuple choice, batch routing
        self.groupers = groupers
        #: their per-tuple choosers
        self.subs = subs = [g.choose for g in groupers]
        self.direct_tasks = direct_tasks
        #: every emit goes to one task (a direct stream, or one subscriber whose grouping
        #: chooses one task per tuple): its per-tuple emits are batched by that task alone
        self.one_each = direct or (len(groupers) == 1 and groupers[0].one_task)
        self.emitted = 0
        #: values -> target tasks, over every subscriber: the one chooser itself when
        #: there is one subscriber (the common case, one call on the hot path).
        self.choose: Callable[[Sequence[Any]], tuple[int, ...]]
        if direct:
            self.choose = self._not_for_emit
        elif len(subs) == 1:
            self.choose = subs[0]
        else:
            self.choose = self._choose_all
        #: the targets when they never depend on the values (one task, global, all, no
        #: subscriber): emit then skips the chooser call
        self.fixed: tuple[int, ...] | None = None
        if not direct:
            if not subs:
                self.fixed = ()
            elif len(subs) == 1:
                self.fixed = groupers[0].fixed

    def _choose_all(self, values: Sequence[Any]) -> tuple[int, ...]:
        return tuple(t for choose in self.subs for t in choose(values))

    def _not_for_emit(self, values: Sequence[Any]) -> tuple[int, ...]:
        raise EmitError(
            f"component {self.source.component!r} emitted on direct stream "
            f"{self.source.stream!r} with emit; use emit_direct(task, ...)"
        )


class CollectorHost(Protocol):
    """What a collector needs of its executor (``Executor`` provides it)."""

    component_id: str
    #: target task -> outgoing buffer (None where the task is not a target)
    out: list[OutBuffer | None]
    #: a batch executes synchronously: the acker is woken when it ends
    in_batch: bool
    acker_ops: AckerOps
    clock: Clock
    trace: Trace | None
    notify_acker: Callable[[], None]

    def rng_for(self, task: int) -> random.Random: ...

    def draw_ids_for(self, task: int) -> Callable[[int], np.ndarray]: ...

    def note_batch(self, rows: int) -> None: ...

    def record_error(self, task: int, error: str, tb: str) -> None: ...


class AsyncSpoutHost(CollectorHost, Protocol):
    """An async spout's executor: told of every emit (it arms a flush timer)."""

    def on_async_emit(self) -> None: ...


class _Emitter:
    """What the engine's bolt and spout collectors share: routing and error reports."""

    def __init__(self, executor: CollectorHost, task: int, routes: dict[str, Route]) -> None:
        self._executor = executor
        self._task = task
        self._routes = routes
        # target task -> outgoing buffer, shared per executor; routing only ever indexes the
        # tasks of subscribers, whose entries are lists (the None entries are other tasks).
        self._out = cast("list[OutBuffer]", executor.out)
        self._rand = executor.rng_for(task).getrandbits

    def _route(self, stream: str, values: Sequence[Any]) -> Route:
        route = self._routes.get(stream)
        if route is None:
            raise EmitError(
                f"component {self._executor.component_id!r} emitted on undeclared stream "
                f"{stream!r}; declared streams: {sorted(self._routes)}"
            )
        if len(values) != route.arity:
            raise EmitError(
                f"component {self._executor.component_id!r} emitted {len(values)} values on "
                f"stream {stream!r}, which declares {route.arity} fields "
                f"{list(route.source.fields)}: {list(values)!r}"
            )
        return route

    def _routed(self, stream: str, values: Sequence[Any]) -> tuple[Route, tuple[int, ...]]:
        """The route of an emit of ``values`` on ``stream`` (checked) and the targets it
        goes to (the route's fixed ones, or its chooser's pick)."""
        route = self._routes.get(stream)
        if route is None or len(values) != route.arity:
            route = self._route(stream, values)
        targets = route.fixed
        if targets is None:
            targets = route.choose(values)  # raises for a direct stream
        return route, targets

    def _direct_route(self, task: int, stream: str, values: Sequence[Any]) -> Route:
        route = self._route(stream, values)
        if not route.direct:
            raise EmitError(
                f"component {self._executor.component_id!r} called emit_direct on stream "
                f"{stream!r}, which is not direct; declare it with direct=True"
            )
        if task not in route.direct_tasks:
            raise EmitError(
                f"component {self._executor.component_id!r}: emit_direct to task {task} on "
                f"stream {stream!r}, but that task does not subscribe to it with a direct "
                f"grouping (direct subscribers' tasks: {sorted(route.direct_tasks)})"
            )
        return route

    def report_error(self, error: BaseException | str) -> None:
        if isinstance(error, BaseException):
            tb = "".join(traceback.format_exception(error))
            text = repr(error)
        else:
            tb = ""
            text = str(error)
        self._executor.record_error(self._task, text, tb)


class BoltCollector(_Emitter, OutputCollector):
    """The engine's collector for one bolt task."""

    def __init__(self, executor: CollectorHost, task: int, routes: dict[str, Route]) -> None:
        _Emitter.__init__(self, executor, task, routes)
        ops = executor.acker_ops
        #: where this task's acker operations go (``BoltExecutor.hold_acks`` may hold ACKs)
        self._ops: Any = ops
        self._ack_root = ops.ack_roots.append
        self._ack_val = ops.ack_vals.append
        self._fail_root = ops.fail_roots.append
        self._reset_root = ops.reset_roots.append
        self.acked = 0
        self.failed = 0
        #: id(tuple) -> execute start (perf_counter ns) for sampled tuples (process latency)
        self.process_starts: dict[int, int] = {}
        self.process_latency = LatencyRecorder()

    def emit(
        self,
        values: Sequence[Any],
        stream: str = DEFAULT,
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> Sequence[int]:
        route, targets = self._routed(stream, values)
        route.emitted += 1
        src = route.source
        out = self._out
        if anchors is None:
            for task in targets:
                out[task].append(Tuple(values, src, None, 0))
            return targets
        if type(anchors) is not Tuple:
            anchors = list(anchors)
            if len(anchors) != 1:
                self._emit_multi(values, src, targets, anchors)
                return targets
            anchors = anchors[0]
        a: Tuple = anchors
        if a._ack_val is None:
            raise _completed_anchor(self._executor.component_id, a, stream)
        rand = self._rand
        for task in targets:
            out[task].append(anchored_copy(values, src, a, rand))
        return targets

    def _emit_multi(
        self, values: Sequence[Any], src: Source, targets: Sequence[int], anchors: list[Tuple]
    ) -> None:
        """Storm's multi-anchoring: per copy, one edge id per anchor, XORed per root."""
        for a in anchors:
            if a._ack_val is None:
                raise _completed_anchor(self._executor.component_id, a, src.stream)
        rand = self._rand
        out = self._out
        for task in targets:
            out[task].append(multi_anchored_copy(values, src, anchors, rand))

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = DEFAULT,
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> None:
        route = self._direct_route(task, stream, values)
        route.emitted += 1
        if anchors is None:
            anchor_list: list[Tuple] = []
        elif type(anchors) is Tuple:
            anchor_list = [anchors]
        else:
            anchor_list = list(anchors)
        self._emit_multi(values, route.source, (task,), anchor_list)

    def ack(self, tuple: Tuple) -> None:
        if tuple._ack_val is None:
            raise _completed_twice(self._executor.component_id, tuple, "ack")
        ack(tuple, self._ack_root, self._ack_val)
        self.acked += 1
        if self.process_starts:
            start = self.process_starts.pop(id(tuple), None)
            if start is not None:
                self.process_latency.add_one(time.perf_counter_ns() - start)
        if not self._executor.in_batch:  # acked later, from a callback or another task
            self._executor.notify_acker()

    def fail(self, tuple: Tuple) -> None:
        if tuple._ack_val is None:
            raise _completed_twice(self._executor.component_id, tuple, "fail")
        if self.process_starts:
            self.process_starts.pop(id(tuple), None)
        fail(tuple, self._fail_root)
        self.failed += 1
        if not self._executor.in_batch:
            self._executor.notify_acker()

    def reset_timeout(self, tuple: Tuple) -> None:
        if tuple._ack_val is None:
            raise _completed_twice(self._executor.component_id, tuple, "reset_timeout")
        reset(tuple, self._reset_root)
        if not self._executor.in_batch:
            self._executor.notify_acker()

    def ack_many(self, tuples: Iterable[Tuple]) -> None:
        """``ack`` of each of ``tuples`` in one call (a windowed bolt acks what left its
        window at once); tuples already acked or failed are refused as ``ack`` refuses
        them."""
        ack_root, ack_val = self._ack_root, self._ack_val
        k = 0
        for t in tuples:
            if t._ack_val is None:
                raise _completed_twice(self._executor.component_id, t, "ack")
            ack(t, ack_root, ack_val)
            k += 1
        self.acked += k
        if not self._executor.in_batch:
            self._executor.notify_acker()

    def ack_rows(self, batch: TupleBatch, rows: np.ndarray) -> None:
        """Ack rows (an index array) of a batch this bolt took whole (``execute_many``) and
        made no ``Tuple`` views of: their ACKs as one array (``_xor.batch_ack_ops``)."""
        if batch.roots is not None and rows.shape[0]:
            self._ops.add_acks(*batch_ack_ops(batch, rows))
        self.acked += int(rows.shape[0])
        if not self._executor.in_batch:
            self._executor.notify_acker()

    def fail_rows(self, batch: TupleBatch, rows: np.ndarray) -> None:
        """``ack_rows`` for FAILs: the rows' trees fail at once."""
        if batch.roots is not None and rows.shape[0]:
            self._ops.add_fails(batch_roots(batch, rows))
        self.failed += int(rows.shape[0])
        if not self._executor.in_batch:
            self._executor.notify_acker()


class _RowBuffer:
    """What a task emitted on one stream since its emits were last sealed: the values, a
    tag per row (the input row it is anchored to, for a bolt; its message id, for a
    spout) and, unless every emit goes to the same fixed tasks, the targets of each."""

    __slots__ = ("arity", "choose", "fixed", "route", "tags", "targets", "values")

    def __init__(self, route: Route, tags: Callable[[], MutableSequence[Any]]) -> None:
        self.route = route
        self.arity = route.arity
        #: the targets of every emit when they never depend on the values, else None
        self.fixed = route.fixed
        self.choose = route.choose
        self.values: list[Sequence[Any]] = []
        #: a list (a list's append is the cheapest per emit; a bolt's anchor rows become
        #: one int64 array at the seal, ``RowBatches.send``)
        self.tags = tags()
        self.targets: list[tuple[int, ...]] = []


class _RowEmitter(_Emitter):
    """What basic bolts and spouts share: their per-tuple emits are collected per stream
    as rows, each ``emit`` only recording the values, a tag and the targets it chose (so
    a custom grouping runs once per tuple, and ``emit`` can return them); ``_take`` gives
    them back run by run, in emit order, for the caller to send on as batches.

    ``emit``'s fast path is for the stream of the current run: its checks and the bound
    ``append`` of its lists are cached on the emitter (``_to``), so an emit is a few
    attribute reads and three appends at most."""

    def __init__(self, executor: CollectorHost, task: int, routes: dict[str, Route]) -> None:
        super().__init__(executor, task, routes)
        self._bufs: dict[str, _RowBuffer] = {}
        #: where the emits switched stream since the last seal: (buffer, its first row)
        self._runs: list[tuple[_RowBuffer, int]] = []
        self._last: _RowBuffer | None = None
        # The current run's stream and what its emits need (None: no run, after a seal).
        self._stream: str | None = None
        self._arity = -1
        self._fixed: tuple[int, ...] | None = None
        self._choose: Callable[[Sequence[Any]], tuple[int, ...]] = _no_run
        self._add_value: Callable[[Sequence[Any]], None] = _no_run
        self._add_tag: Callable[[Any], None] = _no_run
        self._add_target: Callable[[tuple[int, ...]], None] = _no_run

    #: what holds a buffer's tags (``_RowBuffer.tags``)
    _tags: Callable[[], MutableSequence[Any]] = list

    def _buffer(self, stream: str, route: Route) -> _RowBuffer:
        buf = self._bufs.get(stream)
        if buf is None:
            buf = self._bufs[stream] = _RowBuffer(route, self._tags)
        return buf

    def _to(self, stream: str, buf: _RowBuffer) -> None:
        """The emits go on in ``buf`` (another stream, or the first emit after a seal)."""
        if buf is not self._last:
            self._runs.append((buf, len(buf.values)))
            self._last = buf
        self._stream = stream
        self._arity = buf.arity
        self._fixed = buf.fixed
        self._choose = buf.choose
        self._add_value = buf.values.append
        self._add_tag = buf.tags.append
        self._add_target = buf.targets.append

    def _emit_other(self, values: Sequence[Any], stream: str, tag: Any) -> Sequence[int]:
        """``emit``'s slow path: another stream than the current run's, or a first emit."""
        route, targets = self._routed(stream, values)  # raises before anything is recorded
        buf = self._buffer(stream, route)
        self._to(stream, buf)
        if buf.fixed is None:
            self._add_target(targets)
        self._add_value(values)
        self._add_tag(tag)
        return targets

    def _record_direct(self, task: int, values: Sequence[Any], stream: str, tag: Any) -> None:
        route = self._direct_route(task, stream, values)
        if stream is not self._stream:
            self._to(stream, self._buffer(stream, route))
        self._add_target((task,))
        self._add_value(values)
        self._add_tag(tag)

    def _take(
        self,
    ) -> list[tuple[Route, list[Any], list[tuple[int, ...]] | None, Sequence[Any]]]:
        """Every run of emits on one stream since the last call, in emit order, as
        ``(route, values, targets or None for the route's fixed ones, tags)``."""
        runs = self._runs
        taken: list[tuple[Route, list[Any], list[tuple[int, ...]] | None, Sequence[Any]]]
        if len(runs) == 1:
            buf = runs[0][0]
            taken = [
                (buf.route, buf.values, None if buf.fixed is not None else buf.targets, buf.tags)
            ]
        else:
            taken = []
            end: dict[int, int] = {}
            for buf, lo in reversed(runs):
                hi = end.get(id(buf), len(buf.values))
                end[id(buf)] = lo
                targets = None if buf.fixed is not None else buf.targets[lo:hi]
                taken.append((buf.route, buf.values[lo:hi], targets, buf.tags[lo:hi]))
            taken.reverse()
        for buf, _ in runs:
            if buf.values:  # the lists now belong to the batches made of them
                buf.values = []
                buf.tags = self._tags()
                buf.targets = []
        runs.clear()
        self._last = None
        self._stream = None
        return taken


class BasicCollector(_RowEmitter):
    """The engine's ``BasicOutputCollector`` for a synchronous basic bolt task, which runs
    over the batches the engine moves: ``emit`` records the values with the input row
    being executed (the implicit anchor); when the batch has been executed, ``seal``
    sends each stream's rows on as one ``TupleBatch`` per target task, their edge ids drawn
    and XORed into the input rows' ack values for the whole batch, and acks (or fails) the
    input rows with arrays: no ``Tuple`` per emit, no per-tuple id or ack. Streams keep
    their emit order towards every task."""

    def __init__(self, executor: CollectorHost, task: int, routes: dict[str, Route]) -> None:
        super().__init__(executor, task, routes)
        #: the batch being executed, and the index of the row being executed in it
        self._batch: TupleBatch | None = None
        self._row = 0
        #: the tuples being executed one by one (``begin_tuples``), else None
        self._tuples: list[Tuple] | None = None
        ops = executor.acker_ops
        self._ops = ops
        self._reset_root = ops.reset_roots.append
        self._batches = RowBatches(
            executor.component_id,
            task,
            routes,
            self._out,
            ops,
            executor.draw_ids_for(task),
            executor.note_batch,
        )
        self.acked = 0
        self.failed = 0

    def emit(self, values: Sequence[Any], stream: str = DEFAULT) -> Sequence[int]:
        """Emit ``values`` on ``stream``, anchored to the input; returns the target tasks."""
        if stream is not self._stream or len(values) != self._arity:
            return self._emit_other(values, stream, self._row)
        targets = self._fixed
        if targets is None:
            targets = self._choose(values)
            self._add_target(targets)
        self._add_value(values)
        self._add_tag(self._row)
        return targets

    def emit_direct(self, task: int, values: Sequence[Any], stream: str = DEFAULT) -> None:
        """Emit ``values`` to ``task`` on the direct ``stream``, anchored to the input."""
        tuples = self._tuples
        if tuples is None:
            self._record_direct(task, values, stream, self._row)
            return
        route = self._direct_route(task, stream, values)
        route.emitted += 1
        self._out[task].append(anchored_copy(values, route.source, tuples[self._row], self._rand))

    def _emit_other(self, values: Sequence[Any], stream: str, tag: Any) -> Sequence[int]:
        tuples = self._tuples
        if tuples is None:
            return super()._emit_other(values, stream, tag)
        # A few rows (``begin_tuples``): each emit a Tuple now, rule 2 per tuple.
        route, targets = self._routed(stream, values)
        route.emitted += 1
        anchor, src, out, rand = tuples[tag], route.source, self._out, self._rand
        for task in targets:
            out[task].append(anchored_copy(values, src, anchor, rand))
        return targets

    def begin_tuples(self, tuples: list[Tuple]) -> None:
        """A few tuples (``tuples``, with their own ids) are about to be executed: their
        emits leave as ``Tuple`` s, their acks as the per-tuple lists (``seal_tuples``).
        For a handful of rows that costs less than the arrays of a batch."""
        self._tuples = tuples
        self._stream = None  # every emit takes ``_emit_other``

    def seal_tuples(self, tuples: list[Tuple], failed: list[int]) -> None:
        """``tuples`` were executed, rows ``failed`` raised: ack the others (rule 3 per
        tuple) and fail those."""
        ops = self._ops
        ack_root, ack_val = ops.ack_roots.append, ops.ack_vals.append
        fails: list[int] = []
        bad = set(failed)
        for i, t in enumerate(tuples):
            if t._ack_val is None:
                continue
            if i in bad:
                fail(t, fails.append)
            else:
                ack(t, ack_root, ack_val)
        if fails:
            ops.add_fails(np.array(fails, np.uint64))
        k = len(bad)
        self.acked += len(tuples) - k
        self.failed += k
        self._tuples = None

    def reset_timeout(self, tuple: Tuple) -> None:
        """Push back the timeout of every tree the input belongs to."""
        batch = self._batch
        if tuple._root is self and batch is not None:  # the row view: the current row's
            if batch.roots is not None:
                rows = np.array([self._row], np.int64)
                self._ops.add_resets(batch_roots(batch, rows))
        else:
            reset(tuple, self._reset_root)

    def current_anchors_to_ids(self) -> dict[int, int]:
        """The tree of the row being executed (the row view's ``anchors_to_ids``)."""
        batch = self._batch
        if batch is None or batch.roots is None:
            return {}
        return batch._view(self._row, ()).anchors_to_ids

    def begin(self, batch: TupleBatch) -> None:
        """``batch`` is about to be executed, row by row."""
        self._batch = batch

    def seal(self, batch: TupleBatch, failed: list[int]) -> None:
        """``batch`` was executed, rows ``failed`` raised: send what was emitted on, then
        ack every other row and fail those."""
        if self._runs:
            send = self._batches.send
            for route, values, targets, rows in self._take():
                send(route, values, targets, batch, rows)
        n = batch.n
        k = len(failed)
        if batch.roots is not None and n:
            if k:
                bad = np.array(failed, np.int64)
                self._ops.add_fails(batch_roots(batch, bad))
                keep = np.ones(n, bool)
                keep[bad] = False
                ok = np.flatnonzero(keep)
                if ok.shape[0]:
                    self._ops.add_acks(*batch_ack_ops(batch, ok))
            else:
                self._ops.add_acks(*batch_ack_ops(batch, None))  # every row
        self.acked += n - k
        self.failed += k
        self._batch = None


class UntrackedBasicCollector(BasicCollector):
    """``BasicCollector`` in a topology without ackers, where no row has a tree: ``emit``
    records no anchor row (``RowBatches.send`` reads none for an untracked input), and
    the executor sets none per row."""

    def emit(self, values: Sequence[Any], stream: str = DEFAULT) -> Sequence[int]:
        """Emit ``values`` on ``stream``; returns the target tasks."""
        if stream is not self._stream or len(values) != self._arity:
            return self._emit_other(values, stream, 0)
        targets = self._fixed
        if targets is None:
            targets = self._choose(values)
            self._add_target(targets)
        self._add_value(values)
        return targets

    def _to(self, stream: str, buf: _RowBuffer) -> None:
        super()._to(stream, buf)
        self._add_tag = _no_tag  # the slow paths' tags: none either


class SpoutCollector(_RowEmitter, SpoutOutputCollector):
    """The engine's collector for one spout task.

    ``emit`` records the values and the message id; the executor seals the emits when it
    flushes (after a turn of ``next_tuple`` calls, or of ``ack``/``fail`` callbacks), and
    they leave as one ``TupleBatch`` per stream and target task, each tracked row its own
    tree with its ids drawn in bulk and its INIT among the batch's INIT arrays. An async
    spout's first emit after a seal arms the executor's flush timer (``on_emit``).
    """

    def __init__(
        self,
        executor: CollectorHost,
        task: int,
        routes: dict[str, Route],
        acking: bool,
        on_emit: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(executor, task, routes)
        self._acking = acking
        clock = executor.clock
        #: the emit time of a tracked root (its complete latency starts there)
        self._now_ns = time.monotonic_ns if type(clock) is SystemClock else clock.now_ns
        #: root id -> message id, for trees in flight
        self.pending = PendingTable()
        #: message ids to ack at once because nothing tracks them (no ackers)
        self.auto_acked: list[Any] = []
        #: rows emitted (one by one or in batches), ever
        self.emits = 0
        self.trace = executor.trace
        self._on_emit = on_emit
        #: when the first emit since the last seal was made: the INITs' emit time
        self._first_ns = 0
        #: an emit without a message id since the last seal
        self._untracked = False
        self._batch = SpoutBatchEmitter(
            executor.component_id,
            task,
            routes,
            self._out,
            executor.acker_ops,
            executor.draw_ids_for(task),
            executor.note_batch,
            acking=acking,
            pending=self.pending,
            auto_acked=self.auto_acked,
            now_ns=self._now_ns,
            trace=self.trace,
        )

    def emit(
        self, values: Sequence[Any], stream: str = DEFAULT, msg_id: Any = None
    ) -> Sequence[int]:
        targets: Sequence[int] | None
        if stream is not self._stream or len(values) != self._arity:
            targets = self._emit_other(values, stream, msg_id)
        else:
            targets = self._fixed
            if targets is None:
                targets = self._choose(values)
                self._add_target(targets)
            self._add_value(values)
            self._add_tag(msg_id)
        if msg_id is None:
            self._untracked = True
        self.emits += 1
        return targets

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = DEFAULT, msg_id: Any = None
    ) -> None:
        self._record_direct(task, values, stream, msg_id)
        if msg_id is None:
            self._untracked = True
        self.emits += 1

    def _to(self, stream: str, buf: _RowBuffer) -> None:
        if not self._runs:
            self._first_ns = self._now_ns()
            if self._on_emit is not None:
                self._on_emit()
        super()._to(stream, buf)

    def seal(self) -> None:
        """Send what was emitted since the last seal on, as batches (see the class)."""
        if not self._runs:
            return
        emitted_ns = self._first_ns
        untracked = self._untracked
        self._untracked = False
        taken = self._take()
        if sum(len(values) for _, values, _, _ in taken) <= _PER_TUPLE_SEAL:
            # A handful (a paced spout's trickle): a Tuple each costs less than arrays.
            for route, values, targets, msg_ids in taken:
                for j, v in enumerate(values):
                    to = route.fixed if targets is None else targets[j]
                    assert to is not None  # no recorded targets: the route's fixed ones
                    self._send_tuple(route, to, v, msg_ids[j], emitted_ns)
            return
        send = self._batch.send_rows
        for route, values, targets, msg_ids in taken:
            send(route, values, targets, msg_ids, untracked, emitted_ns)

    def _send_tuple(
        self,
        route: Route,
        targets: Sequence[int],
        values: Sequence[Any],
        msg_id: Any,
        emitted_ns: int,
    ) -> int | None:
        """One emit as a ``Tuple`` per target, its tree per rule 1; returns its root (None:
        untracked)."""
        route.emitted += 1
        src = route.source
        out = self._out
        if msg_id is None or not self._acking:
            for task in targets:
                out[task].append(Tuple(values, src, None, 0))
            if msg_id is not None:
                self.auto_acked.append(msg_id)
            return None
        root, edges, init = spout_tree(self._rand, len(targets))
        for task, e in zip(targets, edges, strict=True):
            out[task].append(Tuple(values, src, root, e))
        self.pending[root] = msg_id
        ops = self._executor.acker_ops
        ops.init_roots.append(root)
        ops.init_vals.append(init)
        ops.init_tasks.append(self._task)
        ops.init_times.append(emitted_ns)
        return root

    def emit_batch(
        self, data: Any, msg_ids: Any = None, stream: str = DEFAULT, tasks: Any = None
    ) -> int:
        """Emit many rows at once: ``data`` is one column per declared field (lists,
        numpy or Arrow arrays), a mapping field -> column, or an Arrow record batch;
        ``msg_ids`` one message id per row (each row is its own tracked tree) or None. On a
        direct stream, ``tasks`` gives each row's task. Returns the number of rows."""
        self.seal()  # what came before leaves first
        n = self._batch.emit_batch(data, msg_ids, stream, tasks)
        self.emits += n
        return n

    def pending_count(self) -> int:
        """Trees emitted with a message id and not yet acked or failed (those still to be
        sealed included)."""
        buffered = sum(len(buf.tags) for buf in self._bufs.values())
        if buffered and self._untracked:
            buffered = sum(m is not None for buf in self._bufs.values() for m in buf.tags)
        return len(self.pending) + (buffered if self._acking else 0)


class TracedSpoutCollector(SpoutCollector):
    """A spout collector when the topology is traced (``engine.testing``'s faults and
    traces): every emit is sent at once as a ``Tuple`` (rule 1 per tuple), so the trace
    records each tree's root as it is emitted."""

    #: never None here: the executor makes this kind only for a traced topology
    trace: Trace

    def emit(
        self, values: Sequence[Any], stream: str = DEFAULT, msg_id: Any = None
    ) -> Sequence[int]:
        route, targets = self._routed(stream, values)
        self._send(route, targets, values, msg_id)
        return targets

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = DEFAULT, msg_id: Any = None
    ) -> None:
        route = self._direct_route(task, stream, values)
        self._send(route, (task,), values, msg_id)

    def _send(
        self, route: Route, targets: Sequence[int], values: Sequence[Any], msg_id: Any
    ) -> None:
        self.emits += 1
        if self._on_emit is not None:
            self._on_emit()
        root = self._send_tuple(route, targets, values, msg_id, self._now_ns())
        if msg_id is None:
            return
        if root is None:  # acked by definition: nothing tracks the tree
            self._traced("ack", msg_id, self._traced("emit", msg_id, None))
        else:
            self._traced("emit", msg_id, root)

    def _traced(self, kind: str, msg_id: Any, root: Any) -> Any:
        ex = self._executor
        t = ex.clock.now_ns() / 1e9
        return self.trace.record(t, kind, ex.component_id, self._task, msg_id, root)


#: A spout's sealed emits of at most this many rows leave as ``Tuple`` s (see ``seal``).
_PER_TUPLE_SEAL = 16


def _no_tag(tag: Any) -> None:
    """An untracked emit's anchor row: not recorded (``UntrackedBasicCollector``)."""


def _no_run(*args: Any) -> Any:
    raise AssertionError("an emit's fast path ran with no current run")


def _completed_anchor(component: str, anchor: Tuple, stream: str) -> TupleStateError:
    return TupleStateError(
        f"component {component!r} emitted on stream {stream!r} anchored to {anchor!r}, which "
        f"was already acked or failed; emit a tuple's children before you ack or fail it "
        f"(Storm would silently time the tree out)"
    )


def _completed_twice(component: str, tuple: Tuple, what: str) -> TupleStateError:
    return TupleStateError(
        f"component {component!r} called {what} on {tuple!r}, which was already acked or "
        f"failed; every tuple is acked or failed exactly once"
    )


if TYPE_CHECKING:  # the engine's collectors are what the Protocols say

    def _conforms(
        rich: BoltCollector, basic: BasicCollector, spout: SpoutCollector
    ) -> tuple[IOutputCollector, IBasicOutputCollector, ISpoutOutputCollector]:
        return rich, basic, spout
