"""Task assignment (Storm's scheduling of one worker) and ``TopologyContext``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import TopologyStateError
from .fields import Fields
from .grouping import Grouping
from .metrics import CountMetric, GaugeMetric
from .topology import StormTopology

_Metric = TypeVar("_Metric")

__all__ = ["TaskPlan", "TopologyContext", "build_plan", "split_tasks"]


@dataclass(frozen=True)
class TaskPlan:
    """Which task ids each component has and how its executors split them."""

    component_tasks: Mapping[str, tuple[int, ...]]
    task_component: Mapping[int, str]
    executors: Mapping[str, tuple[tuple[int, ...], ...]]


def build_plan(topology: StormTopology, max_task_parallelism: int | None = None) -> TaskPlan:
    """Task ids start at 1 and go per component in sorted component-id order, as in Storm.

    An executor runs a contiguous range of its component's tasks.
    """
    component_tasks: dict[str, tuple[int, ...]] = {}
    task_component: dict[int, str] = {}
    executors: dict[str, tuple[tuple[int, ...], ...]] = {}
    next_task = 1
    for cid in sorted(topology.components):
        spec = topology.components[cid]
        cap = spec.config.get("topology.max.task.parallelism", max_task_parallelism)
        num_tasks = spec.num_tasks if cap is None else min(spec.num_tasks, cap)
        tasks = tuple(range(next_task, next_task + num_tasks))
        next_task += num_tasks
        component_tasks[cid] = tasks
        for t in tasks:
            task_component[t] = cid
        executors[cid] = split_tasks(tasks, spec.parallelism)
    return TaskPlan(component_tasks, task_component, executors)


def split_tasks(tasks: tuple[int, ...], num_executors: int) -> tuple[tuple[int, ...], ...]:
    """Contiguous ranges of ``tasks``, one per executor (at most one executor per task)."""
    n = min(num_executors, len(tasks))
    base, extra = divmod(len(tasks), n)
    ranges = []
    start = 0
    for i in range(n):
        size = base + (1 if i < extra else 0)
        ranges.append(tasks[start : start + size])
        start += size
    return tuple(ranges)


class TopologyContext:
    """What a task knows about itself and the topology (Storm's ``TopologyContext``).

    Each task gets its own in ``open``/``prepare``. The usual reasons to read it: which
    task this is (to take a share of a source: partition ``task_index`` of
    ``len(get_component_tasks(component_id))``), the fields of a stream, and where to
    register metrics. The ``get_*`` methods are Storm's names; the properties are short
    forms of the common ones.
    """

    def __init__(
        self,
        topology: StormTopology,
        plan: TaskPlan,
        conf: Mapping[str, Any],
        task_id: int,
        metrics: dict[str, Any] | None = None,
        clock: Any = None,
    ) -> None:
        self._topology = topology
        self._plan = plan
        self._conf = conf
        self._task_id = task_id
        self._component_id = plan.task_component[task_id]
        self._metrics = metrics if metrics is not None else {}
        self._clock = clock

    # --- this task ------------------------------------------------------------------------
    def get_this_task_id(self) -> int:
        """This task's id, unique in the topology (ids start at 1, as in Storm)."""
        return self._task_id

    def get_storm_id(self) -> str:
        """Storm's id of this run of the topology (``storm.id``): new at every start."""
        return str(self._conf.get("storm.id", ""))

    def get_this_component_id(self) -> str:
        """The id this task's component was declared under (``set_spout``/``set_bolt``)."""
        return self._component_id

    def get_this_task_index(self) -> int:
        """0-based index of this task among its component's tasks."""
        return self._plan.component_tasks[self._component_id].index(self._task_id)

    @property
    def task_id(self) -> int:
        """``get_this_task_id()``."""
        return self._task_id

    @property
    def component_id(self) -> str:
        """``get_this_component_id()``."""
        return self._component_id

    @property
    def task_index(self) -> int:
        """``get_this_task_index()``: which share of the work is this task's."""
        return self.get_this_task_index()

    def get_this_streams(self) -> list[str]:
        """The streams this component declared, sorted."""
        return sorted(self._topology.components[self._component_id].streams)

    def get_this_output_fields(self, stream: str = "default") -> Fields:
        """The fields this component declared for ``stream``."""
        return self.get_component_output_fields(self._component_id, stream)

    def get_this_sources(self) -> dict[tuple[str, str], Grouping]:
        """``(component, stream) -> grouping`` for every input of this component."""
        spec = self._topology.components[self._component_id]
        return {(s.component, s.stream): s.grouping for s in spec.inputs}

    def get_this_targets(self) -> dict[str, dict[str, Grouping]]:
        """``stream -> {subscriber component: grouping}`` for this component's outputs."""
        spec = self._topology.components[self._component_id]
        return {
            stream: dict(self._topology.subscribers(self._component_id, stream))
            for stream in spec.streams
        }

    # --- the topology ---------------------------------------------------------------------
    def get_component_tasks(self, component_id: str) -> list[int]:
        """The task ids of ``component_id``, ascending (``[]`` for an unknown id): the
        targets ``emit_direct`` may pick from."""
        return list(self._plan.component_tasks.get(component_id, ()))

    def get_component_id(self, task_id: int) -> str | None:
        """The component that runs task ``task_id`` (``None`` for an unknown task): who
        sent a tuple, from its ``source_task``."""
        return self._plan.task_component.get(task_id)

    def get_task_to_component(self) -> dict[int, str]:
        """Every task id with its component (a copy)."""
        return dict(self._plan.task_component)

    def get_component_ids(self) -> list[str]:
        """Every spout and bolt id of the topology, sorted."""
        return sorted(self._topology.components)

    def get_component_streams(self, component_id: str) -> list[str]:
        """The streams ``component_id`` declared, sorted."""
        return sorted(self._topology.components[component_id].streams)

    def get_component_output_fields(self, component_id: str, stream: str = "default") -> Fields:
        """The fields ``component_id`` declared for ``stream``."""
        return self._topology.components[component_id].streams[stream].fields

    def get_sources(self, component_id: str) -> dict[tuple[str, str], Grouping]:
        """``(component, stream) -> grouping`` for every input of ``component_id``."""
        spec = self._topology.components[component_id]
        return {(s.component, s.stream): s.grouping for s in spec.inputs}

    def get_raw_topology(self) -> StormTopology:
        """The whole ``StormTopology`` (read it; changing it changes nothing that runs)."""
        return self._topology

    @property
    def conf(self) -> Mapping[str, Any]:
        """The topology's effective config, with this component's own keys over it (the
        same mapping ``open``/``prepare`` got)."""
        return self._conf

    @property
    def clock(self) -> Any:
        """The topology's ``Clock`` (virtual under simulation): use it for your own timers."""
        return self._clock

    # --- metrics --------------------------------------------------------------------------
    def register_metric(self, name: str, metric: _Metric) -> _Metric:
        """Register a user metric for this task; it shows in the topology's stats.

        ``metric`` is a ``CountMetric``, a ``GaugeMetric``, any object with a ``value`` or
        ``get_value_and_reset()`` (Storm's ``IMetric``), or a zero-argument callable.
        Returns ``metric``.
        """
        if name in self._metrics:
            raise TopologyStateError(
                f"task {self._task_id} ({self._component_id!r}) already has a metric {name!r}"
            )
        self._metrics[name] = metric
        return metric

    def register_counter(self, name: str) -> CountMetric:
        """A ``CountMetric`` registered under ``name``."""
        return self.register_metric(name, CountMetric())

    def register_gauge(self, name: str, read: Any) -> GaugeMetric:
        """A gauge whose value is ``read()`` whenever stats are taken."""
        return self.register_metric(name, GaugeMetric(read))
