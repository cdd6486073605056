"""A global count that is exactly right, whatever fails: Storm's transactional topology.

    log/coordinator (transactions 1, 2, ...; at most --pending in flight)
      -> log        (partitioned spout: each transaction takes up to --batch values per
                     partition; a replayed transaction re-emits exactly the same values)
      -> partial    (batch bolt: count and sum of its share of the batch; fails tuples at
                     random, which fails and replays the whole transaction)
      -> publish    (committer: adds the partials; runs strictly in txid order; fails some
                     commits at random *after* publishing, so they are replayed too)
      -> sink       (the transactional Spark sink: one row per transaction, keyed by txid,
                     published exactly once; the commit completes once it is durable)

The count's state *is* the sink's output: the global count is the sum of the published
rows, exactly right only if every transaction was published once and only once. Halfway,
the topology is killed and started again from its persisted state (the coordinator's
committed txid, every pending transaction's batch metadata).

Run it: ``python examples/transactional_count.py`` (Spark, the ``spark`` extra), or
``--sink file`` to keep the count in a local file through ``TransactionalMap`` instead.
It prints the count it read back and the one computed directly, and exits 1 if they differ.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from engine import FailedException, run_topology
from engine.coordination import BatchBolt
from engine.transactional import (
    Committer,
    FileMapState,
    FileStateStore,
    PartitionedCoordinator,
    PartitionedEmitter,
    PartitionedTransactionalSpout,
    TransactionalMap,
    TransactionalTopologyBuilder,
)


def make_log(partitions: int, size: int, seed: int) -> list[list[int]]:
    """The input: ``partitions`` lists of about ``size`` event values each."""
    rng = random.Random(seed)
    return [
        [rng.randrange(1, 100) for _ in range(rng.randrange(size // 2, size + 1))]
        for _ in range(partitions)
    ]


class _Partitions(PartitionedCoordinator):
    def __init__(self, n: int) -> None:
        self.n = n

    def num_partitions(self) -> int:
        return self.n


class _Offsets(PartitionedEmitter):
    """A batch of a partition is an offset range ``(start, end)``: its metadata."""

    def __init__(self, log: list[list[int]], batch: int) -> None:
        self.log = log
        self.batch = batch

    def emit_partition_batch_new(self, tx: Any, collector: Any, partition: int, last: Any) -> Any:
        start = last[1] if last else 0
        meta = (start, min(start + self.batch, len(self.log[partition])))
        self.emit_partition_batch(tx, collector, partition, meta)
        return meta

    def emit_partition_batch(self, tx: Any, collector: Any, partition: int, meta: Any) -> None:
        start, end = meta
        for value in self.log[partition][start:end]:
            collector.emit([tx, value])


class LogSpout(PartitionedTransactionalSpout):
    def __init__(self, log: list[list[int]], batch: int) -> None:
        self.log = log
        self.batch = batch

    def get_coordinator(self, conf: Any, context: Any) -> PartitionedCoordinator:
        return _Partitions(len(self.log))

    def get_emitter(self, conf: Any, context: Any) -> PartitionedEmitter:
        return _Offsets(self.log, self.batch)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["tx", "value"])


class PartialCount(BatchBolt):
    """Counts and sums one task's share of one batch; fails ``fail_rate`` of its tuples."""

    def __init__(self, fail_rate: float) -> None:
        self.fail_rate = fail_rate

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector, self.id = collector, id
        self.count = self.total = 0
        self.rng = random.Random(id.attempt_id)

    def execute(self, tuple: Any) -> None:
        if self.rng.random() < self.fail_rate:
            raise FailedException("injected failure")
        self.count += 1
        self.total += tuple["value"]

    def finish_batch(self) -> None:
        self.collector.emit([self.id, self.count, self.total])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["tx", "count", "total"])


class Publish(BatchBolt, Committer):
    """Commits one transaction: emits ``(txid, count, total)`` for the sink, or with
    ``state`` applies it to a ``TransactionalMap`` there. Fails ``fail_rate`` of its
    commits after doing so: the replay must not count twice."""

    def __init__(self, fail_rate: float, state: FileMapState | None = None) -> None:
        self.fail_rate = fail_rate
        self.state = state

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector, self.id = collector, id
        self.count = self.total = 0
        self.rng = random.Random(id.attempt_id + 1)

    def execute(self, tuple: Any) -> None:
        self.count += tuple["count"]
        self.total += tuple["total"]

    def finish_batch(self) -> None:
        txid = self.id.transaction_id
        if self.state is None:
            self.collector.emit([self.id, txid, self.count, self.total])
        else:
            TransactionalMap(self.state).multi_update(
                txid,
                ["count", "total"],
                [lambda n: (n or 0) + self.count, lambda n: (n or 0) + self.total],
            )
        if self.rng.random() < self.fail_rate:
            raise FailedException("injected failure after the commit's write")

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["tx", "txid", "count", "total"])


def build(
    log: list[list[int]],
    out: Path,
    *,
    sink: str = "spark",
    batch: int = 500,
    parallelism: int = 2,
    fail_rate: float = 0.001,
    commit_fail_rate: float = 0.25,
    sink_batch_secs: float = 0.05,
) -> Any:
    """The topology; its state lives under ``out`` (``state/``, and ``counts/`` or
    ``counts.pickle``)."""
    builder = TransactionalTopologyBuilder(
        "global-count",
        "log",
        LogSpout(log, batch),
        parallelism,
        state=FileStateStore(out / "state"),
    )
    builder.set_bolt("partial", PartialCount(fail_rate), parallelism).shuffle_grouping("log")
    if sink == "file":
        publish = Publish(commit_fail_rate, FileMapState(out / "counts.pickle"))
        builder.set_committer_bolt("publish", publish).global_grouping("partial")
        return builder.build_topology()
    from spark_io import SinkTarget, SparkSinkBolt

    builder.set_committer_bolt("publish", Publish(commit_fail_rate)).global_grouping("partial")
    topology = builder.build_topology_builder()
    topology.set_bolt(
        "sink",
        SparkSinkBolt(
            SinkTarget.files(str(out / "counts"), "parquet"),
            ["txid", "count", "total"],
            transactional=True,
            key_field="txid",
            batch_secs=sink_batch_secs,
        ),
    ).global_grouping("publish")
    return topology.create_topology()


async def run_until_committed(topology: Any, conf: dict[str, Any], txid: int) -> float:
    """Run ``topology`` until transaction ``txid`` is committed; the seconds it took."""
    start = time.perf_counter()
    async with run_topology(topology, conf) as running:
        (coordinator,) = running.task_objects("log/coordinator").values()
        while coordinator.current_txid <= txid:
            await asyncio.sleep(0.005)
    return time.perf_counter() - start


def read_back(out: Path, sink: str) -> tuple[int, int, int]:
    """``(count, total, transactions)`` as stored."""
    if sink == "file":
        count, total = FileMapState(out / "counts.pickle").multi_get(["count", "total"])
        return count.value, total.value, count.txid
    from spark_io import spark_session

    rows = spark_session().read.parquet(str(out / "counts"))
    row = rows.selectExpr("sum(count)", "sum(total)", "count(distinct txid)", "count(*)").first()
    assert row[2] == row[3], "a transaction was published twice"
    return int(row[0]), int(row[1]), int(row[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sink", choices=["spark", "file"], default="spark")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--size", type=int, default=3000, help="values per partition (about)")
    parser.add_argument("--batch", type=int, default=500, help="values per partition and batch")
    parser.add_argument("--pending", type=int, default=3, help="transactions in flight")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None, help="state and output directory")
    args = parser.parse_args(argv)

    log = make_log(args.partitions, args.size, args.seed)
    values = [v for part in log for v in part]
    transactions = max(-(-len(part) // args.batch) for part in log)  # ceil
    out = args.out or Path(tempfile.mkdtemp(prefix="transactional-count-"))
    conf = {"topology.max.spout.pending": args.pending, "topology.message.timeout.secs": 30}

    def topology() -> Any:
        return build(log, out, sink=args.sink, batch=args.batch)

    async def both_runs() -> tuple[float, float]:
        first = await run_until_committed(topology(), conf, transactions // 2)
        # killed mid-flight; started again from the persisted state:
        second = await run_until_committed(topology(), conf, transactions)
        return first, second

    first, second = uvloop.run(both_runs())
    count, total, committed = read_back(out, args.sink)
    exact = (count, total) == (len(values), sum(values))
    print(f"state and output: {out}")
    print(
        f"run 1: {first:.2f} s, killed after transaction {transactions // 2}; "
        f"run 2: {second:.2f} s, up to transaction {transactions}"
    )
    print(f"stored:   count={count} total={total} ({committed} transactions)")
    print(f"expected: count={len(values)} total={sum(values)}")
    print("exact" if exact else "WRONG")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
