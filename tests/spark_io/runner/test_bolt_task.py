"""A bolt task as the Spark runner runs it, without Spark: a batch bolt sees Arrow columns
and its Arrow output leaves unconverted; failures fail the task with the bolt's name."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from engine import (
    BasicBatchBolt,
    BasicBolt,
    FailedException,
    ReportedFailedException,
    TopologyBuilder,
)
from engine.runners import task_plan

from .topologies import Numbers

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")


class Passes(BasicBatchBolt):
    """Emits its input column as it got it, and remembers what it got."""

    seen: ClassVar[list[Any]] = []

    def execute_batch(self, batch: Any, collector: Any) -> None:
        column = batch.column("n")
        Passes.seen.append(column)
        collector.emit_batch([column])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Odd(BasicBolt):
    """Fails odd numbers by raising ``failure`` (``ReportedFailedException``: each one
    reported too)."""

    def __init__(self, failure: type[FailedException] = FailedException) -> None:
        self.failure = failure

    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple["n"] % 2:
            raise self.failure(f"odd {tuple['n']}")
        collector.emit([tuple["n"]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


def task(bolt: Any) -> Any:
    from spark_io._layout import OutputLayout, StreamLayout
    from spark_io.runner._bolt_task import BoltPlan, BoltTask

    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers(10))
    builder.set_bolt("bolt", bolt).shuffle_grouping("numbers")
    topology = builder.create_topology()
    long = '"long"'
    plan = BoltPlan(
        topology=topology,
        plan=task_plan(topology),
        conf={},
        component="bolt",
        inputs=(StreamLayout("numbers", "default", 0, ("n",), (long,)),),
        output=OutputLayout("bolt", (StreamLayout("bolt", "default", 0, ("n",), (long,)),)),
        tick_secs=None,
    )
    record = pa.RecordBatch.from_arrays(
        [pa.array([2] * 4, pa.int32()), pa.array([0, 1, 2, 3], pa.int64())],
        names=["__src_task", "i0_0"],
    )
    return BoltTask(plan, task_plan(topology).component_tasks["bolt"][0]), record


def test_a_batch_bolt_gets_arrow_and_its_arrow_output_is_not_converted() -> None:
    bolt_task, record = task(Passes())
    (out,) = list(bolt_task.run([record]))
    (got,) = Passes.seen
    assert isinstance(got, pa.Array) and got.to_pylist() == [0, 1, 2, 3]
    emitted = out.column(out.schema.get_field_index("s0_0"))
    assert emitted.buffers()[1].address == got.buffers()[1].address  # the same memory


def test_a_failed_tuple_fails_the_task_naming_the_bolt() -> None:
    from spark_io.runner._bolt_task import BoltFailure

    bolt_task, record = task(Odd())
    with pytest.raises(BoltFailure) as info:
        list(bolt_task.run([record]))
    assert str(info.value) == (
        "bolt 'bolt' task 1 failed 2 tuple(s); on Spark the Spark task fails and is retried "
        "(spark.task.maxFailures), then the query fails, whose restart runs the micro-batch "
        "again"
    )


def test_the_failed_task_names_the_first_reported_errors_and_counts_the_rest() -> None:
    from spark_io.runner._bolt_task import BoltFailure, _reported

    bolt_task, record = task(Odd(ReportedFailedException))
    with pytest.raises(BoltFailure) as info:
        list(bolt_task.run([record]))
    assert str(info.value).endswith(
        "; reported errors: [\"ReportedFailedException('odd 1')\", "
        "\"ReportedFailedException('odd 3')\"]"
    )
    # thousands of rows each reporting do not make a message of thousands of errors
    assert _reported([f"e{i}" for i in range(1200)]) == (
        "; reported errors: ['e0', 'e1', 'e2', 'e3', 'e4'] and 1,195 more"
    )


def test_a_combine_step_that_raises_fails_the_task_naming_the_bolt_and_the_combiner() -> None:
    # The combine step runs in the upstream bolt's task: its error was the bare TypeError,
    # which named neither.
    from engine import SumCombiner
    from spark_io._layout import OutputLayout, StreamLayout
    from spark_io.runner._bolt_task import BoltFailure, BoltPlan, BoltTask
    from spark_io.runner._combine import CombineSpec, PartialStep

    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers(10))
    builder.set_bolt("bolt", Passes()).shuffle_grouping("numbers")
    builder.set_bolt("sum", SumCombiner("n", ["total"])).global_grouping("bolt")
    topology = builder.create_topology()
    long = '"long"'
    combiner = topology.bolts["sum"].component
    plan = BoltPlan(
        topology=topology,
        plan=task_plan(topology),
        conf={},
        component="bolt",
        inputs=(StreamLayout("numbers", "default", 0, ("n",), (long,)),),
        output=OutputLayout(
            "bolt",
            (
                StreamLayout("bolt", "default", 0, ("n",), (long,)),
                StreamLayout("bolt", "__partial:sum:default", 1, ("total",), (long,)),
            ),
        ),
        tick_secs=None,
        partials=(PartialStep(CombineSpec.of("sum", combiner, True), 0, 1, ("n",)),),
        drop=frozenset({0}),
    )
    record = pa.RecordBatch.from_arrays(
        [pa.array([2] * 2, pa.int32()), pa.array([1, None], pa.int64())],
        names=["__src_task", "i0_0"],
    )
    task_id = task_plan(topology).component_tasks["bolt"][0]
    with pytest.raises(BoltFailure) as info:
        list(BoltTask(plan, task_id).run([record]))
    assert str(info.value) == (
        f"bolt 'bolt' task {task_id} raised TypeError(\"unsupported operand type(s) for +: "
        f"'int' and 'NoneType'\") in the combine step of combiner bolt 'sum'; on Spark the "
        f"Spark task fails and is retried (spark.task.maxFailures), then the query fails"
    )


class Huge(BasicBolt):
    """Emits 2**63, one past a BIGINT's largest."""

    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([2**63])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


def test_a_value_too_large_for_its_type_fails_the_task_naming_the_bolt_and_the_field() -> None:
    # pyarrow's OverflowError left the task bare, naming neither.
    from spark_io.runner._bolt_task import BoltFailure

    bolt_task, record = task(Huge())
    with pytest.raises(BoltFailure) as info:
        list(bolt_task.run([record]))
    assert str(info.value) == (
        "bolt 'bolt': stream 'default' of 'bolt': field 'n' does not fit its Spark type int64: "
        "Python int too large to convert to C long; emit values of that type or fix the "
        "runner's schemas="
    )
