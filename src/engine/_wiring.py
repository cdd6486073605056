"""Wiring: a task plan and a topology turned into executors and their routes.

Each component's executors get one component object per task; each sending task gets one
``Route`` per declared stream, holding every subscriber's chooser (per-tuple emits) and
``BatchRouter`` (batch emits), and the executor gets an outgoing buffer per target task.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from ._batch_routing import make_batch_router
from ._collector import Route
from ._context import TaskPlan, TopologyContext
from ._copying import copy_component
from ._executor import BoltExecutor, Executor, SpoutExecutor
from ._groupers import constant_targets, make_grouper
from ._grouping import GroupingKind
from ._services import Services
from ._topology import StormTopology
from ._tuple import Source

__all__ = ["new_executor", "routes_for"]


def new_executor(
    services: Services,
    topology: StormTopology,
    conf: Mapping[str, Any],
    cid: str,
    tasks: tuple[int, ...],
    instances: dict[int, Any],
    max_task: int,
) -> Executor:
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
    ex: Executor,
    task: int,
    executor_of: Mapping[int, Executor],
    rng_for: Callable[[int], random.Random],
    context_for: Callable[[int], TopologyContext],
) -> dict[str, Route]:
    """``task``'s routes, one per stream its component declares; adds ``ex``'s outgoing
    buffers for every target task."""
    cid = ex.component_id
    spec = topology.components[cid]
    routes: dict[str, Route] = {}
    for stream, info in spec.streams.items():
        subs = []
        routers = []
        direct_tasks: set[int] = set()
        for target, grouping in topology.subscribers(cid, stream):
            target_tasks = list(plan.component_tasks[target])
            for t in target_tasks:
                ex.add_target(t, executor_of[t].inbox)
            if grouping.kind is GroupingKind.DIRECT:
                direct_tasks.update(target_tasks)
                continue
            if grouping.kind is GroupingKind.CUSTOM:
                custom = copy_component(
                    grouping.custom, f"custom grouping of {target!r} on {cid!r}"
                )
                grouping = type(grouping)(grouping.kind, grouping.fields, custom)
            chooser = make_grouper(
                grouping,
                info.fields,
                target_tasks,
                rng_for(task),
                context_for(task),
                (cid, stream),
            )
            assert chooser is not None
            subs.append(chooser)
            routers.append(
                make_batch_router(
                    grouping, info.fields, target_tasks, chooser, constant_targets(chooser)
                )
            )
        route = Route(
            Source(cid, stream, task, info.fields), info.direct, subs, frozenset(direct_tasks)
        )
        route.batch_routers = routers
        routes[stream] = route
    return routes
