"""A transactional global count for the tests: a partitioned in-memory log, partial counts
per batch, a committer keeping ``(count, sum)`` exactly once; failures on demand.

Components are copied per task, so what the tests read back (the log's data, the commit
log) lives in module-level registries under a name unique to each test run.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

from engine import FailedException
from engine.coordination import BatchBolt
from engine.transactional import (
    Committer,
    MapState,
    PartitionedCoordinator,
    PartitionedEmitter,
    PartitionedTransactionalSpout,
    TransactionalMap,
    TransactionalTopologyBuilder,
)

#: name -> partition -> values
LOGS: dict[str, list[list[int]]] = {}
#: name -> every (txid, partition, meta, replay) the emitters emitted
EMITS: dict[str, list[tuple[int, int, Any, bool]]] = defaultdict(list)
#: name -> every (txid, count, total, applied) the committer's finish_batch saw
COMMITS: dict[str, list[tuple[int, int, int, bool]]] = defaultdict(list)


class _Coordinator(PartitionedCoordinator):
    def __init__(self, name: str) -> None:
        self.name = name

    def num_partitions(self) -> int:
        return len(LOGS[self.name])


class _Emitter(PartitionedEmitter):
    def __init__(self, name: str, batch: int) -> None:
        self.name = name
        self.batch = batch

    def emit_partition_batch_new(self, tx: Any, collector: Any, partition: int, last: Any) -> Any:
        start = last[1] if last else 0
        meta = (start, min(start + self.batch, len(LOGS[self.name][partition])))
        self._emit(tx, collector, partition, meta, replay=False)
        return meta

    def emit_partition_batch(self, tx: Any, collector: Any, partition: int, meta: Any) -> None:
        self._emit(tx, collector, partition, meta, replay=True)

    def _emit(self, tx: Any, collector: Any, partition: int, meta: Any, replay: bool) -> None:
        EMITS[self.name].append((tx.transaction_id, partition, meta, replay))
        for value in LOGS[self.name][partition][meta[0] : meta[1]]:
            collector.emit([tx, value])


class LogSpout(PartitionedTransactionalSpout):
    def __init__(self, name: str, batch: int) -> None:
        self.name = name
        self.batch = batch

    def get_coordinator(self, conf: Any, context: Any) -> PartitionedCoordinator:
        return _Coordinator(self.name)

    def get_emitter(self, conf: Any, context: Any) -> PartitionedEmitter:
        return _Emitter(self.name, self.batch)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["tx", "value"])


class PartialCount(BatchBolt):
    def __init__(self, fail_rate: float, seed: int) -> None:
        self.fail_rate = fail_rate
        self.seed = seed

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector, self.id = collector, id
        self.count = self.total = 0
        self.rng = random.Random(hash((self.seed, id.transaction_id, id.attempt_id)))

    def execute(self, tuple: Any) -> None:
        if self.fail_rate and self.rng.random() < self.fail_rate:
            raise FailedException("injected")
        self.count += 1
        self.total += tuple[1]

    def finish_batch(self) -> None:
        self.collector.emit([self.id, self.count, self.total])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["tx", "count", "total"])


class GlobalCount(BatchBolt, Committer):
    """Adds each batch's partial counts to the stored ``count`` and ``total``; with
    ``fail_rate``, fails some commits *after* writing, so the retry must skip them."""

    def __init__(self, name: str, state: MapState, fail_rate: float, seed: int) -> None:
        self.name = name
        self.state = state
        self.fail_rate = fail_rate
        self.seed = seed

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.id = id
        self.count = self.total = 0
        self.rng = random.Random(hash((self.seed, id.transaction_id, id.attempt_id, "commit")))

    def execute(self, tuple: Any) -> None:
        self.count += tuple[1]
        self.total += tuple[2]

    def finish_batch(self) -> None:
        txid = self.id.transaction_id
        stored = TransactionalMap(self.state)
        before = self.state.multi_get(["count"])[0]
        stored.multi_update(
            txid,
            ["count", "total"],
            [lambda n: (n or 0) + self.count, lambda n: (n or 0) + self.total],
        )
        applied = before is None or before.txid != txid
        COMMITS[self.name].append((txid, self.count, self.total, applied))
        if self.fail_rate and self.rng.random() < self.fail_rate:
            raise FailedException("injected after the write")


def build(
    name: str,
    store: Any,
    state: MapState,
    *,
    spout_parallelism: int = 2,
    parallelism: int = 2,
    batch: int = 20,
    fail_rate: float = 0.0,
    commit_fail_rate: float = 0.0,
    seed: int = 0,
) -> Any:
    builder = TransactionalTopologyBuilder(
        "count", "log", LogSpout(name, batch), spout_parallelism, state=store
    )
    builder.set_bolt("partial", PartialCount(fail_rate, seed), parallelism).shuffle_grouping("log")
    builder.set_bolt("global", GlobalCount(name, state, commit_fail_rate, seed)).global_grouping(
        "partial"
    )
    return builder.build_topology()
