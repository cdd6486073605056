"""The columnar batch path of spark_io, on virtual time and without Spark: the offset and
streaming spouts hand Arrow columns to batch bolts (and Tuple views to per-tuple bolts),
failed rows come back, and the sink writes exactly the rows it acks, whatever the columns
it is given (Arrow, numpy, lists, per-tuple emits)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from engine import BatchBolt, RunningTopology, Spout, TopologyBuilder, run_topology
from engine.testing import advance_time, simulate
from spark_io import (
    RetryPolicy,
    SinkError,
    SinkTarget,
    SparkSinkBolt,
    SparkStreamingSpout,
    StreamSource,
)

from .test_sink_virtual import every_row, whole_table
from .test_spout_virtual import TABLES, Collect, MemorySpout, bolt_of, committed, settle
from .test_streaming_virtual import FakeQuery


class Batches(BatchBolt):
    """Records each batch's columns (kind and values); fails the rows whose id is in
    ``fail_ids`` the first time it sees them, acks the rest."""

    def __init__(self, fail_ids: tuple[int, ...] = ()) -> None:
        self.fail_ids = fail_ids

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.kinds: list[tuple[type, type]] = []
        self.ids: list[int] = []
        self.words: list[str] = []
        self.failed_once: set[int] = set()

    def execute_batch(self, batch: Any) -> None:
        ids, words = batch.column("id"), batch.column("word")
        self.kinds.append((type(ids), type(words)))
        ids_py = ids.to_pylist() if hasattr(ids, "to_pylist") else list(ids)
        words_py = words.to_pylist() if hasattr(words, "to_pylist") else list(words)
        self.ids.extend(ids_py)
        self.words.extend(words_py)
        fail = [i for i, v in enumerate(ids_py) if v in self.fail_ids and v not in self.failed_once]
        self.failed_once.update(ids_py[i] for i in fail)
        self.collector.fail(batch, fail)
        self.collector.ack(batch, [i for i in range(len(ids_py)) if i not in fail])

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def offset_topology(spout: Any, bolt: Any) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("collect", bolt).shuffle_grouping("src")
    return builder.create_topology()


@pytest.fixture
def table(request: pytest.FixtureRequest) -> Any:
    name = request.node.name
    TABLES[name] = list(range(100))
    yield name
    del TABLES[name]


def test_arrow_columns_reach_a_batch_bolt_as_arrow(tmp_path: Path, table: str) -> None:
    spout = MemorySpout(table, tmp_path / "ck", chunk_rows=40)

    async def scenario() -> Batches:
        async with run_topology(offset_topology(spout, Batches())) as running:
            await running.wait_until_complete(60)
            return bolt_of(running)  # type: ignore[return-value]

    bolt = simulate(scenario())
    assert sorted(zip(bolt.ids, bolt.words, strict=True)) == [(i, f"w{i}") for i in range(100)]
    # Arrow batches of 16 rows as read: each a batch, both columns still Arrow arrays.
    assert len(bolt.kinds) == 7
    assert all(issubclass(k, pa.Array) for kinds in bolt.kinds for k in kinds)
    assert committed(tmp_path / "ck") == [100]


def test_a_per_tuple_bolt_downstream_of_the_arrow_batches_gets_python_values(
    tmp_path: Path, table: str
) -> None:
    spout = MemorySpout(table, tmp_path / "ck", chunk_rows=40)

    async def scenario() -> list[int]:
        async with run_topology(offset_topology(spout, Collect())) as running:
            await running.wait_until_complete(60)
            return bolt_of(running).seen

    seen = simulate(scenario())
    assert sorted(seen) == list(range(100))
    assert all(type(v) is int for v in seen)


def test_rows_failed_in_a_batch_are_retried_and_the_commit_passes_them(
    tmp_path: Path, table: str
) -> None:
    ck = tmp_path / "ck"
    spout = MemorySpout(table, ck, chunk_rows=40, retry=RetryPolicy(initial_delay_secs=1.0))

    async def scenario() -> tuple[list[int], list[str], Any]:
        async with run_topology(offset_topology(spout, Batches(fail_ids=(3, 57)))) as running:
            await settle(running, ck, 100)
            bolt = bolt_of(running)
            (task,) = running.info().components["src"].tasks.values()
            return bolt.ids, bolt.words, task.metrics

    ids, words, metrics = simulate(scenario())
    assert sorted(ids) == sorted([*range(100), 3, 57])  # each failed row once more
    assert sorted(ids[-2:]) == [3, 57]  # the retries come after the batches they failed in
    assert sorted(set(zip(ids, words, strict=True))) == [(i, f"w{i}") for i in range(100)]
    assert metrics["spark_io.retried"] == 2


class Streaming(SparkStreamingSpout):
    def _start_query(self) -> Any:
        return FakeQuery(
            self, pa.table({"id": list(range(20)), "word": [f"w{i}" for i in range(20)]})
        )


def test_the_streaming_spout_hands_arrow_batches_and_retries_failed_rows() -> None:
    spout = Streaming(
        StreamSource.rate(),
        ["id", "word"],
        checkpoint_location="/unused",
        retry=RetryPolicy(initial_delay_secs=0.5),
    )

    async def scenario() -> Batches:
        async with run_topology(offset_topology(spout, Batches(fail_ids=(4,)))) as running:
            await running.wait_until_complete(60)
            return bolt_of(running)  # type: ignore[return-value]

    bolt = simulate(scenario())
    assert sorted(bolt.ids) == sorted([*range(20), 4])
    assert issubclass(bolt.kinds[0][0], pa.Array) and issubclass(bolt.kinds[0][1], pa.Array)


# --- the sink ------------------------------------------------------------------------------


class Recorded(SparkSinkBolt):
    """The real bolt with Spark swapped for the Arrow tables it would write; fails the
    write of any table holding an id in ``bad_ids``."""

    def __init__(
        self, *args: Any, bad_ids: tuple[int, ...] = (), arrow_schema: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.bad_ids = bad_ids
        self.arrow_schema = arrow_schema  # what schema= would give

    def _prepare_blocking(self) -> tuple[Any, Any, Any]:
        self.tables: list[pa.Table] = []
        self.refused: list[pa.Table] = []
        self.kinds: list[type] = []
        return None, self.arrow_schema, None

    def _write_batch(self, pieces: list[Any], seq: int) -> Any:
        # the kind of every held column: the sink keeps what it was given until the write
        self.kinds.extend(type(c) for _, columns, _ in pieces for c in columns)
        table = whole_table(self, pieces)
        if set(table.column("id").to_pylist()) & set(self.bad_ids):
            self.refused.append(table)
            raise SinkError(f"sink {self._component!r}: refusing a batch with a bad id")
        self.tables.append(table)
        return every_row(pieces)


class Mixed(Spout):
    """Emits ids 0..39 as four batches, one per column kind: Arrow arrays, an Arrow record
    batch, numpy arrays, lists; then ids 40..44 per tuple. The id is the message id."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.step = 0
        self.acked: list[int] = []
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        step, self.step = self.step, self.step + 1
        ids = list(range(10 * step, 10 * step + 10))
        names = [f"n{i}" for i in ids]
        emit = self.collector.emit_batch
        if step == 0:
            emit([pa.array(ids, pa.int64()), pa.array(names)], msg_ids=ids)
        elif step == 1:
            emit(pa.record_batch({"id": pa.array(ids, pa.int64()), "name": names}), msg_ids=ids)
        elif step == 2:
            emit([np.array(ids, np.int64), np.array(names, object)], msg_ids=np.array(ids))
        elif step == 3:
            emit({"id": ids, "name": names}, msg_ids=ids)
        elif step == 4:
            for i in range(40, 45):
                self.collector.emit([i, f"n{i}"], msg_id=i)

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "name"])


def sink_run(
    sink: Recorded, until: float = 30.0
) -> tuple[list[pa.Table], list[pa.Table], list[int], list[int]]:
    builder = TopologyBuilder()
    builder.set_spout("rows", Mixed())
    builder.set_bolt("sink", sink).shuffle_grouping("rows")

    async def scenario() -> tuple[list[pa.Table], list[pa.Table], list[int], list[int]]:
        conf = {"topology.message.timeout.secs": 300}
        async with run_topology(builder.create_topology(), conf) as running:
            await advance_time(until)
            await written(running)
            ((_, bolt),) = running.task_objects("sink").items()
            ((_, spout),) = running.task_objects("rows").items()
            sink.kinds = bolt.kinds
            return bolt.tables, bolt.refused, sorted(spout.acked), sorted(spout.failed)

    return simulate(scenario())


async def written(running: RunningTopology) -> None:
    ((_, bolt),) = running.task_objects("sink").items()
    await asyncio.to_thread(bolt._idle.wait, 30)
    await advance_time(0.01)


def test_the_sink_writes_arrow_numpy_list_and_per_tuple_input_and_acks_exactly_that() -> None:
    sink = Recorded(SinkTarget.files("/nonexistent/out"), batch_rows=1_000, batch_secs=1.0)
    tables, _, acked, failed = sink_run(sink)
    written_rows = [row for t in tables for row in t.to_pylist()]
    assert sorted(r["id"] for r in written_rows) == list(range(45))
    assert all(r["name"] == f"n{r['id']}" for r in written_rows)
    assert tables[0].schema == pa.schema([("id", pa.int64()), ("name", pa.string())])
    assert acked == list(range(45)) and failed == []
    # Arrow and numpy columns reached the write as they were emitted (no per-row Python).
    assert {pa.Int64Array, pa.StringArray, np.ndarray, list} <= set(sink.kinds)


def test_a_failed_write_fails_exactly_its_rows() -> None:
    # batch_rows=10: each emit of the spout is flushed on its own (batches queued behind a
    # write go together); the write holding id 25 fails, and exactly its rows are failed.
    sink = Recorded(
        SinkTarget.files("/nonexistent/out"), batch_rows=10, batch_secs=1.0, bad_ids=(25,)
    )
    tables, refused, acked, failed = sink_run(sink)
    written_ids = sorted(i for t in tables for i in t.column("id").to_pylist())
    refused_ids = sorted(i for t in refused for i in t.column("id").to_pylist())
    assert len(refused) == 1 and 25 in refused_ids
    assert failed == refused_ids
    assert acked == written_ids
    assert sorted(acked + failed) == list(range(45))


def test_a_column_that_does_not_fit_the_schema_fails_its_rows_naming_the_field() -> None:
    sink = Recorded(
        SinkTarget.files("/nonexistent/out"),
        batch_rows=10,
        batch_secs=1.0,
        arrow_schema=pa.schema([("id", pa.int64()), ("name", pa.int32())]),
    )

    async def scenario() -> tuple[list[int], list[int], list[str]]:
        builder = TopologyBuilder()
        builder.set_spout("rows", Mixed())
        builder.set_bolt("sink", sink).shuffle_grouping("rows")
        async with run_topology(builder.create_topology()) as running:
            await advance_time(30)
            await written(running)
            ((_, spout),) = running.task_objects("rows").items()
            errors = [e.error for e in running.info().errors]
            return sorted(spout.acked), sorted(spout.failed), errors

    acked, failed, errors = simulate(scenario())
    assert acked == [] and failed == list(range(45))
    assert any(
        "sink 'sink': field 'name' from 'rows' does not convert as int32" in e for e in errors
    )


# --- the engine's bulk ack hook --------------------------------------------------------------


class BulkAcked(Spout):
    """Emits ids 0..29 as three batches; records ``ack`` / ``ack_batch`` / ``fail`` calls."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.i = 0
        self.acked_one: list[int] = []
        self.acked_bulk: list[list[int]] = []
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        if self.i < 30:
            ids = list(range(self.i, self.i + 10))
            self.collector.emit_batch([ids, [f"w{i}" for i in ids]], msg_ids=ids)
            self.i += 10

    def ack(self, msg_id: Any) -> None:
        self.acked_one.append(msg_id)

    def ack_batch(self, msg_ids: list[Any]) -> None:
        self.acked_bulk.append(list(msg_ids))

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)

    def is_exhausted(self) -> bool:
        return self.i == 30

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "word"])


def test_a_spout_with_ack_batch_hears_its_acks_in_bulk_and_its_fails_one_by_one() -> None:
    class FailSome(Batches):
        def execute_batch(self, batch: Any) -> None:
            ids = list(batch.column("id"))
            bad = [i for i, v in enumerate(ids) if v % 7 == 0]
            self.collector.fail(batch, bad)
            self.collector.ack(batch, [i for i in range(len(ids)) if i not in bad])

    async def scenario() -> BulkAcked:
        async with run_topology(offset_topology(BulkAcked(), FailSome())) as running:
            await running.wait_until_complete(60)
            (spout,) = running.task_objects("src").values()
            return spout  # type: ignore[no-any-return]

    spout = simulate(scenario())
    assert spout.acked_one == []
    assert sorted(i for ids in spout.acked_bulk for i in ids) == [i for i in range(30) if i % 7]
    assert sorted(spout.failed) == [0, 7, 14, 21, 28]
