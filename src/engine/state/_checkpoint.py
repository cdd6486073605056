"""Storm's checkpoint spout: it drives the two-phase commit of every stateful bolt.

Every ``topology.state.checkpoint.interval.ms`` it emits ``PREPARE(txid)`` on the system
stream ``__checkpoint``; once that tuple's tree is acked (every stateful bolt prepared its
state), ``COMMIT(txid)``; a failed ``PREPARE`` is followed by ``ROLLBACK``.

It starts a checkpoint before the interval is over (at most every tenth of it) once the
stateful bolts hold uncommitted tuples and no input has reached any of them for
``EARLY_IDLE_NS``: their input has paused, so the spouts have nothing to send, or wait on
the acks only a commit releases (``topology.max.spout.pending``). Waiting for the interval
would then only leave the topology idle: the throughput of a topology whose spouts fill
their pending limit within an interval would otherwise be capped at that limit per interval,
and the last tuples of a finite input would wait up to an interval to be acked. The
stateful bolts tell the spout through a ``CheckpointDemand``, one per run of the topology. Its own progress
(the txid and phase) is kept in the state provider, so a restarted topology recovers as
Storm's does: a transaction left ``PREPARING`` is rolled back, one left ``COMMITTING`` is
committed, then ``INITSTATE`` hands every bolt its last committed state. After every
rollback it sends ``INITSTATE`` again, so a bolt task restarted alone (a crash) gets its
state too.
"""

from __future__ import annotations

import collections
from typing import Any, Protocol

from .._component import Spout, StreamInfo
from .._config import (
    TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS,
    TOPOLOGY_MESSAGE_TIMEOUT_SECS,
    TOPOLOGY_STATE_CHECKPOINT_INTERVAL_MS,
)
from .._errors import InvalidConfigError
from .._fields import Fields
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
    "CheckpointDemand",
    "CheckpointSpout",
    "checkpoint_demand",
]

#: The checkpoint spout's id (Storm's ``$checkpointspout``) and stream (``$checkpoint``):
#: ids starting with ``__`` belong to the engine, so they never clash with a user's.
CHECKPOINT_COMPONENT_ID = "__checkpoint_spout"
CHECKPOINT_STREAM_ID = "__checkpoint"
CHECKPOINT_FIELDS = Fields("txid", "action")

PREPARE, COMMIT, ROLLBACK, INITSTATE = "PREPARE", "COMMIT", "ROLLBACK", "INITSTATE"
_COMMITTED, _PREPARING, _COMMITTING = "COMMITTED", "PREPARING", "COMMITTING"
_RECOVERY_ACTION = {_COMMITTED: INITSTATE, _PREPARING: ROLLBACK, _COMMITTING: COMMIT}
DEFAULT_INTERVAL_MS = 1000
#: No input reached any stateful task for this long while they hold uncommitted tuples: a
#: checkpoint may start before its interval is over.
EARLY_IDLE_NS = 2_000_000
#: Early checkpoints come at most this often per interval.
EARLY_PER_INTERVAL = 10


class _StatefulTask(Protocol):
    last_input_ns: int

    def holds_acks(self) -> bool: ...


class CheckpointDemand:
    """What the stateful tasks of one run of a topology tell its checkpoint spout: whether
    they hold uncommitted tuples, and when input last reached them."""

    def __init__(self, key: str) -> None:
        self._key = key
        self._tasks: dict[int, _StatefulTask] = {}

    def register(self, task: int, gate: _StatefulTask) -> None:
        self._tasks[task] = gate  # a restarted task replaces its predecessor

    def unregister(self, gate: _StatefulTask) -> None:
        for task in [t for t, g in self._tasks.items() if g is gate]:
            del self._tasks[task]
        if not self._tasks:
            _DEMANDS.pop(self._key, None)

    def waiting(self, now_ns: int) -> bool:
        """Some task holds uncommitted tuples and none had input for ``EARLY_IDLE_NS``."""
        tasks = self._tasks.values()
        return any(t.holds_acks() for t in tasks) and all(
            now_ns - t.last_input_ns >= EARLY_IDLE_NS for t in tasks
        )


_DEMANDS: dict[str, CheckpointDemand] = {}


def checkpoint_demand(context: Any) -> CheckpointDemand:
    """The ``CheckpointDemand`` of the run ``context`` belongs to (its ``storm.id``)."""
    key = context.get_storm_id()
    demand = _DEMANDS.get(key)
    if demand is None:
        demand = _DEMANDS[key] = CheckpointDemand(key)
    return demand


class CheckpointSpout(Spout):
    """Emits checkpoint actions, one at a time; wired in by ``create_topology``."""

    def declare_output_fields(self, declarer: Any) -> None:
        # a system stream: set directly, as declare_stream refuses ids starting with "__"
        declarer.streams[CHECKPOINT_STREAM_ID] = StreamInfo(CHECKPOINT_FIELDS)

    def open(self, conf: Any, context: Any, collector: Any) -> None:
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
        self._collector = collector
        self._clock = context.clock
        store = open_state_store(conf, state_namespace(conf, context.get_this_component_id(), 0))
        self._state = KeyValueState(store)
        self._txid: int = self._state.get("txid", 0)
        self._phase: str = self._state.get("phase", _COMMITTED)
        self._saves = store.committed_txid() or 0
        self._recovering = True
        self._in_flight: tuple[int, str] | None = None
        self._next_at = 0
        self._early_at = 0  # no early checkpoint before this
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
        if self._in_flight is not None:
            return
        now = self._clock.now_ns()
        if now < self._next_at and (
            self._recovering or now < self._early_at or not self._demand.waiting(now)
        ):
            return
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
        self._collector.emit([self._txid, action], CHECKPOINT_STREAM_ID, self._in_flight)

    def ack(self, msg_id: Any) -> None:
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
        return not self._recovering and self._in_flight is None
