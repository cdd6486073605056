"""What a run's checkpoint spout shares with the tasks taking part in its checkpoints.
They run in one process, so these are objects in memory, found by the run's id.

- ``CheckpointCoordinator``, with its rewindable spout tasks (``engine.state._rewindable``
  says why): the checkpoint action under way and which spout tasks have completed it.
- ``CheckpointDemand``, with its stateful bolt tasks: whether they hold uncommitted tuples
  and when input last reached them, so that a checkpoint starts early when they wait on
  it (``engine.state._checkpoint``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from .._model.context import TopologyContext

__all__ = [
    "EARLY_HELD",
    "EARLY_IDLE_NS",
    "EARLY_PER_INTERVAL",
    "STOPPED_IDLE_NS",
    "CheckpointCoordinator",
    "CheckpointDemand",
    "checkpoint_demand",
    "coordinator_for",
]

#: No input reached any stateful task for this long while they hold uncommitted tuples: a
#: checkpoint may start before its interval is over, at most ``EARLY_PER_INTERVAL`` times
#: per interval.
EARLY_IDLE_NS = 2_000_000
EARLY_PER_INTERVAL = 10
#: No input for this long while they hold at least ``EARLY_HELD`` tuples: the input has
#: stopped (the spouts wait on the commit, or have nothing left), and a checkpoint starts
#: whenever the last one was. A busy word count's input pauses for 10-20 ms about once a
#: second on a loaded machine (2 shared vCPUs), for 20 ms and more hardly ever: a
#: checkpoint more now and then, while the last tuples of a finite input wait 10 ms less.
STOPPED_IDLE_NS = 10_000_000
EARLY_HELD = 256


class CheckpointCoordinator:
    """The current checkpoint action and which wrapped spout tasks have completed it."""

    def __init__(self, participants: Iterable[int]) -> None:
        self.participants = frozenset(participants)
        #: ``(seq, txid, action)``: a retried action is a new request (a new ``seq``)
        self.request: tuple[int, int, str] | None = None
        self._seq = 0
        self.acked: set[int] = set()
        self.failed = False
        #: a data tuple of a wrapped spout failed: roll back at the next opportunity
        self.rollback_requested = False
        #: task -> the participant's handler of a new request
        self._handlers: dict[int, Callable[[tuple[int, int, str]], None]] = {}

    def join(self, task: int, handler: Callable[[tuple[int, int, str]], None]) -> None:
        """``handler(request)`` runs each action for ``task`` as soon as it is posted (a
        restarted task's handler replaces its predecessor's)."""
        self._handlers[task] = handler

    def post(self, txid: int, action: str) -> tuple[int, list[Exception]]:
        """The checkpoint spout starts an action; every participant runs it at once and
        emits its barrier. At once, not in its own ``next_tuple``: a spout whose pending
        trees reached ``topology.max.spout.pending`` is not asked for tuples, and its
        pending trees (held by stateful bolts until a commit) wait for this very action.

        Returns the request's ``seq`` and what the participants raised: a participant that
        raises fails the action, and every other one still gets it (one stopped at the
        first error would never hear of the rollback that follows)."""
        self._seq += 1
        request = self.request = (self._seq, txid, action)
        self.acked = set()
        self.failed = False
        errors: list[Exception] = []
        for handler in list(self._handlers.values()):
            try:
                handler(request)
            except Exception as exc:
                errors.append(exc)
                self.failed = True
        return self._seq, errors

    def report(self, task: int, request: tuple[int, int, str], ok: bool) -> None:
        """A participant's barrier tree for ``request`` was acked (``ok``) or failed."""
        if request != self.request:
            return  # an earlier action's late answer
        if ok:
            self.acked.add(task)
        else:
            self.failed = True

    def settled(self) -> bool | None:
        """True once every participant acked the current request, False if one failed,
        None while some are still working on it."""
        if self.failed:
            return False
        if self.acked >= self.participants:
            return True
        return None


_LOCK = threading.Lock()
_COORDINATORS: weakref.WeakValueDictionary[str, CheckpointCoordinator] = (
    weakref.WeakValueDictionary()
)


def coordinator_for(
    context: TopologyContext, components: Sequence[str]
) -> CheckpointCoordinator | None:
    """The coordinator of ``context``'s run whose participants are the tasks of
    ``components`` (the spouts whose positions are checkpointed), or None without any."""
    if not components:
        return None
    participants = [t for cid in components for t in context.get_component_tasks(cid)]
    run = _run(context)
    with _LOCK:
        coordinator = _COORDINATORS.get(run)
        if coordinator is None:
            coordinator = _COORDINATORS[run] = CheckpointCoordinator(participants)
        return coordinator


class _StatefulTask(Protocol):
    last_input_ns: int

    def held_acks(self) -> int: ...


class CheckpointDemand:
    """What the stateful bolt tasks of one run tell its checkpoint spout: whether they hold
    uncommitted tuples, and when input last reached them."""

    def __init__(self) -> None:
        self._tasks: dict[int, _StatefulTask] = {}

    def register(self, task: int, gate: _StatefulTask) -> None:
        """``gate`` runs stateful ``task`` (a restarted task replaces its predecessor)."""
        self._tasks[task] = gate

    def waiting(self, now_ns: int) -> tuple[int, int]:
        """The uncommitted tuples (ACK operations) the tasks hold, and for how long (ns)
        none of them had input."""
        tasks = self._tasks.values()
        if not tasks:
            return 0, 0
        idle = now_ns - max(t.last_input_ns for t in tasks)
        return sum(t.held_acks() for t in tasks), idle


_DEMANDS: weakref.WeakValueDictionary[str, CheckpointDemand] = weakref.WeakValueDictionary()


def checkpoint_demand(context: TopologyContext) -> CheckpointDemand:
    """The ``CheckpointDemand`` of the run ``context`` belongs to."""
    run = _run(context)
    with _LOCK:
        demand = _DEMANDS.get(run)
        if demand is None:
            demand = _DEMANDS[run] = CheckpointDemand()
        return demand


def _run(context: TopologyContext) -> str:
    return context.get_storm_id() or f"clock-{id(context.clock)}"
