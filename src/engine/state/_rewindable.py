"""Spouts whose positions are part of the checkpoint: exactly-once state from sources that
replay by position (as Flink's sources do; Storm's checkpoints cover only bolts).

A ``RewindableSpout`` can say where it is (``position()``: everything before it was emitted,
nothing after) and go back there (``rewind(position)``: emit again from it, forgetting what
it emitted since). When such a spout feeds a stateful bolt, ``create_topology`` wraps it in
a ``RewindableSpoutExecutor`` that takes part in every checkpoint action:

- The checkpoint spout posts each action ``(txid, action)`` to the run's
  ``CheckpointCoordinator``. Each wrapped spout task then emits the barrier itself, on
  ``__checkpoint``, in line with its data: what it emitted before the barrier is in the
  checkpoint, what it emits after is not. At ``PREPARE`` it records its position in its
  own state namespace as part of transaction ``txid``; ``COMMIT`` and ``ROLLBACK`` commit or
  drop it with the bolts' state. The action completes once the checkpoint spout's barrier
  tree and every wrapped task's barrier tree are acked.
- At ``INITSTATE`` (start, and after every rollback) the task rewinds its spout to the
  committed position while the bolts reload the committed state; it emits no data before.
  A rewind starts a new *epoch*: acks and fails of tuples emitted before it are ignored
  (the rolled-back bolts fail them; the rewind emits them again).
- A data tuple that fails (or times out) is not replayed on its own, which could count it
  twice: it asks the coordinator for a rollback, which rewinds every wrapped spout.

Every input then affects the state exactly once, across crashes and SIGKILLs, provided the
spout reads the same records again from a position (a Kafka partition's offset, a file's
row number) and the bolts' state lives in a durable provider. The coordinator is shared in
this process: a topology's spouts and its checkpoint spout run in one process here.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from .._execution.collector import SpoutOutputCollector
from .._model.component import OutputFieldsDeclarer, Spout, StreamInfo
from .._model.context import TopologyContext
from .._model.errors import InvalidComponentError
from ._checkpoint import (
    CHECKPOINT_COMPONENT_ID,
    CHECKPOINT_FIELDS,
    CHECKPOINT_STREAM_ID,
    COMMIT,
    INITSTATE,
    PREPARE,
    CheckpointSpout,
)
from ._coordinator import CheckpointCoordinator, coordinator_for
from ._key_value import KeyValueState
from ._provider import open_state_store, state_namespace

__all__ = ["RewindableSpout", "RewindableSpoutExecutor"]

#: The key of a task's position in its state namespace.
_POSITION = "position"


class RewindableSpout(Spout):
    """A spout that replays by position. Implement both methods:

    - ``position()``: a picklable value naming where the spout is: every record before it
      was emitted, none after it (records failed and waiting for a retry count as not
      emitted: the position is at or before the first of them).
    - ``rewind(position)``: emit again from ``position`` on, forgetting every record
      emitted, pending or waiting for a retry since; called only with a value ``position()``
      returned in an earlier run or earlier in this one.

    Fed into a stateful bolt, such a spout makes the bolt's state exactly-once (see
    ``engine.state``): ``KafkaSpout`` is one.
    """

    def position(self) -> Any:
        """Where the spout is now; it is saved with the checkpoint ``PREPARE`` makes.

        Called between two ``next_tuple`` calls, so no record is half emitted. It must be
        picklable (the state provider stores it) and mean the same in a later process: a
        Kafka offset or a file's row number, not an iterator.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement position()")

    def rewind(self, position: Any) -> None:
        """Go back to ``position`` (a value ``position()`` returned) and emit again from it.

        Called at start and after every rollback, while the bolts reload the state committed
        with that position: what the spout emits next is exactly what that state has not
        seen. Forget every record emitted or waiting for a retry since: the engine ignores
        the acks and fails of tuples emitted before a rewind.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement rewind(position)")


class _EpochCollector(SpoutOutputCollector):
    """The delegate's collector: message ids become ``(epoch, id)``, so answers about
    tuples emitted before a rewind can be told apart and ignored."""

    def __init__(self, delegate: SpoutOutputCollector, owner: RewindableSpoutExecutor) -> None:
        super().__init__(delegate)
        self._owner = owner

    def emit(self, values: Sequence[Any], stream: str = "default", msg_id: Any = None) -> Any:
        if stream == CHECKPOINT_STREAM_ID:
            raise InvalidComponentError(
                f"stream {CHECKPOINT_STREAM_ID!r} belongs to the checkpoint protocol; emit on a "
                f"stream of your own"
            )
        if msg_id is not None:
            msg_id = (self._owner.epoch, msg_id)
        return self._delegate.emit(values, stream, msg_id)

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = "default", msg_id: Any = None
    ) -> None:
        if msg_id is not None:
            msg_id = (self._owner.epoch, msg_id)
        self._delegate.emit_direct(task, values, stream, msg_id)

    def emit_batch(
        self, data: Any, msg_ids: Any = None, stream: str = "default", tasks: Any = None
    ) -> int:
        if msg_ids is not None:
            epoch = self._owner.epoch
            msg_ids = [(epoch, m) for m in msg_ids]
        return self._delegate.emit_batch(data, msg_ids, stream, tasks)


class RewindableSpoutExecutor(Spout):
    """Runs a ``RewindableSpout`` inside the checkpoint protocol (wired by
    ``create_topology``); see the module's docstring."""

    def __init__(self, delegate: RewindableSpout) -> None:
        for name in ("next_tuple", "ack", "fail"):
            if inspect.iscoroutinefunction(getattr(type(delegate), name)):
                raise InvalidComponentError(
                    f"{type(delegate).__name__}.{name} is async: a spout whose positions are "
                    f"checkpointed must emit its barriers in line with its data; make "
                    f"{name} a plain def"
                )
        self.delegate = delegate

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.delegate!r})"

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.delegate.declare_output_fields(declarer)
        # a system stream: set directly, as declare_stream refuses ids starting with "__"
        declarer.streams[CHECKPOINT_STREAM_ID] = StreamInfo(CHECKPOINT_FIELDS)

    def component_configuration(self) -> Mapping[str, Any] | None:
        return self.delegate.component_configuration()

    # --- life cycle -----------------------------------------------------------------------
    async def open(self, conf: Mapping[str, Any], context: TopologyContext, collector: Any) -> None:
        self._out = collector
        self._task = context.get_this_task_id()
        self.epoch = 0
        #: INITSTATE was handled: until then no data is emitted (it would not be rewound)
        self.initialized = False
        self._done_request: tuple[int, int, str] | None = None
        #: the barriers this object emitted and not yet heard of: the task's previous
        #: object may have emitted one into a queue lost in its crash, whose answer must
        #: not count for this one
        self._barriers: set[tuple[int, int, str]] = set()
        #: the delegate's position when this run began (before any data), once known
        self._start: Any = None
        #: rewinds done (tests read it)
        self.rewinds = 0
        store = open_state_store(
            conf, state_namespace(conf, context.get_this_component_id(), context.task_index)
        )
        self._state = KeyValueState(store)
        checkpoints = context.get_raw_topology().spouts[CHECKPOINT_COMPONENT_ID].component
        assert isinstance(checkpoints, CheckpointSpout)  # wired in with this spout
        coordinator = coordinator_for(context, checkpoints.participants)
        assert coordinator is not None  # this spout is one of the participants
        self._coordinator: CheckpointCoordinator = coordinator
        #: the delegate's ``open`` returned: until then a request is declined
        self._opened = False
        # Joined before the delegate opens (which may wait on a broker): a crashed task's
        # object must stop taking the actions at once, not run them on a closed client.
        coordinator.join(self._task, self._on_request)
        opened = self.delegate.open(conf, context, _EpochCollector(collector, self))
        if inspect.isawaitable(opened):
            await opened
        self._opened = True
        request = coordinator.request
        if request is not None and request != self._done_request:
            self._decline(request)

    def _decline(self, request: tuple[int, int, str]) -> None:
        """Take no part in ``request``, posted before this object was open: restarted in a
        running topology (a crash, a rebalance), the bolts' state holds what this task
        emitted before, so it must not rewind alone. It fails the action (if it still waits
        for this task) and asks for a rollback, whose INITSTATE rewinds every spout with the
        state. At a topology's start the first INITSTATE may come while the spout opens: it
        is declined the same way, and the rollback's INITSTATE starts it."""
        self._done_request = request
        coordinator = self._coordinator
        if self._task not in coordinator.acked:
            coordinator.report(self._task, request, False)
        coordinator.rollback_requested = True

    async def close(self) -> None:
        try:
            closed = self.delegate.close()
            if inspect.isawaitable(closed):
                await closed
        finally:
            self._state._store.close()

    def activate(self) -> Any:
        return self.delegate.activate()

    def deactivate(self) -> Any:
        return self.delegate.deactivate()

    # --- emitting -------------------------------------------------------------------------
    def next_tuple(self) -> None:
        if self.initialized:
            self.delegate.next_tuple()

    def _on_request(self, request: tuple[int, int, str]) -> None:
        """Run a checkpoint action the moment it is posted (see ``CheckpointCoordinator.post``)."""
        if not self._opened:
            self._decline(request)
        elif request != self._done_request:
            self._run_action(request)

    def _run_action(self, request: tuple[int, int, str]) -> None:
        seq, txid, action = request
        state = self._state
        self._done_request = request
        if action == PREPARE:
            if not self.initialized:
                # No position to record that matches the state (restarted, or a tuple
                # failed since the last rewind): the checkpoint fails and rolls back.
                self._coordinator.report(self._task, request, False)
                return
            state.put(_POSITION, self.delegate.position())
            state.prepare_commit(txid)
        elif action == COMMIT:
            state.commit(txid)
        elif action == INITSTATE:
            self._rewind()
            self.initialized = True
        else:  # ROLLBACK: no data until the INITSTATE that follows rewinds the spout
            state.rollback()
            self.initialized = False
        self._barriers.add(request)
        # A one-row batch: it travels apart from the data around it, so the gates
        # downstream find it without looking at every data tuple.
        self._out.emit_batch(
            [[txid], [action], [seq]], [("__barrier", request)], CHECKPOINT_STREAM_ID
        )

    def _rewind(self) -> None:
        """Back to the committed position; to where this run began when nothing was
        committed yet (the bolts' state is then empty again)."""
        if self._start is None:
            self._start = self.delegate.position()
        self._state = KeyValueState(self._state._store)  # the committed entries
        position = self._state.get(_POSITION, self._start)
        self.epoch += 1
        self.delegate.rewind(position)
        self.rewinds += 1

    # --- acking ---------------------------------------------------------------------------
    def _barrier_done(self, request: tuple[int, int, str], ok: bool) -> None:
        if request in self._barriers:
            self._barriers.discard(request)
            self._coordinator.report(self._task, request, ok)

    def ack(self, msg_id: Any) -> None:
        if msg_id[0] == "__barrier":
            self._barrier_done(msg_id[1], True)
        elif msg_id[0] == self.epoch:
            self.delegate.ack(msg_id[1])

    def ack_batch(self, msg_ids: list[Any]) -> None:
        epoch = self.epoch
        mine = [m[1] for m in msg_ids if m[0] == epoch]
        if len(mine) != len(msg_ids):
            for m in msg_ids:
                if m[0] == "__barrier":
                    self._barrier_done(m[1], True)
        if mine:
            self.delegate.ack_batch(mine)

    def fail(self, msg_id: Any) -> None:
        if msg_id[0] == "__barrier":
            self._barrier_done(msg_id[1], False)
        elif msg_id[0] == self.epoch and self.initialized:
            # Replaying this one tuple could count it twice (a bolt past the failure may
            # have counted it): every spout goes back to the last checkpoint instead. A
            # PREPARE this task already answered recorded a position past the tuple: it
            # must fail too.
            coordinator = self._coordinator
            coordinator.rollback_requested = True
            self.initialized = False
            request = coordinator.request
            if request is not None and request[2] == PREPARE:
                coordinator.report(self._task, request, False)

    def is_exhausted(self) -> bool:
        return self.initialized and bool(self.delegate.is_exhausted())
