"""``task_random``: the random source of a system component, derived from ``topology.seed``.

Request ids (DRPC) and attempt ids (transactional topologies) must be reproducible under
simulation and never repeat within a run. The source is seeded from the topology's seed,
what the ids are for, the task, and the clock's reading when the task opened: the same seed
replays the same ids in a simulation, while a task restarted after a crash (later on the
clock) draws a fresh sequence, so ids of trees still in flight from the crashed instance
are never handed out again.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

__all__ = ["task_random"]


def task_random(conf: Mapping[str, Any], context: Any, purpose: str) -> random.Random:
    """A ``random.Random`` for ``purpose`` in ``context``'s task, from ``topology.seed``.

    A string seed is hashed with SHA-512, so the sequence is the same in every process
    (``PYTHONHASHSEED`` plays no part). Without a seed in ``conf`` the source is still a
    pure function of the task and the clock.
    """
    seed = conf.get("topology.seed")
    clock = getattr(context, "clock", None)
    opened_ns = clock.now_ns() if clock is not None else 0
    material = (
        f"{'-' if seed is None else int(seed)}/{purpose}/{context.get_this_component_id()}/"
        f"{context.get_this_task_id()}/{opened_ns}"
    )
    return random.Random(material)
