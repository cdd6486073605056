"""Storm's ``Testing`` helpers, simulation and fault injection.

- ``complete_topology``: run until every mocked spout tuple is processed; read every tuple
  emitted per component and stream (Storm's ``completeTopology`` + ``readTuples``).
- ``simulate``: run a coroutine on virtual time (``advance_time`` jumps the clock), seeded,
  with faults (``CrashTask``, ``CrashAcker``, ``DropTuples``, ``DelayTuples``, ``SlowBolt``,
  ``FailTuples``) and a per-message report whose ``lost`` count must be 0 (emissions a
  crashed spout task had pending are ``abandoned``, and lost only if never emitted again).
- Reusable components that need no Hypothesis: ``FiniteSpout`` (finite, replays what
  fails), ``PassBolt``, ``BasicPassBolt``, ``AsyncPassBolt``, ``FanOutBolt``,
  ``FilterBolt``, ``HoldBolt``.
"""

import typing

from .._model.faults import (
    CrashAcker,
    CrashTask,
    DelayTuples,
    DropTuples,
    FailTuples,
    Fault,
    MessageReport,
    SlowBolt,
    Trace,
)
from .._model.public import lazy_exports as _lazy_exports
from .._model.public import publish as _publish
from .._time.virtual import SimulationDeadlock, VirtualClock, VirtualTimeLoop
from ._components import (
    FIELDS,
    AsyncPassBolt,
    BasicPassBolt,
    FanOutBolt,
    FilterBolt,
    FiniteSpout,
    HoldBolt,
    PassBolt,
)
from ._simulation import advance_time, simulate, simulated_time

if typing.TYPE_CHECKING:
    from ._complete import (
        CAPTURE_COMPONENT_ID,
        CompleteTopologyResult,
        FixedTupleSpout,
        complete_topology,
        complete_topology_async,
    )

__all__ = [
    "CAPTURE_COMPONENT_ID",
    "FIELDS",
    "AsyncPassBolt",
    "BasicPassBolt",
    "CompleteTopologyResult",
    "CrashAcker",
    "CrashTask",
    "DelayTuples",
    "DropTuples",
    "FailTuples",
    "FanOutBolt",
    "Fault",
    "FilterBolt",
    "FiniteSpout",
    "FixedTupleSpout",
    "HoldBolt",
    "MessageReport",
    "PassBolt",
    "SimulationDeadlock",
    "SlowBolt",
    "Trace",
    "VirtualClock",
    "VirtualTimeLoop",
    "advance_time",
    "complete_topology",
    "complete_topology_async",
    "simulate",
    "simulated_time",
]

#: ``complete_topology`` runs a topology, so its module loads the runtime (numpy, Numba, the
#: acker's kernels): it is imported on first use, so simulation alone, and ``engine.redis``
#: / ``engine.kafka`` (their local servers build on ``._local_server``), load none of it.
_LAZY = {
    name: "._complete"
    for name in (
        "CAPTURE_COMPONENT_ID",
        "CompleteTopologyResult",
        "FixedTupleSpout",
        "complete_topology",
        "complete_topology_async",
    )
}

__getattr__, __dir__ = _lazy_exports(__name__, globals(), _LAZY)

_publish(__name__, globals(), sorted(set(__all__) - set(_LAZY)))
