"""SparkStreamingSpout: Structured Streaming batches bridged through foreachBatch."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from engine import Bolt, RunningTopology, TopologyBuilder, run_topology
from spark_io import (
    RetryPolicy,
    SourceError,
    SparkConfigError,
    SparkStreamingSpout,
    StreamSource,
)

from .conftest import run
from .test_spout import Collect, Hold

pytestmark = pytest.mark.spark

SCHEMA = "id BIGINT, word STRING"


def drop_files(directory: Path, batches: list[range]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for n, ids in enumerate(batches):
        lines = "".join(json.dumps({"id": i, "word": f"w{i}"}) + "\n" for i in ids)
        (directory / f"part-{n:03d}.json").write_text(lines)


def streaming(directory: Path, checkpoint: Path, **kwargs: Any) -> SparkStreamingSpout:
    source = StreamSource.files(directory, "json", schema=SCHEMA, max_files_per_trigger=1)
    return SparkStreamingSpout(source, ["id", "word"], checkpoint_location=checkpoint, **kwargs)


def topology(spout: SparkStreamingSpout, bolt: Any = None) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("collect", bolt or Collect()).shuffle_grouping("src")
    return builder.create_topology()


def seen(running: RunningTopology) -> list[int]:
    return [o for bolt in running.task_objects("collect").values() for o in bolt.seen]


def test_available_now_emits_every_batch_then_is_exhausted(spark: Any, tmp_path: Path) -> None:
    drop_files(tmp_path / "in", [range(0, 10), range(10, 25), range(25, 30)])
    s = streaming(tmp_path / "in", tmp_path / "ck", available_now=True)
    got, batches = run(
        topology(s), read=lambda r: (seen(r), next(iter(r.task_objects("src").values())).batches)
    )
    assert sorted(got) == list(range(30))
    assert batches == 3  # one file per trigger


def test_a_failed_tuple_is_replayed_within_its_batch(spark: Any, tmp_path: Path) -> None:
    drop_files(tmp_path / "in", [range(0, 10)])
    s = streaming(
        tmp_path / "in",
        tmp_path / "ck",
        available_now=True,
        retry=RetryPolicy(initial_delay_secs=0.05),
    )
    got = run(topology(s, Collect(fail_ids=(4,), fail_times=2)), read=seen)
    assert sorted(got) == sorted([*range(10), 4, 4])


def test_past_max_retries_a_row_is_dropped_and_the_batch_completes(
    spark: Any, tmp_path: Path
) -> None:
    drop_files(tmp_path / "in", [range(0, 5)])
    s = streaming(
        tmp_path / "in", tmp_path / "ck", available_now=True, retry=RetryPolicy(max_retries=1)
    )
    info, got = run(topology(s, Collect(fail_ids=(2,))), read=lambda r: (r.info(), seen(r)))
    assert sorted(got) == sorted([*range(5), 2])
    assert [e.error for e in info.errors] == [
        f"spout 'src': dropped row 2 of batch 0 of json stream from {str(tmp_path / 'in')!r} "
        f"after 2 failures (max_retries=1)"
    ]


def test_a_batch_cut_short_by_a_kill_is_redelivered_after_a_restart(
    spark: Any, tmp_path: Path
) -> None:
    drop_files(tmp_path / "in", [range(0, 4), range(4, 8)])
    ck = tmp_path / "ck"

    async def kill_in_batch_one(running: RunningTopology) -> None:
        (hold,) = running.task_objects("collect").values()
        while len(hold.seen) < 4:  # batch 0, held: never acked
            await asyncio.sleep(0.05)

    first = run(
        topology(streaming(tmp_path / "in", ck, available_now=True), Hold()),
        until=kill_in_batch_one,
        read=seen,
    )
    assert sorted(first) in ([0, 1, 2, 3], [4, 5, 6, 7])  # one file per batch, either first
    # The batch function never returned, so Spark did not commit batch 0: it comes again,
    # then the other file.
    second = run(topology(streaming(tmp_path / "in", ck, available_now=True)), read=seen)
    assert sorted(second) == list(range(8))
    assert second[:4] == first


class Values(Bolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.seen = collector, []

    def execute(self, tuple: Any) -> None:
        self.seen.append(tuple[0])
        self.collector.ack(tuple)


def test_the_rate_source(spark: Any, tmp_path: Path) -> None:
    s = SparkStreamingSpout(
        StreamSource.rate(rows_per_second=50),
        ["value"],
        checkpoint_location=tmp_path / "ck",
        trigger_secs=0.2,
    )

    async def until(running: RunningTopology) -> None:
        while len(seen(running)) < 20:
            await asyncio.sleep(0.05)

    got = run(topology(s, Values()), until=until, read=seen)
    assert sorted(got)[:20] == list(range(20))


def test_a_streaming_spout_refuses_parallelism(spark: Any, tmp_path: Path) -> None:
    from .test_spout import start_error

    builder = TopologyBuilder()
    builder.set_spout("src", streaming(tmp_path / "in", tmp_path / "ck", available_now=True), 2)
    builder.set_bolt("collect", Collect()).shuffle_grouping("src")
    error = start_error(builder.create_topology())
    assert isinstance(error, SparkConfigError)
    assert str(error) == (
        "spout 'src': a streaming query is one reader; give the SparkStreamingSpout parallelism 1 "
        "(split the work downstream)"
    )


def test_a_streaming_file_source_needs_a_schema() -> None:
    with pytest.raises(SparkConfigError) as info:
        StreamSource.files("/tmp/in", "json", schema="")
    assert str(info.value) == (
        "a streaming file source needs a schema (a DDL string such as 'id BIGINT, text STRING'): "
        "Spark does not infer one for streams"
    )


def test_a_query_that_fails_on_a_corrupt_file_ends_the_run_with_its_error(
    spark: Any, tmp_path: Path
) -> None:
    # Before, the spout reported the error and was then exhausted: wait_until_complete
    # returned and the run was COMPLETED, though the query had failed and read nothing.
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-000.parquet").write_bytes(b"PAR1 not parquet PAR1")
    source = StreamSource.files(tmp_path / "in", "parquet", schema=SCHEMA)
    s = SparkStreamingSpout(
        source, ["id", "word"], checkpoint_location=tmp_path / "ck", available_now=True
    )

    async def main() -> tuple[BaseException, int]:
        async with run_topology(topology(s)) as running:
            with pytest.raises(SourceError) as info:
                await running.wait_until_complete(120)
            return info.value, running.info().error_count

    error, reported = asyncio.run(main())
    assert str(error).startswith(
        f"the streaming query on parquet stream from {str(tmp_path / 'in')!r} failed: "
    )
    assert reported == 1  # reported once, as well
