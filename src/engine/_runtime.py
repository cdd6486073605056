"""The runtime's public face: ``run_topology`` (the embedding API, ``async with
run_topology(topology, conf) as running``), ``start_topology``, the ``RunningTopology``
handle and ``Runtime`` itself.

Where each part lives: ``_lifecycle`` (``Runtime``: start, run, stop), ``_table`` (the
executors running now), ``_reconfigure`` (``Reconfiguration``: rebalance, crashes),
``_wiring`` (plan -> executors and routes), ``_services`` (what executors get of it),
``_acker`` (the acker coroutine), ``_fault_injection`` (faults as wrappers), ``_report``
(``TopologyInfo``), ``_running`` (the handle and the embedding API).
"""

from __future__ import annotations

from ._lifecycle import Runtime
from ._running import RunningTopology, run_topology, start_topology

__all__ = ["RunningTopology", "Runtime", "run_topology", "start_topology"]
