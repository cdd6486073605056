"""How a topology with stateful bolts is wired (Storm's ``TopologyBuilder`` does the same
when it sees an ``IStatefulBolt``): registered as a ``create_topology`` rewrite.

Every stateful bolt is wrapped in a ``StatefulBoltExecutor``; every bolt upstream of one
(and only those: Storm wraps every bolt) in a ``CheckpointTupleForwarder``; the checkpoint
spout ``__checkpoint_spout`` is added; and each wrapped bolt subscribes, with an all
grouping, to the ``__checkpoint`` stream of each bolt it reads from, and of the checkpoint
spout when it reads from a spout. A ``RewindableSpout`` feeding a wrapped bolt is wrapped
in a ``RewindableSpoutExecutor`` and sends its own barriers: the bolt subscribes to its
``__checkpoint`` stream instead. The builder the user holds is left as it was.
"""

from __future__ import annotations

import inspect

from .._model.batch_component import BasicBatchBolt, BatchBolt
from .._model.component import Spout
from .._model.errors import InvalidComponentError
from .._model.grouping import Grouping, GroupingKind
from .._model.topology import BUILDER_REWRITES, Subscription, TopologyBuilder
from ._bolt import StatefulComponent
from ._checkpoint import CHECKPOINT_COMPONENT_ID, CHECKPOINT_STREAM_ID, CheckpointSpout
from ._rewindable import RewindableSpout, RewindableSpoutExecutor
from ._stateful_executor import CheckpointTupleForwarder, StatefulBoltExecutor

__all__ = ["wire_checkpoints"]


def wire_checkpoints(builder: TopologyBuilder) -> TopologyBuilder:
    """``builder`` itself when it has no stateful bolt, else a wired copy."""
    components = builder._components
    stateful = [cid for cid, c in components.items() if isinstance(c, StatefulComponent)]
    if not stateful:
        return builder
    inputs = builder._inputs
    wrapped: set[str] = set()
    todo = list(stateful)
    while todo:
        cid = todo.pop()
        if cid in wrapped:
            continue
        wrapped.add(cid)
        for sub in inputs[cid]:
            if sub.component in components and not isinstance(components[sub.component], Spout):
                todo.append(sub.component)
    for cid in sorted(wrapped):
        _check_wrappable(cid, components[cid], cid in stateful)
    rewindable = sorted(
        {
            sub.component
            for cid in wrapped
            for sub in inputs[cid]
            if isinstance(components.get(sub.component), RewindableSpout)
        }
    )
    new = TopologyBuilder()
    new._components = dict(components)
    new._parallelism = dict(builder._parallelism)
    new._num_tasks = dict(builder._num_tasks)
    new._inputs = {cid: list(subs) for cid, subs in inputs.items()}
    new._configs = {cid: dict(conf) for cid, conf in builder._configs.items()}
    new._components[CHECKPOINT_COMPONENT_ID] = CheckpointSpout(rewindable)
    for cid in rewindable:
        spout = components[cid]
        assert isinstance(spout, RewindableSpout)  # how ``rewindable`` was chosen
        new._components[cid] = RewindableSpoutExecutor(spout)
    new._parallelism[CHECKPOINT_COMPONENT_ID] = 1
    new._inputs[CHECKPOINT_COMPONENT_ID] = []
    new._configs[CHECKPOINT_COMPONENT_ID] = {}
    every = Grouping(GroupingKind.ALL)
    for cid in sorted(wrapped):
        component = components[cid]
        wrapper = StatefulBoltExecutor if cid in stateful else CheckpointTupleForwarder
        new._components[cid] = wrapper(component)
        sources = dict.fromkeys(sub.component for sub in inputs[cid] if sub.component in components)
        barrier_sources = dict.fromkeys(
            CHECKPOINT_COMPONENT_ID
            if isinstance(components[src], Spout) and src not in rewindable
            else src
            for src in sources
        )
        for src in barrier_sources:
            new._inputs[cid].append(Subscription(src, CHECKPOINT_STREAM_ID, every))
    return new


def _check_wrappable(cid: str, component: object, stateful: bool) -> None:
    where = f"stateful bolt {cid!r}" if stateful else f"bolt {cid!r} (upstream of a stateful bolt)"
    method = "execute_batch" if isinstance(component, (BasicBatchBolt, BatchBolt)) else "execute"
    if inspect.iscoroutinefunction(getattr(type(component), method)):
        raise InvalidComponentError(
            f"{where}: an async {method} cannot be aligned with checkpoint barriers (tuples "
            f"in flight would cross them); make {type(component).__name__}.{method} a plain "
            f"def, or move the bolt downstream of the stateful bolts"
        )


BUILDER_REWRITES.append(wire_checkpoints)
