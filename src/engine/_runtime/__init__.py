"""The runtime's public face: ``run_topology`` (the embedding API, ``async with
run_topology(topology, conf) as running``), ``start_topology``, the ``RunningTopology``
handle and ``Runtime`` itself.

Where each part lives: ``lifecycle`` (``Runtime``: start, run, stop), ``table`` (the
executors running now), ``reconfigure`` (``Reconfiguration``: rebalance, crashes),
``wiring`` (plan -> executors and routes), ``fault_injection`` (faults as wrappers),
``report`` (``TopologyInfo``), ``running`` (the handle and the embedding API), ``cluster``
(``LocalCluster``), ``gc`` (the collector while topologies run). What executors get of the
runtime (``Services``) and the acker coroutine live in ``_execution``, which never imports
this folder.
"""

from __future__ import annotations

from .lifecycle import Runtime
from .running import RunningTopology, run_topology, start_topology

__all__ = ["RunningTopology", "Runtime", "run_topology", "start_topology"]
