"""Output collectors: how spouts and bolts emit, ack and fail.

``OutputCollector`` and ``SpoutOutputCollector`` are Storm's classes: each wraps another
collector (its *delegate*) and forwards every call, so a wrapper such as a coordinating
bolt subclasses one and overrides only what it intercepts. The engine hands each task a
private subclass that does the work itself, without a delegate, to keep the hot path short.

Acking is Storm's XOR protocol, whose rules live in ``_xor``: the collectors apply them,
and their single-root fast paths inline them (checked against ``_xor`` by tests).
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from ._acker import AckerOps
from ._batch import TupleBatch
from ._batch_collector import SpoutBatchEmitter
from ._clock import Clock, SystemClock
from ._errors import EmitError, TupleStateError
from ._faults import Trace
from ._groupers import Grouper
from ._stats import LatencyRecorder
from ._tuple import Source, Tuple
from ._xor import (
    ack,
    anchored_copy,
    batch_ack_ops,
    batch_roots,
    fail,
    multi_anchored_copy,
    reset,
)

__all__ = [
    "BasicOutputCollector",
    "OutputCollector",
    "Route",
    "SpoutOutputCollector",
]

DEFAULT = "default"


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

    def __init__(self, delegate: OutputCollector) -> None:
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
        self._delegate.ack(tuple)

    def fail(self, tuple: Tuple) -> None:
        self._delegate.fail(tuple)

    def reset_timeout(self, tuple: Tuple) -> None:
        """Push back the timeout of every tree ``tuple`` belongs to."""
        self._delegate.reset_timeout(tuple)

    def report_error(self, error: BaseException | str) -> None:
        self._delegate.report_error(error)


class SpoutOutputCollector:
    """What a ``Spout`` emits through. Wrap one by subclassing and passing it the delegate."""

    def __init__(self, delegate: SpoutOutputCollector) -> None:
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
        self._delegate.report_error(error)


class BasicOutputCollector:
    """A ``BasicBolt``'s collector: emits anchor to the input being executed."""

    __slots__ = ("_input", "out")

    def __init__(self, out: OutputCollector) -> None:
        self.out = out
        self._input: Tuple | None = None

    def emit(self, values: Sequence[Any], stream: str = DEFAULT) -> Sequence[int]:
        return self.out.emit(values, stream, self._input)

    def emit_direct(self, task: int, values: Sequence[Any], stream: str = DEFAULT) -> None:
        self.out.emit_direct(task, values, stream, self._input)

    def reset_timeout(self, tuple: Tuple) -> None:
        self.out.reset_timeout(tuple)

    def report_error(self, error: BaseException | str) -> None:
        self.out.report_error(error)


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
    out: list[list[Tuple] | None]
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
        # tasks of subscribers, whose entries are lists.
        self._out: list[list[Tuple]] = executor.out  # type: ignore[assignment]
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
        route = self._routes.get(stream)
        if route is None or len(values) != route.arity:
            route = self._route(stream, values)
        targets = route.fixed
        if targets is None:
            targets = route.choose(values)
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
            self._executor.acker_ops.add_acks(*batch_ack_ops(batch, rows))
        self.acked += int(rows.shape[0])
        if not self._executor.in_batch:
            self._executor.notify_acker()

    def fail_rows(self, batch: TupleBatch, rows: np.ndarray) -> None:
        """``ack_rows`` for FAILs: the rows' trees fail at once."""
        if batch.roots is not None and rows.shape[0]:
            self._executor.acker_ops.add_fails(batch_roots(batch, rows))
        self.failed += int(rows.shape[0])
        if not self._executor.in_batch:
            self._executor.notify_acker()


class BasicCollector(BoltCollector):
    """The engine's ``BasicOutputCollector`` when nothing wraps the bolt's collector: one
    object, so a basic bolt's emit is a single call."""

    def __init__(self, executor: CollectorHost, task: int, routes: dict[str, Route]) -> None:
        super().__init__(executor, task, routes)
        self._input: Tuple | None = None
        self.out = self

    def emit(self, values: Sequence[Any], stream: str = DEFAULT) -> Sequence[int]:  # type: ignore[override]
        # The hot path of every basic bolt: ``BoltCollector.emit`` anchored to the input,
        # with ``_xor.anchored_copy`` (rule 2) inlined for a single-root input (the others
        # take the general path). ``test_xor.py`` checks it against ``anchored_copy``.
        route = self._routes.get(stream)
        if route is None or len(values) != route.arity:
            route = self._route(stream, values)
        targets = route.fixed
        if targets is None:
            targets = route.choose(values)
        a = self._input
        root = a._root  # type: ignore[union-attr]
        v = a._ack_val  # type: ignore[union-attr]
        if type(root) is not int or v is None:
            if root is None and v is not None:  # unanchored input (no ackers, say)
                route.emitted += 1
                src = route.source
                out = self._out
                for task in targets:
                    out[task].append(Tuple(values, src, None, 0))
                return targets
            return BoltCollector.emit(self, values, stream, a)
        route.emitted += 1
        src = route.source
        out = self._out
        rand = self._rand
        for task in targets:
            e = rand(64)
            v ^= e
            out[task].append(Tuple(values, src, root, e))
        a._ack_val = v  # type: ignore[union-attr]
        return targets

    def emit_direct(self, task: int, values: Sequence[Any], stream: str = DEFAULT) -> None:  # type: ignore[override]
        BoltCollector.emit_direct(self, task, values, stream, self._input)


class SpoutCollector(_Emitter, SpoutOutputCollector):
    """The engine's collector for one spout task."""

    def __init__(
        self, executor: CollectorHost, task: int, routes: dict[str, Route], acking: bool
    ) -> None:
        _Emitter.__init__(self, executor, task, routes)
        self._acking = acking
        ops = executor.acker_ops
        self._init_root = ops.init_roots.append
        self._init_val = ops.init_vals.append
        self._init_task = ops.init_tasks.append
        self._init_time = ops.init_times.append
        clock = executor.clock
        #: the emit time of a tracked root (its complete latency starts there)
        self._now_ns = time.monotonic_ns if type(clock) is SystemClock else clock.now_ns
        #: root id -> message id, for trees in flight
        self.pending: dict[int, Any] = {}
        #: message ids to ack at once because nothing tracks them (no ackers)
        self.auto_acked: list[Any] = []
        self.emits = 0
        self.trace = executor.trace
        self._batch: SpoutBatchEmitter | None = None

    def emit(
        self, values: Sequence[Any], stream: str = DEFAULT, msg_id: Any = None
    ) -> Sequence[int]:
        route = self._routes.get(stream)
        if route is None or len(values) != route.arity:
            route = self._route(stream, values)
        targets = route.fixed
        if targets is None:
            targets = route.choose(values)
        self._send(route, targets, values, msg_id)
        return targets

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = DEFAULT, msg_id: Any = None
    ) -> None:
        route = self._direct_route(task, stream, values)
        self._send(route, (task,), values, msg_id)

    def emit_batch(
        self, data: Any, msg_ids: Any = None, stream: str = DEFAULT, tasks: Any = None
    ) -> int:
        """Emit many rows at once: ``data`` is one column per declared field (lists,
        numpy or Arrow arrays), a mapping field -> column, or an Arrow record batch;
        ``msg_ids`` one message id per row (each row is its own tracked tree) or None. On a
        direct stream, ``tasks`` gives each row's task. Returns the number of rows."""
        emitter = self._batch
        if emitter is None:
            ex = self._executor
            emitter = self._batch = SpoutBatchEmitter(
                ex.component_id,
                self._task,
                self._routes,
                self._out,
                ex.acker_ops,
                ex.draw_ids_for(self._task),
                ex.note_batch,
                acking=self._acking,
                pending=self.pending,
                auto_acked=self.auto_acked,
                now_ns=self._now_ns,
                trace=self.trace,
            )
        n = emitter.emit_batch(data, msg_ids, stream, tasks)
        self.emits += n
        return n

    def _send(
        self, route: Route, targets: Sequence[int], values: Sequence[Any], msg_id: Any
    ) -> None:
        route.emitted += 1
        self.emits += 1
        src = route.source
        out = self._out
        if msg_id is None:
            for task in targets:
                out[task].append(Tuple(values, src, None, 0))
            return
        if not self._acking:
            for task in targets:
                out[task].append(Tuple(values, src, None, 0))
            self.auto_acked.append(msg_id)
            if self.trace is not None:  # acked by definition: nothing tracks the tree
                self._traced("ack", msg_id, self._traced("emit", msg_id, None))
            return
        # ``_xor.spout_tree`` (rule 1), inlined; ``test_xor.py`` checks it against it.
        rand = self._rand
        root = rand(64)
        init = 0
        for task in targets:
            e = rand(64)
            init ^= e
            out[task].append(Tuple(values, src, root, e))
        self.pending[root] = msg_id
        self._init_root(root)
        self._init_val(init)
        self._init_task(self._task)
        self._init_time(self._now_ns())
        if self.trace is not None:
            self._traced("emit", msg_id, root)

    def _traced(self, kind: str, msg_id: Any, root: Any) -> Any:
        ex = self._executor
        t = ex.clock.now_ns() / 1e9
        return self.trace.record(t, kind, ex.component_id, self._task, msg_id, root)  # type: ignore[union-attr]

    def pending_count(self) -> int:
        return len(self.pending)


class AsyncSpoutCollector(SpoutCollector):
    """The collector of a spout with ``async`` methods: each emit tells the executor, so
    the tuple leaves within the flush interval whatever the spout awaits next."""

    def __init__(
        self, executor: AsyncSpoutHost, task: int, routes: dict[str, Route], acking: bool
    ) -> None:
        super().__init__(executor, task, routes, acking)
        self._on_emit = executor.on_async_emit

    def _send(
        self, route: Route, targets: Sequence[int], values: Sequence[Any], msg_id: Any
    ) -> None:
        SpoutCollector._send(self, route, targets, values, msg_id)
        self._on_emit()


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
