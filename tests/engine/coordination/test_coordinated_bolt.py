"""CoordinatedBolt on the engine: end to end at parallelism 1 and 3, the envelope, async
delegates, batch bolts, and the errors it raises."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from engine import (
    BasicBolt,
    Bolt,
    EmitError,
    Fields,
    InvalidComponentError,
    InvalidDeclarationError,
    InvalidGroupingError,
    Spout,
    TopologyBuilder,
    run_topology,
)
from engine.coordination import (
    COORDINATED_STREAM_ID,
    BatchBolt,
    BatchBoltExecutor,
    CoordinatedBolt,
    EnvelopeTuple,
    FinishedCallback,
    IdStreamSpec,
    SourceArgs,
    request_id_of,
)

from ..topologies import run


def errors_of(running: Any) -> list[Any]:
    """The errors every task reported (``running.info()`` computes far more, slowly)."""
    log = running.runtime.errors
    return [e for ex in running.runtime.executors for t in ex.tasks for e in log.recent(t)]


class Requests(Spout):
    """Emits ``(rid, n)`` with message id ``rid`` and the bare id on stream ``id``."""

    def __init__(self, requests: list[tuple[int, int]]) -> None:
        self.requests = requests

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.next = 0
        self.acked: list[int] = []
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        if self.next < len(self.requests):
            rid, n = self.requests[self.next]
            self.next += 1
            self.collector.emit([rid, n], msg_id=rid)
            self.collector.emit([rid], "id")

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)

    def is_exhausted(self) -> bool:
        return self.next >= len(self.requests) and len(self.acked) + len(self.failed) >= len(
            self.requests
        )

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "n"])
        declarer.declare_stream("id", ["id"])


class Expand(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        for i in range(tuple[1]):
            collector.emit([tuple[0], i])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "i"])


class EnvelopedExpand(BasicBolt):
    """Never sees the id: its input is ``(n,)``, its output ``(i,)``."""

    def execute(self, tuple: Any, collector: Any) -> None:
        assert isinstance(tuple, EnvelopeTuple) and list(tuple.fields) == ["n"]
        for i in range(tuple["n"]):
            collector.emit([i])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["i"])


class AsyncDouble(BasicBolt):
    async def execute(self, tuple: Any, collector: Any) -> None:
        await asyncio.sleep(0)
        collector.emit([tuple[0], tuple[1]])
        await asyncio.sleep(0)
        collector.emit([tuple[0], tuple[1]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "i"])


class CountBatch(BatchBolt):
    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector, self.id, self.count = collector, id, 0

    def execute(self, tuple: Any) -> None:
        self.count += 1

    def finish_batch(self) -> None:
        self.collector.emit([self.id, self.count])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "count"])


class Results(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.results: list[tuple[int, int]] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        self.results.append((tuple[0], tuple[1]))


def chain(
    requests: list[tuple[int, int]], p: int, first: Any, second: Any, *, envelope: bool = False
) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("req", Requests(requests))
    builder.set_bolt("expand", CoordinatedBolt(first, envelope=envelope), p).shuffle_grouping("req")
    builder.set_bolt(
        "double", CoordinatedBolt(second, {"expand": SourceArgs.single()}), p
    ).shuffle_grouping("expand").direct_grouping("expand", COORDINATED_STREAM_ID)
    builder.set_bolt(
        "count",
        CoordinatedBolt(
            BatchBoltExecutor(CountBatch()),
            {"double": SourceArgs.all()},
            IdStreamSpec.make_detect_spec("req", "id"),
        ),
        p,
    ).fields_grouping("double", Fields("id")).direct_grouping(
        "double", COORDINATED_STREAM_ID
    ).fields_grouping("req", Fields("id"), "id")
    builder.set_bolt("results", Results()).shuffle_grouping("count")
    return builder.create_topology()


def run_chain(topology: Any) -> tuple[list[tuple[int, int]], Any, list[Any]]:
    async def main() -> tuple[list[tuple[int, int]], Any, list[Any]]:
        async with run_topology(topology, {"topology.seed": 3}) as running:
            await running.wait_until_complete(timeout=30)
            (results,) = running.task_objects("results").values()
            (spout,) = running.task_objects("req").values()
            return sorted(results.results), spout, errors_of(running)

    return run(main())


class Double(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([tuple[0], tuple[1]])
        collector.emit([tuple[0], tuple[1]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "i"])


REQUESTS = [(rid, rid % 6) for rid in range(1, 41)]
EXPECTED = sorted((rid, 2 * n) for rid, n in REQUESTS)


def test_every_request_finishes_once_with_every_tuple(parallelism: int) -> None:
    results, spout, errors = run_chain(chain(REQUESTS, parallelism, Expand(), Double()))
    assert results == EXPECTED
    assert sorted(spout.acked) == [rid for rid, _ in REQUESTS]
    assert spout.failed == []
    assert errors == []


def test_an_enveloped_bolt_never_sees_the_id(parallelism: int) -> None:
    results, _, errors = run_chain(
        chain(REQUESTS, parallelism, EnvelopedExpand(), Double(), envelope=True)
    )
    assert results == EXPECTED
    assert errors == []


def test_an_async_delegate_makes_an_async_coordinated_bolt(parallelism: int) -> None:
    bolt = CoordinatedBolt(AsyncDouble(), {"expand": SourceArgs.single()})
    assert type(bolt).__name__ == "_AsyncCoordinatedBolt"
    assert asyncio.iscoroutinefunction(bolt.execute)
    results, _, errors = run_chain(chain(REQUESTS, parallelism, Expand(), AsyncDouble()))
    assert results == EXPECTED
    assert errors == []


def test_request_id_of_reads_the_envelope_or_the_first_field() -> None:
    from engine._model.tuple import Source, Tuple

    wire = Tuple([7, "x"], Source("a", "default", 1, Fields("id", "v")), None, 0)
    inner = EnvelopeTuple(wire, Source("a", "default", 1, Fields("v")))
    assert request_id_of(wire) == 7
    assert request_id_of(inner) == 7
    assert inner["v"] == "x" and list(inner.values) == ["x"]
    assert repr(inner) == "EnvelopeTuple(['x'], request_id=7, source='a':'default'@1)"


# --- errors ---------------------------------------------------------------------------------


class Plain(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "v"])


def test_the_delegate_must_be_a_bolt() -> None:
    with pytest.raises(InvalidComponentError) as info:
        CoordinatedBolt(CountBatch())  # type: ignore[arg-type]
    assert str(info.value) == (
        "CoordinatedBolt wraps an engine.Bolt or engine.BasicBolt, got CountBatch "
        "(wrap a BatchBolt in BatchBoltExecutor first)"
    )


def test_source_args_must_be_source_args() -> None:
    with pytest.raises(InvalidComponentError) as info:
        CoordinatedBolt(Plain(), {"a": "all"})  # type: ignore[dict-item]
    assert str(info.value) == (
        "CoordinatedBolt(Plain): source_args maps component ids to SourceArgs.single() or "
        "SourceArgs.all(), got 'a': 'all'"
    )


def test_timeout_must_be_positive() -> None:
    with pytest.raises(InvalidComponentError) as info:
        CoordinatedBolt(Plain(), timeout_secs=0)
    assert str(info.value) == (
        "CoordinatedBolt(Plain): timeout_secs must be a positive number or None, got 0"
    )


def test_on_error_must_be_callable() -> None:
    with pytest.raises(InvalidComponentError) as info:
        CoordinatedBolt(Plain(), on_error="log it")  # type: ignore[arg-type]
    assert str(info.value) == (
        "CoordinatedBolt(Plain): on_error must be callable or None, got 'log it'"
    )


def test_finished_id_cannot_be_async() -> None:
    class AsyncFinish(Plain, FinishedCallback):
        async def finished_id(self, id: Any) -> None:  # type: ignore[override]
            pass

    with pytest.raises(InvalidComponentError) as info:
        CoordinatedBolt(AsyncFinish())
    assert str(info.value) == (
        "CoordinatedBolt(AsyncFinish): finished_id must be a plain function, not async "
        "(it runs while the id's counts are settled)"
    )


def test_the_envelope_owns_the_id_field() -> None:
    builder = TopologyBuilder()
    builder.set_spout("req", Requests([]))
    builder.set_bolt("b", CoordinatedBolt(Plain(), envelope=True)).shuffle_grouping("req")
    with pytest.raises(InvalidDeclarationError) as info:
        builder.create_topology()
    assert str(info.value) == (
        "component 'b': the envelope puts the request id in field 'id', and stream 'default' "
        "already declares a field 'id' (['id', 'v']); rename it, or use envelope=False and "
        "carry the id as the first field yourself"
    )


def test_the_coord_stream_belongs_to_the_wrapper() -> None:
    class Coord(Plain):
        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare_stream("coord", ["id", "x"])

    builder = TopologyBuilder()
    builder.set_spout("req", Requests([]))
    builder.set_bolt("b", CoordinatedBolt(Coord())).shuffle_grouping("req")
    with pytest.raises(InvalidDeclarationError) as info:
        builder.create_topology()
    assert str(info.value) == (
        "component 'b': stream 'coord' belongs to the CoordinatedBolt wrapping Coord; rename "
        "the delegate's stream"
    )


def test_a_source_without_its_coord_subscription_is_refused_when_the_bolt_starts() -> None:
    builder = TopologyBuilder()
    builder.set_spout("req", Requests([]))
    builder.set_bolt("a", CoordinatedBolt(Expand())).shuffle_grouping("req")
    builder.set_bolt("b", CoordinatedBolt(Double(), {"a": SourceArgs.all()})).shuffle_grouping("a")

    async def main() -> None:
        async with run_topology(builder.create_topology()):
            pass

    with pytest.raises(InvalidGroupingError) as info:
        run(main())
    assert str(info.value) == (
        "coordinated bolt 'b': source 'a' is in source_args, but the bolt does not subscribe "
        "to its 'coord' stream; add .direct_grouping('a', 'coord')"
    )


def test_a_coord_subscription_without_source_args_is_refused() -> None:
    builder = TopologyBuilder()
    builder.set_spout("req", Requests([]))
    builder.set_bolt("a", CoordinatedBolt(Expand())).shuffle_grouping("req")
    builder.set_bolt("b", CoordinatedBolt(Double())).shuffle_grouping("a").direct_grouping(
        "a", COORDINATED_STREAM_ID
    )

    async def main() -> None:
        async with run_topology(builder.create_topology()):
            pass

    with pytest.raises(InvalidGroupingError) as info:
        run(main())
    assert str(info.value) == (
        "coordinated bolt 'b' subscribes to the 'coord' stream of 'a', which is not in its "
        "source_args; add 'a': SourceArgs.all() (or .single())"
    )


class EmitsLater(Bolt):
    """Keeps its collector and emits outside execute: enveloped, that has no request id."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.errors: list[str] = []

    def execute(self, tuple: Any) -> None:
        self.collector.ack(tuple)

    def cleanup(self) -> None:
        try:
            self.collector.emit(["late"])
        except EmitError as exc:
            self.errors.append(str(exc))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["v"])


def test_an_enveloped_emit_outside_a_request_names_the_problem() -> None:
    builder = TopologyBuilder()
    builder.set_spout("req", Requests([(1, 1)]))
    builder.set_bolt("b", CoordinatedBolt(EmitsLater(), envelope=True)).shuffle_grouping("req")

    async def main() -> Any:
        async with run_topology(builder.create_topology()) as running:
            await running.wait_until_complete(timeout=10)
            (bolt,) = running.task_objects("b").values()
        return bolt.delegate

    delegate = run(main())
    assert delegate.errors == [
        "component 'b' emitted without anchors outside execute, finished_id or timeout_id, "
        "so the envelope has no request id to carry; anchor the emit to a tuple of the request"
    ]


class EmitsOnCoord(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([tuple[0], 1], COORDINATED_STREAM_ID)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "v"])


def test_the_delegate_cannot_emit_on_coord_and_the_input_fails() -> None:
    builder = TopologyBuilder()
    builder.set_spout("req", Requests([(1, 1)]))
    builder.set_bolt("b", CoordinatedBolt(EmitsOnCoord())).shuffle_grouping("req")

    async def main() -> Any:
        async with run_topology(builder.create_topology()) as running:
            await running.wait_until_complete(timeout=10)
            (spout,) = running.task_objects("req").values()
            return spout.failed, errors_of(running)

    failed, errors = run(main())
    assert failed == [1]
    assert [e.error for e in errors] == [
        repr(
            EmitError(
                "component 'b': stream 'coord' belongs to the CoordinatedBolt; the delegate "
                "cannot emit on it"
            )
        )
    ]


class Boom(BatchBolt):
    def execute(self, tuple: Any) -> None:
        pass

    def finish_batch(self) -> None:
        raise ValueError("no result")


def test_a_failed_finish_fails_the_request_and_reports_the_error() -> None:
    builder = TopologyBuilder()
    builder.set_spout("req", Requests([(1, 2), (2, 0)]))
    builder.set_bolt("b", CoordinatedBolt(BatchBoltExecutor(Boom()))).shuffle_grouping("req")

    async def main() -> Any:
        async with run_topology(builder.create_topology()) as running:
            await running.wait_until_complete(timeout=10)
            (spout,) = running.task_objects("req").values()
            (bolt,) = running.task_objects("b").values()
            return sorted(spout.failed), errors_of(running), bolt.statistics()

    failed, errors, stats = run(main())
    assert failed == [1, 2]
    assert [e.error for e in errors] == ["ValueError('no result')"] * 2
    assert stats.failed == 2 and stats.finished == 0 and stats.tracked == 0


def test_batch_bolt_executor_checks_its_bolt() -> None:
    with pytest.raises(InvalidComponentError) as info:
        BatchBoltExecutor(Plain())  # type: ignore[arg-type]
    assert str(info.value) == ("BatchBoltExecutor runs an engine.coordination.BatchBolt, got Plain")

    class NoExecute(BatchBolt):
        pass

    with pytest.raises(InvalidComponentError) as info:
        BatchBoltExecutor(NoExecute())
    assert str(info.value) == "batch bolt NoExecute does not implement execute"


def test_source_args_and_id_spec_read_like_storms() -> None:
    assert SourceArgs.single().single_count and not SourceArgs.all().single_count
    assert repr(SourceArgs.all()) == "SourceArgs.all()"
    spec = IdStreamSpec.make_detect_spec("prepare-request", "id")
    assert spec.global_stream_id == ("prepare-request", "id")


def test_the_async_twin_survives_the_per_task_copy() -> None:
    assert type(CoordinatedBolt(Plain())) is CoordinatedBolt
    bolt = CoordinatedBolt(AsyncDouble(), {"expand": SourceArgs.single()}, envelope=True)
    copy = pickle.loads(pickle.dumps(bolt))
    assert type(copy) is type(bolt) and type(copy) is not CoordinatedBolt
    assert copy.source_args == {"expand": SourceArgs.single()} and copy.envelope
