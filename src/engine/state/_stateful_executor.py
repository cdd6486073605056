"""The wrappers ``create_topology`` puts around bolts when a topology has stateful bolts.

``CheckpointTupleForwarder`` wraps a plain bolt upstream of a stateful one: it aligns each
checkpoint barrier over all its inputs and forwards it. ``StatefulBoltExecutor`` wraps a
stateful bolt: it also runs the checkpoint action on the bolt's state (Storm's classes of
the same names).

Alignment (Storm does not align; it needs acking alone for at-least-once): a barrier
``(txid, action)`` comes once from every task that sends this bolt the checkpoint stream
(the checkpoint spout stands for every spout feeding the bolt). Once a task delivered it,
that task's later data tuples are held back until every task did; then the action runs,
the barrier goes downstream (anchored to every copy received) and the held tuples are
executed. So the state a checkpoint commits holds exactly the tuples that came before the
barrier on every input. A barrier of another ``(txid, action)``, or a second copy from the
same task, means the checkpoint spout moved on (a failure): the pending alignment is
abandoned and its barrier tuples failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._collector import BasicOutputCollector, OutputCollector
from .._component import BasicBolt, Bolt, StreamInfo
from .._errors import FailedException, ReportedFailedException, TupleStateError
from .._tuple import Tuple, is_tick_tuple
from ._bolt import StatefulComponent
from ._checkpoint import (
    CHECKPOINT_COMPONENT_ID,
    CHECKPOINT_FIELDS,
    CHECKPOINT_STREAM_ID,
    COMMIT,
    INITSTATE,
    PREPARE,
    ROLLBACK,
)
from ._key_value import KeyValueState
from ._provider import open_state_store, state_namespace

__all__ = ["CheckpointTupleForwarder", "StatefulBoltExecutor"]


class CheckpointTupleForwarder(Bolt):
    """Runs ``delegate`` unchanged and forwards aligned checkpoint barriers."""

    def __init__(self, delegate: Bolt | BasicBolt) -> None:
        self.delegate = delegate

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.delegate!r})"

    def declare_output_fields(self, declarer: Any) -> None:
        self.delegate.declare_output_fields(declarer)
        # a system stream: set directly, as declare_stream refuses ids starting with "__"
        declarer.streams[CHECKPOINT_STREAM_ID] = StreamInfo(CHECKPOINT_FIELDS)

    def component_configuration(self) -> Mapping[str, Any] | None:
        return self.delegate.component_configuration()

    def validate_topology_conf(self, component_id: str, conf: Mapping[str, Any]) -> None:
        """The delegate's own declaration-time check, if it has one (a windowed bolt's)."""
        validate = getattr(self.delegate, "validate_topology_conf", None)
        if callable(validate):
            validate(component_id, conf)

    # --- lifecycle ------------------------------------------------------------------------
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self._out: OutputCollector = collector
        self._conf = conf
        self._context = context
        topology = context.get_raw_topology()
        spout_tasks: set[int] = set()
        self._covers: dict[int, frozenset[int]] = {}
        # Spouts that send their own barriers (their positions are checkpointed) are
        # aligned task by task; the checkpoint spout's barrier stands for the others.
        senders = {c for c, stream in context.get_this_sources() if stream == CHECKPOINT_STREAM_ID}
        for component, _ in context.get_this_sources():
            if component in topology.spouts and component not in senders:
                spout_tasks.update(context.get_component_tasks(component))
        for component, stream in context.get_this_sources():
            if stream != CHECKPOINT_STREAM_ID:
                continue
            for task in context.get_component_tasks(component):
                covers = spout_tasks if component == CHECKPOINT_COMPONENT_ID else {task}
                self._covers[task] = frozenset(covers)
        self._aligning: tuple[int, str, int] | None = None
        self._received: dict[int, Tuple] = {}
        self._blocked: set[int] = set()
        self._held: list[Tuple] = []
        self._collector = self._delegate_collector(collector)
        #: how a basic delegate's input is acked once ``execute`` returned
        self._ack_basic = self._basic_acker()
        if isinstance(self.delegate, BasicBolt):
            self._basic: BasicOutputCollector | None = BasicOutputCollector(self._collector)
            self.delegate.prepare(conf, context)
        else:
            self._basic = None
            self.delegate.prepare(conf, context, self._collector)

    def _delegate_collector(self, collector: OutputCollector) -> OutputCollector:
        return collector

    def _basic_acker(self) -> Any:
        return self._collector.ack

    def cleanup(self) -> None:
        self.delegate.cleanup()

    # --- tuples ---------------------------------------------------------------------------
    def execute(self, tuple: Tuple) -> None:
        src = tuple._src
        if src.stream == CHECKPOINT_STREAM_ID:
            self._on_barrier(tuple)
        elif self._blocked and src.task in self._blocked and not is_tick_tuple(tuple):
            self._held.append(tuple)
        else:
            self._process(tuple)

    def _process(self, tuple: Tuple) -> None:
        self._run(tuple)

    def _run(self, tuple: Tuple) -> None:
        """Execute the delegate on ``tuple`` (a basic delegate's input is acked after)."""
        basic = self._basic
        if basic is None:
            self.delegate.execute(tuple)  # type: ignore[call-arg]
            return
        basic._input = tuple
        try:
            self.delegate.execute(tuple, basic)  # type: ignore[call-arg]
        except FailedException as exc:
            if isinstance(exc, ReportedFailedException):
                self._out.report_error(exc)
            self._collector.fail(tuple)
            return
        finally:
            basic._input = None
        self._ack_basic(tuple)

    # --- barriers -------------------------------------------------------------------------
    def _on_barrier(self, tuple: Tuple) -> None:
        values = tuple.values
        key = (values[0], values[1], values[2] if len(values) > 2 else 0)
        src = tuple.source_task
        aligning = self._aligning
        if aligning is not None and key[2] < aligning[2]:
            # A barrier of an earlier try of the action, still on its way: never aligned
            # with the current try's barriers.
            if tuple._ack_val is not None:
                self._out.fail(tuple)
            return
        if aligning is not None and (key != aligning or src in self._received):
            self._abandon()
        self._aligning = key
        self._received[src] = tuple
        self._blocked |= self._covers.get(src, frozenset((src,)))
        if len(self._received) < len(self._covers):
            return
        barriers = list(self._received.values())
        self._aligning = None
        self._received = {}
        self._blocked = set()
        txid, action, attempt = key
        try:
            ok = self._on_checkpoint(txid, action)
        except Exception as exc:  # a store that is down: the checkpoint fails and is retried
            self._out.report_error(exc)
            ok = False
        if ok:
            self._out.emit([txid, action, attempt], CHECKPOINT_STREAM_ID, barriers)
            for b in barriers:
                self._out.ack(b)
        else:
            for b in barriers:
                self._out.fail(b)
        self._release()

    def _on_checkpoint(self, txid: int, action: str) -> bool:
        """Run the checkpoint action; False fails the barrier instead of forwarding it."""
        return True

    def _abandon(self) -> None:
        for b in self._received.values():
            if b._ack_val is not None:
                self._out.fail(b)
        self._aligning = None
        self._received = {}
        self._blocked = set()
        self._release()

    def _release(self) -> None:
        held, self._held = self._held, []
        for i, t in enumerate(held):
            if t.source_task in self._blocked:  # a new alignment began meanwhile
                self._held.extend(held[i:])
                return
            self._process(t)


class _DeferredAcks(OutputCollector):
    """The stateful delegate's collector: acks wait for the commit of the state they are
    in; everything else passes through."""

    def __init__(self, delegate: OutputCollector) -> None:
        super().__init__(delegate)
        self.acked: list[Tuple] = []
        self._ids: set[int] = set()

    def ack(self, tuple: Tuple) -> None:
        if tuple._ack_val is None or id(tuple) in self._ids:
            raise TupleStateError(
                f"ack of {tuple!r}, which was already acked or failed; every tuple is acked "
                f"or failed exactly once"
            )
        self._ids.add(id(tuple))
        self.acked.append(tuple)

    def fail(self, tuple: Tuple) -> None:
        if id(tuple) in self._ids:
            raise TupleStateError(
                f"fail of {tuple!r}, which was already acked; every tuple is acked or failed "
                f"exactly once"
            )
        self._delegate.fail(tuple)

    def take(self) -> list[Tuple]:
        acked = self.acked[:]
        self.acked.clear()  # in place: the basic path holds its bound append
        self._ids = set()
        return acked

    def emit(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> Sequence[int]:
        if stream == CHECKPOINT_STREAM_ID:
            raise TupleStateError(
                f"stream {CHECKPOINT_STREAM_ID!r} belongs to the checkpoint protocol; emit on "
                f"a stream of your own"
            )
        return self._delegate.emit(values, stream, anchors)


class StatefulBoltExecutor(CheckpointTupleForwarder):
    """Runs a stateful ``delegate``: gives it its state (``INITSTATE``), prepares, commits
    and rolls back that state at the barriers, and acks tuples once their state commits."""

    delegate: Any

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self._state: KeyValueState | None = None
        self._pending: list[Tuple] = []  # tuples that came before INITSTATE
        self._prepared: list[Tuple] = []  # acked tuples in the prepared transaction
        self._store = open_state_store(
            conf, state_namespace(conf, context.get_this_component_id(), context.task_index)
        )
        checkpoints = context.get_raw_topology().spouts.get(CHECKPOINT_COMPONENT_ID)
        #: some spouts rewind with the state (their positions are checkpointed)
        self._rewinding = bool(getattr(getattr(checkpoints, "component", None), "participants", ()))
        super().prepare(conf, context, collector)

    def _delegate_collector(self, collector: OutputCollector) -> OutputCollector:
        self._deferred = _DeferredAcks(collector)
        return self._deferred

    def _basic_acker(self) -> Any:
        # the wrapper acks a basic delegate's input once, after execute: no checks needed
        return self._deferred.acked.append

    def cleanup(self) -> None:
        super().cleanup()
        self._store.close()

    @property
    def state(self) -> KeyValueState | None:
        """The bolt's state once ``INITSTATE`` came (tests read it)."""
        return self._state

    def _process(self, tuple: Tuple) -> None:
        if self._state is None and not is_tick_tuple(tuple):
            self._pending.append(tuple)
            return
        try:
            self._run(tuple)
        except Exception:
            # the engine fails the input: it must not be acked at the commit as well
            deferred = self._deferred
            if id(tuple) in deferred._ids:
                deferred.acked[:] = [t for t in deferred.acked if t is not tuple]
                deferred._ids.discard(id(tuple))
            raise

    def _on_checkpoint(self, txid: int, action: str) -> bool:
        delegate: StatefulComponent = self.delegate
        state = self._state
        if action == INITSTATE:
            for t in self._deferred.take() + self._prepared:  # state is reloaded: replay them
                self._out.fail(t)
            self._prepared = []
            self._state = KeyValueState(self._store)
            delegate.init_state(self._state)
            pending, self._pending = self._pending, []
            if self._rewinding:
                # Spouts that rewind at this INITSTATE send these tuples again: running
                # them now would count them twice.
                for t in pending:
                    self._out.fail(t)
            else:
                for t in pending:
                    self._run(t)
            return True
        if action == PREPARE:
            if state is None:
                return False  # restarted alone: the spout rolls back, then INITSTATE
            delegate.pre_prepare(txid)
            state.prepare_commit(txid)
            self._prepared.extend(self._deferred.take())
            return True
        if action == COMMIT:
            if state is None:
                self._store.commit(txid)
                return True
            delegate.pre_commit(txid)
            state.commit(txid)
            for t in self._prepared:
                self._out.ack(t)
            self._prepared = []
            return True
        assert action == ROLLBACK
        if state is None:
            self._store.rollback()
            return True
        delegate.pre_rollback()
        state.rollback()
        for t in self._prepared + self._deferred.take():
            self._out.fail(t)
        self._prepared = []
        return True
