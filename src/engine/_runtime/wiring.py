"""Wiring: a task plan and a topology turned into executors and their routes.

Each component's executors get one component object per task; each sending task gets one
``Route`` per declared stream, holding every subscriber's ``Grouper`` (its choice per tuple
and its routing of batches), and the executor gets an outgoing buffer per target task.
Optional behaviour is put in place here, as wrappers: fault injection wraps the
destinations of faulty edges and the execution of faulty bolts (``fault_injection``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from .._execution.acker import AckerExecutor
from .._execution.channel import Destination
from .._execution.collector import Route
from .._execution.executor import BoltExecutor, SpoutExecutor
from .._execution.groupers import make_grouper
from .._execution.services import Services
from .._model.context import TaskPlan, TopologyContext
from .._model.copying import copy_component
from .._model.topology import StormTopology
from .._model.tuple import Source
from .fault_injection import FaultInjector
from .table import ExecutorTable, TaskExecutor

__all__ = ["Wiring", "new_executor", "routes_for"]


class Wiring:
    """Builds the executors of one running topology into its ``ExecutorTable`` and wires
    them: routes, destinations (through the faults of each edge) and bolt faults."""

    def __init__(
        self,
        topology: StormTopology,
        conf: Mapping[str, Any],
        services: Services,
        table: ExecutorTable,
        acker: AckerExecutor,
        faults: FaultInjector,
    ) -> None:
        self._topology = topology
        self._conf = conf
        self._services = services
        self._table = table
        self._acker = acker
        self._faults = faults
        self._max_task = max(table.plan.task_component, default=0)

    def add_executor(
        self, cid: str, tasks: tuple[int, ...], instances: dict[int, Any]
    ) -> TaskExecutor:
        """A new executor of ``cid``'s ``tasks`` (one object per task), in the table from
        now on; ``wire`` it once the executors it sends to are in the table too."""
        executor = new_executor(
            self._services, self._topology, self._conf, cid, tasks, instances, self._max_task
        )
        if isinstance(executor, SpoutExecutor):
            for t in tasks:
                self._acker.register_spout(t, executor.inbox)
        self._table.add(executor)
        self._faults.wrap(executor)
        return executor

    def wire(self, ex: TaskExecutor) -> None:
        """Give ``ex`` its routes and its outgoing buffers, one per target task."""
        services = self._services
        for t in ex.tasks:
            ex.routes[t] = routes_for(
                self._topology,
                self._table.plan,
                ex,
                t,
                lambda target: self.destination(ex, target),
                services.rng_for,
                services.context_for,
            )

    def rewire(self, ex: TaskExecutor) -> None:
        """Point ``ex`` at the executors serving its targets now, through the faults now
        (after a restart, a rebalance, an injected fault)."""
        ex.retarget(lambda target: self.destination(ex, target))
        self._faults.wrap(ex)

    def destination(self, ex: TaskExecutor, target: int) -> Destination:
        """Where ``ex`` hands its batches for task ``target``."""
        return self._faults.edge(
            ex.component_id,
            self._table.plan.task_component[target],
            self._table.of_task[target].inbox,
        )


def new_executor(
    services: Services,
    topology: StormTopology,
    conf: Mapping[str, Any],
    cid: str,
    tasks: tuple[int, ...],
    instances: dict[int, Any],
    max_task: int,
) -> TaskExecutor:
    """The executor of component ``cid``'s ``tasks`` (routes are wired afterwards, once
    every target's executor exists: ``routes_for``)."""
    spec = topology.components[cid]
    comp_conf = {**conf, **spec.config}
    if spec.is_spout:
        return SpoutExecutor(
            services, cid, tasks, comp_conf, instances, max_task, acking=services.acking
        )
    return BoltExecutor(services, cid, tasks, comp_conf, instances, max_task)


def routes_for(
    topology: StormTopology,
    plan: TaskPlan,
    ex: TaskExecutor,
    task: int,
    destination: Callable[[int], Destination],
    rng_for: Callable[[int], random.Random],
    context_for: Callable[[int], TopologyContext],
) -> dict[str, Route]:
    """``task``'s routes, one per stream its component declares; adds ``ex``'s outgoing
    buffers for every target task, handing to ``destination(target)``."""
    cid = ex.component_id
    spec = topology.components[cid]
    routes: dict[str, Route] = {}
    for stream, info in spec.streams.items():
        groupers = []
        direct_tasks: set[int] = set()
        for target, grouping in topology.subscribers(cid, stream):
            target_tasks = list(plan.component_tasks[target])
            for t in target_tasks:
                ex.add_target(t, destination(t))
            if grouping.custom is not None:  # each sending task gets its own object
                custom = copy_component(
                    grouping.custom, f"custom grouping of {target!r} on {cid!r}"
                )
                grouping = type(grouping)(grouping.kind, grouping.fields, custom)
            grouper = make_grouper(
                grouping,
                info.fields,
                target_tasks,
                rng_for(task),
                context_for(task),
                (cid, stream),
            )
            if grouper.direct:  # the emitter names the task
                direct_tasks.update(target_tasks)
            else:
                groupers.append(grouper)
        routes[stream] = Route(
            Source(cid, stream, task, info.fields),
            info.direct,
            groupers,
            frozenset(direct_tasks),
        )
    return routes
