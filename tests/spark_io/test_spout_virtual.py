"""SparkOffsetSpout over an in-memory source, on virtual time (no Spark): first-poll
strategies across re-opens within a run and across runs, retry backoff and commit timing
driven by the topology's clock."""

from __future__ import annotations

import asyncio
import itertools
import json
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from engine import BasicBolt, Bolt, FailedException, RunningTopology, TopologyBuilder, run_topology
from engine.testing import CrashTask, advance_time, simulate
from spark_io import (
    CheckpointError,
    FirstPollStrategy,
    RetryPolicy,
    SparkOffsetSpout,
    SparkSource,
)
from spark_io._checkpoint import SharedCheckpoint, shared_checkpoint
from spark_io._offsets import Batch, chunk_owner
from spark_io._reader import END, PassEnd

#: table name -> the offsets it holds (rows are ``(offset, f"w{offset}")``); module level,
#: since components are copied per task.
TABLES: dict[str, list[int]] = {}


class MemoryReader:
    """StreamReader's contract over ``TABLES``: positions once, then one pass over the rows
    the task owns from there (as Arrow batches of ``batch_rows``, in reverse offset order,
    as Spark may serve them), its end, and END (a bounded read)."""

    def __init__(
        self,
        table: str,
        chunk_rows: int,
        partitions: int,
        partition: int,
        start: Callable[[Callable[[], int | None]], int],
        batch_rows: int = 16,
    ) -> None:
        self.table, self.chunk_rows = table, chunk_rows
        self.partitions, self.partition = partitions, partition
        self.start_at = start
        self.batch_rows = batch_rows
        self.out: queue.Queue[Any] = queue.Queue()
        self.rows_read = 0
        self.positioned = threading.Event()

    def start(self) -> None:
        rows = TABLES[self.table]
        lo = self.start_at(lambda: max(rows, default=None))
        self.positioned.set()
        C, n, i = self.chunk_rows, self.partitions, self.partition
        owned = sorted((o for o in rows if o >= lo and chunk_owner(o, C, n) == i), reverse=True)
        position = 0
        for k in range(0, len(owned), self.batch_rows):
            part = owned[k : k + self.batch_rows]
            columns = [pa.array(part, pa.int64()), pa.array([f"w{o}" for o in part])]
            self.out.put(Batch(position, np.array(part, np.int64), columns))
            position += len(part)
            self.rows_read += len(part)
        self.out.put(PassEnd(max(owned) + 1 if owned else lo))
        self.out.put(END)

    def stop(self) -> None:
        pass


class MemorySpout(SparkOffsetSpout):
    """The real spout with its Spark parts swapped for ``TABLES``."""

    def __init__(self, table: str, checkpoint: Path, **kwargs: Any) -> None:
        kwargs.setdefault("chunk_rows", 32)
        super().__init__(
            SparkSource.table(table), "id", ["id", "word"], checkpoint_dir=checkpoint, **kwargs
        )
        self.table = table

    def _spark_session(self) -> Any:
        return None

    def _check_source(self, spark: Any) -> None:
        pass

    def _make_reader(self, spark: Any, start: Any, **kwargs: Any) -> Any:
        return MemoryReader(self.table, self.chunk_rows, self._partitions, self._partition, start)


class Collect(BasicBolt):
    """Records every offset it sees and the clock time it saw it; fails ``fail_ids``."""

    def __init__(self, fail_ids: tuple[int, ...] = ()) -> None:
        self.fail_ids = fail_ids

    def prepare(self, conf: Any, context: Any) -> None:
        self.clock = context.clock
        self.seen: list[int] = []
        self.times: dict[int, list[float]] = {}

    def execute(self, tuple: Any, collector: Any) -> None:
        offset = tuple[0]
        self.seen.append(offset)
        self.times.setdefault(offset, []).append(self.clock.now_ns() / 1e9)
        if offset in self.fail_ids:
            raise FailedException(f"failing {offset}")


def topology(spout: SparkOffsetSpout, bolt: Any = None) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("collect", bolt or Collect()).shuffle_grouping("src")
    return builder.create_topology()


def committed(checkpoint: Path) -> list[int | None]:
    return json.loads((checkpoint / "offsets.json").read_text())["committed"]


def bolt_of(running: RunningTopology) -> Collect:
    (bolt,) = running.task_objects("collect").values()
    return bolt  # type: ignore[no-any-return]


def spout_metrics(info: Any) -> dict[str, Any]:
    (task,) = info.components["src"].tasks.values()
    return task.metrics  # type: ignore[no-any-return]


async def settle(running: RunningTopology, checkpoint: Path, expected: int) -> None:
    """Until the commit reached ``expected``: every row below it was acked (commits are
    written by an I/O thread every ``commit_interval_secs`` of the topology's clock). Not
    ``wait_until_complete``: a completed topology is not restarted or rebalanced."""
    for _ in range(600):
        if committed(checkpoint) == [expected]:
            return
        await advance_time(0.1)
    raise AssertionError(f"commit stayed at {committed(checkpoint)}, expected [{expected}]")


async def reopened(running: RunningTopology, before: Any) -> None:
    """Until the spout task is a new, open object (after a crash restart)."""
    for _ in range(10_000):
        (now,) = running.task_objects("src").values()
        if now is not before and hasattr(now, "_reader"):
            return
        await advance_time(0.01)
    raise AssertionError("the spout task did not restart")


@pytest.fixture
def table(request: pytest.FixtureRequest) -> Any:
    name = request.node.name
    TABLES[name] = list(range(100))
    yield name
    del TABLES[name]


#: Where a new run starts with rows 0..99 and an earlier run's commit at 40.
NEW_RUN = {
    FirstPollStrategy.EARLIEST: list(range(0, 100)),
    FirstPollStrategy.LATEST: [],
    FirstPollStrategy.UNCOMMITTED_EARLIEST: list(range(40, 100)),
    FirstPollStrategy.UNCOMMITTED_LATEST: list(range(40, 100)),
}
STRATEGIES = list(NEW_RUN)


def prepare(tmp_path: Path, table: str) -> Path:
    ck = tmp_path / "ck"
    store = shared_checkpoint(ck)
    store.open(f"table {table!r}", "id", 1, 32, 0)
    store.commit(0, 40, "an-earlier-run")
    return ck


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_a_crash_restart_resumes_from_this_runs_commit_whatever_the_strategy(
    tmp_path: Path, table: str, strategy: FirstPollStrategy
) -> None:
    ck = prepare(tmp_path, table)

    async def scenario() -> tuple[list[int], list[int]]:
        async with run_topology(topology(MemorySpout(table, ck, first_poll=strategy))) as running:
            await settle(running, ck, 100)
            first = sorted(bolt_of(running).seen)
            TABLES[table].extend(range(100, 150))
            (spout,) = running.task_objects("src").values()
            running.inject(CrashTask(component="src", at=0))
            await reopened(running, spout)
            await settle(running, ck, 150)
            return first, sorted(bolt_of(running).seen[len(first) :])

    first, after_restart = simulate(scenario())
    assert first == NEW_RUN[strategy]  # a new run: the strategy decides
    # The same run: its own commit (100) wins; nothing replayed, nothing skipped.
    assert after_restart == list(range(100, 150))


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_a_rebalance_resumes_from_this_runs_commit_whatever_the_strategy(
    tmp_path: Path, table: str, strategy: FirstPollStrategy
) -> None:
    ck = prepare(tmp_path, table)

    async def scenario() -> tuple[list[int], list[int]]:
        async with run_topology(topology(MemorySpout(table, ck, first_poll=strategy))) as running:
            await settle(running, ck, 100)
            first = sorted(bolt_of(running).seen)
            TABLES[table].extend(range(100, 150))
            await running.rebalance("src", 1)
            await settle(running, ck, 150)
            return first, sorted(bolt_of(running).seen[len(first) :])

    first, after_rebalance = simulate(scenario())
    assert first == NEW_RUN[strategy]
    assert after_rebalance == list(range(100, 150))


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (FirstPollStrategy.EARLIEST, list(range(0, 150))),  # the earlier run's commit: ignored
        (FirstPollStrategy.LATEST, []),  # only rows added after the start: none, bounded
        (FirstPollStrategy.UNCOMMITTED_EARLIEST, list(range(100, 150))),
        (FirstPollStrategy.UNCOMMITTED_LATEST, list(range(100, 150))),
    ],
    ids=lambda s: s.name if isinstance(s, FirstPollStrategy) else "",
)
def test_a_new_run_applies_the_strategy_to_the_last_runs_commit(
    tmp_path: Path, table: str, strategy: FirstPollStrategy, expected: list[int]
) -> None:
    ck = prepare(tmp_path, table)

    async def one_run() -> list[int]:
        async with run_topology(topology(MemorySpout(table, ck, first_poll=strategy))) as running:
            await running.wait_until_complete(60)
            return sorted(bolt_of(running).seen)

    assert simulate(one_run()) == NEW_RUN[strategy]
    TABLES[table].extend(range(100, 150))
    # Closing the run committed what it did: 100 for every strategy.
    assert committed(ck) == [100]
    assert simulate(one_run()) == expected


def test_retries_back_off_on_the_topologys_clock(tmp_path: Path, table: str) -> None:
    policy = RetryPolicy(
        initial_delay_secs=5.0, delay_period_secs=10.0, max_delay_secs=30.0, max_retries=4
    )
    spout = MemorySpout(table, tmp_path / "ck", retry=policy)

    async def scenario() -> tuple[list[float], Any]:
        conf = {"topology.message.timeout.secs": 300}
        async with run_topology(topology(spout, Collect(fail_ids=(3,))), conf) as running:
            await running.wait_until_complete(600)
            return bolt_of(running).times[3], running.info()

    times, info = simulate(scenario())
    # Storm's backoff: initial_delay, then delay_period * 2**(fails-1), capped at max_delay;
    # then the fifth failure drops the row.
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([5.0, 20.0, 30.0, 30.0], abs=0.05)
    assert spout_metrics(info)["spark_io.dropped"] == 1


def test_commits_wait_for_the_commit_interval_on_the_topologys_clock(
    tmp_path: Path, table: str
) -> None:
    ck = tmp_path / "ck"
    spout = MemorySpout(table, ck, commit_interval_secs=20.0)

    def committed_metric(running: RunningTopology) -> Any:
        return spout_metrics(running.info())["spark_io.committed_offset"]

    async def scenario() -> list[Any]:
        async with run_topology(topology(spout)) as running:
            await running.wait_until_complete(5)
            seen = [committed_metric(running)]  # the start, committed when reading began
            await advance_time(10)
            seen.append(committed_metric(running))  # 10 s later: not yet
            await advance_time(11)
            seen.append(committed_metric(running))  # past 20 s: everything acked
            return seen

    assert simulate(scenario()) == [0, 0, 100]


def test_a_slow_checkpoint_write_takes_no_virtual_time(
    tmp_path: Path, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The periodic commit is written on the task's I/O thread, here 0.2 s of real time
    per write. Under simulation the virtual clock waits for that thread: the commit lands
    within the interval it was due in, however busy the machine is (before, the clock ran
    on while the thread was at work, and the commit seemed to take many virtual seconds)."""
    ck = tmp_path / "ck"
    write = SharedCheckpoint.commit

    def slow_commit(self: SharedCheckpoint, *args: Any) -> None:
        time.sleep(0.2)
        write(self, *args)

    monkeypatch.setattr(SharedCheckpoint, "commit", slow_commit)

    async def scenario() -> float | None:
        async with run_topology(
            topology(MemorySpout(table, ck, commit_interval_secs=1.0))
        ) as running:
            await running.wait_until_complete(5)
            loop = asyncio.get_running_loop()
            start = loop.time()
            for _ in range(300):
                if committed(ck) == [100]:
                    return loop.time() - start
                await advance_time(0.01)
            return None

    took = simulate(scenario())
    assert took is not None and took <= 1.5, took


def test_a_commit_that_failed_is_reported_and_made_again(
    tmp_path: Path, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass's end (100) is committed on the I/O thread, and that write fails once:
    the failure is reported and the commit made again, not taken as made (before, the
    spout went on as if 100 were committed, and the run ended with the checkpoint at 0,
    no error reported: the next run read every row again)."""
    ck = tmp_path / "ck"
    write = SharedCheckpoint.commit
    failures = [CheckpointError(f"cannot write checkpoint {str(ck / 'offsets.json')!r}: disk full")]

    def failing_commit(self: SharedCheckpoint, partition: int, point: int, *args: Any) -> None:
        if point == 100 and failures:
            raise failures.pop()
        write(self, partition, point, *args)

    monkeypatch.setattr(SharedCheckpoint, "commit", failing_commit)

    async def scenario() -> list[str]:
        async with run_topology(topology(MemorySpout(table, ck))) as running:
            await running.wait_until_complete(60)
            await advance_time(3)
            return [str(e.error) for e in running.info().errors]

    errors = simulate(scenario())
    assert not failures  # the write of 100 failed once
    assert committed(ck) == [100]
    assert any("disk full" in e for e in errors), errors


class Hold(Bolt):
    """Holds every tuple until released: nothing is acked meanwhile."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: list[Any] = []

    def execute(self, tuple: Any) -> None:
        self.held.append(tuple)

    def release(self) -> None:
        for t in self.held:
            self.collector.ack(t)
        self.held.clear()


def test_max_uncommitted_offsets_bounds_the_rows_in_flight(tmp_path: Path, table: str) -> None:
    spout = MemorySpout(table, tmp_path / "ck", max_uncommitted_offsets=25)

    async def scenario() -> list[int]:
        conf = {"topology.message.timeout.secs": 300}
        async with run_topology(topology(spout, Hold()), conf) as running:
            (bolt,) = running.task_objects("collect").values()
            seen = []
            for _ in range(3):
                await advance_time(10)  # nothing is acked: the spout stays paused at 25
                seen.append(running.info().components["src"].emitted)
                bolt.release()  # 25 done: 25 more may go
            await advance_time(10)
            bolt.release()
            await running.wait_until_complete(60)
            return seen

    assert simulate(scenario()) == [25, 50, 75]
