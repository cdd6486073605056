"""SparkOffsetSpout against a real local Spark session."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from engine import BasicBolt, Bolt, FailedException, RunningTopology, TopologyBuilder, run_topology
from engine.testing import CrashTask
from spark_io import (
    CheckpointError,
    FirstPollStrategy,
    OffsetColumnError,
    ProcessingGuarantee,
    RetryPolicy,
    SinkTarget,
    SourceError,
    SparkOffsetSpout,
    SparkSource,
)

from .conftest import run, write_parquet

pytestmark = pytest.mark.spark


class Collect(BasicBolt):
    """Records every id it sees; fails ids in ``fail_ids`` (``fail_times`` times each, or
    always when None)."""

    def __init__(self, fail_ids: tuple[int, ...] = (), fail_times: int | None = None) -> None:
        self.fail_ids = fail_ids
        self.fail_times = fail_times

    def prepare(self, conf: Any, context: Any) -> None:
        self.seen: list[int] = []
        self.failures: dict[int, int] = {}

    def execute(self, tuple: Any, collector: Any) -> None:
        offset = tuple[0]
        self.seen.append(offset)
        if offset in self.fail_ids:
            failures = self.failures.get(offset, 0)
            if self.fail_times is None or failures < self.fail_times:
                self.failures[offset] = failures + 1
                raise FailedException(f"failing {offset}")


def numbers(path: Path, ids: list[int]) -> Path:
    return write_parquet(path, {"id": ids, "word": [f"w{i}" for i in ids]})


def topology(spout: SparkOffsetSpout, bolt: Any = None, tasks: int = 1) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("src", spout, tasks)
    builder.set_bolt("collect", bolt or Collect()).shuffle_grouping("src")
    return builder.create_topology()


def seen(running: RunningTopology) -> list[int]:
    return [o for bolt in running.task_objects("collect").values() for o in bolt.seen]


def committed(checkpoint: Path) -> list[int | None]:
    return json.loads((checkpoint / "offsets.json").read_text())["committed"]


def spout(source: Path | SparkSource, checkpoint: Path, **kwargs: Any) -> SparkOffsetSpout:
    if isinstance(source, Path):
        source = SparkSource.files(source)
    kwargs.setdefault("chunk_rows", 100)
    return SparkOffsetSpout(source, "id", ["id", "word"], checkpoint_dir=checkpoint, **kwargs)


def test_two_tasks_split_the_offsets_and_every_row_is_emitted_once(
    spark: Any, tmp_path: Path
) -> None:
    data = numbers(
        tmp_path / "in.parquet", list(range(300))[::-1]
    )  # on-disk order is not offset order
    ck = tmp_path / "ck"
    got = run(topology(spout(data, ck), tasks=2), read=seen)
    assert sorted(got) == list(range(300))
    # Task 0 owns chunks [0, 100) and [200, 300); task 1 owns [100, 200).
    assert committed(ck) == [300, 200]


def test_a_restart_resumes_from_the_commit(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "in"
    numbers(src / "a.parquet", list(range(0, 150)))
    ck = tmp_path / "ck"
    assert sorted(run(topology(spout(src, ck)), read=seen)) == list(range(150))
    assert committed(ck) == [150]
    numbers(src / "b.parquet", list(range(150, 230)))
    assert sorted(run(topology(spout(src, ck)), read=seen)) == list(range(150, 230))
    assert committed(ck) == [230]


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (FirstPollStrategy.EARLIEST, list(range(0, 80))),  # ignores the commit
        (FirstPollStrategy.UNCOMMITTED_EARLIEST, list(range(40, 80))),
        (FirstPollStrategy.UNCOMMITTED_LATEST, list(range(40, 80))),
        (FirstPollStrategy.LATEST, []),  # only rows added after the start: none, bounded
    ],
)
def test_first_poll_strategies(
    spark: Any, tmp_path: Path, strategy: FirstPollStrategy, expected: list[int]
) -> None:
    src = tmp_path / "in"
    ck = tmp_path / "ck"
    numbers(src / "a.parquet", list(range(0, 40)))
    run(topology(spout(src, ck)))
    numbers(src / "b.parquet", list(range(40, 80)))
    assert sorted(run(topology(spout(src, ck, first_poll=strategy)), read=seen)) == expected


def test_a_latest_task_restarted_by_a_crash_resumes_from_its_own_commit(
    spark: Any, tmp_path: Path
) -> None:
    # LATEST applies to a new run only: a task that restarts in the same run used to jump to
    # the latest offset again and skip every row that arrived meanwhile.
    src = tmp_path / "in"
    ck = tmp_path / "ck"
    numbers(src / "a.parquet", list(range(0, 40)))
    s = spout(src, ck, first_poll=FirstPollStrategy.LATEST, commit_interval_secs=0.05)

    async def until(running: RunningTopology) -> None:
        while not (ck / "offsets.json").exists() or committed(ck) != [40]:
            await asyncio.sleep(0.01)  # LATEST starts after 39 and commits that start
        assert seen(running) == []
        numbers(src / "b.parquet", list(range(40, 80)))
        (before,) = running.task_objects("src").values()
        running.inject(CrashTask(component="src", at=0))
        while next(iter(running.task_objects("src").values())) is before:
            await asyncio.sleep(0.01)
        await running.wait_until_complete(60)
        while committed(ck) != [80]:  # the restarted task's next periodic commit
            await asyncio.sleep(0.01)

    assert sorted(run(topology(s), until=until, read=seen)) == list(range(40, 80))


def test_uncommitted_latest_without_a_commit_reads_only_new_rows(
    spark: Any, tmp_path: Path
) -> None:
    src = tmp_path / "in"
    numbers(src / "a.parquet", list(range(0, 30)))
    s = spout(
        src,
        tmp_path / "ck",
        first_poll=FirstPollStrategy.UNCOMMITTED_LATEST,
        bounded=False,
        poll_interval_secs=0.2,
    )

    async def until(running: RunningTopology) -> None:
        (task,) = running.task_objects("src").values()
        while not task._reader.positioned.is_set():  # it has found 29 as the latest offset
            await asyncio.sleep(0.02)
        numbers(src / "b.parquet", list(range(30, 45)))
        while len(seen(running)) < 15:
            await asyncio.sleep(0.05)

    assert sorted(run(topology(s), until=until, read=seen)) == list(range(30, 45))


def test_failed_rows_are_retried_with_backoff(spark: Any, tmp_path: Path) -> None:
    data = numbers(tmp_path / "in.parquet", list(range(20)))
    ck = tmp_path / "ck"
    s = spout(data, ck, retry=RetryPolicy(initial_delay_secs=0.05, delay_period_secs=0.05))
    got = run(topology(s, Collect(fail_ids=(3, 11), fail_times=2)), read=seen)
    assert sorted(got) == sorted([*list(range(20)), 3, 3, 11, 11])
    assert committed(ck) == [20]


def test_past_max_retries_a_row_is_dropped_reported_and_dead_lettered(
    spark: Any, tmp_path: Path
) -> None:
    data = numbers(tmp_path / "in.parquet", list(range(20)))
    ck = tmp_path / "ck"
    dead = tmp_path / "dead"
    s = spout(
        data, ck, retry=RetryPolicy(max_retries=2), dead_letter=SinkTarget.files(dead, "json")
    )
    info, got = run(topology(s, Collect(fail_ids=(7,))), read=lambda r: (r.info(), seen(r)))
    assert got.count(7) == 3  # the first emit and two retries
    assert [e.error for e in info.errors] == [
        f"spout 'src': dropped offset 7 of parquet files at {str(data)!r} after 3 failures "
        f"(max_retries=2); writing it to the dead-letter sink json files at {str(dead)!r}"
    ]
    assert committed(ck) == [20]  # the dropped row counts as done, once it is dead-lettered
    rows = spark.read.json(str(dead)).collect()
    assert [(r.id, r.word, r.squall_offset, r.squall_failures) for r in rows] == [(7, "w7", 7, 3)]


def test_at_most_once_commits_before_emitting_and_never_retries(spark: Any, tmp_path: Path) -> None:
    data = numbers(tmp_path / "in.parquet", list(range(50)))
    ck = tmp_path / "ck"
    s = spout(data, ck, guarantee=ProcessingGuarantee.AT_MOST_ONCE)
    got = run(topology(s, Collect(fail_ids=(5,))), read=seen)
    assert sorted(got) == list(range(50))  # 5 failed and was not replayed
    assert committed(ck) == [50]


def test_no_guarantee_emits_untracked_and_commits_what_was_emitted(
    spark: Any, tmp_path: Path
) -> None:
    data = numbers(tmp_path / "in.parquet", list(range(50)))
    ck = tmp_path / "ck"
    info = run(topology(spout(data, ck, guarantee=ProcessingGuarantee.NO_GUARANTEE)))
    assert info.components["src"].emitted == 50
    assert info.pending_trees == 0
    assert committed(ck) == [50]


class Hold(Bolt):
    """Holds every tuple until released: nothing is acked meanwhile."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: list[Any] = []
        self.seen: list[int] = []

    def execute(self, tuple: Any) -> None:
        self.held.append(tuple)
        self.seen.append(tuple[0])

    def release(self) -> None:
        for t in self.held:
            self.collector.ack(t)
        self.held.clear()


def test_sparse_offsets_skip_empty_chunks(spark: Any, tmp_path: Path) -> None:
    ids = [0, 1, 5_000, 5_001, 1_000_000]
    data = numbers(tmp_path / "in.parquet", ids)
    ck = tmp_path / "ck"
    assert sorted(run(topology(spout(data, ck, chunk_rows=10)), read=seen)) == ids
    assert committed(ck) == [1_000_001]


def test_dataframe_table_and_sql_sources(spark: Any, tmp_path: Path) -> None:
    df = spark.range(0, 30).selectExpr("id", "concat('w', id) AS word")
    df.write.saveAsTable("numbers_for_spout")
    sources = [
        SparkSource.dataframe(df, name="numbers"),
        SparkSource.table("numbers_for_spout"),
        SparkSource.sql("SELECT id, word FROM numbers_for_spout WHERE id % 2 = 0", name="evens"),
    ]
    got = [
        sorted(run(topology(spout(s, tmp_path / f"ck{i}")), read=seen))
        for i, s in enumerate(sources)
    ]
    assert got == [list(range(30)), list(range(30)), list(range(0, 30, 2))]


# --- bad input ----------------------------------------------------------------------------------


async def start(topo: Any) -> None:
    async with run_topology(topo):
        pass


def start_error(topo: Any) -> BaseException:
    import uvloop

    with pytest.raises(Exception) as info:
        uvloop.run(start(topo))
    return info.value


def test_a_missing_offset_column_fails_the_start(spark: Any, tmp_path: Path) -> None:
    data = write_parquet(tmp_path / "in.parquet", {"key": [1, 2], "word": ["a", "b"]})
    error = start_error(topology(spout(data, tmp_path / "ck")))
    assert isinstance(error, OffsetColumnError)
    assert str(error) == (
        f"parquet files at {str(data)!r} has no offset column 'id'; its columns are ['key', 'word']"
    )


def test_a_non_integer_offset_column_fails_the_start(spark: Any, tmp_path: Path) -> None:
    data = write_parquet(tmp_path / "in.parquet", {"id": ["a", "b"], "word": ["a", "b"]})
    error = start_error(topology(spout(data, tmp_path / "ck")))
    assert isinstance(error, OffsetColumnError)
    assert str(error) == (
        f"parquet files at {str(data)!r}: offset column 'id' has type string; offsets must be "
        f"integers (tinyint, smallint, int, bigint)"
    )


def test_a_missing_path_fails_the_start(spark: Any, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    error = start_error(topology(spout(missing, tmp_path / "ck")))
    assert isinstance(error, SourceError)
    assert str(error).startswith(
        f"reading parquet files at {str(missing)!r} failed: AnalysisException: [PATH_NOT_FOUND]"
    )


def test_a_corrupt_checkpoint_fails_the_start_and_is_left_alone(spark: Any, tmp_path: Path) -> None:
    data = numbers(tmp_path / "in.parquet", list(range(10)))
    ck = tmp_path / "ck"
    run(topology(spout(data, ck)))
    (ck / "offsets.json").write_text('{"version": 1, "committed": [')
    error = start_error(topology(spout(data, ck)))
    assert isinstance(error, CheckpointError)
    assert str(error) == (
        f"checkpoint {str(ck / 'offsets.json')!r} is corrupt (not valid JSON); restore it from a "
        f"backup, or delete it to start over"
    )
    assert (ck / "offsets.json").read_text() == '{"version": 1, "committed": ['
