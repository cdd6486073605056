"""Fault injection: which executor gets which fault (``engine.testing``'s fault records).

Crashes (``CrashTask``, ``CrashAcker``) are the runtime's to carry out at their time; edge
faults (``DropTuples``, ``DelayTuples``) go to the sending executor, per target task, and
bolt faults (``SlowBolt``, ``FailTuples``) to the bolt's executors. Every executor, new
ones (restarts, rebalances) included, gets the faults of its component.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from ._errors import TopologyStateError
from ._executor import BoltExecutor, Executor
from ._faults import (
    BoltFaults,
    CrashAcker,
    CrashTask,
    DelayTuples,
    DropTuples,
    EdgeFaults,
    FailTuples,
    Fault,
    SlowBolt,
)

__all__ = ["FaultInjector"]


class FaultInjector:
    """The edge and bolt faults of one topology, and the one random source they draw on."""

    def __init__(self, name: str, components: Sequence[str], seed: int) -> None:
        self._name = name
        self._components = sorted(components)
        self._edge: list[DropTuples | DelayTuples] = []
        self._bolt: list[SlowBolt | FailTuples] = []
        self._rng = random.Random(seed ^ 0x5EED_FA17)

    def check_component(self, cid: str, what: str) -> None:
        if cid not in self._components:
            raise TopologyStateError(
                f"{what}: topology {self._name!r} has no component {cid!r} "
                f"(components: {self._components})"
            )

    def add(self, fault: Fault) -> CrashTask | CrashAcker | None:
        """Check ``fault`` and keep it; a crash is returned for the runtime to schedule.
        Executors that exist already must be ``install``ed again."""
        if isinstance(fault, (CrashTask, CrashAcker)):
            if isinstance(fault, CrashTask):
                self.check_component(fault.component, "CrashTask")
            return fault
        if isinstance(fault, (DropTuples, DelayTuples)):
            for cid in (fault.source, fault.target):
                self.check_component(cid, type(fault).__name__)
            self._edge.append(fault)
        elif isinstance(fault, (SlowBolt, FailTuples)):
            self.check_component(fault.component, type(fault).__name__)
            self._bolt.append(fault)
        else:
            raise TypeError(f"not a fault: {fault!r}")
        return None

    def install(self, ex: Executor, component_tasks: Mapping[str, Sequence[int]]) -> None:
        """Give ``ex`` the faults of its component (as edge source, or as the bolt)."""
        edge = [f for f in self._edge if f.source == ex.component_id]
        if edge:
            faults = EdgeFaults(self._rng)
            for f in edge:
                for t in component_tasks[f.target]:
                    faults.by_task.setdefault(t, []).append(f)
            ex.edge_faults = faults
        bolt = [f for f in self._bolt if f.component == ex.component_id]
        if bolt and isinstance(ex, BoltExecutor):
            bf = BoltFaults(self._rng)
            bf.faults = bolt
            ex.bolt_faults = bf
