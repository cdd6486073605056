"""Which run of a topology a task belongs to, and task metrics that survive a re-open.

A spout re-opens within one run when its task crashes and restarts (a fresh component object
copied from the topology) or when it is rebalanced (the same object, opened again); a new
run starts with a new runtime. The offset spout must tell the two apart: a commit made by
this run wins over the ``EARLIEST``/``LATEST`` first-poll strategies (Storm's KafkaSpout
checks the topology id stored with the commit).

The run id is the conf's ``storm.id`` when the runtime gives one (Storm's per-submission
topology id). Otherwise it is derived from the runtime's ``Clock`` (``context.clock``): the
runtime creates one clock when it starts and hands it to every task, restarted and
rebalanced ones included, so the clock object identifies the run for as long as the run
lives. A task without a clock gets a fresh id at every open (every open is a new run).
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from engine import TopologyStateError

__all__ = ["register_task_metrics", "run_id"]

_lock = threading.Lock()
_run_ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def run_id(conf: Mapping[str, Any], context: Any) -> str:
    """The id of the topology run that ``context``'s task belongs to."""
    given = conf.get("storm.id")
    if isinstance(given, str) and given:
        return given
    clock = getattr(context, "clock", None)
    if clock is not None:
        with _lock:
            try:
                found = _run_ids.get(clock)
                if found is None:
                    found = _run_ids[clock] = uuid.uuid4().hex
                return found
            except TypeError:  # a clock that cannot be weakly referenced
                pass
    return uuid.uuid4().hex


class _Slot:
    """The task's current component object, read by the metrics registered for the task."""

    __slots__ = ("names", "owner")

    def __init__(self, owner: Any) -> None:
        self.owner = owner
        self.names: set[str] = set()


#: run (its clock, else the context) -> task id -> slot
_slots: weakref.WeakKeyDictionary[Any, dict[int, _Slot]] = weakref.WeakKeyDictionary()


def register_task_metrics(
    context: Any, owner: Any, reads: Mapping[str, Callable[[Any], Any]]
) -> None:
    """Register gauges ``name -> read(owner)`` for ``context``'s task.

    A task that re-opens within its run (a rebalance, or a restart on an engine that keeps
    the task's metrics) finds its metrics registered already: they then read the new
    ``owner``, so the figures follow the live object instead of raising "already has a
    metric". A name registered by anyone else still raises.
    """
    clock = getattr(context, "clock", None)
    with _lock:
        tasks = _slots.setdefault(clock if clock is not None else context, {})
        slot = tasks.get(context.task_id)
        if slot is None:
            slot = tasks[context.task_id] = _Slot(owner)
        slot.owner = owner
    for name, read in reads.items():
        try:
            context.register_metric(name, _gauge(slot, read))
        except TopologyStateError:
            if name not in slot.names:
                raise
        slot.names.add(name)


def _gauge(slot: _Slot, read: Callable[[Any], Any]) -> Callable[[], Any]:
    return lambda: read(slot.owner)
