"""Trees held in flight for long (a window's, a stateful bolt's until its checkpoint): a
spout task's root ids are consecutive (``SpoutBatchEmitter._roots``), and the acker's
ledgers keep the size the spouts' pending limit needs once grown to it (``ledger_capacity``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from acker_kernel import AckerLedger, Op
from engine import TopologyBuilder
from engine._execution.acker import MAX_PRESIZED_CAPACITY, ledger_capacity
from engine._execution.collector import SpoutCollector
from engine._runtime.lifecycle import Runtime

from .test_xor import Host, route
from .topologies import CollectBolt, ListSpout


def emitted_roots(collector: SpoutCollector, host: Host, n: int) -> list[int]:
    for i in range(n):
        collector.emit([f"w{i}"], msg_id=i)
    collector.seal()
    _, roots, _, _ = host.acker_ops.take()
    return list(roots.tolist())


def test_a_spout_task_roots_are_consecutive_and_its_edges_random() -> None:
    """Consecutive roots keep the pending map's inserts and pops side by side; the edge
    ids, whose XOR tells a tree complete, stay random."""
    host = Host()
    collector = SpoutCollector(host, 1, route("s", (3,)), acking=True)  # type: ignore[arg-type]
    first = emitted_roots(collector, host, 40)
    second = emitted_roots(collector, host, 40)
    roots = first + second
    assert roots == list(range(roots[0], roots[0] + 80))
    assert sorted(collector.pending) == roots
    edges = [e for batch in host.out[3] for e in batch.edges.tolist()]  # type: ignore[index]
    assert len(edges) == 80 and edges != sorted(edges)


def test_roots_skip_zero_when_they_reach_the_end_of_the_ids() -> None:
    host = Host()
    collector = SpoutCollector(host, 1, route("s", (3,)), acking=True)  # type: ignore[arg-type]
    collector._batch._next_root = 2**64 - 30
    assert emitted_roots(collector, host, 20) == list(range(2**64 - 30, 2**64 - 10))
    assert emitted_roots(collector, host, 20) == list(range(1, 21))


def test_ledger_capacity_covers_the_pending_limit_per_acker() -> None:
    assert ledger_capacity(None, 1) == 4096  # no limit: the ledger's default
    assert ledger_capacity(100, 1) == 4096
    assert ledger_capacity(20_000, 1) == 32_768  # 20,000 / 0.75 = 26,667
    assert ledger_capacity(20_000, 2) == 16_384
    assert ledger_capacity(10**9, 1) == MAX_PRESIZED_CAPACITY


@pytest.mark.parametrize(
    ("conf", "spout_conf", "capacity"),
    [
        ({"topology.max.spout.pending": 10_000}, {}, 32_768),  # 2 tasks: 20,000 trees
        ({}, {}, 4096),
        ({"topology.max.spout.pending": 10_000}, {"topology.max.spout.pending": 1000}, 4096),
        ({"topology.max.spout.pending": 10_000, "topology.acker.executors": 2}, {}, 16_384),
    ],
)
def test_the_ledgers_keep_the_size_the_spouts_pending_trees_need(
    conf: dict[str, Any], spout_conf: dict[str, Any], capacity: int
) -> None:
    """For ``topology.max.spout.pending`` (a spout's own setting first) times its tasks."""
    builder = TopologyBuilder()
    spout = builder.set_spout("items", ListSpout([[0, "a"]]), 2)
    if spout_conf:
        spout.add_configurations(spout_conf)
    builder.set_bolt("sink", CollectBolt()).shuffle_grouping("items")
    runtime = Runtime(builder.create_topology(), conf)
    assert runtime.acker.capacity == capacity
    assert [ledger._keep_capacity for ledger in runtime.acker.ledgers] == [capacity] * len(
        runtime.acker.ledgers
    )


def test_a_ledger_grown_to_its_kept_size_does_not_shrink_below_it() -> None:
    """Trees that pile up and drain in waves (acked at each checkpoint) rehash the table
    only while it first grows; a ledger without a kept size shrinks back each time."""
    kept, plain = AckerLedger(keep_capacity=16_384), AckerLedger()
    roots = np.arange(1, 10_001, dtype=np.uint64)
    vals = np.arange(7, 10_007, dtype=np.uint64)
    for ledger in (kept, plain):
        for _ in range(3):  # three waves of 10,000 trees, each acked whole
            n = roots.shape[0]
            ledger.apply(np.full(n, Op.INIT, np.uint8), roots, vals, np.ones(n, np.int32), 0)
            assert ledger._table.shape[0] == 16_384
            ledger.apply(np.full(n, Op.ACK, np.uint8), roots, vals, np.ones(n, np.int32), 0)
            assert len(ledger) == 0
    assert kept._table.shape[0] == 16_384 and kept._rehashes == 2  # 4096 -> 8192 -> 16,384
    assert plain._table.shape[0] == 4096 and plain._rehashes > 6
