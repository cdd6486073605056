"""Storm's checkpoint spout: it drives the two-phase commit of every stateful bolt.

Every ``topology.state.checkpoint.interval.ms`` it emits ``PREPARE(txid)`` on the system
stream ``__checkpoint``; once that tuple's tree is acked (every stateful bolt prepared its
state), ``COMMIT(txid)``; a failed ``PREPARE`` is followed by ``ROLLBACK``. Its own progress
(the txid and phase) is kept in the state provider, so a restarted topology recovers as
Storm's does: a transaction left ``PREPARING`` is rolled back, one left ``COMMITTING`` is
committed, then ``INITSTATE`` hands every bolt its last committed state. After every
rollback it sends ``INITSTATE`` again, so a bolt task restarted alone (a crash) gets its
state too.

It starts a checkpoint before the interval is over once the stateful bolts hold
uncommitted tuples and no input has reached any of them for ``EARLY_IDLE_NS``: their input
has paused, so the spouts may have nothing to send, or wait on the acks only a commit
releases (``topology.max.spout.pending``). Waiting for the interval would then leave the
topology idle: a topology whose spouts fill their pending limit within an interval would be
capped at that limit per interval, and the last tuples of a finite input would wait up to
an interval to be acked. Such early checkpoints come at most ``EARLY_PER_INTERVAL`` times
per interval (a busy topology's input pauses for a few milliseconds now and then, a
trickling one all the time), except once the input has stopped (``STOPPED_IDLE_NS``) with
at least ``EARLY_HELD`` tuples held: then nothing else can make progress. Under a
``topology.max.spout.pending``, a checkpoint also starts (within the same bound) once the
held acks reach half of what the spouts may have pending, before they stop at the limit.
The stateful bolts tell the spout through the run's ``CheckpointDemand``.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

from .._model.component import OutputFieldsDeclarer, Spout, StreamInfo
from .._model.config import (
    TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS,
    TOPOLOGY_MAX_SPOUT_PENDING,
    TOPOLOGY_MESSAGE_TIMEOUT_SECS,
    TOPOLOGY_STATE_CHECKPOINT_INTERVAL_MS,
)
from .._model.context import TopologyContext
from .._model.errors import InvalidConfigError
from .._model.fields import Fields
from ._coordinator import (
    EARLY_HELD,
    EARLY_IDLE_NS,
    EARLY_PER_INTERVAL,
    STOPPED_IDLE_NS,
    checkpoint_demand,
    coordinator_for,
)
from ._key_value import KeyValueState
from ._provider import open_state_store, state_namespace

__all__ = [
    "CHECKPOINT_COMPONENT_ID",
    "CHECKPOINT_FIELDS",
    "CHECKPOINT_STREAM_ID",
    "COMMIT",
    "INITSTATE",
    "PREPARE",
    "ROLLBACK",
    "CheckpointSpout",
    "spouts_rewind",
]

#: The checkpoint spout's id (Storm's ``$checkpointspout``) and stream (``$checkpoint``):
#: ids starting with ``__`` belong to the engine, so they never clash with a user's.
CHECKPOINT_COMPONENT_ID = "__checkpoint_spout"
CHECKPOINT_STREAM_ID = "__checkpoint"
#: ``attempt`` tells apart the tries of one action (0 without rewindable spouts): a barrier
#: of an earlier try still on its way is recognized and dropped, not aligned with the new.
CHECKPOINT_FIELDS = Fields("txid", "action", "attempt")

#: The checkpoint actions, the ``action`` field of a barrier: ``PREPARE`` stages a
#: transaction, ``COMMIT`` makes it the committed state, ``ROLLBACK`` drops it, and
#: ``INITSTATE`` hands each bolt its last committed state (at start and after a rollback).
#: Storm spells them the same, so a bolt ported from Storm compares the same strings.
PREPARE, COMMIT, ROLLBACK, INITSTATE = "PREPARE", "COMMIT", "ROLLBACK", "INITSTATE"
_COMMITTED, _PREPARING, _COMMITTING = "COMMITTED", "PREPARING", "COMMITTING"
_RECOVERY_ACTION = {_COMMITTED: INITSTATE, _PREPARING: ROLLBACK, _COMMITTING: COMMIT}
DEFAULT_INTERVAL_MS = 1000


def spouts_rewind(context: TopologyContext) -> bool:
    """Whether some spouts of the topology rewind with the state (``RewindableSpout``s whose
    positions the checkpoints record): then every rollback is followed by an ``INITSTATE``
    at which they go back to the committed positions, and the failure of a tuple rolls the
    state back instead of replaying that tuple alone."""
    checkpoints = context.get_raw_topology().spouts.get(CHECKPOINT_COMPONENT_ID)
    return bool(getattr(getattr(checkpoints, "component", None), "participants", ()))


class CheckpointSpout(Spout):
    """Emits checkpoint actions, one at a time; wired in by ``create_topology``.

    ``participants`` are the spouts whose positions are checkpointed with the state (see
    ``engine.state._rewindable``): each action is also posted to them through the run's
    ``CheckpointCoordinator``, and it completes once their barriers are acked too. A data
    tuple of theirs that fails makes the next action a rollback.
    """

    def __init__(self, participants: Sequence[str] = ()) -> None:
        self.participants = tuple(participants)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        # a system stream: set directly, as declare_stream refuses ids starting with "__"
        declarer.streams[CHECKPOINT_STREAM_ID] = StreamInfo(CHECKPOINT_FIELDS)

    def open(self, conf: Mapping[str, Any], context: TopologyContext, collector: Any) -> None:
        interval_ms = conf.get(TOPOLOGY_STATE_CHECKPOINT_INTERVAL_MS) or DEFAULT_INTERVAL_MS
        timeout = conf.get(TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30)
        if conf.get(TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True) and interval_ms / 1000 >= timeout:
            raise InvalidConfigError(
                f"'{TOPOLOGY_STATE_CHECKPOINT_INTERVAL_MS}' = {interval_ms} is not shorter than "
                f"'{TOPOLOGY_MESSAGE_TIMEOUT_SECS}' = {timeout}: a stateful bolt acks its "
                f"tuples only at the next checkpoint, so they would time out; checkpoint more "
                f"often or raise the timeout"
            )
        self._interval_ns = int(interval_ms * 1_000_000)
        self._early_gap_ns = self._interval_ns // EARLY_PER_INTERVAL
        self._demand = checkpoint_demand(context)
        # Half the trees the spouts may have pending: held acks past it start a checkpoint
        # before the spouts stop at their limit (a tree's acks may count more than once,
        # which only makes it start sooner).
        max_pending = conf.get(TOPOLOGY_MAX_SPOUT_PENDING)
        spouts = [c for c in context.get_raw_topology().spouts if c != CHECKPOINT_COMPONENT_ID]
        tasks = sum(len(context.get_component_tasks(c)) for c in spouts)
        self._filling: int | None = max(1, max_pending * tasks // 2) if max_pending else None
        #: how long participants may take to answer an action: a barrier lost with a
        #: crashed task is then given up on like a timed-out tree
        self._settle_ns = (
            int(timeout * 1e9) if conf.get(TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True) else None
        )
        self._posted_at = 0
        self._collector = collector
        self._clock = context.clock
        store = open_state_store(conf, state_namespace(conf, context.get_this_component_id(), 0))
        self._state = KeyValueState(store)
        self._txid: int = self._state.get("txid", 0)
        self._phase: str = self._state.get("phase", _COMMITTED)
        self._saves = store.committed_txid() or 0
        self._recovering = True
        self._in_flight: tuple[int, str] | None = None
        self._own_acked = False
        self._next_at = 0
        self._early_at = 0  # no early checkpoint before this
        self._coordinator = coordinator_for(context, self.participants)
        #: (txid, action) of the checkpoints acked, in order, the latest 10,000 (tests read it)
        self.completed: collections.deque[tuple[int, str]] = collections.deque(maxlen=10_000)

    def close(self) -> None:
        self._state._store.close()

    def _save(self) -> None:
        self._state.put("txid", self._txid)
        self._state.put("phase", self._phase)
        self._saves += 1
        self._state.prepare_commit(self._saves)
        self._state.commit(self._saves)

    def next_tuple(self) -> None:
        coordinator = self._coordinator
        if self._in_flight is not None:
            if coordinator is not None:
                self._check_participants()
            return
        now = self._clock.now_ns()
        if now < self._next_at and (self._recovering or not self._early(now)):
            return
        if (
            coordinator is not None
            and coordinator.rollback_requested
            and self._phase == _COMMITTED
            and not self._recovering
        ):
            # A tuple of a rewindable spout failed: back to the last committed checkpoint,
            # as a PREPARE that failed would go (ROLLBACK, then INITSTATE).
            coordinator.rollback_requested = False
            self._txid += 1
            self._phase = _PREPARING
            self._save()
            self._recovering = True
        if self._recovering:
            action = _RECOVERY_ACTION[self._phase]
        elif self._phase == _COMMITTING:
            action = COMMIT
        else:
            self._txid += 1
            self._phase = _PREPARING
            self._save()
            action = PREPARE
        self._in_flight = (self._txid, action)
        self._own_acked = False
        attempt = 0
        if coordinator is not None:
            self._posted_at = self._clock.now_ns()
            attempt, errors = coordinator.post(self._txid, action)
            for error in errors:
                self._collector.report_error(error)
        self._collector.emit([self._txid, action, attempt], CHECKPOINT_STREAM_ID, self._in_flight)

    def _early(self, now: int) -> bool:
        """A checkpoint may start before its interval is over (the module's doc)."""
        held, idle = self._demand.waiting(now)
        if not held:
            return False
        if now >= self._early_at:
            filling = self._filling
            return idle >= EARLY_IDLE_NS or (filling is not None and held >= filling)
        return held >= EARLY_HELD and idle >= STOPPED_IDLE_NS

    def _check_participants(self) -> None:
        """Complete or fail the action in flight once the participants settled it."""
        assert self._coordinator is not None and self._in_flight is not None
        settled = self._coordinator.settled()
        if (
            settled is None
            and self._settle_ns is not None
            and self._clock.now_ns() - self._posted_at > self._settle_ns
        ):
            settled = False
        if settled is False:
            self._failed(self._in_flight)
        elif settled and self._own_acked:
            self._completed(self._in_flight)

    def ack(self, msg_id: Any) -> None:
        if msg_id != self._in_flight:
            return  # the action was given up on already (a participant failed it)
        if self._coordinator is None:
            self._completed(msg_id)
        else:
            self._own_acked = True
            self._check_participants()

    def _completed(self, msg_id: tuple[int, str]) -> None:
        txid, action = msg_id
        self._in_flight = None
        self.completed.append((txid, action))
        now = self._clock.now_ns()
        self._next_at = now
        if action == PREPARE:
            self._phase = _COMMITTING
            self._save()
        elif action == COMMIT:
            self._phase = _COMMITTED
            self._save()
            if not self._recovering:
                self._next_at = now + self._interval_ns
                self._early_at = now + self._early_gap_ns
        elif action == ROLLBACK:
            self._txid, self._phase = txid - 1, _COMMITTED
            self._save()
            self._recovering = True  # then INITSTATE: tasks restarted alone get their state
        else:  # INITSTATE
            self._recovering = False
            self._next_at = now + self._interval_ns
            self._early_at = now + self._early_gap_ns

    def fail(self, msg_id: Any) -> None:
        if msg_id == self._in_flight:
            self._failed(msg_id)

    def _failed(self, msg_id: tuple[int, str]) -> None:
        _, action = msg_id
        self._in_flight = None
        if action == PREPARE:
            self._recovering = True  # PREPARING + recovering -> ROLLBACK next
        # COMMIT, ROLLBACK and INITSTATE are retried as they are, after a pause (a store
        # that is down is not hammered).
        self._next_at = self._early_at = self._clock.now_ns() + min(
            self._interval_ns, 1_000_000_000
        )

    def is_exhausted(self) -> bool:
        # Nothing of its own to finish: a topology completes once every data tree is acked,
        # and stateful bolts ack theirs only at a commit, which keeps it checkpointing.
        coordinator = self._coordinator
        return (
            not self._recovering
            and self._in_flight is None
            and not (coordinator is not None and coordinator.rollback_requested)
        )
