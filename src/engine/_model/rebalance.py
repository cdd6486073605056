"""What a rebalance may ask, checked in one place for every way of asking.

``LocalCluster.rebalance``, ``RunningTopology.rebalance`` and the web UI's REST API (and
through it ``squall rebalance``) all pass their request through ``check_rebalance`` before
anything is deactivated or moved, so they accept and refuse the same values with the same
messages, and report the same truth:

- executors: a positive integer per component. A component's task count is fixed for the
  topology's life and an executor runs at least one task, so more executors than tasks
  are *capped* at the task count: ``RebalancePlan.executors`` is what is applied, and
  ``notes()`` says where it differs from what was asked.
- wait: ``None`` (the default drain time) or a finite number of seconds in
  ``0..MAX_REBALANCE_WAIT_SECS``. ``inf`` or a billion seconds would hold the request,
  with the topology deactivated, for ever.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from .errors import InvalidRebalanceError, TopologyStateError

__all__ = ["MAX_REBALANCE_WAIT_SECS", "RebalancePlan", "check_rebalance", "check_wait_secs"]

#: The longest a rebalance (or a kill) may be told to wait for in-flight trees: one day.
MAX_REBALANCE_WAIT_SECS = 86_400.0


@dataclasses.dataclass(frozen=True)
class RebalancePlan:
    """A checked rebalance: per component, the executors asked for and those applied."""

    requested: Mapping[str, int]
    executors: Mapping[str, int]  # applied: at most one executor per task
    tasks: Mapping[str, int]
    wait_secs: float | None

    @property
    def capped(self) -> list[str]:
        """The components that get fewer executors than asked (their task count)."""
        return [cid for cid, n in self.executors.items() if n < self.requested[cid]]

    def notes(self) -> list[str]:
        """One sentence per capped component, for the caller's output."""
        return [
            f"{cid!r} got {self.executors[cid]} executor(s), not {self.requested[cid]}: capped "
            f"at its {self.tasks[cid]} task(s) (an executor runs at least one task; the task "
            f"count is fixed at submission, raise it with set_num_tasks)"
            for cid in self.capped
        ]


def check_wait_secs(wait_secs: Any, what: str) -> float | None:
    """``wait_secs`` as a float, or None; ``InvalidRebalanceError`` unless it is a finite
    number of seconds in ``0..MAX_REBALANCE_WAIT_SECS``. ``what`` names the field."""
    if wait_secs is None:
        return None
    if (
        isinstance(wait_secs, bool)
        or not isinstance(wait_secs, (int, float))
        or not math.isfinite(wait_secs)
        or not 0 <= wait_secs <= MAX_REBALANCE_WAIT_SECS
    ):
        raise InvalidRebalanceError(
            f"{what} must be a finite number of seconds in 0..{MAX_REBALANCE_WAIT_SECS:g} (a "
            f"day), got {wait_secs!r}"
        )
    return float(wait_secs)


def check_rebalance(
    topology_name: str,
    component_tasks: Mapping[str, int],
    num_executors: Mapping[str, Any],
    wait_secs: Any = None,
    *,
    executors_field: str = "num_executors",
    wait_field: str = "wait_secs",
) -> RebalancePlan:
    """Check a request to spread each component of ``num_executors`` over that many
    executors, waiting up to ``wait_secs`` for in-flight trees first.

    ``component_tasks`` is each component's task count. An unknown component raises
    ``TopologyStateError``; a value out of range ``InvalidRebalanceError``, naming the
    field as the caller calls it (``executors_field``, ``wait_field``) and the range.
    """
    if not isinstance(num_executors, Mapping) or not num_executors:
        raise InvalidRebalanceError(
            f"{executors_field} must map component ids to executor counts, e.g. {{'split': 4}};"
            f" got {num_executors!r}"
        )
    requested: dict[str, int] = {}
    for cid, n in num_executors.items():
        if cid not in component_tasks:
            raise TopologyStateError(
                f"topology {topology_name!r} has no component {cid!r} to rebalance "
                f"(components: {sorted(component_tasks)})"
            )
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise InvalidRebalanceError(
                f"{executors_field}[{cid!r}] must be a positive integer (1 and up; at most "
                f"{component_tasks[cid]} take effect, its task count), got {n!r}"
            )
        requested[cid] = n
    wait = check_wait_secs(wait_secs, wait_field)
    return RebalancePlan(
        requested=requested,
        executors={cid: min(n, component_tasks[cid]) for cid, n in requested.items()},
        tasks={cid: component_tasks[cid] for cid in requested},
        wait_secs=wait,
    )
