"""Task assignment (``build_plan``) and what a task sees through ``TopologyContext``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import (
    Bolt,
    Fields,
    Spout,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    TopologyStateError,
)
from engine._model.context import build_plan
from engine._model.grouping import Grouping, GroupingKind


class Words(Spout):
    def next_tuple(self) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])
        declarer.declare_stream("marks", ["word", "mark"])


class Split(Bolt):
    def execute(self, tuple: Any) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class Sink(Bolt):
    def execute(self, tuple: Any) -> None:
        pass


def word_count() -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("words", Words(), 2)
    builder.set_bolt("split", Split(), 3).set_num_tasks(6).shuffle_grouping("words")
    builder.set_bolt("count", Sink(), 2).fields_grouping("split", Fields("word"))
    builder.set_bolt("audit", Sink()).all_grouping("words").global_grouping("words", "marks")
    return builder.create_topology()


# --- build_plan --------------------------------------------------------------------------


def test_task_ids_start_at_1_in_sorted_component_order() -> None:
    plan = build_plan(word_count())
    assert dict(plan.component_tasks) == {
        "audit": (1,),
        "count": (2, 3),
        "split": (4, 5, 6, 7, 8, 9),
        "words": (10, 11),
    }
    assert dict(plan.task_component) == {
        1: "audit",
        2: "count",
        3: "count",
        **{t: "split" for t in range(4, 10)},
        10: "words",
        11: "words",
    }


def test_executors_run_contiguous_task_ranges() -> None:
    plan = build_plan(word_count())
    assert dict(plan.executors) == {
        "audit": ((1,),),
        "count": ((2,), (3,)),
        "split": ((4, 5), (6, 7), (8, 9)),
        "words": ((10,), (11,)),
    }


def test_uneven_tasks_go_to_the_first_executors() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", Words(), 3).set_num_tasks(8)
    assert build_plan(builder.create_topology()).executors["s"] == (
        (1, 2, 3),
        (4, 5, 6),
        (7, 8),
    )


def test_max_task_parallelism_caps_tasks_and_executors() -> None:
    plan = build_plan(word_count(), max_task_parallelism=2)
    assert dict(plan.component_tasks) == {
        "audit": (1,),
        "count": (2, 3),
        "split": (4, 5),
        "words": (6, 7),
    }
    assert plan.executors["split"] == ((4,), (5,))


def test_component_max_task_parallelism_overrides_the_topologys() -> None:
    builder = TopologyBuilder()
    builder.set_spout("a", Words(), 4).add_configuration("topology.max.task.parallelism", 1)
    builder.set_spout("b", Words(), 4)
    plan = build_plan(builder.create_topology(), max_task_parallelism=3)
    assert dict(plan.component_tasks) == {"a": (1,), "b": (2, 3, 4)}


components_st = st.dictionaries(
    st.text("abcxyz_", min_size=1, max_size=4).filter(lambda s: not s.startswith("__")),
    st.tuples(st.integers(1, 6), st.integers(1, 12)),
    min_size=1,
    max_size=6,
)


@given(components_st)
def test_plan_invariants(components: dict[str, tuple[int, int]]) -> None:
    builder = TopologyBuilder()
    for cid, (parallelism, num_tasks) in components.items():
        builder.set_spout(cid, Words(), parallelism).set_num_tasks(num_tasks)
    plan = build_plan(builder.create_topology())

    expected_next = 1
    for cid in sorted(components):
        parallelism, num_tasks = components[cid]
        tasks = plan.component_tasks[cid]
        assert tasks == tuple(range(expected_next, expected_next + num_tasks))
        expected_next += num_tasks
        ranges = plan.executors[cid]
        assert len(ranges) == min(parallelism, num_tasks)
        assert tuple(t for r in ranges for t in r) == tasks  # contiguous, in order, a partition
        sizes = [len(r) for r in ranges]
        assert max(sizes) - min(sizes) <= 1
        assert sizes == sorted(sizes, reverse=True)
    assert sorted(plan.task_component) == list(range(1, expected_next))


# --- TopologyContext ------------------------------------------------------------------------


@pytest.fixture
def topology() -> StormTopology:
    return word_count()


def context(topology: StormTopology, task: int, **kwargs: Any) -> TopologyContext:
    return TopologyContext(topology, build_plan(topology), {"my.key": 1}, task, **kwargs)


def test_this_task(topology: StormTopology) -> None:
    ctx = context(topology, 6)
    assert ctx.get_this_task_id() == ctx.task_id == 6
    assert ctx.get_this_component_id() == ctx.component_id == "split"
    assert ctx.get_this_task_index() == ctx.task_index == 2


@pytest.mark.parametrize(("task", "index"), [(10, 0), (11, 1), (1, 0)])
def test_task_index_counts_from_0_within_the_component(
    topology: StormTopology, task: int, index: int
) -> None:
    assert context(topology, task).get_this_task_index() == index


def test_this_component_outputs_and_inputs(topology: StormTopology) -> None:
    ctx = context(topology, 4)
    assert ctx.get_this_streams() == ["default"]
    assert ctx.get_this_output_fields() == Fields("word")
    assert ctx.get_this_sources() == {("words", "default"): Grouping(GroupingKind.SHUFFLE)}
    assert ctx.get_this_targets() == {
        "default": {"count": Grouping(GroupingKind.FIELDS, Fields("word"))}
    }


def test_spout_targets_per_stream(topology: StormTopology) -> None:
    ctx = context(topology, 10)
    assert ctx.get_this_sources() == {}
    assert ctx.get_this_streams() == ["default", "marks"]
    assert ctx.get_this_output_fields("marks") == Fields("word", "mark")
    assert ctx.get_this_targets() == {
        "default": {
            "split": Grouping(GroupingKind.SHUFFLE),
            "audit": Grouping(GroupingKind.ALL),
        },
        "marks": {"audit": Grouping(GroupingKind.GLOBAL)},
    }


def test_the_topology_as_a_task_sees_it(topology: StormTopology) -> None:
    ctx = context(topology, 2)
    assert ctx.get_component_ids() == ["audit", "count", "split", "words"]
    assert ctx.get_component_tasks("split") == [4, 5, 6, 7, 8, 9]
    assert ctx.get_component_tasks("nope") == []
    assert ctx.get_component_id(10) == "words"
    assert ctx.get_component_id(99) is None
    assert ctx.get_task_to_component() == dict(build_plan(topology).task_component)
    assert ctx.get_component_streams("words") == ["default", "marks"]
    assert ctx.get_component_streams("count") == []
    assert ctx.get_component_output_fields("words", "marks") == Fields("word", "mark")
    assert ctx.get_component_output_fields("split") == Fields("word")
    assert ctx.get_sources("audit") == {
        ("words", "default"): Grouping(GroupingKind.ALL),
        ("words", "marks"): Grouping(GroupingKind.GLOBAL),
    }
    assert ctx.get_raw_topology() is topology
    assert ctx.conf == {"my.key": 1}


def test_getters_return_copies(topology: StormTopology) -> None:
    ctx = context(topology, 2)
    ctx.get_component_tasks("count").append(99)
    ctx.get_task_to_component()[99] = "x"
    assert ctx.get_component_tasks("count") == [2, 3]
    assert ctx.get_component_id(99) is None


def test_register_metric(topology: StormTopology) -> None:
    metrics: dict[str, Any] = {}
    ctx = context(topology, 5, metrics=metrics)

    def gauge() -> int:
        return 1

    assert ctx.register_metric("queue", gauge) is gauge
    assert metrics == {"queue": gauge}


def test_register_metric_twice_names_the_task(topology: StormTopology) -> None:
    ctx = context(topology, 5)
    ctx.register_metric("queue", lambda: 1)
    with pytest.raises(
        TopologyStateError, match=r"^task 5 \('split'\) already has a metric 'queue'$"
    ):
        ctx.register_metric("queue", lambda: 2)
