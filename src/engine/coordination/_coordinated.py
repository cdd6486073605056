"""``CoordinatedBolt``: Storm's completion tracking for request and batch ids.

Every tuple's first value is the id of the request (DRPC) or batch attempt (transactional
topologies) it belongs to. A ``CoordinatedBolt`` wraps a user bolt (its *delegate*) and
tracks, per id, how many tuples it sent to each task downstream and how many it received
and acked. When an id is done at this bolt it tells every task of every coordinated
subscriber, on the direct stream ``coord``, how many tuples of that id to expect — zero
included — so the subscriber knows in turn when it has seen them all
(Storm's DRPC and transactional topologies are built on this).

An id is finished at a task when it received the id (the id-stream tuple, when an
``IdStreamSpec`` is given; at once otherwise) and either the bolt has no sources (the
first stage: the delegate acked its input) or every expected count report came in and
the delegate acked exactly as many tuples as were announced. Then, in this order: the
delegate's ``finished_id(id)`` runs (what it emits is counted and anchored to the id's
held tuples), the counts go out, and the held tuples (count reports, or the id tuple) are
acked. Holding them chains the request's tuple tree through every stage, so the request's
root completes only when the last stage finished.

Where this differs from Storm, on purpose:

* ``envelope=True`` lets the delegate work without the id in its fields (``_envelope``).
* Async delegates (``async def execute``) work: the wrapper becomes async too.
* A failed or timed-out id is remembered for another timeout: its later tuples are failed
  without running the delegate, since the request is lost anyway.
* ``timeout_id`` is called only for ids this task worked on (a tuple executed, or the id
  received), not for ids it only heard an empty count report of.
* Emits made in ``finished_id`` without anchors are anchored to the id's held tuples, so a
  result stays inside the request's tuple tree down to whoever returns it.
* Finishing on the last acked tuple (not only on a count report) is allowed: a delegate may
  ack late.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._execution.collector import (
    AnchoringOutputCollector,
    BasicOutputCollector,
    IOutputCollector,
    OutputCollector,
)
from .._model.component import BasicBolt, Bolt, OutputFieldsDeclarer
from .._model.errors import (
    EmitError,
    FailedException,
    InvalidComponentError,
    InvalidDeclarationError,
    InvalidGroupingError,
    ReportedFailedException,
)
from .._model.fields import Fields
from .._model.grouping import GroupingKind
from .._model.tuple import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, Source, Tuple, is_tick_tuple
from ._envelope import (
    ENVELOPE_ID_FIELD,
    EnvelopeOutputCollector,
    EnvelopeTuple,
    current_request_id,
)

__all__ = [
    "COORDINATED_STREAM_ID",
    "DEFAULT_TIMEOUT_TICK_SECS",
    "CoordinatedBolt",
    "CoordinationStatistics",
    "FinishedCallback",
    "IdStreamSpec",
    "SourceArgs",
    "TimeoutCallback",
]

logger = logging.getLogger(__name__)

#: The direct stream carrying ``(id, count)`` reports (Storm's ``Constants.COORDINATED_STREAM_ID``
#: is ``__coord``; ids starting with ``__`` belong to the engine here).
COORDINATED_STREAM_ID = "coord"
COORDINATED_FIELDS = Fields("id", "count")
#: How often timeouts are checked when neither the delegate nor ``timeout_secs`` asks for
#: another period (seconds of the topology's clock, through tick tuples).
DEFAULT_TIMEOUT_TICK_SECS = 1.0
_TICK_KEY = "topology.tick.tuple.freq.secs"

_REGULAR, _ID, _COORD, _TICK = 0, 1, 2, 3


@dataclass(frozen=True)
class SourceArgs:
    """How many count reports a source component sends per id.

    ``SourceArgs.single()``: one (only one task of the source handles each id, like the
    first stage of a linear DRPC); ``SourceArgs.all()``: one per task of the source.
    """

    single_count: bool

    @classmethod
    def single(cls) -> SourceArgs:
        """One count report per id from the whole source component."""
        return cls(True)

    @classmethod
    def all(cls) -> SourceArgs:
        """One count report per id from every task of the source component."""
        return cls(False)

    def __repr__(self) -> str:
        return "SourceArgs.single()" if self.single_count else "SourceArgs.all()"


@dataclass(frozen=True)
class IdStreamSpec:
    """The stream whose tuples announce an id (Storm's ``IdStreamSpec``): the id is not
    finished at a task before its id tuple arrived there."""

    component: str
    stream: str

    @classmethod
    def make_detect_spec(cls, component: str, stream: str) -> IdStreamSpec:
        """Storm's name for the constructor: ``IdStreamSpec(component, stream)``."""
        return cls(component, stream)

    @property
    def global_stream_id(self) -> tuple[str, str]:
        """``(component, stream)``, the key a ``TopologyContext`` uses for an input."""
        return (self.component, self.stream)


class FinishedCallback:
    """Mix into a delegate to hear ``finished_id(id)`` once an id is complete at its task.

    Runs before the counts go downstream: emit the id's result here. A plain function
    (not ``async``); raise ``FailedException`` to fail the id.
    """

    def finished_id(self, id: Any) -> None:
        """Every tuple of ``id`` reached this task and was acked: emit its result now."""
        raise NotImplementedError


class TimeoutCallback:
    """Mix into a delegate to hear ``timeout_id(id)`` once for an id that will not finish
    at its task: it did not finish in time, or it failed. Release the id's state here."""

    def timeout_id(self, id: Any) -> None:
        """``id`` will not finish here (it timed out or failed): forget what it left."""
        raise NotImplementedError


@dataclass(frozen=True)
class CoordinationStatistics:
    """One task's ids: being tracked, finished, failed and timed out so far."""

    tracked: int
    finished: int
    failed: int
    timed_out: int


class _Track:
    """What one task knows about one id (Storm's ``TrackingInfo``)."""

    __slots__ = (
        "born",
        "emitted",
        "expected",
        "failed",
        "held",
        "received",
        "received_id",
        "reports",
        "touched",
    )

    def __init__(self, born: int, received_id: bool) -> None:
        self.born = born
        self.reports = 0
        self.expected = 0
        self.received = 0
        self.failed = False
        self.received_id = received_id
        self.touched = False
        self.emitted: dict[int, int] = {}
        self.held: list[Tuple] = []


class _CoordinatedOutputCollector(AnchoringOutputCollector):
    """Counts what the delegate emits per id and target task; routes its acks and fails
    through the tracking. Unanchored emits while ``finished_id`` runs are anchored to the
    id's held tuples (``default_anchors``)."""

    def __init__(self, delegate: IOutputCollector, bolt: CoordinatedBolt) -> None:
        super().__init__(delegate)
        self._bolt = bolt

    def emit(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> Sequence[int]:
        if stream == COORDINATED_STREAM_ID:
            raise self._bolt._coord_emit_error()
        tasks = super().emit(values, stream, anchors)
        if values:
            self._bolt._count(values[0], tasks)
        return tasks

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> None:
        if stream == COORDINATED_STREAM_ID:
            raise self._bolt._coord_emit_error()
        super().emit_direct(task, values, stream, anchors)
        if values:
            self._bolt._count(values[0], (task,))

    def ack(self, tuple: Tuple) -> None:
        self._bolt._on_ack(tuple)

    def fail(self, tuple: Tuple) -> None:
        self._bolt._on_fail(tuple)


def _is_async(delegate: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(delegate, "execute", None))


class CoordinatedBolt(Bolt):
    """Wraps ``delegate`` (a ``Bolt`` or ``BasicBolt``) with Storm's per-id completion
    tracking. The DRPC and transactional builders wire it for you; by hand::

        builder.set_bolt("count", CoordinatedBolt(Count(), {"split": SourceArgs.all()}), 2) \\
            .fields_grouping("split", ["id"]) \\
            .direct_grouping("split", COORDINATED_STREAM_ID)

    ``source_args`` names every coordinated component this bolt reads (``{}``: none, the
    first stage); the bolt must subscribe to each one's ``coord`` stream with
    ``direct_grouping``. ``id_stream_spec`` names a stream announcing ids (subscribe to it
    too). ``envelope=True`` hides the id from the delegate (see ``EnvelopeTuple``).
    ``timeout_secs`` (default: the topology's message timeout) bounds how long an id is
    tracked; it is checked on tick tuples every ``DEFAULT_TIMEOUT_TICK_SECS`` (or a quarter
    of ``timeout_secs`` if that is shorter, or the delegate's own tick period).
    ``on_error(id, component_id, exc)`` (picklable, like the bolt) hears every exception the
    delegate raises for an id, before the id's tuple is failed: the DRPC builder uses it to
    tell the caller why a request failed.
    """

    def __new__(cls, delegate: Any = None, *args: Any, **kwargs: Any) -> CoordinatedBolt:
        # An async delegate needs an async execute here too: pick the async twin. (Pickle
        # calls __new__ with no arguments and the concrete class, which keeps working.)
        if cls is CoordinatedBolt and delegate is not None and _is_async(delegate):
            cls = _AsyncCoordinatedBolt
        return super().__new__(cls)

    def __init__(
        self,
        delegate: Bolt | BasicBolt,
        source_args: Mapping[str, SourceArgs] | None = None,
        id_stream_spec: IdStreamSpec | None = None,
        *,
        envelope: bool = False,
        timeout_secs: float | None = None,
        on_error: Callable[[Any, str, BaseException], None] | None = None,
    ) -> None:
        if not isinstance(delegate, (Bolt, BasicBolt)):
            raise InvalidComponentError(
                f"CoordinatedBolt wraps an engine.Bolt or engine.BasicBolt, got "
                f"{type(delegate).__name__}"
                + (
                    " (wrap a BatchBolt in BatchBoltExecutor first)"
                    if hasattr(delegate, "finish_batch")
                    else ""
                )
            )
        sources = dict(source_args or {})
        for component, args in sources.items():
            if not isinstance(component, str) or not isinstance(args, SourceArgs):
                raise InvalidComponentError(
                    f"CoordinatedBolt({type(delegate).__name__}): source_args maps component "
                    f"ids to SourceArgs.single() or SourceArgs.all(), got "
                    f"{component!r}: {args!r}"
                )
        if id_stream_spec is not None and not isinstance(id_stream_spec, IdStreamSpec):
            raise InvalidComponentError(
                f"CoordinatedBolt({type(delegate).__name__}): id_stream_spec must be an "
                f"IdStreamSpec, got {id_stream_spec!r}"
            )
        if timeout_secs is not None and (
            not isinstance(timeout_secs, (int, float))
            or isinstance(timeout_secs, bool)
            or not timeout_secs > 0
        ):
            raise InvalidComponentError(
                f"CoordinatedBolt({type(delegate).__name__}): timeout_secs must be a "
                f"positive number or None, got {timeout_secs!r}"
            )
        for name in ("finished_id", "timeout_id"):
            if inspect.iscoroutinefunction(getattr(delegate, name, None)):
                raise InvalidComponentError(
                    f"CoordinatedBolt({type(delegate).__name__}): {name} must be a plain "
                    f"function, not async (it runs while the id's counts are settled)"
                )
        self._delegate = delegate
        self._source_args = sources
        self._id_spec = id_stream_spec
        if on_error is not None and not callable(on_error):
            raise InvalidComponentError(
                f"CoordinatedBolt({type(delegate).__name__}): on_error must be callable or "
                f"None, got {on_error!r}"
            )
        self._envelope = bool(envelope)
        self._timeout_secs = timeout_secs
        self._on_error = on_error

    # --- declaration ----------------------------------------------------------------------
    @property
    def delegate(self) -> Bolt | BasicBolt:
        """The wrapped bolt, which does the work."""
        return self._delegate

    @property
    def source_args(self) -> Mapping[str, SourceArgs]:
        """The coordinated components this bolt expects count reports from (a copy)."""
        return dict(self._source_args)

    @property
    def id_stream_spec(self) -> IdStreamSpec | None:
        """The stream announcing ids, if the bolt waits for one."""
        return self._id_spec

    @property
    def envelope(self) -> bool:
        """Whether the delegate sees tuples without the id (``EnvelopeTuple``)."""
        return self._envelope

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        component = getattr(declarer, "_component_id", "") or type(self._delegate).__name__
        if self._envelope:
            inner = OutputFieldsDeclarer(component)
            self._delegate.declare_output_fields(inner)
            for stream, info in inner.streams.items():
                if ENVELOPE_ID_FIELD in info.fields:
                    raise InvalidDeclarationError(
                        f"component {component!r}: the envelope puts the request id in field "
                        f"{ENVELOPE_ID_FIELD!r}, and stream {stream!r} already declares a "
                        f"field {ENVELOPE_ID_FIELD!r} ({list(info.fields)}); rename it, or "
                        f"use envelope=False and carry the id as the first field yourself"
                    )
                declarer.declare_stream(stream, [ENVELOPE_ID_FIELD, *info.fields], info.direct)
        else:
            self._delegate.declare_output_fields(declarer)
        if COORDINATED_STREAM_ID in declarer.streams:
            raise InvalidDeclarationError(
                f"component {component!r}: stream {COORDINATED_STREAM_ID!r} belongs to the "
                f"CoordinatedBolt wrapping {type(self._delegate).__name__}; rename the "
                f"delegate's stream"
            )
        declarer.declare_stream(COORDINATED_STREAM_ID, COORDINATED_FIELDS, direct=True)

    def component_configuration(self) -> Mapping[str, Any] | None:
        conf = dict(self._delegate.component_configuration() or {})
        if not conf.get(_TICK_KEY):
            tick = DEFAULT_TIMEOUT_TICK_SECS
            if self._timeout_secs is not None:
                tick = min(tick, self._timeout_secs / 4)
            conf[_TICK_KEY] = tick
        return conf

    # --- running --------------------------------------------------------------------------
    async def prepare(
        self, conf: Mapping[str, Any], context: Any, collector: OutputCollector
    ) -> None:
        self._component_id = context.get_this_component_id()
        self._check_wiring(context)
        self._collector = collector
        self._out = _CoordinatedOutputCollector(collector, self)
        self._delegate_out: OutputCollector = (
            EnvelopeOutputCollector(self._out, self._component_id) if self._envelope else self._out
        )
        self._tracked: dict[Any, _Track] = {}
        self._failed_ids: dict[Any, int] = {}  # tombstones: id -> tick it failed at
        self._now = 0  # ticks seen
        tick = conf.get(_TICK_KEY) or DEFAULT_TIMEOUT_TICK_SECS
        timeout = self._timeout_secs or conf["topology.message.timeout.secs"]
        # +1: a track born just after a tick still lives for the whole timeout
        self._expire_ticks = max(1, math.ceil(timeout / tick)) + 1
        self._forward_ticks = bool((self._delegate.component_configuration() or {}).get(_TICK_KEY))
        self._finished_cb = isinstance(self._delegate, FinishedCallback)
        self._timeout_cb = isinstance(self._delegate, TimeoutCallback)
        self._held_kind = _COORD if self._id_spec is None else _ID
        # (component, stream) -> what its tuples are to the protocol; the rest are regular
        self._kinds: dict[tuple[str, str], int] = {
            (SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID): _TICK
        }
        for component in self._source_args:
            self._kinds[(component, COORDINATED_STREAM_ID)] = _COORD
        if self._id_spec is not None:
            self._kinds[self._id_spec.global_stream_id] = _ID
        self._inner_sources: dict[tuple[str, str, int], Source] = {}
        self._stats = [0, 0, 0]  # finished, failed, timed out
        targets = context.get_this_targets().get(COORDINATED_STREAM_ID, {})
        self._count_out_tasks = [
            t for component in sorted(targets) for t in context.get_component_tasks(component)
        ]
        self._num_reports = sum(
            1 if args.single_count else len(context.get_component_tasks(component))
            for component, args in self._source_args.items()
        )
        self._sources = bool(self._source_args)
        delegate = self._delegate
        self._basic = isinstance(delegate, BasicBolt)
        self._execute: Callable[..., Any] = delegate.execute
        if isinstance(delegate, BasicBolt):
            self._basic_out = BasicOutputCollector(self._delegate_out)
            result = delegate.prepare(conf, context)
        else:
            result = delegate.prepare(conf, context, self._delegate_out)
        if inspect.isawaitable(result):
            await result

    def _check_wiring(self, context: Any) -> None:
        cid = self._component_id
        sources = context.get_this_sources()
        for component in sorted(self._source_args):
            grouping = sources.get((component, COORDINATED_STREAM_ID))
            if grouping is None or grouping.kind is not GroupingKind.DIRECT:
                raise InvalidGroupingError(
                    f"coordinated bolt {cid!r}: source {component!r} is in source_args, but the "
                    f"bolt does not subscribe to its {COORDINATED_STREAM_ID!r} stream; add "
                    f".direct_grouping({component!r}, {COORDINATED_STREAM_ID!r})"
                )
        for component, stream in sorted(sources):
            if stream == COORDINATED_STREAM_ID and component not in self._source_args:
                raise InvalidGroupingError(
                    f"coordinated bolt {cid!r} subscribes to the {COORDINATED_STREAM_ID!r} "
                    f"stream of {component!r}, which is not in its source_args; add "
                    f"{component!r}: SourceArgs.all() (or .single())"
                )
        spec = self._id_spec
        if spec is not None and (spec.component, spec.stream) not in sources:
            raise InvalidGroupingError(
                f"coordinated bolt {cid!r}: its id stream {spec.stream!r} of "
                f"{spec.component!r} is not one of its inputs; subscribe to it"
            )

    async def cleanup(self) -> None:
        result = self._delegate.cleanup()
        if inspect.isawaitable(result):
            await result

    def statistics(self) -> CoordinationStatistics:
        """This task's ids so far: a test reads it to see that every id finished (or why
        one did not), rather than waiting on a result that will never come."""
        finished, failed, timed_out = self._stats
        return CoordinationStatistics(len(self._tracked), finished, failed, timed_out)

    # --- per tuple ------------------------------------------------------------------------
    def _accept(self, t: Tuple) -> Tuple | None:
        """Track ``t``; return what the delegate must execute, or None if handled here."""
        kind = self._kinds.get(t.source_global_stream_id, _REGULAR)
        if kind == _TICK:
            self._on_tick()
            return t if self._forward_ticks else None
        values = t.values
        rid = values[0]
        try:
            track = self._tracked.get(rid)
        except TypeError:
            raise EmitError(
                f"coordinated bolt {self._component_id!r} got {t!r}: the first value of every "
                f"tuple is its request id and must be hashable"
            ) from None
        if track is None:
            if rid in self._failed_ids:
                self._collector.fail(t)  # the id failed here already: its request is lost
                return None
            track = self._tracked[rid] = _Track(self._now, self._id_spec is None)
        if kind == _REGULAR:
            track.touched = True
            if self._envelope:
                return EnvelopeTuple(t, self._inner_source(t))
            return t
        if kind == _COORD:
            track.reports += 1
            track.expected += values[1]
        else:
            track.received_id = True
            track.touched = True
        self._settle(rid, track, t, kind)
        return None

    def _inner_source(self, t: Tuple) -> Source:
        key = (t.source_component, t.source_stream, t.source_task)
        src = self._inner_sources.get(key)
        if src is None:
            src = self._inner_sources[key] = Source(
                key[0], key[1], key[2], Fields(list(t.fields)[1:])
            )
        return src

    def execute(self, tuple: Tuple) -> Awaitable[None] | None:
        # None here; ``_AsyncCoordinatedBolt.execute`` is a coroutine function.
        inner = self._accept(tuple)
        if inner is None:
            return None
        token = current_request_id.set(tuple.values[0]) if self._envelope else None
        try:
            if self._basic:
                basic = self._basic_out
                basic._input = inner
                try:
                    self._execute(inner, basic)
                finally:
                    basic._input = None
                if not tuple.completed:  # the delegate may have failed it
                    self._on_ack(tuple)
            else:
                self._execute(inner)
        except Exception as exc:
            self._report(tuple.values[0], exc)
            if not tuple.completed:
                self._on_fail(tuple)
            raise  # the engine reports it (or not, for a plain FailedException)
        finally:
            if token is not None:
                current_request_id.reset(token)
        return None

    def _report(self, rid: Any, exc: BaseException) -> None:
        on_error = self._on_error
        if on_error is not None:
            try:
                on_error(rid, self._component_id, exc)
            except Exception:  # a broken callback must not hide the bolt's own error
                logger.exception("coordinated bolt %r: on_error raised", self._component_id)

    # --- what the delegate's collector calls ------------------------------------------------
    def _count(self, rid: Any, tasks: Sequence[int]) -> None:
        try:
            track = self._tracked.get(rid)
        except TypeError:
            raise EmitError(
                f"coordinated bolt {self._component_id!r} emitted a tuple whose first value "
                f"{rid!r} is not hashable; the first value is the request id"
            ) from None
        if track is not None:
            emitted = track.emitted
            for task in tasks:
                emitted[task] = emitted.get(task, 0) + 1

    def _on_ack(self, t: Tuple) -> None:
        if self._forward_ticks and is_tick_tuple(t):  # only then can a tick reach here
            self._collector.ack(t)
            return
        rid = t.values[0]
        track = self._tracked.get(rid)
        failed = False
        if track is not None:
            track.received += 1
            # _settle's conditions, inlined: most acks neither fail nor finish an id
            if track.failed or (
                track.received_id
                and (
                    not self._sources
                    or (track.reports == self._num_reports and track.expected == track.received)
                )
            ):
                failed = self._settle(rid, track, t, _REGULAR)
        elif rid in self._failed_ids:
            failed = True
        if failed:
            self._collector.fail(t)
        else:
            self._collector.ack(t)

    def _on_fail(self, t: Tuple) -> None:
        if not (self._forward_ticks and is_tick_tuple(t)):
            rid = t.values[0]
            track = self._tracked.get(rid)
            if track is not None:
                track.failed = True
                self._settle(rid, track, t, _REGULAR)
        self._collector.fail(t)

    def _coord_emit_error(self) -> EmitError:
        return EmitError(
            f"component {self._component_id!r}: stream {COORDINATED_STREAM_ID!r} belongs to "
            f"the CoordinatedBolt; the delegate cannot emit on it"
        )

    # --- the protocol -----------------------------------------------------------------------
    def _settle(self, rid: Any, track: _Track, trigger: Tuple, kind: int) -> bool:
        """Storm's ``checkFinishId``: hold, fail or finish after ``trigger``. True if failed."""
        delayed = kind == self._held_kind
        if delayed:
            track.held.append(trigger)
        failed = track.failed
        if failed:
            self._drop(rid, track)
        elif track.received_id and (
            not self._sources
            or (track.reports == self._num_reports and track.expected == track.received)
        ):
            failed = not self._finish(rid, track, trigger)
        if not delayed and kind != _REGULAR:
            if failed:
                self._collector.fail(trigger)
            else:
                self._collector.ack(trigger)
        return failed

    def _finish(self, rid: Any, track: _Track, trigger: Tuple) -> bool:
        anchors = _anchors(track.held, trigger)
        if self._finished_cb and not self._callback(rid, anchors, "finished_id"):
            self._drop(rid, track)
            return False
        emit_direct = self._collector.emit_direct
        emitted = track.emitted
        for task in self._count_out_tasks:
            emit_direct(task, [rid, emitted.get(task, 0)], COORDINATED_STREAM_ID, anchors)
        ack = self._collector.ack
        for held in track.held:
            ack(held)
        del self._tracked[rid]
        self._stats[0] += 1
        return True

    def _callback(self, rid: Any, anchors: list[Tuple] | None, name: str) -> bool:
        """Run the delegate's ``finished_id`` / ``timeout_id``; False if it failed the id."""
        out = self._out
        out.default_anchors = anchors
        token = current_request_id.set(rid)
        try:
            getattr(self._delegate, name)(rid)
        except FailedException as exc:
            if name == "finished_id":
                self._report(rid, exc)
            if isinstance(exc, ReportedFailedException):
                self._collector.report_error(exc)
            return False
        except Exception as exc:
            if name == "finished_id":  # (timeout_id runs for an id already lost)
                self._report(rid, exc)
            self._collector.report_error(exc)
            return False
        finally:
            current_request_id.reset(token)
            out.default_anchors = None
        return True

    def _drop(self, rid: Any, track: _Track) -> None:
        if self._timeout_cb and track.touched:
            self._callback(rid, None, "timeout_id")
        fail = self._collector.fail
        for held in track.held:
            if not held.completed:
                fail(held)
        track.held.clear()
        self._tracked.pop(rid, None)
        self._failed_ids[rid] = self._now
        self._stats[1] += 1

    def _on_tick(self) -> None:
        self._now = now = self._now + 1
        horizon = now - self._expire_ticks
        tracked = self._tracked
        expired = []
        for rid, track in tracked.items():  # oldest first: dicts keep insertion order
            if track.born > horizon:
                break
            expired.append(rid)
        for rid in expired:
            track = tracked.pop(rid)
            if self._timeout_cb and track.touched:
                self._callback(rid, None, "timeout_id")
            fail = self._collector.fail
            for held in track.held:
                if not held.completed:
                    fail(held)
            if track.touched:
                self._stats[2] += 1
        tombstones = self._failed_ids
        if tombstones:
            old = [rid for rid, at in tombstones.items() if at <= horizon]
            for rid in old:
                del tombstones[rid]
        for rid in expired:  # stragglers of a timed-out id are failed, like a failed id's
            tombstones[rid] = now


def _anchors(held: list[Tuple], trigger: Tuple) -> list[Tuple]:
    """What the id's count reports (and unanchored results) anchor to: its held tuples and
    the tuple that finished it, each once."""
    if not held:
        return [trigger]
    anchors = [t for t in held if not t.completed]
    if not any(t is trigger for t in anchors):
        anchors.append(trigger)
    return anchors


class _AsyncCoordinatedBolt(CoordinatedBolt):
    """``CoordinatedBolt`` around a delegate whose ``execute`` is ``async``.

    Each tuple runs in its own task (``topology.bolt.max.inflight`` at a time); the
    tracking between awaits is plain synchronous code, so ids settle exactly as above.
    """

    async def execute(self, tuple: Tuple) -> None:
        inner = self._accept(tuple)
        if inner is None:
            return
        if self._envelope:
            current_request_id.set(tuple.values[0])  # this task's own context
        try:
            if self._basic:
                basic = BasicOutputCollector(self._delegate_out)
                basic._input = inner
                await self._execute(inner, basic)
                if not tuple.completed:
                    self._on_ack(tuple)
            else:
                await self._execute(inner)
        except Exception as exc:
            self._report(tuple.values[0], exc)
            if not tuple.completed:
                self._on_fail(tuple)
            raise
