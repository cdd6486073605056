"""``Services``: what a running topology offers its executors and collectors.

The runtime builds one ``Services`` record and hands it to every executor; executors and
collectors reach the topology only through it (never through the runtime object): the
acker's operation lists and its wake-up, the clock and uptime, each task's random source
and context, the message trace and error reporting. Faults are none of their business:
fault injection wraps their destinations and execution when the topology is wired.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from .._model.context import TopologyContext
from .._model.faults import Trace
from .._monitor.stats import ErrorInfo
from .._time.clock import Clock
from .acker import AckerOps

__all__ = ["Services"]


@dataclass(frozen=True, slots=True)
class Services:
    """The record the module describes: one per running topology, shared by every
    executor. A record of callables rather than the runtime itself, so that an executor
    can be built and tested with fakes, and the runtime's layer stays above it."""

    #: pending acker operations, appended to by every collector
    acker_ops: AckerOps
    #: the topology has ackers (``topology.acker.executors`` > 0)
    acking: bool
    clock: Clock
    #: wake the acker if operations are pending (once per batch, or per out-of-batch ack)
    notify_acker: Callable[[], None]
    #: seconds since the topology started, on its clock
    uptime_secs: Callable[[], float]
    #: the task's own random source, derived from the topology's seed (ids, groupings)
    rng_for: Callable[[int], random.Random]
    #: the task's ``TopologyContext``
    context_for: Callable[[int], TopologyContext]
    #: the message trace (``trace=True``), else None
    trace: Trace | None
    #: told of every error a task reports (the topology's ``ErrorLog``: counts, history,
    #: groups, the throttled log)
    on_error: Callable[[ErrorInfo], None]
