"""SparkSinkBolt's batch timer on virtual time (the writes are recorded, not made: no Spark)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine import RunningTopology, Spout, TopologyBuilder, run_topology
from engine.testing import advance_time, simulate
from spark_io import SinkError, SinkTarget, SparkSinkBolt
from spark_io._sink import _Outcome

from .test_spout_virtual import TABLES, MemorySpout


class Recorded(SparkSinkBolt):
    """The real bolt with Spark swapped for a list of the batches it would write."""

    def _prepare_blocking(self) -> tuple[Any, Any, Any]:
        self.batches: list[list[Any]] = []
        return None, None, None

    def _write_batch(self, pieces: list[Any], seq: int) -> Any:
        self.batches.append(whole_table(self, pieces).to_pylist())
        return every_row(pieces)


def whole_table(sink: SparkSinkBolt, pieces: list[Any]) -> Any:
    """The Arrow table of all ``pieces``, or the first one's error if one does not fit."""
    table, failed = sink._convert(pieces)
    if failed:
        raise failed[min(failed)]
    return table


def every_row(pieces: list[Any]) -> _Outcome:
    """A write's outcome where every row of every piece was written."""
    return _Outcome([n for _, _, n in pieces], {})


class Five(Spout):
    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.i = collector, 0
        self.acked: list[int] = []
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        if self.i < 5:
            self.collector.emit([self.i], msg_id=self.i)
            self.i += 1

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id"])


async def written(running: RunningTopology) -> None:
    """Until the sink's writer thread is idle (it runs on real time) and its acks reached
    the spout."""
    ((_, bolt),) = running.task_objects("sink").items()
    await asyncio.to_thread(bolt._idle.wait, 30)
    await advance_time(0.01)


def test_a_partial_batch_is_flushed_after_batch_secs_of_the_topologys_clock() -> None:
    sink = Recorded(SinkTarget.files("/nonexistent/out"), batch_rows=1_000, batch_secs=10.0)
    builder = TopologyBuilder()
    builder.set_spout("rows", Five())
    builder.set_bolt("sink", sink).shuffle_grouping("rows")

    def state(running: RunningTopology) -> tuple[int, list[int], list[int]]:
        ((_, bolt),) = running.task_objects("sink").items()
        ((_, spout),) = running.task_objects("rows").items()
        return len(bolt.batches), sorted(spout.acked), sorted(spout.failed)

    async def scenario() -> list[tuple[int, list[int], list[int]]]:
        conf = {"topology.message.timeout.secs": 60}
        async with run_topology(builder.create_topology(), conf) as running:
            await advance_time(9)
            seen = [state(running)]  # held: the oldest tuple waited less than batch_secs
            await advance_time(8)  # ticks every batch_secs / 2: flushed by 15 s
            await written(running)
            seen.append(state(running))
            return seen

    assert simulate(scenario()) == [(0, [], []), (1, [0, 1, 2, 3, 4], [])]


class Unpublishable(SinkTarget):
    """A files target whose every write fails as an output the process may not change."""

    def write(self, spark: Any, table: Any, location: str | None = None) -> None:
        raise PermissionError(1, "Operation not permitted", f"{self.location}/part-0.parquet")


class Arrivals(SparkSinkBolt):
    """The real bolt (its writes fail: ``Unpublishable``), recording when each id arrived."""

    def _prepare_blocking(self) -> tuple[Any, Any, Any]:
        self.arrived: dict[int, list[float]] = {}
        return None, None, None

    def execute_batch(self, batch: Any) -> None:
        if batch.source_component == "rows":
            for i in batch.column("id"):
                self.arrived.setdefault(int(i), []).append(self._now_ns() / 1e9)
        super().execute_batch(batch)


def test_a_sink_that_cannot_publish_fails_naming_itself_and_the_path_and_retries_back_off(
    tmp_path: Path,
) -> None:
    TABLES["unpublishable"] = list(range(10))
    target = Unpublishable("files", "/nonexistent/out", "parquet")
    builder = TopologyBuilder()
    builder.set_spout("rows", MemorySpout("unpublishable", tmp_path / "ck"))  # default retries
    builder.set_bolt("sink", Arrivals(target, batch_rows=1)).shuffle_grouping("rows")

    async def scenario() -> tuple[dict[int, list[float]], Any]:
        conf = {"topology.message.timeout.secs": 300}
        async with run_topology(builder.create_topology(), conf) as running:
            await advance_time(60)
            ((_, bolt),) = running.task_objects("sink").items()
            return bolt.arrived, running.info()

    try:
        arrived, info = simulate(scenario())
    finally:
        del TABLES["unpublishable"]
    # Storm's backoff with this project's defaults: 0.5 s, then 1, 2, 4, 8 s, then every 10 s.
    gaps = [b - a for a, b in itertools.pairwise(arrived[3])]
    assert gaps == pytest.approx([0.5, 1, 2, 4, 8, 10, 10, 10, 10], abs=0.05)
    assert sum(len(times) for times in arrived.values()) == 10 * 10  # not a replay storm
    first = info.errors[0]
    assert first.error == repr(
        SinkError(
            "sink 'sink': writing 10 rows to parquet files at '/nonexistent/out' failed: "
            "[Errno 1] Operation not permitted: '/nonexistent/out/part-0.parquet'"
        )
    )
    assert "PermissionError: [Errno 1] Operation not permitted" in first.traceback
    assert "The above exception was the direct cause" in first.traceback


class JavaSide:
    """Stands in for a py4j ``JavaObject``: records that Python let the JVM free it."""

    def __init__(self) -> None:
        self.detached = False

    def _detach(self) -> None:
        self.detached = True


class FakeWriter:
    def __init__(self) -> None:
        self._jwrite = JavaSide()
        self.saved: list[str] = []

    def mode(self, mode: str) -> FakeWriter:
        return self

    def format(self, fmt: str) -> FakeWriter:
        return self

    def options(self, **options: str) -> FakeWriter:
        return self

    def save(self, path: str) -> None:
        self.saved.append(path)


class FakeFrame:
    def __init__(self) -> None:
        self._jdf = JavaSide()
        self.write = FakeWriter()


class FakeSpark:
    def __init__(self) -> None:
        self.frames: list[FakeFrame] = []

    def createDataFrame(self, table: Any) -> FakeFrame:
        self.frames.append(FakeFrame())
        return self.frames[-1]


def test_a_write_lets_the_jvm_free_its_dataframe_at_once() -> None:
    # A DataFrame's py4j object lives in a reference cycle, so only Python's cyclic
    # collector freed it, with the rows it holds on the JVM's heap: a long run with four
    # sink tasks ran a 1 GB driver out of memory.
    import pyarrow as pa

    spark = FakeSpark()
    SinkTarget.files("/nonexistent/out").write(spark, pa.table({"id": [1, 2]}), "/tmp/x")
    (frame,) = spark.frames
    assert frame.write.saved == ["/tmp/x"]
    assert frame._jdf.detached and frame.write._jwrite.detached


class Batches(Spout):
    """Emits consecutive ids in batches of ``sizes``: ``0 .. sizes[0]-1`` first."""

    def __init__(self, *sizes: int) -> None:
        self.sizes = list(sizes)

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.next_id = collector, 0
        self.acked: list[int] = []

    def next_tuple(self) -> None:
        if self.sizes:
            ids = list(range(self.next_id, self.next_id + self.sizes.pop(0)))
            self.collector.emit_batch([ids], ids)
            self.next_id += len(ids)

    def ack_batch(self, msg_ids: list[Any]) -> None:
        self.acked.extend(msg_ids)

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id"])


class HeldWrite(Recorded):
    """Its first write waits until ``rows`` input rows have come (by default: until some are
    held beside it; the simulation's clock stands still while a write runs, so the rows
    arrive during the write)."""

    def __init__(self, *args: Any, rows: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rows = rows

    def _prepare_blocking(self) -> tuple[Any, Any, Any]:
        self.came = 0
        self.rows_came = threading.Event()
        return super()._prepare_blocking()

    def execute_batch(self, batch: Any) -> None:
        super().execute_batch(batch)
        self.came += len(batch)
        if (self.came >= self.rows) if self.rows is not None else self._held_rows:
            self.rows_came.set()

    def _write_batch(self, pieces: list[Any], seq: int) -> Any:
        if seq == 1:
            assert self.rows_came.wait(30)
        return super()._write_batch(pieces, seq)


@pytest.mark.parametrize(
    ("batch_rows", "second", "written_at_1s"),
    [
        (3, 2, [[0, 1, 2], [3, 4]]),  # 2 rows held >= half a batch: written as the writer idles
        (4, 1, [[0, 1, 2, 3]]),  # 1 row < half a batch: waits (for a quiet input, or the tick)
    ],
)
def test_rows_held_during_a_write_go_out_when_it_ends_if_they_are_half_a_batch(
    batch_rows: int, second: int, written_at_1s: list[list[int]]
) -> None:
    sink = HeldWrite(SinkTarget.files("/nonexistent/out"), batch_rows=batch_rows, batch_secs=10.0)
    builder = TopologyBuilder()
    builder.set_spout("rows", Batches(batch_rows, second))
    builder.set_bolt("sink", sink).shuffle_grouping("rows")

    async def scenario() -> tuple[list[list[int]], list[int], list[list[int]]]:
        conf = {"topology.message.timeout.secs": 60}
        async with run_topology(builder.create_topology(), conf) as running:
            ((_, bolt),) = running.task_objects("sink").items()
            ((_, spout),) = running.task_objects("rows").items()
            await advance_time(0.5)
            for _ in range(3):  # the first write, then the second if the writer idles into it
                await written(running)
            at_1s = [[row["id"] for row in b] for b in bolt.batches]
            await advance_time(15)  # the timer flushes what is left
            await written(running)
            return at_1s, sorted(spout.acked), [[row["id"] for row in b] for b in bolt.batches]

    at_1s, acked, batches = simulate(scenario())
    assert at_1s == written_at_1s
    assert acked == list(range(batch_rows + second))
    assert [i for b in batches for i in b] == list(range(batch_rows + second))


def test_rows_held_during_a_write_go_with_the_queued_batch_in_one_write() -> None:
    # While the first batch is written, a second fills and queues and a third stops short
    # of full (as with topology.max.spout.pending a few batches): the next write takes both.
    sink = HeldWrite(SinkTarget.files("/nonexistent/out"), rows=11, batch_rows=4, batch_secs=10.0)
    builder = TopologyBuilder()
    builder.set_spout("rows", Batches(4, 4, 3))
    builder.set_bolt("sink", sink).shuffle_grouping("rows")

    async def scenario() -> tuple[list[list[int]], list[int]]:
        async with run_topology(builder.create_topology(), {}) as running:
            ((_, bolt),) = running.task_objects("sink").items()
            ((_, spout),) = running.task_objects("rows").items()
            await advance_time(0.5)
            for _ in range(3):
                await written(running)
            return [[row["id"] for row in b] for b in bolt.batches], sorted(spout.acked)

    batches, acked = simulate(scenario())
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7, 8, 9, 10]]
    assert acked == list(range(11))


class Settled:
    """A collector double: what the writer acked, failed and reported."""

    def __init__(self, ack_raises_for: Any = None) -> None:
        self.acked: list[Any] = []
        self.failed: list[Any] = []
        self.errors: list[str] = []
        self.ack_raises_for = ack_raises_for

    def ack(self, batch: Any) -> None:
        if batch == self.ack_raises_for:
            raise ValueError(f"batch {batch} was already failed")
        self.acked.append(batch)

    def fail(self, batch: Any) -> None:
        self.failed.append(batch)

    def report_error(self, error: BaseException) -> None:
        self.errors.append(str(error))


def bare_sink(
    loop: asyncio.AbstractEventLoop, write: Any, collector: Settled, task: int = 1
) -> SparkSinkBolt:
    """A sink's task ``task`` alone (what ``prepare`` sets up for it), ``write`` for Spark;
    its group's writer is the first task's of this loop."""
    sink = SparkSinkBolt(SinkTarget.files("/nonexistent/out"), ["x"], batch_rows=4)
    sink._loop, sink._collector, sink._component, sink._task_index = loop, collector, "sink", 0
    sink._task_id = task
    sink._now_ns = time.monotonic_ns
    sink.rows_written = sink.rows_skipped = sink.batches_written = 0
    sink._join(("a run", "sink", id(loop)))

    def outcome(pieces: list[Any], seq: int) -> Any:
        result = write(pieces, seq)
        return result if isinstance(result, _Outcome) else every_row(pieces)

    sink._write_batch = outcome  # type: ignore[method-assign]
    return sink


def hold(
    sink: SparkSinkBolt, name: str, group: SparkSinkBolt | None = None, values: Any = None
) -> None:
    """A batch of 4 rows (``values``, by default ``name`` 4 times), named ``name`` (what
    gets acked), held by ``sink``'s group (or ``group``): a full batch, so it is flushed."""
    (group or sink)._hold(sink, ("rows", "default"), [values or [name] * 4], 4, name)


def test_a_batch_whose_ack_raises_is_reported_and_the_writer_goes_on() -> None:
    written: list[list[str]] = []

    async def scenario() -> Settled:
        settled = Settled(ack_raises_for="A")
        sink = bare_sink(
            asyncio.get_running_loop(),
            lambda pieces, seq: written.append([p[1][0][0] for p in pieces]),
            settled,
        )
        hold(sink, "A")
        await asyncio.to_thread(sink._idle.wait, 30)
        hold(sink, "B")
        await asyncio.wait_for(sink.cleanup(), 30)
        return settled

    settled = asyncio.run(scenario())
    assert written == [["A"], ["B"]]
    assert settled.acked == ["B"] and settled.errors == ["batch A was already failed"]


def test_a_cancelled_cleanup_fails_what_it_could_not_write_and_leaves_no_thread_waiting() -> None:
    written: list[list[str]] = []
    first_write = threading.Event()

    def write(pieces: list[Any], seq: int) -> int:
        if seq == 1:
            assert first_write.wait(30)
        written.append([p[1][0][0] for p in pieces])
        return 4

    async def scenario() -> tuple[Settled, bool]:
        settled = Settled()
        sink = bare_sink(asyncio.get_running_loop(), write, settled)
        hold(sink, "A")  # written first, held up
        hold(sink, "B")  # queued behind it
        cleanup = asyncio.create_task(sink.cleanup())
        await asyncio.sleep(0)  # cleanup waits for the writer
        cleanup.cancel()  # its shutdown of the writer lets A finish; B is never written
        first_write.set()
        with pytest.raises(asyncio.CancelledError):
            await cleanup
        for _ in range(100):  # A's outcome comes back to the loop (posted during shutdown)
            if settled.failed:
                break
            await asyncio.sleep(0)
        return settled, sink._idle.is_set()

    # asyncio.run returns: no thread is left waiting on the sink (its loop's shutdown
    # waits for them).
    settled, idle = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert written == [["A"]]
    assert settled.acked == ["A"] and settled.failed == ["B"] and idle
    assert settled.errors and "stopped" in settled.errors[0]


def test_a_tail_under_half_a_batch_goes_once_the_input_is_quiet_a_tenth_of_batch_secs() -> None:
    # The last row of a finite input comes while the first batch is written: alone it is
    # under half a batch, so it would wait for the tick (10-15 s); the input stays quiet,
    # so it goes a tenth of batch_secs after the write ended.
    sink = HeldWrite(SinkTarget.files("/nonexistent/out"), rows=5, batch_rows=4, batch_secs=10.0)
    builder = TopologyBuilder()
    builder.set_spout("rows", Batches(4, 1))
    builder.set_bolt("sink", sink).shuffle_grouping("rows")

    async def scenario() -> tuple[list[list[int]], list[list[int]], list[int]]:
        async with run_topology(builder.create_topology(), {}) as running:
            ((_, bolt),) = running.task_objects("sink").items()
            ((_, spout),) = running.task_objects("rows").items()
            await advance_time(0.5)
            await written(running)
            early = [[row["id"] for row in b] for b in bolt.batches]
            await advance_time(1.0)
            await written(running)
            return early, [[row["id"] for row in b] for b in bolt.batches], sorted(spout.acked)

    early, batches, acked = simulate(scenario())
    assert early == [[0, 1, 2, 3]]
    assert batches == [[0, 1, 2, 3], [4]]
    assert acked == [0, 1, 2, 3, 4]


def test_a_sinks_tasks_write_their_rows_together_and_each_acks_and_counts_its_own() -> None:
    # Two tasks get 2 rows each of a 4-row batch_rows: alone, each would hold its rows
    # until the tick (batch_secs); together they make a batch, written at once in one write.
    sink = Recorded(SinkTarget.files("/nonexistent/out"), batch_rows=4, batch_secs=10.0)
    builder = TopologyBuilder()
    builder.set_spout("rows", Batches(4))
    builder.set_bolt("sink", sink, 2).fields_grouping("rows", ["id"])

    async def scenario() -> tuple[list[list[list[int]]], list[int], list[int]]:
        async with run_topology(builder.create_topology(), {}) as running:
            bolts = list(running.task_objects("sink").values())
            ((_, spout),) = running.task_objects("rows").items()
            await advance_time(0.5)
            await asyncio.to_thread(bolts[0]._group._idle.wait, 30)
            await advance_time(0.01)
            writes = [[[row["id"] for row in b] for b in bolt.batches] for bolt in bolts]
            return writes, [bolt.rows_written for bolt in bolts], sorted(spout.acked)

    writes, rows_written, acked = simulate(scenario())
    # One write, made by the group's first task, of both tasks' rows (a task's in a piece).
    assert [sorted(w[0]) for w in writes if w] == [[0, 1, 2, 3]] and [] in writes
    assert acked == [0, 1, 2, 3]
    assert sum(rows_written) == 4 and all(rows_written)  # each task counts its own rows


def test_in_a_group_each_task_settles_and_counts_its_rows_and_the_last_one_out_stops_the_writer() -> (
    None
):
    writes: list[list[str]] = []

    def write(pieces: list[Any], seq: int) -> Any:
        writes.append([p[1][0][0] for p in pieces])
        # transactional: of B's rows, only the second was not in the output yet
        return _Outcome([4, 1], {})

    async def scenario() -> tuple[Settled, Settled, list[int], bool, bool]:
        loop = asyncio.get_running_loop()
        one, two = Settled(), Settled()
        first = bare_sink(loop, write, one)
        second = bare_sink(loop, write, two, task=2)
        assert second._group is first  # the same run, sink and loop: one writer
        first._group._held_rows = -4  # the two batches go in one write
        hold(first, "A")
        hold(second, "B", first)
        await asyncio.wait_for(second.cleanup(), 30)  # waits for B's write; the writer stays
        alive = not first._writer._shutdown  # type: ignore[attr-defined]
        await asyncio.wait_for(first.cleanup(), 30)
        counts = [first.rows_written, first.rows_skipped, second.rows_written, second.rows_skipped]
        return one, two, counts, alive, first._writer._shutdown  # type: ignore[attr-defined]

    one, two, counts, alive_after_one, stopped_after_both = asyncio.run(scenario())
    assert writes == [["A", "B"]]
    assert one.acked == ["A"] and two.acked == ["B"] and not one.failed and not two.failed
    assert counts == [4, 0, 1, 3]
    assert alive_after_one and stopped_after_both


class Appended(SinkTarget):
    """A files target that keeps the tables written, in memory."""

    def write(self, spark: Any, table: Any, location: str | None = None) -> None:
        WRITTEN.append(table.column("x").to_pylist())


WRITTEN: list[list[Any]] = []


def test_in_a_group_rows_that_do_not_fit_fail_alone_and_the_others_are_written() -> None:
    WRITTEN.clear()

    async def scenario() -> tuple[Settled, Settled]:
        loop = asyncio.get_running_loop()
        one, two = Settled(), Settled()
        first = bare_sink(loop, None, one)
        second = bare_sink(loop, None, two, task=2)
        for sink in (first, second):
            del sink._write_batch  # the real write, into Appended
        first.target = Appended("files", "/nonexistent/out")
        first._arrow_schema, first._checked_existing, first._spark = None, True, None
        first._columns = ("x",)
        first._held_rows = -4  # the two batches go in one write
        hold(first, "A", values=[1, 2, 3, 4])
        hold(second, "B", first, values=["oops"] * 4)  # not ints: it does not fit
        await asyncio.wait_for(second.cleanup(), 30)
        await asyncio.wait_for(first.cleanup(), 30)
        return one, two

    one, two = asyncio.run(scenario())
    assert WRITTEN == [[1, 2, 3, 4]]
    assert one.acked == ["A"] and not one.failed and not one.errors
    assert two.failed == ["B"] and not two.acked
    assert len(two.errors) == 1 and "does not fit the schema of the first one" in two.errors[0]


def test_in_a_group_a_batch_that_arrow_cannot_cast_fails_alone_naming_the_sink() -> None:
    # After the first write set the schema (x: int64), a batch of numpy strings does not
    # cast (pyarrow raises ArrowNotImplementedError, not ArrowInvalid): it fails alone, with
    # a SinkSchemaError naming the sink and the field, and the batch beside it is written.
    import numpy as np

    WRITTEN.clear()

    async def scenario() -> tuple[Settled, Settled]:
        loop = asyncio.get_running_loop()
        one, two = Settled(), Settled()
        first = bare_sink(loop, None, one)
        second = bare_sink(loop, None, two, task=2)
        for sink in (first, second):
            del sink._write_batch  # the real write, into Appended
        first.target = Appended("files", "/nonexistent/out")
        first._arrow_schema, first._checked_existing, first._spark = None, True, None
        first._columns = ("x",)
        hold(first, "A", values=[1, 2, 3, 4])  # the first write: x is int64
        await asyncio.to_thread(first._settled.wait, 30)
        first._held_rows = -4  # the next two batches go in one write
        hold(first, "C", values=[5, 6, 7, 8])
        strings = np.array(["a", "b", "c", "d"])
        first._hold(second, ("rows", "default"), [strings], 4, "B")
        await asyncio.wait_for(second.cleanup(), 30)
        await asyncio.wait_for(first.cleanup(), 30)
        return one, two

    one, two = asyncio.run(scenario())
    assert WRITTEN == [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert one.acked == ["A", "C"] and not one.failed and not one.errors
    assert two.failed == ["B"] and not two.acked
    assert len(two.errors) == 1
    assert two.errors[0].startswith("sink 'sink': field 'x' from 'rows' does not convert as int64")


def test_a_task_restarted_without_its_cleanup_rejoins_as_itself_and_cleanups_are_idempotent() -> (
    None
):
    def write(pieces: list[Any], seq: int) -> int:
        return 4

    async def crashed() -> bool:
        loop = asyncio.get_running_loop()
        first = bare_sink(loop, write, Settled())
        bare_sink(loop, write, Settled(), task=2)  # crashes: no cleanup
        again = bare_sink(loop, write, Settled(), task=2)  # task 2 restarted
        await asyncio.wait_for(again.cleanup(), 30)
        await asyncio.wait_for(first.cleanup(), 30)  # the last task: the writer goes
        return first._writer._shutdown  # type: ignore[no-any-return, attr-defined]

    async def twice() -> tuple[bool, Settled]:
        loop = asyncio.get_running_loop()
        one = Settled()
        first = bare_sink(loop, write, one)
        second = bare_sink(loop, write, Settled(), task=2)
        await asyncio.wait_for(second.cleanup(), 30)
        await asyncio.wait_for(second.cleanup(), 30)  # twice: the first's writer stays
        hold(first, "A")
        await asyncio.to_thread(first._settled.wait, 30)
        alive = not first._writer._shutdown  # type: ignore[attr-defined]
        await asyncio.wait_for(first.cleanup(), 30)
        return alive, one

    assert asyncio.run(crashed())
    alive, one = asyncio.run(twice())
    assert alive and one.acked == ["A"] and not one.failed
