"""The gates ``create_topology`` puts in front of bolts when a topology has stateful bolts.

``CheckpointTupleForwarder`` stands in front of a bolt upstream of a stateful one: it aligns
each checkpoint barrier over all its inputs and forwards it. ``StatefulBoltExecutor`` stands
in front of a stateful bolt: it also runs the checkpoint action on the bolt's state (Storm's
classes of the same names). Both are ``InputGate``s: the bolt's tuples run as the bolt's
kind runs without them (a basic bolt on the executor's per-tuple fast path, a batch bolt on
its columns), and the gate acts only between input items.

Alignment (Storm does not align; it needs acking alone for at-least-once): a barrier
``(txid, action)`` comes once from every task that sends this bolt the checkpoint stream
(the checkpoint spout stands for every spout feeding the bolt). Once a task delivered it,
that task's later data tuples are held back until every task did; then the action runs,
the barrier goes downstream (anchored to every copy received) and the held tuples are
executed. So the state a checkpoint commits holds exactly the tuples that came before the
barrier on every input. A barrier of another ``(txid, action)``, or a second copy from the
same task, means the checkpoint spout moved on (a failure): the pending alignment is
abandoned and its barrier tuples failed.

Barriers travel as inbox items of their own: the checkpoint spout emits nothing else, and a
gate emits each barrier as a one-row batch (its own ``BatchCollector``). So a gate tells a
barrier item by its first tuple and never looks at each data tuple.

Acks: a forwarder holds none (nor does Storm's): its bolt's tuples are acked as they would be
without it. A stateful bolt's acks, the basic bolt's automatic ones included, go to an
``AckHold`` and reach the acker when the checkpoint that holds their tuples' effect commits;
a rollback fails them, and their tuples are replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._columnar.batch import TupleBatch
from .._columnar.batch_collector import BatchCollector
from .._execution.gate import AckHold, HeldAcks, InputGate, join_held
from .._model.component import Bolt, Component, OutputFieldsDeclarer, StreamInfo
from .._model.context import TopologyContext
from .._model.tuple import Tuple
from ._bolt import StatefulComponent
from ._checkpoint import (
    CHECKPOINT_COMPONENT_ID,
    CHECKPOINT_FIELDS,
    CHECKPOINT_STREAM_ID,
    COMMIT,
    INITSTATE,
    PREPARE,
    ROLLBACK,
    spouts_rewind,
)
from ._coordinator import checkpoint_demand
from ._key_value import KeyValueState
from ._provider import open_state_store, state_namespace

__all__ = ["CheckpointTupleForwarder", "StatefulBoltExecutor"]

#: An inbox item: tuples, or a batch of one source.
Item = list[Tuple] | TupleBatch


class CheckpointTupleForwarder(InputGate, Bolt):
    """Runs ``delegate`` unchanged and forwards aligned checkpoint barriers."""

    def __init__(self, delegate: Component) -> None:
        self.delegate = delegate

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.delegate!r})"

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.delegate.declare_output_fields(declarer)
        # a system stream: set directly, as declare_stream refuses ids starting with "__"
        declarer.streams[CHECKPOINT_STREAM_ID] = StreamInfo(CHECKPOINT_FIELDS)

    def component_configuration(self) -> Mapping[str, Any] | None:
        delegate: Component = self.delegate
        return delegate.component_configuration()

    def validate_topology_conf(self, component_id: str, conf: Mapping[str, Any]) -> None:
        """The delegate's own declaration-time check, if it has one (a windowed bolt's)."""
        validate = getattr(self.delegate, "validate_topology_conf", None)
        if callable(validate):
            validate(component_id, conf)

    def check_inputs(self, component_id: str, inputs: Any) -> None:
        """The delegate's own check of its inputs, if it has one (a combiner's key)."""
        check = getattr(self.delegate, "check_inputs", None)
        if callable(check):
            check(component_id, inputs)

    # --- lifecycle ------------------------------------------------------------------------
    def bind(
        self,
        control: BatchCollector,
        hold_acks: Callable[[], AckHold],
        failures: Callable[[], int],
    ) -> None:
        self._control = control
        self._hold_acks = hold_acks
        self._failures = failures

    def prepare(
        self, conf: Mapping[str, Any], context: TopologyContext, collector: Any = None
    ) -> None:
        """Prepare the gate, then the delegate (a basic or basic batch one gets no
        collector, as without the gate)."""
        self._clock = context.clock
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
        self._held: list[Item] = []
        #: when the last data item came in (the topology's clock)
        self.last_input_ns = 0
        #: some spouts rewind with the state (their positions are checkpointed)
        self._rewinding = spouts_rewind(context)
        #: an INITSTATE passed this object: what reached it since came after the spouts'
        #: last rewind (see ``_on_checkpoint``)
        self._synced = False
        #: the bolt's ``failures()`` when the last barrier was aligned (see ``_on_barrier``)
        self._failures_seen = self._failures()
        self._prepare_gate(conf, context)
        if collector is None:
            self.delegate.prepare(conf, context)
        else:
            self.delegate.prepare(conf, context, collector)

    def _prepare_gate(self, conf: Mapping[str, Any], context: TopologyContext) -> None:
        """What a subclass prepares before the delegate."""

    def cleanup(self) -> None:
        self.delegate.cleanup()

    # --- input ----------------------------------------------------------------------------
    def admit(self, item: Item) -> Iterator[Item]:
        if type(item) is TupleBatch:
            if not item.n:
                return
            src = item.source
        else:
            if not item:
                return
            src = item[0]._src
        if src.stream == CHECKPOINT_STREAM_ID:
            for barrier in item.tuples() if type(item) is TupleBatch else item:
                yield from self._on_barrier(barrier)
            return
        self.last_input_ns = self._clock.now_ns()
        if self._blocked:
            yield from self._split_blocked(item)
        else:
            yield from self._data(item)

    def _data(self, item: Item) -> Iterator[Item]:
        """Data from inputs not held back: executed now."""
        yield item

    def _split_blocked(self, item: Item) -> Iterator[Item]:
        """Hold back what came from inputs that delivered the barrier being aligned."""
        blocked = self._blocked
        if type(item) is TupleBatch:
            if item.source.task in blocked:
                self._held.append(item)
            else:
                yield from self._data(item)
            return
        now = [t for t in item if t._src.task not in blocked]
        if len(now) < len(item):
            self._held.append([t for t in item if t._src.task in blocked])
        if now:
            yield from self._data(now)

    # --- barriers -------------------------------------------------------------------------
    def _on_barrier(self, barrier: Tuple) -> Iterator[Item]:
        values = barrier.values
        key = (values[0], values[1], values[2] if len(values) > 2 else 0)
        src = barrier.source_task
        aligning = self._aligning
        if aligning is not None and key[2] < aligning[2]:
            # A barrier of an earlier try of the action, still on its way: never aligned
            # with the current try's barriers.
            self._control.fail(TupleBatch.from_tuples([barrier]))
            return
        if aligning is not None and (key != aligning or src in self._received):
            yield from self._abandon()
        self._aligning = key
        self._received[src] = barrier
        self._blocked |= self._covers.get(src, frozenset((src,)))
        if len(self._received) < len(self._covers):
            return
        barriers = TupleBatch.from_tuples(list(self._received.values()))
        self._aligning = None
        self._received = {}
        self._blocked = set()
        txid, action, attempt = key
        control = self._control
        failures, self._failures_seen = self._failures_seen, self._failures()
        if action == PREPARE and self._rewinding and failures != self._failures_seen:
            # The bolt failed a data tuple that came before this barrier: the spouts'
            # positions are past it, and the state may hold part of its effect (or none).
            # The spout hears of the failure through the acker, maybe (with several
            # ackers) after this checkpoint completed, too late to stop its commit; failing
            # the barrier here rolls back to the last checkpoint.
            ok = False
        else:
            try:
                ok = self._on_checkpoint(txid, action)
            except Exception as exc:  # a store that is down: the checkpoint fails, is retried
                control.report_error(exc)
                ok = False
            if action == INITSTATE:
                # What failed until now came before the state was reloaded, and a stateful
                # window fails the tuples it held right here: none of it is missing from
                # the state the next PREPARE records.
                self._failures_seen = self._failures()
        if ok:
            control.emit_batch(
                [[txid], [action], [attempt]],
                stream=CHECKPOINT_STREAM_ID,
                anchor_batch=barriers,
                anchor_groups=[list(range(barriers.n))],
            )
            control.ack(barriers)
        else:
            control.fail(barriers)
        yield from self._release()

    def _on_checkpoint(self, txid: int, action: str) -> bool:
        """Run the checkpoint action; False fails the barrier instead of forwarding it.

        With spouts that rewind, a ``PREPARE`` that reaches a forwarder before any
        ``INITSTATE`` did fails: this task was restarted (a crash), and what its crashed
        predecessor held was lost, data tuples emitted before the barrier among them. A
        checkpoint would record spout positions past tuples the state never saw, and no
        rewind would send them again. Failing it rolls back to the last checkpoint instead,
        and the ``INITSTATE`` that follows rewinds the spouts. (A topology's first action is
        always an ``INITSTATE`` or a recovery before one, so only a restart meets this.)"""
        if action == INITSTATE:
            self._synced = True
        elif action == PREPARE and self._rewinding and not self._synced:
            return False
        return True

    def _abandon(self) -> Iterator[Item]:
        if self._received:
            self._control.fail(TupleBatch.from_tuples(list(self._received.values())))
        self._aligning = None
        self._received = {}
        self._blocked = set()
        yield from self._release()

    def _release(self) -> Iterator[Item]:
        held, self._held = self._held, []
        for item in held:
            yield from self._data(item)


class StatefulBoltExecutor(CheckpointTupleForwarder):
    """Runs a stateful ``delegate``: gives it its state (``INITSTATE``), prepares, commits
    and rolls back that state at the barriers, and acks tuples once their state commits."""

    delegate: Any

    def _prepare_gate(self, conf: Mapping[str, Any], context: TopologyContext) -> None:
        self._state: KeyValueState | None = None
        self._pending: list[Item] = []  # what came before INITSTATE
        self._prepared: list[HeldAcks] = []  # the acks of the prepared transaction
        self._store = open_state_store(
            conf, state_namespace(conf, context.get_this_component_id(), context.task_index)
        )
        self._hold = self._hold_acks()
        self._demand = checkpoint_demand(context)
        self._demand.register(context.task_id, self)

    def cleanup(self) -> None:
        super().cleanup()
        self._store.close()

    @property
    def state(self) -> KeyValueState | None:
        """The bolt's state once ``INITSTATE`` came (tests read it)."""
        return self._state

    def held_acks(self) -> int:
        """Tuples executed and not yet committed, whose acks wait for a checkpoint (a run
        of one tree's acks may count once)."""
        return len(self._hold)

    def _data(self, item: Item) -> Iterator[Item]:
        if self._state is None:
            self._pending.append(item)
            return
        yield item

    def _release(self) -> Iterator[Item]:
        if self._state is not None and self._pending:
            pending, self._pending = self._pending, []
            yield from pending
        yield from super()._release()

    def _on_checkpoint(self, txid: int, action: str) -> bool:
        delegate: StatefulComponent = self.delegate
        state = self._state
        hold = self._hold
        if action == INITSTATE:
            hold.fail(join_held([hold.take(), *self._prepared]))  # state reloaded: replay
            self._prepared = []
            self._state = KeyValueState(self._store)
            delegate.init_state(self._state)
            if self._rewinding:
                # Spouts that rewind at this INITSTATE send what came before it again:
                # running it now would count it twice.
                pending, self._pending = self._pending, []
                for item in pending:
                    batch = item if isinstance(item, TupleBatch) else TupleBatch.from_tuples(item)
                    self._control.fail(batch)
            return True
        if action == PREPARE:
            if state is None:
                return False  # restarted alone: the spout rolls back, then INITSTATE
            delegate.pre_prepare(txid)
            state.prepare_commit(txid)
            self._prepared.append(hold.take())
            return True
        if action == COMMIT:
            if state is None:
                self._store.commit(txid)
                return True
            delegate.pre_commit(txid)
            state.commit(txid)
            hold.release(join_held(self._prepared))
            self._prepared = []
            return True
        assert action == ROLLBACK
        if state is None:
            self._store.rollback()
            return True
        delegate.pre_rollback()
        state.rollback()
        hold.fail(join_held([*self._prepared, hold.take()]))
        self._prepared = []
        return True
