"""SparkSinkBolt against a real local Spark session."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import Spout, TopologyBuilder
from spark_io import SinkError, SinkSchemaError, SinkTarget, SparkConfigError, SparkSinkBolt

from .conftest import run, write_parquet
from .test_spout import start_error

pytestmark = pytest.mark.spark


class Rows(Spout):
    """Emits fixed rows with their index as message id; replays failures ``replays`` times.

    With ``check_output``, every ack looks for the row's id in that parquet output and
    records the ids it did not find in ``missing``.
    """

    def __init__(
        self,
        rows: list[tuple[Any, ...]],
        fields: list[str],
        replays: int = 0,
        check_output: Path | None = None,
    ) -> None:
        self.rows = rows
        self.fields = fields
        self.replays = replays
        self.check_output = check_output

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.todo = list(range(len(self.rows)))
        self.acked: list[int] = []
        self.failed: list[int] = []
        self.missing: list[int] = []

    def next_tuple(self) -> None:
        if self.todo:
            i = self.todo.pop(0)
            self.collector.emit(list(self.rows[i]), msg_id=i)

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)
        if self.check_output is not None:
            import pyarrow.dataset as ds

            table = ds.dataset(self.check_output, format="parquet").to_table(columns=["id"])
            if self.rows[msg_id][0] not in table.column("id").to_pylist():
                self.missing.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)
        if self.failed.count(msg_id) <= self.replays:
            self.todo.append(msg_id)

    def is_exhausted(self) -> bool:
        return not self.todo and len(self.acked) + len(self.failed) - self._replayed() >= len(
            self.rows
        )

    def _replayed(self) -> int:
        return sum(min(self.failed.count(i), self.replays) for i in set(self.failed))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.fields)


def sink_topology(spout: Rows, sink: SparkSinkBolt) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("rows", spout)
    builder.set_bolt("sink", sink).shuffle_grouping("rows")
    return builder.create_topology()


def spout_state(running: Any) -> tuple[list[int], list[int]]:
    (spout,) = running.task_objects("rows").values()
    return sorted(spout.acked), sorted(spout.failed)


def staged(out: Path) -> list[str]:
    """What is left in ``out``'s staging folder (the writing process's lock aside)."""
    staging = out / "_squall_staging"
    if not staging.exists():
        return []
    return [p.name for p in staging.iterdir() if not p.name.startswith(".")]


WORDS = [(i, f"word{i % 7}", i * 1.5) for i in range(40)]
FIELDS = ["id", "word", "weight"]


@pytest.mark.parametrize("fmt", ["parquet", "json", "csv"])
def test_writes_every_tuple_in_batches_and_acks_them(spark: Any, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "out"
    sink = SparkSinkBolt(SinkTarget.files(out, fmt), batch_rows=15)
    acked, failed = run(sink_topology(Rows(WORDS, FIELDS), sink), read=spout_state)
    assert (acked, failed) == (list(range(40)), [])
    reader = (
        spark.read.option("header", "true").option("inferSchema", "true")
        if fmt == "csv"
        else spark.read
    )
    rows = reader.format(fmt).load(str(out)).select(*FIELDS).collect()
    assert sorted(tuple(r) for r in rows) == WORDS


def test_writes_to_a_table(spark: Any, tmp_path: Path) -> None:
    sink = SparkSinkBolt(SinkTarget.table("sink_words"), ["id", "word"], batch_rows=25)
    run(sink_topology(Rows(WORDS, FIELDS), sink))
    assert sorted(tuple(r) for r in spark.table("sink_words").collect()) == [
        (i, w) for i, w, _ in WORDS
    ]


def test_tuples_are_acked_only_once_their_batch_is_on_disk(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    sink = SparkSinkBolt(SinkTarget.files(out), batch_rows=10)
    spout = Rows(WORDS, FIELDS, check_output=out)
    acked, missing = run(
        sink_topology(spout, sink),
        read=lambda r: (spout_state(r)[0], next(iter(r.task_objects("rows").values())).missing),
    )
    assert acked == list(range(40))
    assert missing == []


def test_a_partial_batch_is_flushed_on_the_timer(spark: Any, tmp_path: Path) -> None:
    sink = SparkSinkBolt(SinkTarget.files(tmp_path / "out"), batch_rows=1_000, batch_secs=0.3)
    acked, _ = run(sink_topology(Rows(WORDS[:5], FIELDS), sink), read=spout_state)
    assert acked == [0, 1, 2, 3, 4]


def test_tuples_that_do_not_fit_the_schema_are_failed_with_the_column_named(
    spark: Any, tmp_path: Path
) -> None:
    rows = [(1, "a"), ("two", "b")]
    sink = SparkSinkBolt(
        SinkTarget.files(tmp_path / "out"), schema="id BIGINT, word STRING", batch_rows=2
    )
    info, (acked, failed) = run(
        sink_topology(Rows(rows, ["id", "word"]), sink), read=lambda r: (r.info(), spout_state(r))
    )
    assert (acked, failed) == ([], [0, 1])
    (error,) = info.errors
    assert error.error.startswith(
        "SinkSchemaError(\"sink 'sink': field 'id' from 'rows' does not convert as int64 for "
        f"parquet files at {str(tmp_path / 'out')!r}: "
    )


def test_an_existing_output_with_another_schema_fails_the_start(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_parquet(out / "part-0.parquet", {"id": ["x"], "word": ["y"]})
    sink = SparkSinkBolt(SinkTarget.files(out), schema="id BIGINT, word STRING")
    error = start_error(sink_topology(Rows([(1, "a")], ["id", "word"]), sink))
    assert isinstance(error, SinkSchemaError)
    assert str(error) == (
        f"sink 'sink': column 'id' is bigint in the tuples but string in the existing output "
        f"parquet files at {str(out)!r}"
    )


def test_an_unwritable_output_directory_fails_the_start(spark: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a directory")
    sink = SparkSinkBolt(SinkTarget.files(blocker / "out"))
    error = start_error(sink_topology(Rows([(1, "a")], ["id", "word"]), sink))
    assert isinstance(error, SinkError)
    assert (
        str(error) == f"output directory {str(blocker / 'out')!r} is not writable: Not a directory"
    )


def test_the_transactional_sink_never_writes_a_key_twice(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    target = SinkTarget.files(out)
    published = []
    for _ in range(2):  # the second run replays every row
        sink = SparkSinkBolt(target, batch_rows=12, transactional=True, key_field="id")
        acked, _ = run(sink_topology(Rows(WORDS, FIELDS), sink), read=spout_state)
        assert acked == list(range(40))
        published.append(sorted(p.name for p in out.glob("squall_txid=*")))
    assert published[1] == published[0]  # the replay published no transaction
    rows = spark.read.parquet(str(out)).collect()
    assert sorted((r.id, r.word, r.weight) for r in rows) == WORDS
    assert not staged(out)


def test_a_replay_inside_one_batch_is_written_once(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    rows = [(1, "a"), (2, "b"), (1, "a")]  # the replay of 1 arrives before 1 was published
    sink = SparkSinkBolt(SinkTarget.files(out), batch_rows=3, transactional=True, key_field="id")
    run(sink_topology(Rows(rows, ["id", "word"]), sink))
    assert sorted(tuple(r)[:2] for r in spark.read.parquet(str(out)).collect()) == [
        (1, "a"),
        (2, "b"),
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"transactional": True},
            "transactional mode needs key_field: an int field, unique per row and the same when the row is replayed (e.g. the source offset)",
        ),
        ({"batch_rows": 0}, "batch_rows must be an int >= 1, got 0"),
        ({"batch_secs": 0}, "batch_secs must be a number of seconds > 0, got 0"),
        ({"fields": "id"}, "fields must be a non-empty list of field names, got 'id'"),
    ],
)
def test_bad_declarations(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SparkConfigError) as info:
        SparkSinkBolt(SinkTarget.files("/tmp/out"), **kwargs)
    assert str(info.value) == message


def test_transactional_tables_are_refused() -> None:
    with pytest.raises(SparkConfigError) as info:
        SparkSinkBolt(SinkTarget.table("t"), transactional=True, key_field="id")
    assert str(info.value) == (
        "transactional mode publishes each batch with an atomic rename, so it needs a local "
        "files target, not table 't'"
    )


def test_unknown_formats_are_refused() -> None:
    with pytest.raises(SparkConfigError) as info:
        SinkTarget.files("/tmp/out", "delta")
    assert str(info.value) == "unknown sink format 'delta'; use one of parquet, json, csv, orc"


def parallel_sink_topology(spout: Rows, sink: SparkSinkBolt, tasks: int) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("rows", spout)
    builder.set_bolt("sink", sink, tasks).shuffle_grouping("rows")
    return builder.create_topology()


@pytest.mark.parametrize("transactional", [False, True], ids=["append", "transactional"])
def test_four_sink_tasks_writing_one_directory_keep_every_acked_row(
    spark: Any, tmp_path: Path, transactional: bool
) -> None:
    # Spark's committer keeps an append's temporary files in <output>/_temporary and deletes
    # that directory when its job ends: concurrent appends into one directory used to lose
    # each other's files after reporting success (50-300 of 6,000 acked rows missing).
    out = tmp_path / "out"
    rows = [(i, f"w{i % 13}") for i in range(6_000)]
    sink = SparkSinkBolt(
        SinkTarget.files(out),
        batch_rows=150,
        batch_secs=0.2,
        transactional=transactional,
        key_field="id" if transactional else None,
    )
    conf = {"topology.max.spout.pending": 2_000}
    acked, failed = run(
        parallel_sink_topology(Rows(rows, ["id", "word"]), sink, 4),
        conf,
        timeout=240,
        read=spout_state,
    )
    assert (len(acked), failed) == (6_000, [])
    written = sorted((r.id, r.word) for r in spark.read.parquet(str(out)).collect())
    assert written == rows  # every acked row, once
    assert not staged(out)


@contextlib.contextmanager
def unchangeable(directory: Path) -> Iterator[None]:
    """``directory`` refuses new entries until the block ends: by its mode, or for root
    (whom modes do not stop) by the immutable attribute, where the file system has it."""
    if os.geteuid() != 0:
        mode = directory.stat().st_mode
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(mode)
        return
    try:
        done = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("running as root without chattr: no way to make a directory read-only")
    if done.returncode != 0:
        pytest.skip(f"running as root and chattr +i failed: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)


class Gated(Rows):
    """Emits the first two rows, the others once released."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        self.todo = [0, 1]

    def release(self) -> None:
        self.todo.extend(range(2, len(self.rows)))


@pytest.mark.parametrize("transactional", [False, True], ids=["append", "transactional"])
def test_a_sink_that_cannot_publish_reports_a_sink_error_naming_itself_and_the_path(
    spark: Any, tmp_path: Path, transactional: bool
) -> None:
    # The transactional sink's publishing rename raised a bare PermissionError, reported as
    # "PermissionError(1, 'Operation not permitted')": no path, no component.
    out = tmp_path / "out"
    sink = SparkSinkBolt(
        SinkTarget.files(out),
        batch_rows=2,
        transactional=transactional,
        key_field="id" if transactional else None,
    )

    async def until(running: Any) -> None:
        (spout,) = running.task_objects("rows").values()
        while len(spout.acked) < 2:  # the first batch is published: the output exists
            await asyncio.sleep(0.01)
        with unchangeable(out):
            spout.release()
            while len(spout.failed) < 2:
                await asyncio.sleep(0.01)
        await running.wait_until_complete(30)

    info, (acked, failed) = run(
        sink_topology(Gated(WORDS[:4], FIELDS), sink),
        until=until,
        read=lambda r: (r.info(), spout_state(r)),
    )
    assert (acked, failed) == ([0, 1], [2, 3])
    (error,) = info.errors
    verb = "writing 2 rows to" if transactional else "publishing 2 rows into"
    assert error.error.startswith(
        f"SinkError(\"sink 'sink': {verb} parquet files at {str(out)!r} failed: [Errno "
    )
    assert f" -> '{out}/" in error.error  # the rename that failed
    assert "The above exception was the direct cause" in error.traceback
    assert not staged(out)  # nothing left staged
